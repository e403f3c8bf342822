/**
 * Runloop files, paths relative to the devbox user's home (the gateway's `/workspace`; other absolute paths are
 * sent as given):
 * - read: `POST /v1/devboxes/{id}/download_file {path}` answers the whole file (Runloop has no ranges), read when
 *   it is at most `WHOLE_FILE_BYTES` and cut to the range asked for; 400 and 404 mean there is no such file.
 * - write: multipart `POST /v1/devboxes/{id}/upload_file` (`path`, `file`), which replaces the file. Whether the
 *   file existed (for `create`, and for `created`) is asked with a download first. No parents are made and
 *   nothing is appended (a read-modify-write would race), as declared.
 * - no listing and no delete: Runloop's API has neither (they would be shell commands).
 */
import { HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Effect, Stream } from "effect"
import { rangeOfWhole, readBodyAtMost } from "../../core/wire.ts"
import { type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { filePath, NAME, type RunloopContext } from "./wire.ts"
import { checkWrite } from "../../../src/providers/errors.ts"

/** The largest file read (whole, as Runloop sends it) to serve a range of it. */
export const WHOLE_FILE_BYTES = 64 * 1024 * 1024

export const makeFiles = (ctx: RunloopContext) => {
  const { api, devboxPath, fail, send } = ctx
  const files = ctx.capabilities.files

  /** The file's download, or null when there is no such file (Runloop answers 400 or 404). */
  const download = (sandbox: ProviderSandbox, p: string) =>
    send(
      api("POST", devboxPath(sandbox.resourceId, "/download_file")).pipe(
        HttpClientRequest.setHeader("accept", "application/octet-stream"),
        HttpClientRequest.bodyUnsafeJson({ path: filePath(p) })
      ),
      "download file",
      { mutating: false, accept: (status) => status === 400 || status === 404 }
    ).pipe(Effect.map((response) => (response.status === 400 || response.status === 404 ? null : response)))

  /** The whole body, failing as soon as it passes `cap` bytes (a chunked answer states no length up front). */
  const readAtMost = (response: HttpClientResponse.HttpClientResponse, cap: number, p: string) =>
    readBodyAtMost(response, cap, {
      unreadable: (message) => fail("unavailable", `runloop download could not be read: ${message}`),
      tooLarge: () => fail("invalid_request", `${p} is larger than the ${cap} bytes Runloop's whole-file download is read for`)
    })

  const readFile: SandboxProvider["readFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.read) return yield* unsupported(NAME, "reading files")
      const response = yield* download(sandbox, input.path)
      if (response === null) return yield* fail("not_found", `${input.path} does not exist`)
      const body = yield* readAtMost(response, WHOLE_FILE_BYTES, input.path)
      return rangeOfWhole(body, input.offsetBytes, Math.min(input.maxBytes, files.maxReadBytes))
    })

  const writeFile: SandboxProvider["writeFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      yield* checkWrite(NAME, files, input)
      // Only the status is wanted: at most a first piece of the body is read, then the download is cancelled.
      const probe = yield* download(sandbox, input.path)
      if (probe !== null) yield* probe.stream.pipe(Stream.take(1), Stream.runDrain, Effect.ignore)
      const existed = probe !== null
      if (input.mode === "create" && existed) return yield* fail("customer", `${input.path} already exists`)
      const form = new FormData()
      form.append("path", filePath(input.path))
      form.append("file", new Blob([input.data.slice()]), input.path.slice(input.path.lastIndexOf("/") + 1) || "file")
      yield* send(api("POST", devboxPath(sandbox.resourceId, "/upload_file")).pipe(HttpClientRequest.bodyFormData(form)), "upload file")
      return { bytesWritten: input.data.length, created: !existed }
    })

  return {
    readFile,
    writeFile,
    listFiles: () => Effect.fail(unsupported(NAME, "listing files")),
    deleteFile: () => Effect.fail(unsupported(NAME, "deleting files"))
  } satisfies Partial<SandboxProvider>
}
