/**
 * Blaxel files through the sandbox runtime, paths sent absolute (one escaped segment: `/filesystem/%2Fworkspace%2Fa`;
 * an unescaped path would be taken relative to the runtime's working directory):
 * - read: `GET /filesystem/{path}` with `Accept: application/octet-stream` and a Range (Go's ServeContent: 206 with
 *   the size in Content-Range, 416 past the end, 200 for an empty file); a directory answers its listing instead.
 * - write: the parent's listing says whether the file exists (and its size); `PUT /filesystem/{parent}
 *   {isDirectory: true}` makes parents when asked (Blaxel's writes would make them anyway, so without
 *   createParents a missing parent is refused first); the bytes go up as a multipart upload in 5 MiB parts
 *   (`/filesystem-multipart/initiate/{path}`, `…/{uploadId}/part?partNumber=`, `…/complete`, `…/abort` on failure).
 *   Append is a read-modify-write of at most the write limit.
 * - list: `GET /filesystem/{path}` (JSON: files and subdirectories), walked for a recursive listing.
 * - delete: `DELETE /filesystem/{path}?recursive=`; 404 is "nothing to delete".
 */
import { readBodyAtMost } from "../../core/wire.ts"
import { HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import type { ProviderError, ProviderFileEntry, ProviderSandbox, SandboxProvider } from "../../../src/providers/Provider.ts"
import { unsupported } from "../../../src/providers/Provider.ts"
import { type BlaxelContext, NAME, PART_BYTES, runtimePath, WireDirectory, WireDirectoryOrFile, WirePart, WireUpload } from "./wire.ts"
import { checkWrite } from "../../../src/providers/errors.ts"

const parentOf = (p: string) => p.slice(0, p.lastIndexOf("/")) || "/"
const baseName = (p: string) => p.slice(p.lastIndexOf("/") + 1)
const iso = (s: string | undefined) => {
  const ms = s === undefined ? Number.NaN : Date.parse(s)
  return Number.isNaN(ms) ? new Date(0).toISOString() : new Date(ms).toISOString()
}

export const makeFiles = (ctx: BlaxelContext) => {
  const { decode, fail, runtime } = ctx
  const files = ctx.capabilities.files
  const fsPath = (p: string) => `/filesystem/${runtimePath(p)}`

  /** A directory's listing; null when the path does not exist; a failure when it is a file. */
  const listing = (sandbox: ProviderSandbox, dir: string) =>
    runtime(sandbox, "GET", fsPath(dir), "list directory").pipe(
      Effect.flatMap(decode(WireDirectoryOrFile, "list directory")),
      Effect.flatMap((d) => ("content" in d ? Effect.fail(fail("invalid_request", `${dir} is not a directory`)) : Effect.succeed(d))),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
    )

  /** Bytes [offset, offset + length) and the file's size. */
  const download = (sandbox: ProviderSandbox, p: string, offset: number, length: number) =>
    Effect.gen(function*() {
      const response = yield* runtime(sandbox, "GET", fsPath(p), "download", (r) =>
        r.pipe(HttpClientRequest.setHeaders({ accept: "application/octet-stream", range: `bytes=${offset}-${offset + Math.max(length, 1) - 1}` })), {
        accept: (status) => status === 416
      })
      const range = /\/(\d+)$/.exec(response.headers["content-range"] ?? "")
      if (response.status === 416) return { data: new Uint8Array(), size: range === null ? offset : Number(range[1]) }
      // A directory answers its listing (JSON, and no attachment).
      if (response.headers["content-disposition"] === undefined && (response.headers["content-type"] ?? "").includes("application/json")) {
        return yield* fail("invalid_request", `${p} is a directory`)
      }
      // Bounded, before reading where the length is stated and while reading: a 206 is at most the range, a whole
      // file (no Range on the way) at most the limit.
      const cap = response.status === 206 ? Math.max(length, 1) : files!.maxReadBytes
      const body = yield* readBodyAtMost(response, cap, {
        unreadable: (message) => fail("unavailable", `blaxel download could not be read: ${message}`),
        tooLarge: () => fail("invalid_request", `${p} is larger than ${cap} bytes`)
      })
      if (response.status === 206) return { data: body.slice(0, length), size: range === null ? offset + body.length : Number(range[1]) }
      return { data: body.slice(offset, offset + length), size: body.length }
    })

  const readFile: SandboxProvider["readFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.read) return yield* unsupported(NAME, "reading files")
      const length = Math.min(input.maxBytes, files.maxReadBytes)
      const { data, size } = yield* download(sandbox, input.path, input.offsetBytes, length)
      return { data, offsetBytes: input.offsetBytes, sizeBytes: size, eof: input.offsetBytes + data.length >= size }
    })

  const upload = (sandbox: ProviderSandbox, p: string, bytes: Uint8Array) =>
    Effect.gen(function*() {
      const { uploadId } = yield* runtime(sandbox, "POST", `/filesystem-multipart/initiate/${runtimePath(p)}`, "initiate upload", HttpClientRequest.bodyUnsafeJson({ permissions: "0644" })).pipe(
        Effect.flatMap(decode(WireUpload, "initiate upload"))
      )
      const upload = `/filesystem-multipart/${encodeURIComponent(uploadId)}`
      // A failed upload is aborted (its parts would otherwise wait in the sandbox).
      yield* uploadParts(sandbox, upload, bytes).pipe(Effect.onError(() => Effect.ignore(runtime(sandbox, "DELETE", `${upload}/abort`, "abort upload"))))
    })

  const uploadParts = (sandbox: ProviderSandbox, upload: string, bytes: Uint8Array) =>
    Effect.gen(function*() {
      const parts: Array<{ partNumber: number; etag: string }> = []
      // Completing needs one part at least, an empty one for an empty file.
      for (let start = 0, partNumber = 1; start < bytes.length || partNumber === 1; start += PART_BYTES, partNumber++) {
        const form = new FormData()
        form.append("file", new Blob([bytes.slice(start, start + PART_BYTES)]), `part-${partNumber}`)
        const part = yield* runtime(sandbox, "PUT", `${upload}/part`, "upload part", (r) =>
          r.pipe(HttpClientRequest.setUrlParam("partNumber", String(partNumber)), HttpClientRequest.bodyFormData(form))).pipe(
            Effect.flatMap(decode(WirePart, "upload part"))
          )
        parts.push({ partNumber: part.partNumber, etag: part.etag })
      }
      yield* runtime(sandbox, "POST", `${upload}/complete`, "complete upload", HttpClientRequest.bodyUnsafeJson({ parts }))
    })

  const writeFile: SandboxProvider["writeFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      const writable = yield* checkWrite(NAME, files, input)
      const parent = parentOf(input.path)
      const dir = yield* listing(sandbox, parent)
      if (dir === null && !input.createParents) return yield* fail("not_found", `${parent} does not exist`)
      const name = baseName(input.path)
      if ((dir?.subdirectories ?? []).some((d) => d.name === name)) return yield* fail("invalid_request", `${input.path} is a directory`)
      const existing = (dir?.files ?? []).find((f) => f.name === name)
      if (input.mode === "create" && existing !== undefined) return yield* fail("customer", `${input.path} already exists`)
      let bytes = input.data
      if (input.mode === "append" && existing !== undefined && existing.size > 0) {
        if (existing.size + input.data.length > writable.maxWriteBytes) return yield* fail("invalid_request", `appending would make ${input.path} larger than ${writable.maxWriteBytes} bytes`)
        const before = yield* download(sandbox, input.path, 0, existing.size)
        bytes = new Uint8Array(before.data.length + input.data.length)
        bytes.set(before.data)
        bytes.set(input.data, before.data.length)
      }
      if (dir === null) yield* runtime(sandbox, "PUT", fsPath(parent), "create folder", HttpClientRequest.bodyUnsafeJson({ isDirectory: true }))
      yield* upload(sandbox, input.path, bytes)
      return { bytesWritten: input.data.length, created: existing === undefined }
    })

  const listFiles: SandboxProvider["listFiles"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.list) return yield* unsupported(NAME, "listing files")
      const limit = Math.min(input.maxEntries, files.maxListEntries)
      const entries: Array<ProviderFileEntry> = []
      let truncated = false
      const walk = (path: string, top: boolean): Effect.Effect<void, ProviderError> =>
        Effect.gen(function*() {
          const d = yield* listing(sandbox, path)
          if (d === null) {
            if (top) return yield* fail("not_found", `${path} does not exist`)
            return
          }
          const dirPath = path.length > 1 ? path.replace(/\/+$/, "") : path
          const join = (n: string) => `${dirPath === "/" ? "" : dirPath}/${n}`
          const items = [
            ...(d.files ?? []).map((f) => ({ name: f.name, entry: { path: join(f.name), type: "file" as const, sizeBytes: f.size, modifiedAt: iso(f.lastModified) } })),
            ...(d.subdirectories ?? []).map((s) => ({ name: s.name, entry: { path: join(s.name), type: "directory" as const, sizeBytes: 0, modifiedAt: new Date(0).toISOString() } }))
          ].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
          for (const item of items) {
            if (entries.length >= limit) {
              truncated = true
              return
            }
            entries.push(item.entry)
            if (input.recursive && item.entry.type === "directory") yield* walk(item.entry.path, false)
            if (truncated) return
          }
        })
      yield* walk(input.path, true)
      return { entries, truncated }
    })

  const deleteFile: SandboxProvider["deleteFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.delete) return yield* unsupported(NAME, "deleting files")
      return yield* runtime(sandbox, "DELETE", fsPath(input.path), "delete file", HttpClientRequest.setUrlParam("recursive", String(input.recursive))).pipe(
        Effect.as({ deleted: true }),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed({ deleted: false })),
        // A directory that is not empty, deleted without `recursive`.
        Effect.catchIf((e) => e.status === 422, (e) => Effect.fail(fail("customer", e.message, 422)))
      )
    })

  return { readFile, writeFile, listFiles, deleteFile }
}
