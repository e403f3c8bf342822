/**
 * A sandbox's files in the Promise layer: the raw file route (`…/files/content`: bytes both ways, no base64, no
 * operation to poll), and files of any size on top of it — uploads in pieces of the provider's largest write,
 * downloads that resume a broken connection where it stopped.
 */
import type { Schema } from "effect"
import type { SandboxId } from "../../src/domain/Ids.ts"
import type { Capabilities } from "../../src/domain/Runtime.ts"
import { fromResponse, GatewayError } from "./errors.ts"
import type { ExecOptions, ExecResult } from "./processes.ts"
import { backoff, fetchFailure, toGatewayError, type Transport } from "./transport.ts"

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

/** The piece size of an upload when the provider states no largest write. */
const DEFAULT_PIECE_BYTES = 10 * 1024 * 1024
/** Times a broken download is resumed from where it stopped (a Range read). */
const DOWNLOAD_RESUMES = 5

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

/** What the files of a sandbox need besides the gateway: its provider's manifest, and a command (to join pieces). */
export interface FilesDeps {
  readonly capabilities: () => Promise<Schema.Schema.Type<typeof Capabilities>>
  readonly exec: (command: ReadonlyArray<string>, o?: ExecOptions) => Promise<ExecResult>
}

/** The files of sandbox `sandboxId`. */
export const makeFiles = (t: Transport, sandboxId: SandboxId, deps: FilesDeps) => {
  /** One call of the raw file route; a failure is a GatewayError (retried, like the others, when retryable). */
  const rawTries = async (tries: number, method: "GET" | "PUT", path: string, headers: Record<string, string> = {}, body?: Buffer, query = ""): Promise<Response> => {
    const url = `${t.baseUrl}/v1/sandboxes/${sandboxId}/files/content?path=${encodeURIComponent(path)}${query}`
    for (let attempt = 1; ; attempt++) {
      let error: GatewayError
      try {
        const response = await t.fetch(url, { method, headers: { ...t.authHeaders, ...headers }, ...(body === undefined ? {} : { body: body as unknown as BodyInit }) })
        if (response.status < 300) return response
        error = await fromResponse(response)
      } catch (e) {
        error = fetchFailure(e)
      }
      if (!error.retryable || attempt >= tries) throw error
      await backoff(attempt)
    }
  }
  const raw = (method: "GET" | "PUT", path: string, headers: Record<string, string> = {}, body?: Buffer, query = "") => rawTries(t.attempts, method, path, headers, body, query)
  /** Once, for a call that is not safe to send again as it is (an append). */
  const rawOnce = (method: "GET" | "PUT", path: string, headers: Record<string, string> = {}, body?: Buffer, query = "") => rawTries(1, method, path, headers, body, query)

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
        if (!error.retryable || attempt >= t.attempts) throw error
        await backoff(attempt)
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
    const caps = await deps.capabilities()
    const largest = caps.filesystem.max_write_bytes > 0 ? caps.filesystem.max_write_bytes : DEFAULT_PIECE_BYTES
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
        const joined = await deps.exec(["sh", "-c", 'cat -- "$@" >> "$0" && rm -f -- "$@"', path, ...parts], { timeoutSeconds: 600 })
        if (joined.exitCode !== 0) throw new GatewayError("upload_failed", `Joining the pieces of ${path} failed: ${joined.stderr.trim() || joined.state}`, 0, false)
        parts.length = 0
      }
    } finally {
      if (parts.length > 0) await deps.exec(["rm", "-f", "--", ...parts]).catch(() => undefined)
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
        if (resume >= DOWNLOAD_RESUMES) throw fetchFailure(e)
      }
      if (resume >= DOWNLOAD_RESUMES) throw new GatewayError("network_error", `The download of ${path} broke off at ${received} bytes`, 0, true)
      await backoff(resume + 1)
    }
  }

  return {
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
      const started = await t.call((c) =>
        c.filesystem.list({ path: { sandbox_id: sandboxId }, payload: { path, recursive: o.recursive ?? false, max_entries: 10_000 } }))
      return ((await t.waitRuntimeOperation(sandboxId, started)) as { entries: ReadonlyArray<unknown> }).entries
    }
  }
}
