/**
 * E2B files: `GET /files` with Range (206, or 416 past the end, as Go's ServeContent answers), `POST /files`
 * (octet-stream from envd 0.5.7, multipart before), and the unary `filesystem.Filesystem` Stat, ListDir and
 * Remove. envd overwrites, creates parents and removes like `rm -rf` unconditionally, so `create`, "no parents"
 * and "not empty" are checked first; append is not offered.
 */
import { HttpBody, HttpClientRequest } from "@effect/platform"
import { readAtMost } from "../../../src/domain/Bodies.ts"
import { Effect } from "effect"
import { type ProviderFileEntry, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { type CallOptions, exactBody, rangeOfWhole } from "../../core/wire.ts"
import type { E2BContext, EnvdAccess } from "./context.ts"
import { Empty, ENVD_OCTET_STREAM_UPLOAD, envdAtLeast, ListDirResponse, NAME } from "./wire.ts"

const entryType = (type: string | undefined): ProviderFileEntry["type"] =>
  type === "FILE_TYPE_DIRECTORY" ? "directory" : type === "FILE_TYPE_SYMLINK" ? "symlink" : type === "FILE_TYPE_FILE" ? "file" : "other"
const parentOf = (path: string) => path.slice(0, path.lastIndexOf("/")) || "/"

export const makeFiles = (ctx: E2BContext) => {
  const { accessOf, envd, envdRequest, fail, statOrNull, unary, userParam } = ctx

  /** `GET /files` of `length` bytes from `offset` (envd serves Range as Go's ServeContent does). */
  const ranged = (sandbox: ProviderSandbox, path: string, offset: number, length: number, options: CallOptions = {}) =>
    envd(
      sandbox,
      (a) =>
        envdRequest(sandbox, a, "GET", "/files").pipe(
          HttpClientRequest.setUrlParam("path", path),
          userParam(a),
          HttpClientRequest.setHeader("range", `bytes=${offset}-${offset + length - 1}`)
        ),
      "read file",
      options
    )

  const readFile: SandboxProvider["readFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (input.maxBytes <= 0) {
        const entry = yield* statOrNull(sandbox, input.path)
        if (entry === null) return yield* fail("not_found", `${input.path} does not exist`)
        if (entry.type === "FILE_TYPE_DIRECTORY") return yield* fail("invalid_request", `${input.path} is a directory`)
        const size = Number(entry.size ?? 0)
        return { data: new Uint8Array(), offsetBytes: input.offsetBytes, sizeBytes: size, eof: input.offsetBytes >= size }
      }
      const response = yield* ranged(sandbox, input.path, input.offsetBytes, input.maxBytes, { accept: (status) => status === 416 })
      const range = response.headers["content-range"] ?? ""
      if (response.status === 416) {
        // Nothing at or after the offset (Go's ServeContent answers `bytes */<size>`).
        const size = Number(/^bytes \*\/(\d+)$/.exec(range)?.[1] ?? input.offsetBytes)
        return { data: new Uint8Array(), offsetBytes: input.offsetBytes, sizeBytes: size, eof: true }
      }
      const body = new Uint8Array(yield* Effect.mapError(response.arrayBuffer, (e) => fail("unavailable", `e2b read file: ${e.message}`)))
      if (response.status === 206) {
        const total = /^bytes \d+-\d+\/(\d+)$/.exec(range)?.[1]
        const size = total === undefined ? input.offsetBytes + body.length : Number(total)
        return { data: body, offsetBytes: input.offsetBytes, sizeBytes: size, eof: input.offsetBytes + body.length >= size }
      }
      // 200: the whole file (the Range was not honoured).
      return rangeOfWhole(body, input.offsetBytes, input.maxBytes)
    })

  /** One ranged `GET /files`, passed on as it comes (the gateway stat'ed the file). */
  const readFileStream: NonNullable<SandboxProvider["readFileStream"]> = (sandbox, input) =>
    Effect.gen(function*() {
      const response = yield* ranged(sandbox, input.path, input.offsetBytes, input.length)
      // A 200 is the whole file (the range not honoured): only the range from its start can be that.
      if (response.status !== 206 && input.offsetBytes !== 0) return yield* fail("unavailable", "e2b read file ignored the range")
      return exactBody(response, input.length, "e2b read file")
    })

  /** envd's checks a write needs first (it overwrites and creates parents unconditionally); whether it exists. */
  const beforeWrite = (sandbox: ProviderSandbox, input: { readonly path: string; readonly mode: string; readonly createParents: boolean }) =>
    Effect.gen(function*() {
      if (input.mode === "append") return yield* unsupported(NAME, "appending to files")
      const existing = yield* statOrNull(sandbox, input.path)
      if (existing?.type === "FILE_TYPE_DIRECTORY") return yield* fail("invalid_request", `${input.path} is a directory`)
      if (input.mode === "create" && existing !== null) return yield* fail("customer", `${input.path} already exists`)
      if (!input.createParents) {
        const parent = yield* statOrNull(sandbox, parentOf(input.path))
        if (parent === null) return yield* fail("not_found", `the directory ${parentOf(input.path)} does not exist`)
        if (parent.type !== "FILE_TYPE_DIRECTORY") return yield* fail("invalid_request", `${parentOf(input.path)} is not a directory`)
      }
      return existing !== null
    })

  const upload = (sandbox: ProviderSandbox, path: string, body: (request: HttpClientRequest.HttpClientRequest, a: EnvdAccess) => HttpClientRequest.HttpClientRequest) =>
    envd(
      sandbox,
      (a) => body(envdRequest(sandbox, a, "POST", "/files").pipe(HttpClientRequest.setUrlParam("path", path), userParam(a)), a),
      "write file",
      { mutating: true }
    ).pipe(Effect.tap((response) => Effect.ignore(response.text))) // read the small answer so the connection is free

  const writeFile: SandboxProvider["writeFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      const existed = yield* beforeWrite(sandbox, input)
      yield* upload(sandbox, input.path, (request, a) => {
        if (envdAtLeast(a.envdVersion, ENVD_OCTET_STREAM_UPLOAD)) return HttpClientRequest.bodyUint8Array(request, input.data, "application/octet-stream")
        const form = new FormData()
        form.append("file", new Blob([input.data.slice()]), input.path)
        return HttpClientRequest.bodyFormData(request, form)
      })
      return { bytesWritten: input.data.length, created: !existed }
    })

  /**
   * A streamed write: envd's octet-stream upload (from 0.5.7) takes the body as it comes. Older envd takes only
   * multipart, so there the body is read whole first, up to the largest single write.
   */
  const writeFileStream: NonNullable<SandboxProvider["writeFileStream"]> = (sandbox, input) =>
    Effect.gen(function*() {
      const existed = yield* beforeWrite(sandbox, input)
      const a = yield* accessOf(sandbox)
      if (!envdAtLeast(a.envdVersion, ENVD_OCTET_STREAM_UPLOAD)) {
        const limit = ctx.capabilities.files?.maxWriteBytes ?? 0
        // Read no further than one write takes: a larger body is refused before it is held whole.
        const data = yield* Effect.tryPromise({ try: (signal) => readAtMost(input.body, limit, signal), catch: () => fail("invalid_request", "the body broke off") })
        if (data === undefined) return yield* fail("invalid_request", `this envd takes at most ${limit} bytes in one write`)
        return yield* writeFile(sandbox, { path: input.path, data, mode: input.mode, createParents: input.createParents })
      }
      yield* upload(sandbox, input.path, (request) =>
        HttpClientRequest.setBody(request, HttpBody.raw(input.body, { contentType: "application/octet-stream" })))
      return { created: !existed }
    })

  const listFiles: SandboxProvider["listFiles"] = (sandbox, input) =>
    unary(sandbox, "filesystem.Filesystem/ListDir", { path: input.path, depth: input.recursive ? 64 : 1 }, ListDirResponse).pipe(
      Effect.map((r) => ({
        entries: r.entries.slice(0, input.maxEntries).map((e): ProviderFileEntry => ({
          path: e.path,
          type: entryType(e.type),
          sizeBytes: Number(e.size ?? 0),
          modifiedAt: e.modifiedTime ?? new Date(0).toISOString()
        })),
        truncated: r.entries.length > input.maxEntries
      }))
    )

  const deleteFile: SandboxProvider["deleteFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      // envd's Remove is `rm -rf` and succeeds on a missing path: whether there was something, and whether a
      // directory is empty, are checked first.
      const entry = yield* statOrNull(sandbox, input.path)
      if (entry === null) return { deleted: false }
      if (entry.type === "FILE_TYPE_DIRECTORY" && !input.recursive) {
        const listed = yield* unary(sandbox, "filesystem.Filesystem/ListDir", { path: input.path, depth: 1 }, ListDirResponse)
        if (listed.entries.length > 0) return yield* fail("customer", `${input.path} is a directory that is not empty`)
      }
      yield* unary(sandbox, "filesystem.Filesystem/Remove", { path: input.path }, Empty, true)
      return { deleted: true }
    })

  return { readFile, readFileStream, writeFile, writeFileStream, listFiles, deleteFile }
}
