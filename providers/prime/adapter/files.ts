/**
 * Prime files, through the sandbox's gateway (`/auth` first, as every runtime call):
 * - read: `GET <gateway>/download?path=&sandbox_id=` answers the whole file (no ranges), read when it is at most
 *   `WHOLE_FILE_BYTES` and cut to the range asked for; 404 means there is no such file.
 * - write: multipart `POST <gateway>/upload?path=&sandbox_id=` (`file`), which replaces the file: `overwrite` only,
 *   as declared. Whether the file existed (for `created`) is asked with a download first, of which at most a first
 *   piece is read. No parents, no append, no listing, no delete: the gateway has none of them.
 */
import { HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Effect, Stream } from "effect"
import { rangeOfWhole, readBodyAtMost } from "../../core/wire.ts"
import { type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { NAME, type PrimeContext } from "./wire.ts"
import { checkWrite } from "../../../src/providers/errors.ts"

/** The largest file read (whole, as Prime sends it) to serve a range of it. */
export const WHOLE_FILE_BYTES = 64 * 1024 * 1024

export const makeFiles = (ctx: PrimeContext) => {
  const { fail } = ctx
  const files = ctx.capabilities.files

  /** The file's download, or null when there is no such file. */
  const download = (sandbox: ProviderSandbox, gw: { readonly base: string; readonly token: string }, p: string) =>
    ctx.sendGateway(
      HttpClientRequest.get(`${gw.base}/download`).pipe(
        HttpClientRequest.setUrlParams({ path: p, sandbox_id: sandbox.resourceId }),
        HttpClientRequest.setHeader("accept", "application/octet-stream")
      ),
      gw.token,
      "download file",
      { accept: (status) => status === 404 }
    ).pipe(Effect.map((response) => (response.status === 404 ? null : response)))

  /** The whole body, failing as soon as it passes `cap` bytes (a chunked answer states no length up front). */
  const readAtMost = (response: HttpClientResponse.HttpClientResponse, cap: number, p: string) =>
    readBodyAtMost(response, cap, {
      unreadable: (message) => fail("unavailable", `prime download could not be read: ${message}`),
      tooLarge: () => fail("invalid_request", `${p} is larger than the ${cap} bytes Prime's whole-file download is read for`)
    })

  const readFile: SandboxProvider["readFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.read) return yield* unsupported(NAME, "reading files")
      const gw = yield* ctx.gateway(sandbox)
      const response = yield* download(sandbox, gw, input.path)
      if (response === null) return yield* fail("not_found", `${input.path} does not exist`)
      const body = yield* readAtMost(response, WHOLE_FILE_BYTES, input.path)
      return rangeOfWhole(body, input.offsetBytes, Math.min(input.maxBytes, files.maxReadBytes))
    })

  const writeFile: SandboxProvider["writeFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      yield* checkWrite(NAME, files, input)
      const gw = yield* ctx.gateway(sandbox)
      const probe = yield* download(sandbox, gw, input.path)
      if (probe !== null) yield* probe.stream.pipe(Stream.take(1), Stream.runDrain, Effect.ignore)
      const form = new FormData()
      form.append("file", new Blob([input.data.slice()]), input.path.slice(input.path.lastIndexOf("/") + 1) || "file")
      yield* ctx.sendGateway(
        HttpClientRequest.post(`${gw.base}/upload`).pipe(
          HttpClientRequest.setUrlParams({ path: input.path, sandbox_id: sandbox.resourceId }),
          HttpClientRequest.bodyFormData(form)
        ),
        gw.token,
        "upload file"
      )
      return { bytesWritten: input.data.length, created: probe === null }
    })

  return {
    readFile,
    writeFile,
    listFiles: () => Effect.fail(unsupported(NAME, "listing files")),
    deleteFile: () => Effect.fail(unsupported(NAME, "deleting files"))
  } satisfies Partial<SandboxProvider>
}
