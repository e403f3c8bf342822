/**
 * The Connect protocol (connectrpc.com/docs/protocol) as envd speaks it, JSON codec.
 *
 * Streaming bodies (`application/connect+json`) are a series of envelopes: 1 flag byte, a 4-byte big-endian
 * length, then that many bytes of JSON. The last envelope has flag 0x02 (end of stream) and carries the trailer
 * `{}` or `{"error": {"code", "message"}}`; a server-streaming RPC that fails answers HTTP 200 with only that
 * trailer. Unary calls are plain JSON (`application/json`) and fail with an HTTP status plus `{"code","message"}`.
 * Protobuf JSON flattens oneofs (a ProcessSelector is `{"pid": 1}` or `{"tag": "x"}`), omits default values
 * (an exit code of 0 is absent), writes int64 as strings, bytes as base64 and enums by name.
 */
import { EnvelopeError, frame, FrameDecoder } from "../core/connect.ts"

export { COMPRESSED, END_STREAM, EnvelopeError } from "../core/connect.ts"
/** Refuse to buffer more than this for one message (envd sends output in small chunks). */
export const MAX_MESSAGE_BYTES = 32 * 1024 * 1024

export const STREAM_CONTENT_TYPE = "application/connect+json"

export const encodeEnvelope = (message: unknown, flags = 0): Uint8Array<ArrayBuffer> => frame(new TextEncoder().encode(JSON.stringify(message)), flags)

export interface Envelope {
  readonly flags: number
  readonly message: unknown
}

/** Incremental decoder of JSON envelopes: push bytes as they arrive, take whole ones. Throws `EnvelopeError` on bad input. */
export class EnvelopeDecoder {
  private readonly frames = new FrameDecoder(MAX_MESSAGE_BYTES)

  push(chunk: Uint8Array): Array<Envelope> {
    return this.frames.push(chunk).map(({ flags, data }) => {
      const json = new TextDecoder().decode(data)
      try {
        return { flags, message: json === "" ? {} : JSON.parse(json) }
      } catch {
        throw new EnvelopeError("a Connect message is not valid JSON")
      }
    })
  }

  /** Bytes of an incomplete envelope still waiting for the rest. */
  get pending(): number {
    return this.frames.pending
  }
}

/** Connect error codes and the HTTP status each maps to (the protocol's table). */
export const CONNECT_STATUS = {
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  data_loss: 500,
  unauthenticated: 401
} as const
export type ConnectCode = keyof typeof CONNECT_STATUS

export const isConnectCode = (code: unknown): code is ConnectCode => typeof code === "string" && Object.hasOwn(CONNECT_STATUS, code)

export interface ConnectErrorBody {
  readonly code: ConnectCode
  readonly message: string
}

/** The error in an end-of-stream trailer, if any. */
export const trailerError = (trailer: unknown): ConnectErrorBody | null => {
  const error = (trailer as { error?: { code?: unknown; message?: unknown } } | null)?.error
  if (error === undefined || error === null) return null
  return { code: isConnectCode(error.code) ? error.code : "unknown", message: typeof error.message === "string" ? error.message : "" }
}
