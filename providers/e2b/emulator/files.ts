/**
 * envd's `/files`: `GET` with Go's ServeContent semantics for Range (206, or 416 naming only the size), `POST`
 * with the raw body (path required; gzip-encoded when the SDK's `gzip` option asks) or multipart `file` parts;
 * parents are created, files overwritten.
 */
import { asBody } from "../../../src/domain/Bodies.ts"
import * as path from "node:path"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Books, EmulatedSandbox } from "./books.ts"
import { apiError, json, resolvePath } from "./http.ts"

/** A download (whole or a range) up to this size is read whole; a larger one is streamed. */
const WHOLE_READ_BYTES = 16 * 1024 * 1024
/** The largest upload this emulator takes (real envd takes any size the sandbox disk holds). */
const MAX_UPLOAD_BYTES = 16 * 1024 * 1024 * 1024

export const makeFiles = ({ runtime }: Books) => {
  /** GET /files: Go's ServeContent semantics for Range (206, or 416 naming only the size). */
  const download = async (sandbox: EmulatedSandbox, url: URL, request: Request) => {
    const raw = url.searchParams.get("path")
    if (raw === null || raw === "") return apiError(400, "path is required")
    const p = resolvePath(raw)
    const entry = await run(runtime.statFile(sandbox.sandboxID, p))
    if (entry._tag === "None") return apiError(404, `path '${p}' does not exist`)
    if (entry.value.type === "directory") return apiError(400, `path '${p}' is a directory`)
    const size = entry.value.sizeBytes
    const header = request.headers.get("range")
    const single = header === null ? null : /^bytes=(\d*)-(\d*)$/.exec(header.trim())
    if (header === null || (single === null && header.includes(","))) {
      const headers = { "content-type": "application/octet-stream", "accept-ranges": "bytes" }
      // A whole file past a piece is streamed from the jail as it is read (envd streams too): never held whole here.
      if (size > WHOLE_READ_BYTES) return new Response((await run(runtime.readFileStream(sandbox.sandboxID, p, 0, size))).stream, { headers })
      return new Response(asBody((await run(runtime.readFile(sandbox.sandboxID, p, 0, size), request.signal)).data), { headers })
    }
    let start: number
    let end: number
    if (single === null || (single[1] === "" && single[2] === "")) {
      start = Number.POSITIVE_INFINITY
      end = 0
    } else if (single[1] === "") {
      start = Math.max(0, size - Number(single[2])) // suffix: the last n bytes
      end = size - 1
    } else {
      start = Number(single[1])
      end = single[2] === "" ? size - 1 : Math.min(Number(single[2]), size - 1)
    }
    if (start >= size || end < start) return new Response(null, { status: 416, headers: { "content-range": `bytes */${size}` } })
    const length = end - start + 1
    const ranged = { "content-type": "application/octet-stream", "content-range": `bytes ${start}-${end}/${size}` }
    // Up to a piece, read whole; beyond, streamed from the jail as it is read (exactly the range, or it errors).
    if (length > WHOLE_READ_BYTES) return new Response((await run(runtime.readFileStream(sandbox.sandboxID, p, start, length))).stream, { status: 206, headers: ranged })
    // A client that hangs up (the gateway's read beside a stat that found a large file) stops the read.
    const read = await run(runtime.readFile(sandbox.sandboxID, p, start, length), request.signal)
    return new Response(asBody(read.data), { status: 206, headers: { ...ranged, "content-range": `bytes ${start}-${start + read.data.length - 1}/${size}` } })
  }

  /** POST /files: the raw body (path required) or multipart `file` parts; parents are created, files overwritten. */
  const upload = async (sandbox: EmulatedSandbox, url: URL, request: Request) => {
    const contentType = request.headers.get("content-type") ?? ""
    const target = url.searchParams.get("path")
    const files: Array<{ path: string; data: Uint8Array }> = []
    if (contentType.startsWith("application/octet-stream")) {
      if (target === null || target === "") return apiError(400, "path is required for an application/octet-stream upload")
      // As envd: the body is written as it comes (the runtime puts it in place only once whole).
      const file = resolvePath(target)
      // The SDK's `gzip` option sends the body gzipped (envd decodes it); the bound below counts decoded bytes.
      const encoding = (request.headers.get("content-encoding") ?? "identity").trim().toLowerCase()
      if (encoding !== "identity" && encoding !== "gzip") return apiError(415, `unsupported Content-Encoding: ${encoding}`)
      const raw = request.body ?? new ReadableStream<Uint8Array>({ start: (controller) => controller.close() })
      const body = encoding === "gzip" ? raw.pipeThrough(new DecompressionStream("gzip") as unknown as TransformStream<Uint8Array, Uint8Array>) : raw
      await run(runtime.writeFileStream(sandbox.sandboxID, file, body, { mode: "overwrite", createParents: true, maxBytes: MAX_UPLOAD_BYTES }))
      return json([{ name: path.posix.basename(file), type: "file", path: file }])
    } else if (contentType.startsWith("multipart/form-data")) {
      const form = await request.formData().catch(() => null)
      if (form === null) return apiError(400, "the multipart body is malformed")
      for (const part of form.getAll("file")) {
        if (typeof part === "string") continue
        const name = target ?? part.name
        if (name === "") return apiError(400, "each file needs a path")
        files.push({ path: resolvePath(name), data: new Uint8Array(await part.arrayBuffer()) })
      }
      if (files.length === 0) return apiError(400, "the multipart body has no file part")
    } else {
      return apiError(400, "the body must be application/octet-stream or multipart/form-data")
    }
    for (const file of files) {
      await run(runtime.writeFile(sandbox.sandboxID, file.path, file.data, { mode: "overwrite", createParents: true }))
    }
    return json(files.map((f) => ({ name: path.posix.basename(f.path), type: "file", path: f.path })))
  }

  return { download, upload }
}
