/**
 * Cloudflare files through the bridge, only under `/workspace/` (reference §3.2; any other path is refused before
 * a request):
 * - read: `GET /v1/sandbox/{id}/file/{path}` with `Range: bytes=a-b`; a 206 says the size in `Content-Range`, a
 *   200 is the whole file (cut to the range here), 416 is a read past the end, 404 no such file.
 * - write: `PUT …/file/{path}` with the bytes (the bridge writes the whole file). `create` first asks whether the
 *   file exists (a one-byte read); `append` reads the file and writes it back with the data added (a
 *   read-modify-write, as the reference does: the bridge has no append). No parents are made, and there is no list
 *   or delete (the bridge has no such routes).
 */
import { HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Effect } from "effect"
import { readBodyAtMost } from "../../core/wire.ts"
import { type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { bridgePath, type CloudflareContext, NAME } from "./wire.ts"
import { checkWrite } from "../../../src/providers/errors.ts"

const CONTENT_RANGE = /^bytes (?:\d+-\d+|\*)\/(\d+)$/

export const makeFiles = (ctx: CloudflareContext) => {
  const { api, fail, send, sandboxPath } = ctx
  const files = ctx.capabilities.files

  const pathOf = (p: string) => {
    const encoded = bridgePath(p)
    return encoded === undefined ? Effect.fail(fail("invalid_request", `the Cloudflare bridge serves files only under /workspace/ (got ${p})`)) : Effect.succeed(encoded)
  }
  const fileUrl = (sandbox: ProviderSandbox, encoded: string) => sandboxPath(sandbox.resourceId, `/file/${encoded}`)

  /** The body, failing past `cap` bytes. */
  const bytesOf = (response: HttpClientResponse.HttpClientResponse, cap: number, p: string) =>
    readBodyAtMost(response, cap, {
      unreadable: (message) => fail("unavailable", `cloudflare read of ${p} could not be read: ${message}`),
      tooLarge: () => fail("invalid_request", `${p} is larger than the ${cap} bytes read at once`)
    })

  /** A ranged read: the bytes, the file's size; null when there is no such file. */
  const ranged = (sandbox: ProviderSandbox, p: string, encoded: string, offset: number, length: number) =>
    Effect.gen(function*() {
      const response = yield* send(
        api("GET", fileUrl(sandbox, encoded)).pipe(HttpClientRequest.setHeader("range", `bytes=${offset}-${offset + Math.max(1, length) - 1}`)),
        "read file",
        { accept: (status) => status === 404 || status === 416 }
      )
      if (response.status === 404) return null
      const total = CONTENT_RANGE.exec(response.headers["content-range"] ?? "")
      if (response.status === 416) return { data: new Uint8Array(0), size: total === null ? offset : Number(total[1]) }
      const cap = files?.maxReadBytes ?? 0
      if (response.status === 206) {
        const data = (yield* bytesOf(response, Math.max(length, 1), p)).subarray(0, length)
        return { data, size: total === null ? offset + data.length : Number(total[1]) }
      }
      // 200: the whole file.
      const whole = yield* bytesOf(response, Math.max(cap, offset + length), p)
      return { data: whole.subarray(Math.min(offset, whole.length), Math.min(whole.length, offset + length)), size: whole.length }
    })

  const readFile: SandboxProvider["readFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.read) return yield* unsupported(NAME, "reading files")
      const encoded = yield* pathOf(input.path)
      const length = Math.min(input.maxBytes, files.maxReadBytes)
      const read = yield* ranged(sandbox, input.path, encoded, input.offsetBytes, length)
      if (read === null) return yield* fail("not_found", `${input.path} does not exist`)
      const data = length === 0 ? new Uint8Array(0) : read.data
      return { data, offsetBytes: input.offsetBytes, sizeBytes: read.size, eof: input.offsetBytes + data.length >= read.size }
    })

  const writeFile: SandboxProvider["writeFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      const writable = yield* checkWrite(NAME, files, input)
      const encoded = yield* pathOf(input.path)
      let existing: Uint8Array | null = null
      if (input.mode === "append") {
        const head = yield* ranged(sandbox, input.path, encoded, 0, writable.maxWriteBytes)
        if (head !== null && head.size > head.data.length) return yield* fail("invalid_request", `${input.path} is too large to append to through the bridge`)
        existing = head === null ? null : head.data
      } else {
        const head = yield* ranged(sandbox, input.path, encoded, 0, 1)
        existing = head === null ? null : new Uint8Array(0)
        if (input.mode === "create" && head !== null) return yield* fail("customer", `${input.path} already exists`)
      }
      const body = existing === null || input.mode !== "append" ? input.data : new Uint8Array(Buffer.concat([existing, input.data]))
      if (body.length > writable.maxWriteBytes) return yield* fail("invalid_request", `${input.path} would be larger than the ${writable.maxWriteBytes} bytes a write may hold`)
      yield* send(api("PUT", fileUrl(sandbox, encoded)).pipe(HttpClientRequest.bodyUint8Array(body, "application/octet-stream")), "write file")
      return { bytesWritten: input.data.length, created: existing === null }
    })

  const listFiles: SandboxProvider["listFiles"] = () => Effect.fail(unsupported(NAME, "listing files"))
  const deleteFile: SandboxProvider["deleteFile"] = () => Effect.fail(unsupported(NAME, "deleting files"))

  return { readFile, writeFile, listFiles, deleteFile }
}
