/**
 * Raw files (`GET|PUT /v1/sandboxes/{id}/files/content?path=`): bytes in and out in the request itself, without
 * base64 or a runtime operation to poll. A read past one piece is streamed: in one download passed on as it
 * comes where the provider's wire streams a range (`readFileStream`), else in pieces of the provider's largest
 * read (the gateway holds one piece at a time, whatever the file's size); a single byte range, an ETag from the
 * file's size and modification time. A write streams the body through when the provider's wire does
 * (`writeFileStream`: up to RAW_WRITE_MAX_BYTES, 1 GiB by default, the gateway holding a piece at a time), else takes it
 * whole up to the provider's largest write (10 MiB) and hands it over in one call; either way a broken upload, or
 * one past the limit, writes nothing. Paths and symlinks resolve inside the sandbox, as for the filesystem routes
 * (the provider or the runtime's agent resolves them there).
 */
import { passedOn, readAtMost } from "../../domain/Bodies.ts"
import { Effect, Fiber, Option, Runtime } from "effect"
import type { ProviderError, ProviderFileEntry, ProviderSandbox, SandboxProvider } from "../../providers/Provider.ts"
import { apiError, type Conflict, conflict, NotFound, PayloadTooLarge, ServiceUnavailable, Unprocessable } from "../../domain/Errors.ts"
import { AppConfig } from "../../Config.ts"
import { JobsRepo } from "../../db/repos/Jobs.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import { type Caller, readySandboxOf, requireCapability } from "./SandboxAccess.ts"
import { fileFailure, type FileOperation, fileReasonOf, logProviderFailure } from "./ProviderErrors.ts"
import { touchSandbox } from "./SandboxRows.ts"
import { unsupportedCall } from "./Unsupported.ts"
import type { SandboxId } from "../../domain/Ids.ts"

/** A streamed read asks for this much at a time (less in flight between the hops than a whole provider read). */
const STREAM_PIECE = 2 * 1024 * 1024
/** From this size on, a streamed read is one download from the file's start (see `open`). */
const LARGE_READ = 256 * 1024 * 1024

/** A file's identity for caching: its size and modification time (weak: equal bytes may differ in time). */
const etagOf = (entry: ProviderFileEntry) => {
  const mtime = Date.parse(entry.modifiedAt)
  return Number.isFinite(mtime) ? `W/"${entry.sizeBytes.toString(16)}-${mtime.toString(16)}"` : undefined
}

/** A provider failure of a file call, in the envelope: the request's own fault, or the provider's. */
const failure = (operation: FileOperation, path: string, e: ProviderError) => {
  const reason = fileReasonOf(e)
  if (reason === "already_exists") return conflict("file_exists", `The file exists: ${path.slice(0, 200)}`, { reason })
  if (reason === "is_a_directory") return conflict("is_a_directory", `Is a directory: ${path.slice(0, 200)}`, { reason })
  const { customer, error } = fileFailure(operation, path, e)
  switch (error.code) {
    case "file_not_found":
      return apiError(NotFound, error.code, error.message, error.details)
    case "invalid_path":
      return apiError(Unprocessable, error.code, error.message, error.details)
    case "capability_unsupported":
      return conflict(error.code, error.message, error.details)
    case "runtime_operation_failed":
      return customer ? conflict(error.code, error.message, error.details) : apiError(ServiceUnavailable, error.code, error.message, error.details)
  }
}
/** What a file call can fail with at the provider (`failure`). */
type FileFailure = ReturnType<typeof failure>
const failed = (operation: FileOperation, path: string) => (e: ProviderError) => Effect.zipRight(logProviderFailure(operation, e), Effect.fail(failure(operation, path, e)))

/**
 * How long a raw read or write waits for the sandbox's earlier work before it gives up (503 `sandbox_busy`,
 * retryable): within the 25 s a raw request has to answer its head (http/Sse.ts `SANDBOX_HEAD_MS`).
 */
const ORDER_WAIT_MS = 20_000

/**
 * One order per sandbox (docs/guide/sandboxes.md): a raw read or write waits until the processes and file operations
 * accepted before it have started (a process) or finished (a file operation), so a read after a write sees it.
 */
const awaitEarlierWork = (sandboxId: SandboxId) =>
  Effect.gen(function*() {
    const jobs = yield* JobsRepo
    const upTo = yield* jobs.orderTail(sandboxId)
    if (upTo === null) return
    const deadline = Date.now() + ORDER_WAIT_MS
    for (let waitMs = 2; yield* jobs.orderBusy(sandboxId, upTo); waitMs = Math.min(waitMs * 2, 50)) {
      if (Date.now() > deadline) {
        return yield* apiError(ServiceUnavailable, "sandbox_busy", "The sandbox's earlier processes and file operations did not start within 20 s; try again")
      }
      yield* Effect.sleep(waitMs)
    }
  })

const targetOf = (caller: Caller, sandboxId: SandboxId) =>
  Effect.gen(function*() {
    const sandbox = yield* readySandboxOf(caller, sandboxId)
    yield* awaitEarlierWork(sandbox.id)
    const target = (yield* ProviderAccounts).target(sandbox)
    if (target === undefined) return yield* conflict("invalid_sandbox_state", "The sandbox has no running provider resource")
    return { sandbox, provider: target.provider, resource: target.resource }
  })

/**
 * The entry of `path` in its parent's listing: its type, size and modification time (a stat every provider has).
 * In a directory too large to list whole, a one-byte read stands in: the size, no time (and so no ETag).
 */
const statOf = (provider: SandboxProvider, resource: ProviderSandbox, path: string) =>
  Effect.gen(function*() {
    const parent = path.slice(0, path.lastIndexOf("/")) || "/"
    const listed = yield* provider.listFiles(resource, { path: parent, recursive: false, maxEntries: provider.capabilities.files?.maxListEntries ?? 10_000 })
    const entry = listed.entries.find((e) => e.path === path)
    if (entry !== undefined || !listed.truncated) return entry
    const probe = yield* provider.readFile(resource, { path, offsetBytes: 0, maxBytes: 1 })
    return { path, type: "file", sizeBytes: probe.sizeBytes, modifiedAt: "" } satisfies ProviderFileEntry
  })

export interface RangeRequest {
  readonly start: number
  readonly end: number
}

/** One `bytes=` range against a size: the bytes to send, undefined for the whole file, or "unsatisfiable". */
export const parseRange = (header: string | undefined, size: number): RangeRequest | undefined | "unsatisfiable" => {
  if (header === undefined) return undefined
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim())
  if (m === null || (m[1] === "" && m[2] === "")) return "unsatisfiable"
  if (m[1] === "") {
    const suffix = Number(m[2])
    if (!Number.isSafeInteger(suffix) || suffix === 0 || size === 0) return "unsatisfiable"
    return { start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(m[1])
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1)
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start >= size || end < start) return "unsatisfiable"
  return { start, end }
}

export interface RawRead {
  readonly size: number
  readonly etag: string | undefined
  readonly range: RangeRequest | undefined | "unsatisfiable"
  readonly notModified: boolean
  /** The bytes from `from` to `to` (inclusive) as a stream: one download where the provider streams a range, else read piece by piece as it is pulled. */
  readonly open: (from: number, to: number) => Effect.Effect<ReadableStream<Uint8Array>, FileFailure>
  /** Bytes that fit in one read come whole (and get a Content-Length): at most this many. */
  readonly piece: number
  readonly readPiece: (from: number, to: number) => Effect.Effect<Uint8Array, FileFailure>
}

export const readRaw = (caller: Caller, sandboxId: SandboxId, path: string, headers: { readonly range?: string | undefined; readonly ifNoneMatch?: string | undefined }) =>
  Effect.gen(function*() {
    const { sandbox, provider, resource } = yield* targetOf(caller, sandboxId)
    yield* requireCapability(sandbox, ["filesystem", "read"], { kind: "files", operation: "read" })
    const piece = Math.max(1, provider.capabilities.files?.maxReadBytes ?? 8 * 1024 * 1024)
    const whole = provider.readFileStream
    // A plain read (no range, no validator) will want the file's first piece whatever the stat says: it is asked
    // for at the same time as the stat, which saves a round trip through the provider. The stat decides; the
    // piece is used only when it was read at the size the stat found (else the file changed: it is read again).
    // A large file downloaded in one stream starts without it (see `open`): that read is cut when the stat comes,
    // rather than finished and held for the whole transfer. (The read's fiber is this one's child: on a failure
    // below it goes when this one ends.)
    const early = headers.range === undefined && headers.ifNoneMatch === undefined
    const firstRead = early ? yield* Effect.fork(Effect.option(provider.readFile(resource, { path, offsetBytes: 0, maxBytes: piece }))) : undefined
    const entry = yield* statOf(provider, resource, path).pipe(Effect.catchAll(failed("read", path)))
    if (entry === undefined) return yield* apiError(NotFound, "file_not_found", `No such file or directory: ${path.slice(0, 200)}`, { reason: "not_found" })
    if (entry.type === "directory") return yield* conflict("is_a_directory", `Is a directory: ${path.slice(0, 200)}`, { reason: "is_a_directory" })
    const streamedWhole = whole !== undefined && entry.sizeBytes >= LARGE_READ
    const [, firstPiece] = yield* Effect.all([
      touchSandbox(sandbox.id),
      firstRead === undefined ? Effect.succeedNone : streamedWhole ? Effect.as(Fiber.interrupt(firstRead), Option.none()) : Fiber.join(firstRead)
    ], { concurrency: 2 })
    const etag = etagOf(entry)
    /** Bytes from offset 0 already read, when they belong to the file the stat found. */
    const first = Option.isSome(firstPiece) && firstPiece.value.sizeBytes === entry.sizeBytes ? firstPiece.value.data : undefined
    /** Piece by piece, each read as the response is pulled (the first may already be here). */
    const inPieces = (from: number, to: number, runtime: Runtime.Runtime<never>) => {
      let offset = from
      return new ReadableStream<Uint8Array>({
        pull: async (controller) => {
          if (offset > to) return controller.close()
          if (offset === 0 && first !== undefined && first.length > 0) {
            const head = first.subarray(0, to + 1)
            controller.enqueue(head)
            offset += head.length
            return
          }
          const read = await Runtime.runPromise(runtime)(
            Effect.either(provider.readFile(resource, { path, offsetBytes: offset, maxBytes: Math.min(STREAM_PIECE, piece, to - offset + 1) }))
          )
          // The file changed or went while it was read: the response ends short and errors, never passes as whole.
          if (read._tag === "Left" || read.right.data.length === 0) return controller.error(new Error("the file changed while it was read"))
          passedOn(read.right.data.length)
          controller.enqueue(read.right.data)
          offset += read.right.data.length
        }
      }, { highWaterMark: 0 })
    }
    /** The bytes already read, then the rest's stream as it comes. */
    const after = (head: Uint8Array, rest: ReadableStream<Uint8Array>) => {
      const reader = rest.getReader()
      let sent = false
      return new ReadableStream<Uint8Array>({
        cancel: (reason) => reader.cancel(reason).catch(() => {}),
        pull: async (controller) => {
          if (!sent) {
            sent = true
            return controller.enqueue(head)
          }
          try {
            const { done, value } = await reader.read()
            if (done) return controller.close()
            passedOn(value.length)
            controller.enqueue(value)
          } catch {
            controller.error(new Error("the file changed while it was read"))
          }
        }
      }, { highWaterMark: 0 })
    }
    // One download where the provider streams a range, opened before the response (a failure is an envelope, not
    // a cut body). Its body is the response's — held to the length by the adapter; framed by the provider's
    // Content-Length, it passes without a JavaScript stage — after the first piece when that is here and the rest
    // is small; a large file is downloaded from its start instead (the piece read beside the stat is at most a few
    // per cent of it), so that nothing stands between the provider's body and the response. Else piece by piece.
    const open = (from: number, to: number) => {
      if (whole === undefined) return Effect.map(Effect.runtime<never>(), (runtime) => inPieces(from, to, runtime))
      const head = from === 0 && first !== undefined && first.length > 0 && first.length <= to && to + 1 < LARGE_READ ? first : undefined
      const start = head === undefined ? from : head.length
      return whole(resource, { path, offsetBytes: start, length: to - start + 1 }).pipe(
        Effect.map((rest) => (head === undefined ? rest : after(head, rest))),
        Effect.catchAll(failed("read", path))
      )
    }
    const readPiece = (from: number, to: number) =>
      from === 0 && first !== undefined && first.length >= Math.min(to + 1, entry.sizeBytes) ? Effect.succeed(first.subarray(0, to + 1)) : provider.readFile(resource, { path, offsetBytes: from, maxBytes: to - from + 1 }).pipe(
        Effect.map((r) => r.data),
        Effect.catchAll(failed("read", path))
      )
    return {
      piece,
      readPiece,
      size: entry.sizeBytes,
      etag,
      range: parseRange(headers.range, entry.sizeBytes),
      notModified: etag !== undefined && headers.ifNoneMatch !== undefined && headers.ifNoneMatch.split(",").some((t) => t.trim() === etag || t.trim() === "*"),
      open
    } satisfies RawRead
  }).pipe(Effect.withSpan("RawFiles.readRaw", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

export interface RawWriteInput {
  readonly path: string
  readonly mode: "create" | "overwrite" | "append"
  readonly createParents: boolean
  readonly data: Uint8Array
}

/** The largest body a raw write takes on this provider: any size up to `streamLimit` where its wire streams, else its largest write. */
const writeLimitOf = (provider: SandboxProvider, streamLimit: number) =>
  provider.writeFileStream !== undefined ? streamLimit : provider.capabilities.files?.maxWriteBytes ?? 0

/** A write past the limit (`limit` bytes on `provider`). */
export const tooLarge = (limit: number, provider: string | null) =>
  apiError(PayloadTooLarge, "payload_too_large", `A write takes at most ${limit} bytes on ${provider}`, { limit_bytes: limit })

/** What a raw write checks before it takes any byte: the sandbox, the capability, the mode, parents, a declared size. */
export const checkRawWrite = (caller: Caller, sandboxId: SandboxId, input: Omit<RawWriteInput, "data"> & { readonly declaredBytes?: number | undefined }) =>
  Effect.gen(function*() {
    const { sandbox, provider, resource } = yield* targetOf(caller, sandboxId)
    yield* requireCapability(sandbox, ["filesystem", "write"], { kind: "files", operation: "write" })
    const files = provider.capabilities.files
    if (files === null || !files.writeModes.includes(input.mode)) return yield* unsupportedCall(sandbox, { kind: "write_mode", mode: input.mode })
    if (input.createParents && !files.createParents) return yield* unsupportedCall(sandbox, { kind: "create_parents" })
    const limit = writeLimitOf(provider, (yield* AppConfig).rawWriteMaxBytes)
    if (input.declaredBytes !== undefined && input.declaredBytes > limit) return yield* tooLarge(limit, sandbox.provider)
    return { sandbox, provider, resource, limit }
  })

/**
 * The size of the file after a write: what was written, or after an append (or a write not counted: `written`
 * undefined), what the provider says it is now.
 */
const sizeAfter = (provider: SandboxProvider, resource: ProviderSandbox, input: RawWriteInput | Omit<RawWriteInput, "data">, written: number | undefined) =>
  input.mode !== "append" && written !== undefined
    ? Effect.succeed(written)
    : Effect.map(statOf(provider, resource, input.path).pipe(Effect.catchAll(failed("write", input.path))), (entry) => entry?.sizeBytes ?? written ?? 0)

/**
 * A raw write of a body that streams in (`PUT …/files/content`): through the provider's streaming write where it
 * has one, each byte counted against the limit (past it, the body is cut and nothing is written: 413); else read
 * whole up to the provider's largest write and written in one call.
 */
export const writeRawStream = (
  caller: Caller,
  sandboxId: SandboxId,
  input: Omit<RawWriteInput, "data"> & {
    readonly body: ReadableStream<Uint8Array> | null
    readonly declaredBytes?: number | undefined
    /** An unsized body the server that took it cuts at the limit itself (the HTTP route's intake): not counted here. */
    readonly countedByBun?: boolean | undefined
  }
) =>
  Effect.gen(function*() {
    const { sandbox, provider, resource, limit } = yield* checkRawWrite(caller, sandboxId, input)
    const body = input.body ?? new ReadableStream<Uint8Array>({ start: (controller) => controller.close() })
    const write = provider.writeFileStream
    if (write === undefined) {
      const data = yield* Effect.promise((signal) => readAtMost(body, limit, signal))
      if (data === undefined) return yield* tooLarge(limit, sandbox.provider)
      return yield* writeRaw(caller, sandboxId, { ...input, data })
    }
    // A stated length bounds the body (HTTP framing ends it there, and it was checked against the limit): it
    // goes to the provider's wire as it is, never through JavaScript, so memory stays flat; so does an unsized body
    // that Bun cuts at the limit. Otherwise an unsized (chunked) body is counted as it passes, to cut it at the limit.
    let received = input.declaredBytes ?? 0
    let over = false
    const counted = input.declaredBytes !== undefined || input.countedByBun === true ? body : body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, controller) => {
        received += chunk.length
        passedOn(chunk.length)
        if (received > limit) {
          over = true
          return controller.error(new Error("the body is larger than the limit"))
        }
        controller.enqueue(chunk)
      }
    }))
    const written = yield* write(resource, { path: input.path, body: counted, mode: input.mode, createParents: input.createParents }).pipe(
      Effect.catchAll((e): Effect.Effect<never, ReturnType<typeof tooLarge> | FileFailure> =>
        over ? Effect.fail(tooLarge(limit, sandbox.provider)) : failed("write", input.path)(e))
    )
    if (over) return yield* tooLarge(limit, sandbox.provider)
    yield* touchSandbox(sandbox.id)
    // Not counted here: the provider says how large the file is now.
    const size = input.countedByBun === true ? undefined : received
    return { created: written.created, path: input.path, size_bytes: yield* sizeAfter(provider, resource, input, size) }
  })

/** What a streamed raw write needs of the services (the HTTP route runs it with these). */
export type RawWriteServices = Effect.Effect.Context<ReturnType<typeof writeRawStream>>


export const writeRaw = (caller: Caller, sandboxId: SandboxId, input: RawWriteInput) =>
  Effect.gen(function*() {
    const { sandbox, provider, resource } = yield* checkRawWrite(caller, sandboxId, input)
    const files = provider.capabilities.files!
    if (input.data.length > files.maxWriteBytes && provider.writeFileStream === undefined) return yield* tooLarge(files.maxWriteBytes, sandbox.provider)
    const written = yield* provider.writeFile(resource, { path: input.path, data: input.data, mode: input.mode, createParents: input.createParents }).pipe(
      Effect.catchAll(failed("write", input.path))
    )
    yield* touchSandbox(sandbox.id)
    // After an append the file's size is asked of the provider (what was there before is not known here).
    return { created: written.created, path: input.path, size_bytes: yield* sizeAfter(provider, resource, input, input.data.length) }
  }).pipe(Effect.withSpan("RawFiles.writeRaw", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))
