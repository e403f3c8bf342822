/**
 * Freestyle files through the VM's `fs/*` routes (paths absolute, as query parameters):
 * - read: `GET …/fs/read?path=` with `Range: bytes=a-b` answers 206 with `Content-Range: bytes a-b/size` (or 200
 *   with the whole file); a range past the end is 416 with `bytes *\/size`; 404 when the file is missing.
 * - write: `PUT …/fs/write?path=&sha256=` with the bytes: Freestyle checks the digest and replaces the file
 *   (`CHECKSUM_MISMATCH` when the body arrived damaged). Overwrite only (reference §3.1: no create mode, no append).
 *   Whether the file existed is asked first (`GET …/fs/exists`); missing parents are made one by one from the top
 *   with `POST …/fs/mkdir {path}` when asked, else a missing parent is Freestyle's 404. A 202 is unresolved: the file
 *   is then looked at (`fs/stat`) until it has the size written, never written again blindly.
 * - list: `GET …/fs/dir?path=` names a directory's entries (`{name, kind}`); each is stat'ed (`GET …/fs/stat`:
 *   size, modification time) and, when recursive, each directory walked, up to the entry limit.
 * - delete: `DELETE …/fs/remove?path=`, as Freestyle's SDK removes; whether there was anything is asked first, and a
 *   directory with entries is removed only when asked to be recursive.
 * Routes and shapes as Freestyle's SDK (`freestyle` 0.2.17) calls them.
 */
import { HttpClientRequest } from "@effect/platform"
import { Duration, Effect, Option } from "effect"
import { createHash } from "node:crypto"
import { pollUntil } from "../../core/poll.ts"
import { type ProviderFileEntry, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { type FreestyleContext, NAME, WireDir, WireExists, WireStat } from "./wire.ts"
import { checkWrite } from "../../../src/providers/errors.ts"
import { rangeOfWhole } from "../../core/wire.ts"

const CONTENT_RANGE = /^bytes (?:(\d+)-(\d+)|\*)\/(\d+)$/

export const makeFiles = (ctx: FreestyleContext) => {
  const { api, decode, fail, send, vmPath } = ctx
  const files = ctx.capabilities.files
  const fsPath = (sandbox: ProviderSandbox, route: string) => vmPath(sandbox.resourceId, `/fs/${route}`)
  const absolute = (p: string) => (p.startsWith("/") ? Effect.succeed(p) : Effect.fail(fail("invalid_request", `${p} is not an absolute path`)))
  const missing = (path: string) => (e: { readonly kind: string }) =>
    e.kind === "not_found" ? fail("not_found", `${path} does not exist`, 404) : (e as ReturnType<typeof fail>)

  const stat = (sandbox: ProviderSandbox, path: string) =>
    send(api("GET", fsPath(sandbox, "stat")).pipe(HttpClientRequest.setUrlParam("path", path)), "stat file").pipe(
      Effect.flatMap(decode(WireStat, "stat file")),
      Effect.map(Option.some),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(Option.none()))
    )

  const readFile: SandboxProvider["readFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.read) return yield* unsupported(NAME, "reading files")
      const path = yield* absolute(input.path)
      const length = Math.min(input.maxBytes, files.maxReadBytes)
      if (length <= 0) return yield* fail("invalid_request", "a read needs at least one byte")
      const request = api("GET", fsPath(sandbox, "read")).pipe(
        HttpClientRequest.setUrlParam("path", path),
        HttpClientRequest.setHeader("accept", "application/octet-stream"),
        HttpClientRequest.setHeader("range", `bytes=${input.offsetBytes}-${input.offsetBytes + length - 1}`)
      )
      const response = yield* send(request, "read file", { accept: (status) => status === 416 }).pipe(Effect.mapError(missing(path)))
      const range = CONTENT_RANGE.exec(response.headers["content-range"] ?? "")
      if (response.status === 416) {
        const size = range === null ? Number.NaN : Number(range[3])
        if (!Number.isSafeInteger(size)) return yield* fail("unavailable", `freestyle read of ${path} answered 416 without the file's size`)
        return { data: new Uint8Array(0), offsetBytes: input.offsetBytes, sizeBytes: size, eof: true }
      }
      const body = new Uint8Array(yield* response.arrayBuffer.pipe(Effect.mapError((e) => fail("unavailable", `freestyle read of ${path} could not be read: ${e.message}`))))
      if (response.status === 206) {
        if (range === null || range[1] === undefined) return yield* fail("unavailable", `freestyle read of ${path} answered 206 without a Content-Range`)
        const start = Number(range[1])
        const size = Number(range[3])
        if (start !== input.offsetBytes) return yield* fail("unavailable", `freestyle read of ${path} answered bytes from ${start}, not ${input.offsetBytes}`)
        const data = body.subarray(0, length)
        return { data, offsetBytes: start, sizeBytes: size, eof: start + data.length >= size }
      }
      // The whole file (Freestyle left the range out): the range is cut here.
      return rangeOfWhole(body, input.offsetBytes, length)
    })

  const writeFile: SandboxProvider["writeFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      yield* checkWrite(NAME, files, input)
      const path = yield* absolute(input.path)
      if (path.endsWith("/")) return yield* fail("invalid_request", `${path} names no file`)
      const { exists } = yield* send(api("GET", fsPath(sandbox, "exists")).pipe(HttpClientRequest.setUrlParam("path", path)), "file exists").pipe(
        Effect.flatMap(decode(WireExists, "file exists"))
      )
      const parent = path.slice(0, path.lastIndexOf("/"))
      if (!exists && input.createParents && parent !== "") {
        // From the top down, each missing directory in turn.
        const parts = parent.split("/").filter((p) => p !== "")
        for (let i = 1; i <= parts.length; i++) {
          const dir = `/${parts.slice(0, i).join("/")}`
          const found = yield* stat(sandbox, dir)
          if (Option.isSome(found)) {
            if (!found.value.isDirectory) return yield* fail("customer", `${dir} is not a directory`)
            continue
          }
          yield* send(api("POST", fsPath(sandbox, "mkdir")).pipe(HttpClientRequest.bodyUnsafeJson({ path: dir })), "make directory")
        }
      }
      const sha256 = createHash("sha256").update(input.data).digest("hex")
      const request = api("PUT", fsPath(sandbox, "write")).pipe(
        HttpClientRequest.setUrlParams({ path, sha256 }),
        HttpClientRequest.bodyUint8Array(input.data, "application/octet-stream")
      )
      const response = yield* send(request, "write file").pipe(
        Effect.mapError((e) => (e.kind === "not_found" ? fail("not_found", `the directory of ${path} does not exist`, 404) : e))
      )
      if (response.status === 202) {
        // Unresolved: the file is looked at until it has what was written (its size), or the outcome stays unknown.
        yield* pollUntil(
          Effect.map(stat(sandbox, path), (s) => (Option.isSome(s) && s.value.isFile && s.value.size === input.data.length ? Option.some(true) : Option.none())),
          {
            interval: Duration.millis(ctx.pollMs),
            timeout: Duration.millis(ctx.lifecycleTimeoutMs),
            onTimeout: () => fail("unknown_outcome", `freestyle accepted the write of ${path} (202) but it has not shown up`)
          }
        )
      }
      return { bytesWritten: input.data.length, created: !exists }
    })

  const entriesOf = (sandbox: ProviderSandbox, path: string) =>
    send(api("GET", fsPath(sandbox, "dir")).pipe(HttpClientRequest.setUrlParam("path", path)), "list directory").pipe(
      Effect.flatMap(decode(WireDir, "list directory")),
      Effect.mapError(missing(path))
    )

  const listFiles: SandboxProvider["listFiles"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.list) return yield* unsupported(NAME, "listing files")
      const root = yield* absolute(input.path)
      const limit = Math.max(1, Math.min(input.maxEntries, files.maxListEntries))
      const entries: Array<ProviderFileEntry> = []
      const pending = [root]
      let truncated = false
      while (pending.length > 0 && !truncated) {
        const dir = pending.shift()!
        const listed = yield* entriesOf(sandbox, dir)
        for (const e of listed.entries) {
          if (entries.length >= limit) {
            truncated = true
            break
          }
          const path = `${dir === "/" ? "" : dir}/${e.name}`
          // Entries may go while they are listed: those are left out.
          const info = yield* stat(sandbox, path)
          if (Option.isNone(info)) continue
          const type = info.value.isSymlink ? "symlink" : info.value.isDirectory ? "directory" : info.value.isFile ? "file" : "other"
          entries.push({ path, type, sizeBytes: info.value.size, modifiedAt: info.value.modified ?? new Date(0).toISOString() })
          if (input.recursive && type === "directory") pending.push(path)
        }
      }
      return { entries, truncated }
    })

  const deleteFile: SandboxProvider["deleteFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.delete) return yield* unsupported(NAME, "deleting files")
      const path = yield* absolute(input.path)
      const found = yield* stat(sandbox, path)
      if (Option.isNone(found)) return { deleted: false }
      if (found.value.isDirectory && !input.recursive && (yield* entriesOf(sandbox, path)).entries.length > 0) {
        return yield* fail("customer", `${path} is a directory that is not empty`)
      }
      yield* send(api("DELETE", fsPath(sandbox, "remove")).pipe(HttpClientRequest.setUrlParam("path", path)), "remove file").pipe(
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.void)
      )
      return { deleted: true }
    })

  return { readFile, writeFile, listFiles, deleteFile } satisfies Partial<SandboxProvider>
}
