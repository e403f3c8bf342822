/**
 * Daytona files through the toolbox: `files/info`, `files/download` (with Range), `files/upload-v2` (the raw body:
 * a stream goes as it comes, no multipart framing), `files/folder`, `files` (list, delete). Daytona's upload creates
 * parents itself, so `createParents: false` checks the parent first; append is not offered (a read-modify-write
 * would race).
 */
import { HttpBody, HttpClientRequest } from "@effect/platform"
import { Effect, Schema } from "effect"
import { type ProviderError, type ProviderFileEntry, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { checkWrite } from "../../../src/providers/errors.ts"
import { exactBody } from "../../core/wire.ts"
import { type DaytonaContext, NAME, WireFileInfo } from "./wire.ts"

// Paths arrive already at the provider (withWorkspace rewrites /workspace on the way in and out).
const withPath = (p: string) => HttpClientRequest.setUrlParam("path", p)
const parentOf = (p: string) => p.slice(0, p.lastIndexOf("/")) || "/"

/** Daytona sends Go's time format (`2025-01-02 15:04:05.999 +0000 UTC m=+…`) or ISO; unreadable is the epoch. */
const modifiedAtOf = (f: WireFileInfo) => {
  const iso = f.modifiedAt ?? f.modTime
  const ms = iso === undefined ? Number.NaN : Date.parse(iso.replace(/ [+-]\d{4} \w+$/, "").replace(" m=", ""))
  return Number.isNaN(ms) ? new Date(0).toISOString() : new Date(ms).toISOString()
}
/** Go's `os.FileMode.String()`: `-` file, `d` directory (isDir), `L` symlink. */
const typeOf = (f: WireFileInfo): ProviderFileEntry["type"] =>
  f.isDir ? "directory" : f.mode === undefined || f.mode.startsWith("-") ? "file" : f.mode.startsWith("L") ? "symlink" : "other"

export const makeFiles = (ctx: DaytonaContext) => {
  const { decode, fail, toolbox } = ctx
  const files = ctx.capabilities.files

  const fileInfo = (sandbox: ProviderSandbox, p: string) =>
    toolbox(sandbox, "GET", "/files/info", "file info", withPath(p)).pipe(Effect.flatMap(decode(WireFileInfo, "file info")))
  const fileInfoOrNull = (sandbox: ProviderSandbox, p: string) =>
    fileInfo(sandbox, p).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))

  const readFile: SandboxProvider["readFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.read) return yield* unsupported(NAME, "reading files")
      const want = Math.min(input.maxBytes, files.maxReadBytes)
      const empty = (size: number) => ({ data: new Uint8Array(), offsetBytes: input.offsetBytes, sizeBytes: size, eof: input.offsetBytes >= size })
      // The file's info and the ranged download at once: one round trip. The info says what the file is and its
      // size; the download's range may reach past the end (the answer stops there, or is 416 when it starts past it).
      const [info, response] = yield* Effect.all([
        fileInfo(sandbox, input.path),
        want <= 0 ? Effect.succeed(undefined) : toolbox(sandbox, "GET", "/files/download", "download", (r) =>
          r.pipe(withPath(input.path), HttpClientRequest.setHeader("range", `bytes=${input.offsetBytes}-${input.offsetBytes + want - 1}`)), { accept: (status) => status === 416 }).pipe(
          // What the info says (not found, a directory) comes first; else the download's own failure.
          Effect.either
        )
      ], { concurrency: 2 })
      if (info.isDir) return yield* fail("invalid_request", `${input.path} is a directory`)
      const size = info.size
      const end = Math.min(size, input.offsetBytes + want)
      if (response === undefined || end <= input.offsetBytes) return empty(size)
      if (response._tag === "Left") return yield* response.left
      if (response.right.status === 416) return empty(size)
      const body = new Uint8Array(yield* Effect.mapError(response.right.arrayBuffer, (e) => fail("unavailable", `daytona download could not be read: ${e.message}`)))
      // 206 is the range; a 200 is the whole file (no Range support on the way).
      const data = response.right.status === 206 ? body.subarray(0, end - input.offsetBytes) : body.subarray(input.offsetBytes, end)
      return { data, offsetBytes: input.offsetBytes, sizeBytes: size, eof: input.offsetBytes + data.length >= size }
    })

  /** One ranged download, passed on as it comes (the gateway stat'ed the file: no `files/info` first). */
  const readFileStream: NonNullable<SandboxProvider["readFileStream"]> = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.read) return yield* unsupported(NAME, "reading files")
      const response = yield* toolbox(sandbox, "GET", "/files/download", "download", (r) =>
        r.pipe(withPath(input.path), HttpClientRequest.setHeader("range", `bytes=${input.offsetBytes}-${input.offsetBytes + input.length - 1}`)))
      // A 200 is the whole file: only the range from its start can be that.
      if (response.status !== 206 && input.offsetBytes !== 0) return yield* fail("unavailable", "daytona download ignored the range")
      return exactBody(response, input.length, "daytona download")
    })

  /**
   * The checks of a write (Daytona's upload overwrites and makes parents itself; `data` is sized, a stream is not);
   * whether the file existed.
   */
  const beforeWrite = (
    sandbox: ProviderSandbox,
    input: { readonly path: string; readonly mode: "create" | "overwrite" | "append"; readonly createParents: boolean; readonly data?: Uint8Array }
  ) =>
    Effect.gen(function*() {
      yield* checkWrite(NAME, files, input)
      const existing = yield* fileInfoOrNull(sandbox, input.path)
      if (existing?.isDir === true) return yield* fail("invalid_request", `${input.path} is a directory`)
      if (input.mode === "create" && existing !== null) return yield* fail("customer", `${input.path} already exists`)
      const parent = parentOf(input.path)
      if (input.createParents) {
        yield* toolbox(sandbox, "POST", "/files/folder", "create folder", (r) => r.pipe(withPath(parent), HttpClientRequest.setUrlParam("mode", "755")))
      } else if (existing === null) {
        // Daytona's upload would create the parents: refuse as a missing parent would.
        const dir = yield* fileInfoOrNull(sandbox, parent)
        if (dir === null) return yield* fail("not_found", `${parent} does not exist`)
        if (!dir.isDir) return yield* fail("invalid_request", `${parent} is not a directory`)
      }
      return existing !== null
    })
  /** One upload (`files/upload-v2`): the body as it is, a file there replaced. */
  const upload = (sandbox: ProviderSandbox, p: string, body: HttpBody.HttpBody) =>
    toolbox(sandbox, "POST", "/files/upload-v2", "upload", (r) => r.pipe(withPath(p), HttpClientRequest.setBody(body)))

  const writeFile: SandboxProvider["writeFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      const existed = yield* beforeWrite(sandbox, input)
      yield* upload(sandbox, input.path, HttpBody.uint8Array(input.data, "application/octet-stream"))
      return { bytesWritten: input.data.length, created: !existed }
    })

  /** A streamed write: the same upload, its body handed on as it comes. */
  const writeFileStream: NonNullable<SandboxProvider["writeFileStream"]> = (sandbox, input) =>
    Effect.gen(function*() {
      const existed = yield* beforeWrite(sandbox, input)
      yield* upload(sandbox, input.path, HttpBody.raw(input.body, { contentType: "application/octet-stream" }))
      return { created: !existed }
    })

  const listFiles: SandboxProvider["listFiles"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.list) return yield* unsupported(NAME, "listing files")
      const limit = Math.min(input.maxEntries, files.maxListEntries)
      const entries: Array<ProviderFileEntry> = []
      let truncated = false
      const walk = (dir: string): Effect.Effect<void, ProviderError> =>
        Effect.gen(function*() {
          const list = yield* toolbox(sandbox, "GET", "/files", "list files", withPath(dir)).pipe(Effect.flatMap(decode(Schema.Array(WireFileInfo), "list files")))
          for (const item of [...list].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
            if (entries.length >= limit) {
              truncated = true
              return
            }
            const p = `${dir === "/" ? "" : dir}/${item.name}`
            entries.push({ path: p, type: typeOf(item), sizeBytes: item.size, modifiedAt: modifiedAtOf(item) })
            if (input.recursive && item.isDir) yield* walk(p)
            if (truncated) return
          }
        })
      yield* walk(input.path.length > 1 ? input.path.replace(/\/+$/, "") : input.path)
      return { entries, truncated }
    })

  const deleteFile: SandboxProvider["deleteFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.delete) return yield* unsupported(NAME, "deleting files")
      return yield* toolbox(sandbox, "DELETE", "/files", "delete file", (r) =>
        r.pipe(withPath(input.path), HttpClientRequest.setUrlParam("recursive", String(input.recursive)))).pipe(
          Effect.as({ deleted: true }),
          Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed({ deleted: false }))
        )
    })

  return { readFile, readFileStream, writeFile, writeFileStream, listFiles, deleteFile }
}
