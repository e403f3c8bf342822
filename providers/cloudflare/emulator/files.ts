/**
 * The bridge emulator's files, only under `/workspace/`: `GET /v1/sandbox/{id}/file/{path}` (the whole file, or
 * with `Range: bytes=a-b` a 206 with `Content-Range`; 416 past the end; 404 `FILE_NOT_FOUND`; 400 for a directory)
 * and `PUT …/file/{path}` (the body replaces the file; its directory must exist; at most 10 MiB).
 */
import { asBody } from "../../../src/domain/Bodies.ts"
import * as path from "node:path"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { EmulatedSandbox } from "./books.ts"
import { HttpFailure, json } from "./http.ts"

const MAX_WRITE_BYTES = 10 * 1024 * 1024
const READ_CHUNK = 4 * 1024 * 1024
const RANGE = /^bytes=(\d+)-(\d*)$/

/** The file's absolute path, from the route's rest (`workspace/…`); only under /workspace/. */
const fileOf = (rest: string) => {
  const p = `/${rest}`
  if (!p.startsWith("/workspace/") || path.posix.normalize(p) !== p || p.endsWith("/")) {
    throw new HttpFailure(400, "files are served only under /workspace/", "INVALID_PATH")
  }
  return p
}

export const makeFiles = (runtime: LocalRuntimeShape) => {
  const read = async (s: EmulatedSandbox, rest: string, request: Request) => {
    const p = fileOf(rest)
    const stat = await run(runtime.statFile(s.runtimeId, p))
    if (stat._tag === "None") throw new HttpFailure(404, `${p}: no such file`, "FILE_NOT_FOUND")
    if (stat.value.type === "directory") throw new HttpFailure(400, `${p} is a directory`, "IS_DIRECTORY")
    const size = stat.value.sizeBytes
    const header = request.headers.get("range")
    const range = header === null ? null : RANGE.exec(header)
    if (header !== null && range === null) throw new HttpFailure(400, `unsupported Range ${header}`, "BAD_REQUEST")
    const start = range === null ? 0 : Number(range[1])
    if (range !== null && start >= size) return new Response(null, { status: 416, headers: { "content-range": `bytes */${size}` } })
    const end = range === null || range[2] === "" ? size - 1 : Math.min(size - 1, Number(range[2]))
    if (end < start) throw new HttpFailure(400, `unsupported Range ${header ?? ""}`, "BAD_REQUEST")
    let offset = start
    const body = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        if (offset > end) return controller.close()
        const chunk = await run(runtime.readFile(s.runtimeId, p, offset, Math.min(READ_CHUNK, end + 1 - offset))).catch(() => null)
        if (chunk === null || chunk.data.length === 0) return controller.error(new Error(`${p} changed while it was read`))
        offset += chunk.data.length
        controller.enqueue(asBody(chunk.data))
      }
    })
    const headers: Record<string, string> = { "content-type": "application/octet-stream", "content-length": String(end + 1 - start) }
    if (range !== null) headers["content-range"] = `bytes ${start}-${end}/${size}`
    return new Response(size === 0 ? null : body, { status: range === null ? 200 : 206, headers })
  }

  const write = async (s: EmulatedSandbox, rest: string, request: Request) => {
    const p = fileOf(rest)
    if (Number(request.headers.get("content-length") ?? "0") > MAX_WRITE_BYTES) throw new HttpFailure(413, `at most ${MAX_WRITE_BYTES} bytes`, "PAYLOAD_TOO_LARGE")
    const data = new Uint8Array(await request.arrayBuffer())
    if (data.length > MAX_WRITE_BYTES) throw new HttpFailure(413, `at most ${MAX_WRITE_BYTES} bytes`, "PAYLOAD_TOO_LARGE")
    const parent = await run(runtime.statFile(s.runtimeId, path.posix.dirname(p)))
    if (parent._tag === "None" || parent.value.type !== "directory") throw new HttpFailure(404, `${path.posix.dirname(p)} is not a directory`, "FILE_NOT_FOUND")
    await run(runtime.writeFile(s.runtimeId, p, data, { mode: "overwrite", createParents: false }))
    return json({ path: p, bytes: data.length })
  }

  return { read, write }
}
