/**
 * The Vercel emulator's files in a session: `POST …/fs/read {path, cwd?}` (the bytes, with their length; 404
 * `file_not_found` when missing, 400 for a directory), `POST …/fs/write` (a gzipped tar, extracted under the
 * `x-cwd` directory, parents made as tar makes them), `POST …/fs/mkdir {path, cwd?}` (one directory: its parent
 * must exist, and it must not). Relative paths are taken from `cwd`, else the session's directory.
 */
import { Schema } from "effect"
import * as path from "node:path"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import { untarGz } from "../tar.ts"
import type { EmulatedSandbox } from "./books.ts"
import { sessionCwd } from "./control.ts"
import { HttpFailure, json, readBody } from "./http.ts"

const PathBody = Schema.Struct({ path: Schema.String.pipe(Schema.minLength(1)), cwd: Schema.optional(Schema.String) })
const READ_CHUNK = 4 * 1024 * 1024
const MAX_ARCHIVE_BYTES = 64 * 1024 * 1024
const MAX_EXTRACTED_BYTES = 256 * 1024 * 1024

const resolve = (s: EmulatedSandbox, p: string, cwd: string | undefined) => path.posix.resolve(sessionCwd(s), cwd ?? ".", p)

export const makeFilesystem = (runtime: LocalRuntimeShape) => {
  const read = async (s: EmulatedSandbox, request: Request) => {
    const body = await readBody(request, PathBody)
    const p = resolve(s, body.path, body.cwd)
    const stat = await run(runtime.statFile(s.runtimeId, p))
    if (stat._tag === "None") throw new HttpFailure(404, `${p}: no such file or directory`, "file_not_found")
    if (stat.value.type === "directory") throw new HttpFailure(400, `${p} is a directory`, "bad_request")
    const size = stat.value.sizeBytes
    let offset = 0
    const stream = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        if (offset >= size) return controller.close()
        const chunk = await run(runtime.readFile(s.runtimeId, p, offset, Math.min(READ_CHUNK, size - offset))).catch(() => null)
        if (chunk === null || chunk.data.length === 0) return controller.error(new Error(`${p} changed while it was read`))
        offset += chunk.data.length
        controller.enqueue(chunk.data.slice())
      }
    })
    return new Response(stream, { headers: { "content-type": "application/octet-stream", "content-length": String(size) } })
  }

  const write = async (s: EmulatedSandbox, request: Request) => {
    if (!(request.headers.get("content-type") ?? "").includes("application/gzip")) throw new HttpFailure(400, "the body must be application/gzip", "bad_request")
    const cwd = request.headers.get("x-cwd")
    if (cwd === null || !cwd.startsWith("/")) throw new HttpFailure(400, "x-cwd must name an absolute directory", "bad_request")
    if (Number(request.headers.get("content-length") ?? "0") > MAX_ARCHIVE_BYTES) throw new HttpFailure(413, "the archive is too large", "payload_too_large")
    const archive = new Uint8Array(await request.arrayBuffer())
    if (archive.length > MAX_ARCHIVE_BYTES) throw new HttpFailure(413, "the archive is too large", "payload_too_large")
    let entries
    try {
      entries = untarGz(archive, MAX_EXTRACTED_BYTES)
    } catch (e) {
      throw new HttpFailure(400, `the archive could not be read: ${e instanceof Error ? e.message : "invalid"}`, "bad_request")
    }
    for (const entry of entries) {
      const target = path.posix.resolve(cwd, entry.name)
      if (entry.type === "directory") await run(runtime.makeDir(s.runtimeId, target, { parents: true }))
      else await run(runtime.writeFile(s.runtimeId, target, entry.data, { mode: "overwrite", createParents: true }))
    }
    return json({})
  }

  const mkdir = async (s: EmulatedSandbox, request: Request) => {
    const body = await readBody(request, PathBody)
    const p = resolve(s, body.path, body.cwd)
    if ((await run(runtime.statFile(s.runtimeId, p)))._tag === "Some") throw new HttpFailure(409, `${p} already exists`, "file_exists")
    const parent = await run(runtime.statFile(s.runtimeId, path.posix.dirname(p)))
    if (parent._tag === "None" || parent.value.type !== "directory") throw new HttpFailure(404, `${path.posix.dirname(p)} is not a directory`, "file_not_found")
    await run(runtime.makeDir(s.runtimeId, p, { parents: false }))
    return json({})
  }

  return { read, write, mkdir }
}
