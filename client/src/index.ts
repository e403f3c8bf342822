/**
 * A typed client for Sandbox Gateway. `raw` is the server's own HttpApi contract turned into a client
 * (`HttpApiClient`), so its routes, parameters and shapes cannot drift from the server's; the Promise layer on
 * top does what is awkward with raw calls: create-and-wait, run-and-follow, files beyond one call's size,
 * endpoints that are ready to use, typed errors, and retries of retryable failures with the same
 * Idempotency-Key (a retried create never makes a second sandbox).
 *
 *   const gw = createClient({ baseUrl: "http://127.0.0.1:8080", apiKey: "metal_sk_…", projectId: "prj_…" })
 *   const sandbox = await gw.sandboxes.create({ source: { kind: "environment", environment: "metal/base" },
 *     resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 600 } })
 *   const { exitCode, stdout } = await sandbox.exec(["python3", "-c", "print(6*7)"], { onOutput: (s, t) => process.stdout.write(t) })
 *   await sandbox.destroy()
 */
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Layer, ParseResult, Schema } from "effect"
import { Api } from "../../src/http/Api.ts"
import type { Capabilities, Endpoint, Process, RuntimeOperation } from "../../src/domain/Runtime.ts"
import { type Sandbox as SandboxWire, SandboxRequest } from "../../src/domain/Sandbox.ts"
import { makeComputer } from "./computer.ts"
import { issuesSummary, readableIssues } from "../../src/domain/Issues.ts"
import { fromEnvelope, GatewayError } from "./errors.ts"
import { followEvents } from "./sse.ts"
import { type AttachHandlers, openTerminal, type Terminal, type TerminalExit, type WebSocketConstructor } from "./terminal.ts"

export { GatewayError, type GatewayErrorCode } from "./errors.ts"
/** The API's error codes by status, each with its meaning; `raw` calls fail with their route's own codes, typed. */
export { ERROR_CODES, type ErrorCode } from "../../src/domain/ErrorCodes.ts"
export type { ComputerActionInput, RecordingRecord, Screenshot, ScreenshotOptions } from "./computer.ts"
export type { AttachHandlers, Terminal, TerminalExit, WebSocketConstructor } from "./terminal.ts"

export interface ClientOptions {
  readonly baseUrl: string
  /** A project API key (`metal_sk_…`) and its project (`prj_…`). */
  readonly apiKey: string
  readonly projectId: string
  /** Attempts for a retryable failure (network errors, 429, 5xx), the first included. Default 4. */
  readonly attempts?: number
  /** The fetch to use (default: the global one). */
  readonly fetch?: typeof globalThis.fetch
  /**
   * The WebSocket to attach terminals with (default: the global one, which takes `{ headers }` in Bun and Node 22+;
   * on Node 20, the `ws` package's).
   */
  readonly webSocket?: WebSocketConstructor
}

export type SandboxRecord = Schema.Schema.Type<typeof SandboxWire>
export type CreateSandbox = Schema.Schema.Encoded<typeof SandboxRequest>
export type ProcessRecord = Schema.Schema.Type<typeof Process>
export type EndpointRecord = Schema.Schema.Type<typeof Endpoint>

export interface ExecOptions {
  readonly cwd?: string
  readonly env?: Readonly<Record<string, string>>
  readonly timeoutSeconds?: number
  /**
   * Standard input: written to the process as it comes (in pieces of at most 1 MiB), then closed. Needs a
   * provider that takes input (409 capability_unsupported otherwise).
   */
  readonly stdin?: string | Uint8Array | AsyncIterable<Uint8Array>
  /** Each piece of output as it is written (live: the process's event stream is followed). */
  readonly onOutput?: (stream: "stdout" | "stderr", text: string, bytes: Uint8Array) => void
}

export interface AttachOptions extends AttachHandlers {
  /** Replay only the output after this event sequence (default 0: all the output kept). */
  readonly after?: number
}

export interface TerminalOptions extends AttachHandlers {
  /** The terminal's size (default 80×24). */
  readonly cols?: number
  readonly rows?: number
  readonly cwd?: string
  /** The process's environment; `TERM` defaults to xterm-256color. */
  readonly env?: Readonly<Record<string, string>>
  /** Default: an hour, or the provider's longest if shorter. */
  readonly timeoutSeconds?: number
}

export interface UploadOptions {
  /** Bytes sent so far, after each piece the gateway took. */
  readonly onProgress?: (sentBytes: number) => void
  /** The size of a piece (finer progress); at most, and by default, the provider's largest write. */
  readonly pieceBytes?: number
}

export interface DownloadOptions {
  /** Bytes received so far, and the file's size once the gateway has said it. */
  readonly onProgress?: (receivedBytes: number, totalBytes: number | undefined) => void
}

export interface ExecResult {
  readonly processId: string
  readonly state: ProcessRecord["state"]
  readonly exitCode: number | null
  readonly stdout: string
  readonly stderr: string
}

const TERMINAL_OPERATION = new Set(["succeeded", "failed", "cancelled"])
const TERMINAL_PROCESS = new Set(["succeeded", "failed", "cancelled", "timed_out"])
const POLL_MS = 100

const MAX_OUTPUT_BYTES = 10 * 1024 * 1024
/** The longest run-and-wait the API takes (`?wait_seconds`). */
const MAX_WAIT_SECONDS = 300
/** The API takes at most 1 MiB of input a call. */
const STDIN_PIECE = 1024 * 1024
/** A terminal keeps at most this much output (its replay buffer), or the provider's ceiling if lower. */
const TERMINAL_OUTPUT_BYTES = 100 * 1024 * 1024
/** A shell for `shell()`: bash where there is one, else sh; interactive either way. */
const DEFAULT_SHELL = ["/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -i; else exec sh -i; fi"]
/** Times a broken download is resumed from where it stopped (a Range read). */
const DOWNLOAD_RESUMES = 5

/** A request the client refuses before sending it, said as the gateway would say it (domain/Issues.ts): never a schema dump. */
const invalid = (error: ParseResult.ParseError) => {
  const issues = readableIssues(ParseResult.ArrayFormatter.formatErrorSync(error))
  return new GatewayError("validation_error", issuesSummary(issues), 422, false, { issues })
}

/** A create request checked (and its defaults filled) before it is sent: a mistake is a validation_error here. */
const decodeRequest = (request: CreateSandbox) => {
  const decoded = Schema.decodeUnknownEither(SandboxRequest, { errors: "all" })(request)
  if (decoded._tag === "Left") throw invalid(decoded.left)
  return decoded.right
}

/** `data` cut (or gathered) into pieces of exactly `size` bytes, the last one shorter. */
async function* inPieces(data: Uint8Array | AsyncIterable<Uint8Array>, size: number): AsyncGenerator<Uint8Array, void, undefined> {
  if (data instanceof Uint8Array) {
    for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size)
    return
  }
  let buffer = new Uint8Array(size)
  let filled = 0
  for await (const chunk of data) {
    for (let at = 0; at < chunk.length;) {
      const n = Math.min(size - filled, chunk.length - at)
      buffer.set(chunk.subarray(at, at + n), filled)
      filled += n
      at += n
      if (filled === size) {
        yield buffer
        buffer = new Uint8Array(size)
        filled = 0
      }
    }
  }
  if (filled > 0) yield buffer.subarray(0, filled)
}

const idempotencyKey = () => `client-${crypto.randomUUID()}`
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Any failure of a raw call, as a GatewayError. */
const toGatewayError = (e: unknown): GatewayError => {
  if (e instanceof GatewayError) return e
  // A request the contract refuses before it is sent (the typed client encodes it first).
  if (ParseResult.isParseError(e)) return invalid(e)
  const tagged = e as { _tag?: string; code?: unknown; message?: unknown; details?: unknown; reason?: string; response?: { status: number } }
  const status = (e as { constructor?: { status?: unknown } })?.constructor?.status
  if (typeof tagged?.code === "string" && typeof status === "number") {
    return new GatewayError(tagged.code, String(tagged.message), status, status >= 500 || status === 429, tagged.details)
  }
  if (tagged?._tag === "RequestError") return new GatewayError("network_error", `The gateway could not be reached: ${String(tagged.message)}`, 0, true)
  if (tagged?._tag === "ResponseError") {
    const s = tagged.response?.status ?? 0
    return new GatewayError(`http_${s}`, `The gateway answered ${s} unexpectedly`, s, s >= 500 || s === 429)
  }
  return new GatewayError("client_error", e instanceof Error ? e.message : String(e), 0, false)
}

export const createClient = (options: ClientOptions) => {
  const attempts = Math.max(1, options.attempts ?? 4)
  const fetchImpl = options.fetch ?? globalThis.fetch
  const authHeaders = { authorization: `Bearer ${options.apiKey}`, "x-metal-project-id": options.projectId }
  // Node 20 has no global WebSocket (without --experimental-websocket): terminals there need `webSocket`.
  const WebSocketImpl = options.webSocket ?? (globalThis.WebSocket as unknown as WebSocketConstructor | undefined)
  const wsBase = options.baseUrl.replace(/^http/, "ws")
  const httpLayer = FetchHttpClient.layer.pipe(Layer.provide(Layer.succeed(FetchHttpClient.Fetch, fetchImpl)))
  /** The contract's client: every route of the API, typed (Effect). */
  const raw = HttpApiClient.make(Api, {
    baseUrl: options.baseUrl,
    transformClient: HttpClient.mapRequest(HttpClientRequest.setHeaders(authHeaders))
  })
  type Raw = Effect.Effect.Success<typeof raw>
  const rawClient = Effect.runSync(Effect.cached(Effect.provide(raw, httpLayer)))

  /** Runs a raw call; retryable failures are retried (the same call: the same Idempotency-Key). */
  const call = async <A>(f: (client: Raw) => Effect.Effect<A, unknown>): Promise<A> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await Effect.runPromise(Effect.flatMap(rawClient, f).pipe(Effect.mapError(toGatewayError), Effect.either)).then((r) => {
          if (r._tag === "Left") throw r.left
          return r.right
        })
      } catch (e) {
        const error = toGatewayError(e)
        if (!error.retryable || attempt >= attempts) throw error
        await sleep(100 * 2 ** (attempt - 1))
      }
    }
  }

  const waitOperation = async (operationId: string, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const op = await call((c) => c.operations.get({ path: { operation_id: operationId } }))
      if (TERMINAL_OPERATION.has(op.state) || Date.now() > deadline) return op
      await sleep(POLL_MS)
    }
  }

  const waitRuntimeOperation = async (sandboxId: string, started: Schema.Schema.Type<typeof RuntimeOperation>) => {
    let op = started
    while (op.state === "queued" || op.state === "running") {
      await sleep(20)
      op = await call((c) => c.filesystem.getRuntimeOperation({ path: { sandbox_id: sandboxId, runtime_operation_id: op.id } }))
    }
    if (op.state !== "succeeded") {
      throw new GatewayError(op.error?.code ?? "runtime_operation_failed", op.error?.message ?? `The operation ended ${op.state}`, 0, op.error?.retryable ?? false, op.error?.details)
    }
    return op.result!
  }

  const handle = (record: SandboxRecord) => {
    const id = record.id
    const mutate = async (action: "pause" | "resume" | "delete", waitMs = 120_000) => {
      // Pause, resume and delete are idempotent by state: sending one again is safe without a key.
      const mutation = await call((c) => (action === "delete" ? c.sandboxes.delete({ path: { sandbox_id: id } }) : c.sandboxes[action]({ path: { sandbox_id: id } })))
      const op = await waitOperation(mutation.operation.id, waitMs)
      if (op.state !== "succeeded") throw new GatewayError(op.error?.code ?? "operation_failed", op.error?.message ?? `The ${action} ended ${op.state}`, 0, op.retryable, op.error?.details)
      return op
    }

    /** One call of the raw file route; a failure is a GatewayError (retried, like the others, when retryable). */
    const rawTries = async (tries: number, method: "GET" | "PUT", path: string, headers: Record<string, string> = {}, body?: Buffer, query = ""): Promise<Response> => {
      const url = `${options.baseUrl}/v1/sandboxes/${id}/files/content?path=${encodeURIComponent(path)}${query}`
      for (let attempt = 1; ; attempt++) {
        let error: GatewayError
        try {
          const response = await fetchImpl(url, { method, headers: { ...authHeaders, ...headers }, ...(body === undefined ? {} : { body: body as unknown as BodyInit }) })
          if (response.status < 300) return response
          error = fromEnvelope(response.status, await response.json().catch(() => undefined), response.headers.get("x-request-id") ?? undefined)
        } catch (e) {
          error = toGatewayError(e instanceof TypeError ? { _tag: "RequestError", message: e.message } : e)
        }
        if (!error.retryable || attempt >= tries) throw error
        await sleep(100 * 2 ** (attempt - 1))
      }
    }
    const raw = (method: "GET" | "PUT", path: string, headers: Record<string, string> = {}, body?: Buffer, query = "") => rawTries(attempts, method, path, headers, body, query)
    /** Once, for a call that is not safe to send again as it is (an append). */
    const rawOnce = (method: "GET" | "PUT", path: string, headers: Record<string, string> = {}, body?: Buffer, query = "") => rawTries(1, method, path, headers, body, query)

    /** Writes `input` to a process's stdin in ≤ 1 MiB pieces, in order, then closes it; a process that ended stops it. */
    const feed = async (processId: string, input: string | Uint8Array | AsyncIterable<Uint8Array>) => {
      const write = (bytes: Uint8Array, eof: boolean) =>
        call((c) => c.processes.stdin({ path: { sandbox_id: id, process_id: processId }, payload: { data_base64: Buffer.from(bytes).toString("base64"), eof } }))
      const pieces = typeof input === "string" ? [new TextEncoder().encode(input)] : input instanceof Uint8Array ? [input] : input
      try {
        for await (const piece of pieces) {
          for (let at = 0; at < piece.length; at += STDIN_PIECE) await write(piece.subarray(at, at + STDIN_PIECE), false)
        }
        await write(new Uint8Array(), true)
      } catch (e) {
        // The process stopped reading (it ended): what is left has nowhere to go, as with a pipe in a shell.
        if (!(e instanceof GatewayError && e.code === "invalid_process_state")) throw e
      }
    }

    /**
     * Runs argv (not a shell line: use ["sh", "-c", "…"] for one), follows its output live, and resolves with its
     * exit code and output once it ends.
     */
    const exec = async (command: ReadonlyArray<string>, o: ExecOptions = {}): Promise<ExecResult> => {
      const timeoutSeconds = o.timeoutSeconds ?? 300
      // Nothing to show live and nothing to feed: run and wait, and a process that ends within the wait comes back
      // with its output in the same answer (one call); otherwise (202, or output past the answer's cap) it is read
      // from the events as below.
      const wait = o.onOutput === undefined && o.stdin === undefined ? Math.min(timeoutSeconds, MAX_WAIT_SECONDS) : undefined
      const started = await call((c) =>
        c.processes.start({
          path: { sandbox_id: id },
          urlParams: wait === undefined ? {} : { wait_seconds: wait },
          headers: { "idempotency-key": idempotencyKey() },
          payload: {
            command: [...command],
            ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
            ...(o.env !== undefined ? { environment: { ...o.env } } : {}),
            timeout_seconds: timeoutSeconds,
            max_output_bytes: MAX_OUTPUT_BYTES,
            stdin: o.stdin !== undefined
          }
        }))
      if ("stdout" in started && !started.output_capped) {
        return { processId: started.id, state: started.state, exitCode: started.exit_code, stdout: started.stdout, stderr: started.stderr }
      }
      const feeding = o.stdin === undefined ? Promise.resolve() : feed(started.id, o.stdin)
      const out = { stdout: [] as Array<Uint8Array>, stderr: [] as Array<Uint8Array> }
      const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() }
      await followEvents(fetchImpl, `${options.baseUrl}/v1/sandboxes/${id}/processes/${started.id}/events?follow=true`, authHeaders, (type, data) => {
        if (type !== "stdout" && type !== "stderr") return
        const bytes = Uint8Array.from(Buffer.from((data as { data_base64: string }).data_base64, "base64"))
        out[type].push(bytes)
        o.onOutput?.(type, decoders[type].decode(bytes, { stream: true }), bytes)
      })
      await feeding
      let process = await call((c) => c.processes.get({ path: { sandbox_id: id, process_id: started.id } }))
      while (!TERMINAL_PROCESS.has(process.state)) {
        await sleep(POLL_MS)
        process = await call((c) => c.processes.get({ path: { sandbox_id: id, process_id: started.id } }))
      }
      const text = (chunks: Array<Uint8Array>) => Buffer.concat(chunks).toString("utf8")
      return { processId: process.id, state: process.state, exitCode: process.exit_code, stdout: text(out.stdout), stderr: text(out.stderr) }
    }

    /** The provider's capability manifest, asked once. */
    let capabilitiesOnce: Promise<Schema.Schema.Type<typeof Capabilities>> | undefined
    const capabilities = () => {
      capabilitiesOnce ??= call((c) => c.sandboxes.capabilities({ path: { sandbox_id: id } })).catch((e: unknown) => {
        capabilitiesOnce = undefined
        throw e
      })
      return capabilitiesOnce
    }
    const getProcess = (processId: string) => call((c) => c.processes.get({ path: { sandbox_id: id, process_id: processId } }))

    /** A terminal whose process ended before the attach: its stored output is handed over, then its end. */
    const endedTerminal = async (process: ProcessRecord, o: AttachHandlers): Promise<Terminal> => {
      const decoder = new TextDecoder()
      await followEvents(fetchImpl, `${options.baseUrl}/v1/sandboxes/${id}/processes/${process.id}/events?follow=true`, authHeaders, (type, data) => {
        if (type !== "stdout" && type !== "stderr") return
        const bytes = Uint8Array.from(Buffer.from((data as { data_base64: string }).data_base64, "base64"))
        o.onOutput?.(decoder.decode(bytes, { stream: true }), bytes)
      })
      const exit: TerminalExit = { state: process.state as TerminalExit["state"], exitCode: process.exit_code }
      o.onExit?.(exit)
      const ended = () => {
        throw new GatewayError("invalid_process_state", `The process is ${process.state}: its terminal is closed`, 409, false)
      }
      return { processId: process.id, write: ended, resize: ended, close: () => undefined, exit: Promise.resolve(exit) }
    }

    /**
     * Attaches to a process started with `pty`: output as it comes (first what was kept after `after`), typed input,
     * resizes. A process that already ended hands over its stored output and resolves `exit` at once.
     */
    const attach = async (processId: string, o: AttachOptions = {}): Promise<Terminal> => {
      const query = o.after === undefined ? "" : `?after=${o.after}`
      const path = `/v1/sandboxes/${id}/processes/${processId}/attach${query}`
      if (WebSocketImpl === undefined) {
        throw new GatewayError("client_error", "No WebSocket here to attach a terminal with: pass createClient's `webSocket` (on Node 20, the `ws` package's WebSocket, or run Node with --experimental-websocket)", 0, false)
      }
      let terminal: Terminal
      try {
        terminal = await openTerminal(WebSocketImpl, `${wsBase}${path}`, authHeaders, processId, o)
      } catch (e) {
        // A refused upgrade is unreadable through a WebSocket: the same request without it gets the API's answer.
        const response = await fetchImpl(`${options.baseUrl}${path}`, { headers: authHeaders }).catch(() => undefined)
        if (response === undefined || response.status === 426) throw e
        const error = fromEnvelope(response.status, await response.json().catch(() => undefined), response.headers.get("x-request-id") ?? undefined)
        if (error.code === "invalid_process_state") {
          const process = await getProcess(processId)
          if (process.pty !== null && TERMINAL_PROCESS.has(process.state)) return endedTerminal(process, o)
        }
        throw error
      }
      // A dropped connection as the process ends is its end: the process says how it ended.
      const exit = terminal.exit.catch(async (e: unknown) => {
        if (e instanceof GatewayError && e.code === "attach_lost") {
          const process = await getProcess(processId).catch(() => undefined)
          if (process !== undefined && TERMINAL_PROCESS.has(process.state)) return { state: process.state as TerminalExit["state"], exitCode: process.exit_code }
        }
        throw e
      })
      exit.catch(() => undefined)
      return { ...terminal, exit }
    }

    /** Starts `command` on a terminal (`pty`) and attaches to it; needs a provider with terminals. */
    const terminal = async (command: ReadonlyArray<string>, o: TerminalOptions = {}): Promise<Terminal> => {
      const caps = await capabilities()
      const started = await call((c) =>
        c.processes.start({
          path: { sandbox_id: id },
          urlParams: {},
          headers: { "idempotency-key": idempotencyKey() },
          payload: {
            command: [...command],
            ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
            environment: { TERM: "xterm-256color", ...o.env },
            timeout_seconds: o.timeoutSeconds ?? Math.min(3600, caps.process.max_timeout_seconds || 3600),
            max_output_bytes: Math.min(TERMINAL_OUTPUT_BYTES, caps.process.max_output_bytes || MAX_OUTPUT_BYTES),
            stdin: true,
            pty: { cols: o.cols ?? 80, rows: o.rows ?? 24 }
          }
        }))
      try {
        return await attach(started.id, o)
      } catch (e) {
        // Nobody can type into it: it would only wait for its timeout.
        await call((c) => c.processes.cancel({ path: { sandbox_id: id, process_id: started.id }, headers: {} })).catch(() => undefined)
        throw e
      }
    }

    /**
     * One PUT of the raw route that is safe to send again: after a lost answer, the file's size says whether the
     * append was applied (an append sent twice would write its bytes twice).
     */
    const appendOnce = async (path: string, piece: Uint8Array, before: number) => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await rawOnce("PUT", path, { "content-type": "application/octet-stream" }, Buffer.from(piece), "&mode=append")
        } catch (e) {
          const error = toGatewayError(e)
          if (!error.retryable || attempt >= attempts) throw error
          await sleep(100 * 2 ** (attempt - 1))
          const size = await sizeOf(path)
          if (size === before + piece.length) return
          if (size !== before) throw new GatewayError("upload_conflict", `${path} changed during the upload (${size} bytes, expected ${before})`, 0, false)
        }
      }
    }
    /** A file's size, from a one-byte Range read (`Content-Range: bytes 0-0/<size>`). */
    const sizeOf = async (path: string) => {
      const response = await raw("GET", path, { range: "bytes=0-0" }).catch((e: unknown) => {
        if (e instanceof GatewayError && e.status === 416) return undefined // an empty file
        throw e
      })
      if (response === undefined) return 0
      await response.arrayBuffer()
      return Number(/\/(\d+)$/.exec(response.headers.get("content-range") ?? "")?.[1] ?? response.headers.get("content-length") ?? 0)
    }

    /**
     * Writes a file of any size: pieces of at most the provider's largest write, the first replacing the file. The
     * rest are appended where the provider appends; elsewhere (or when its append refuses the size) they are
     * written beside the file and joined onto it by a command in the sandbox, then removed.
     */
    const upload = async (path: string, data: Uint8Array | AsyncIterable<Uint8Array>, o: UploadOptions = {}) => {
      const caps = await capabilities()
      const largest = caps.filesystem.max_write_bytes > 0 ? caps.filesystem.max_write_bytes : MAX_OUTPUT_BYTES
      const pieceBytes = Math.max(1, Math.min(largest, o.pieceBytes ?? largest))
      let append = caps.filesystem.write_modes.includes("append")
      const parts: Array<string> = []
      const token = crypto.randomUUID().slice(0, 8)
      const slash = path.lastIndexOf("/")
      const partPath = (n: number) => `${path.slice(0, slash + 1)}.${path.slice(slash + 1)}.${token}.part${n}`
      let sent = 0
      let pieces = 0
      const put = async (target: string, piece: Uint8Array) =>
        (await raw("PUT", target, { "content-type": "application/octet-stream" }, Buffer.from(piece), "&mode=overwrite&create_parents=true")).arrayBuffer()
      try {
        for await (const piece of inPieces(data, pieceBytes)) {
          if (pieces === 0) await put(path, piece)
          else if (append) {
            try {
              await appendOnce(path, piece, sent)
            } catch (e) {
              // Refused outright on the first append (a provider whose append has a total ceiling): join instead.
              if (pieces !== 1 || !(e instanceof GatewayError) || e.retryable || e.code === "upload_conflict") throw e
              append = false
            }
          }
          if (pieces > 0 && !append) {
            parts.push(partPath(parts.length))
            await put(parts[parts.length - 1]!, piece)
          }
          pieces += 1
          sent += piece.length
          o.onProgress?.(sent)
        }
        if (pieces === 0) {
          await put(path, new Uint8Array())
          o.onProgress?.(0)
        }
        if (parts.length > 0) {
          const joined = await exec(["sh", "-c", 'cat -- "$@" >> "$0" && rm -f -- "$@"', path, ...parts], { timeoutSeconds: 600 })
          if (joined.exitCode !== 0) throw new GatewayError("upload_failed", `Joining the pieces of ${path} failed: ${joined.stderr.trim() || joined.state}`, 0, false)
          parts.length = 0
        }
      } finally {
        if (parts.length > 0) await exec(["rm", "-f", "--", ...parts]).catch(() => undefined)
      }
      return { sizeBytes: sent, pieces }
    }

    /**
     * The file's bytes as they stream in; a connection that breaks is resumed where it stopped (a Range read of
     * the rest, refused if the file changed meanwhile).
     */
    async function* download(path: string, o: DownloadOptions = {}): AsyncGenerator<Uint8Array, void, undefined> {
      let received = 0
      let total: number | undefined
      let etag: string | null = null
      for (let resume = 0; ; resume++) {
        // Always a Range read: its Content-Range tells the file's size even when the body is streamed without a
        // Content-Length (files larger than one provider read).
        const response = await raw("GET", path, { range: `bytes=${received}-` }).catch((e: unknown) => {
          if (received === 0 && e instanceof GatewayError && e.status === 416 && (e.details as { size_bytes?: unknown } | undefined)?.size_bytes === 0) return undefined
          throw e
        })
        if (response === undefined) {
          o.onProgress?.(0, 0) // an empty file
          return
        }
        const size = Number(/\/(\d+)$/.exec(response.headers.get("content-range") ?? "")?.[1] ?? Number.NaN)
        if (received === 0) {
          total = Number.isFinite(size) ? size : undefined
          etag = response.headers.get("etag")
          o.onProgress?.(0, total)
        } else if (response.status !== 206 || size !== total || (etag !== null && response.headers.get("etag") !== etag)) {
          await response.body?.cancel()
          throw new GatewayError("download_conflict", `${path} changed while it was read`, 0, false)
        }
        try {
          for await (const chunk of response.body ?? []) {
            received += chunk.length
            yield chunk
            o.onProgress?.(received, total)
          }
          if (total === undefined || received >= total) return
        } catch (e) {
          if (resume >= DOWNLOAD_RESUMES) throw toGatewayError(e instanceof TypeError ? { _tag: "RequestError", message: e.message } : e)
        }
        if (resume >= DOWNLOAD_RESUMES) throw new GatewayError("network_error", `The download of ${path} broke off at ${received} bytes`, 0, true)
        await sleep(100 * 2 ** resume)
      }
    }

    const expose = async (port: number, o: { readonly leaseSeconds?: number } = {}): Promise<EndpointRecord> => {
      let endpoint = await call((c) =>
        c.endpoints.create({ path: { sandbox_id: id }, headers: { "idempotency-key": idempotencyKey() }, payload: { port, protocol: "http", lease_seconds: o.leaseSeconds ?? 3600 } }))
      while (endpoint.state === "provisioning") {
        await sleep(POLL_MS)
        const list = await call((c) => c.endpoints.list({ path: { sandbox_id: id }, urlParams: { limit: 100 } }))
        endpoint = list.endpoints.find((e) => e.id === endpoint.id) ?? endpoint
      }
      if (endpoint.state !== "active") throw new GatewayError(endpoint.error?.code ?? "endpoint_failed", endpoint.error?.message ?? `The endpoint is ${endpoint.state}`, 0, false)
      return endpoint
    }

    return {
      id,
      record,
      /** The sandbox as the gateway has it now. */
      refresh: () => call((c) => c.sandboxes.get({ path: { sandbox_id: id } })),
      exec,
      attach,
      terminal,
      /** An interactive shell (bash where there is one, else sh) on a terminal, attached. */
      shell: (o: TerminalOptions = {}) => terminal(DEFAULT_SHELL, o),
      files: {
        /** The file's bytes as they stream in (`GET …/files/content`); a Range as `{start, end}` (inclusive). */
        readStream: async (path: string, range?: { readonly start: number; readonly end?: number }): Promise<ReadableStream<Uint8Array>> => {
          const response = await raw("GET", path, range === undefined ? {} : { range: `bytes=${range.start}-${range.end ?? ""}` })
          return response.body ?? new ReadableStream({ start: (c) => c.close() })
        },
        /** The whole file, through the raw route (no base64, no operation to poll). */
        read: async (path: string): Promise<Uint8Array> => new Uint8Array(await (await raw("GET", path)).arrayBuffer()),
        /**
         * Writes the file (`PUT …/files/content`), making its parents; `mode` create (a GatewayError `file_exists`
         * if it exists), overwrite (default) or append. At most the provider's largest write (10 MiB today).
         */
        write: async (path: string, data: Uint8Array | string, o: { readonly mode?: "create" | "overwrite" | "append" } = {}): Promise<{ readonly sizeBytes: number }> => {
          const body = typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data)
          const response = await raw("PUT", path, { "content-type": "application/octet-stream" }, body, `&mode=${o.mode ?? "overwrite"}&create_parents=true`)
          return { sizeBytes: ((await response.json()) as { size_bytes: number }).size_bytes }
        },
        /**
         * Writes a file of any size from bytes or a stream (pieces of at most the provider's largest write, each
         * retried on its own); resolves with the bytes written.
         */
        upload,
        /** Reads a file of any size as a stream of pieces, resuming a broken connection where it stopped. */
        download,
        list: async (path: string, o: { readonly recursive?: boolean } = {}) => {
          const started = await call((c) =>
            c.filesystem.list({ path: { sandbox_id: id }, payload: { path, recursive: o.recursive ?? false, max_entries: 10_000 } }))
          return ((await waitRuntimeOperation(id, started)) as { entries: ReadonlyArray<unknown> }).entries
        }
      },
      /** Serves `port` of the sandbox at a URL; resolves once the endpoint is active. */
      expose,
      /** The desktop of a sandbox created with `features: { computer_use: true }` (computer.ts). */
      computer: makeComputer({
        act: async (action) => {
          const key = idempotencyKey()
          // The contract's client takes one member of the actions' union at a time; any member encodes the same way.
          const payload = action as Extract<typeof action, { readonly type: "mouse_move" }>
          return waitRuntimeOperation(id, await call((c) => c.computer.action({ path: { sandbox_id: id }, headers: { "idempotency-key": key }, payload })))
        },
        screenshot: async (payload) => waitRuntimeOperation(id, await call((c) => c.computer.screenshot({ path: { sandbox_id: id }, payload }))),
        startRecording: (label) => {
          const key = idempotencyKey()
          return call((c) => c.computer.startRecording({ path: { sandbox_id: id }, headers: { "idempotency-key": key }, payload: { format: "mp4", ...(label === undefined ? {} : { label }) } }))
        },
        getRecording: (recording) => call((c) => c.computer.getRecording({ path: { sandbox_id: id, recording_id: recording } })),
        stopRecording: (recording) => call((c) => c.computer.stopRecording({ path: { sandbox_id: id, recording_id: recording }, headers: {} })),
        listRecordings: async () => (await call((c) => c.computer.listRecordings({ path: { sandbox_id: id }, urlParams: { limit: 100 } }))).recordings,
        recordingContent: async (recording) => {
          const response = await fetchImpl(`${options.baseUrl}/v1/sandboxes/${id}/recordings/${recording}/content`, { headers: authHeaders })
          if (response.status !== 200) throw fromEnvelope(response.status, await response.json().catch(() => undefined), response.headers.get("x-request-id") ?? undefined)
          return new Uint8Array(await response.arrayBuffer())
        },
        expose: (port, o) => expose(port, o),
        sleep: (ms) => sleep(ms).then(() => undefined)
      }),
      extend: (seconds: number) => call((c) => c.sandboxes.extend({ path: { sandbox_id: id }, payload: { runtime_timeout_seconds: seconds } })),
      metrics: () => call((c) => c.sandboxes.metrics({ path: { sandbox_id: id } })),
      pause: () => mutate("pause"),
      resume: () => mutate("resume"),
      destroy: () => mutate("delete")
    }
  }

  return {
    /** The contract's client (Effect): every route of the API, typed. */
    raw: rawClient,
    environments: {
      /** What `source.environment` can name: the names, their versions and the providers that create each. */
      list: async () => (await call((c) => c.environments.list())).environments
    },
    sandboxes: {
      /**
       * Creates a sandbox and (unless `wait: false`) resolves once it is ready. Retried after a lost answer with
       * the same Idempotency-Key, so one request makes at most one sandbox.
       */
      create: async (request: CreateSandbox, o: { readonly wait?: boolean; readonly timeoutMs?: number } = {}) => {
        const payload = decodeRequest(request)
        const key = idempotencyKey()
        const mutation = await call((c) => c.sandboxes.create({ headers: { "idempotency-key": key }, payload }))
        if (o.wait === false) return handle(mutation.sandbox)
        const op = await waitOperation(mutation.operation.id, o.timeoutMs ?? 300_000)
        if (op.state !== "succeeded") {
          throw new GatewayError(op.error?.code ?? "sandbox_failed", op.error?.message ?? `The sandbox could not be created (${op.state})`, 0, op.retryable, op.error?.details)
        }
        return handle(await call((c) => c.sandboxes.get({ path: { sandbox_id: mutation.sandbox.id } })))
      },
      get: async (id: string) => handle(await call((c) => c.sandboxes.get({ path: { sandbox_id: id } }))),
      list: (filter: { readonly state?: ReadonlyArray<SandboxRecord["state"]>; readonly provider?: SandboxRecord["provider"] & string; readonly limit?: number; readonly cursor?: string } = {}) =>
        call((c) =>
          c.sandboxes.list({
            urlParams: {
              limit: filter.limit ?? 50,
              ...(filter.cursor !== undefined ? { cursor: filter.cursor } : {}),
              ...(filter.state !== undefined ? { state: filter.state } : {}),
              ...(filter.provider !== undefined ? { provider: filter.provider } : {})
            }
          }))
    }
  }
}

export type GatewayClient = ReturnType<typeof createClient>
export type SandboxHandle = Awaited<ReturnType<GatewayClient["sandboxes"]["get"]>>
