/**
 * The Runloop emulator's files: `POST /v1/devboxes/{id}/download_file {path}` answers the whole file as bytes
 * (404 when there is none, 400 for a directory), and multipart `POST …/upload_file` (`path`, `file`) replaces
 * or creates it. Paths are relative to the user's home (`/workspace` here); an absolute path is taken as given.
 * The upload makes no parent directories (a missing one is a 404); the emulator holds a file in memory while it
 * moves, so both are bounded (100 MiB down, 64 MiB up).
 */
import { asBody } from "../../../src/domain/Bodies.ts"
import * as path from "node:path"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Devbox } from "./books.ts"
import { HttpFailure, json } from "./http.ts"

const HOME = "/workspace"
const MAX_DOWNLOAD_BYTES = 100 * 1024 * 1024
const MAX_UPLOAD_BYTES = 64 * 1024 * 1024

/** A path as the devbox user means it: relative to the home, or absolute. */
export const resolvePath = (p: string) => path.posix.normalize(p.startsWith("/") ? p : `${HOME}/${p}`)

const requireRunning = (d: Devbox) => {
  if (d.status !== "running") throw new HttpFailure(400, `Devbox ${d.id} is ${d.status}, not running`)
}

export const makeFilesystem = (runtime: LocalRuntimeShape) => {
  const download = async (d: Devbox, request: Request) => {
    requireRunning(d)
    let body: unknown
    try {
      body = await request.json()
    } catch {
      throw new HttpFailure(400, "the request body is not valid JSON")
    }
    const raw = (body as { path?: unknown } | null)?.path
    if (typeof raw !== "string" || raw === "" || Object.keys(body as object).length !== 1) throw new HttpFailure(400, "the body must be {path}")
    const p = resolvePath(raw)
    const stat = await run(runtime.statFile(d.id, p))
    if (stat._tag === "None") throw new HttpFailure(404, `File not found: ${raw}`)
    if (stat.value.type === "directory") throw new HttpFailure(400, `${raw} is a directory`)
    if (stat.value.sizeBytes > MAX_DOWNLOAD_BYTES) throw new HttpFailure(400, `${raw} is larger than the emulator serves`)
    const read = await run(runtime.readFile(d.id, p, 0, stat.value.sizeBytes))
    return new Response(asBody(read.data), {
      headers: { "content-type": "application/octet-stream", "content-disposition": `attachment; filename="${path.posix.basename(p)}"` }
    })
  }

  const upload = async (d: Devbox, request: Request) => {
    requireRunning(d)
    if (Number(request.headers.get("content-length") ?? "0") > MAX_UPLOAD_BYTES + 64 * 1024) throw new HttpFailure(413, "the file is too large for the emulator")
    const form = await request.formData().catch(() => null)
    const raw = form?.get("path")
    const file = form?.get("file")
    if (typeof raw !== "string" || raw === "") throw new HttpFailure(400, "missing 'path' field in multipart form")
    if (!(file instanceof Blob)) throw new HttpFailure(400, "missing 'file' field in multipart form")
    if (file.size > MAX_UPLOAD_BYTES) throw new HttpFailure(413, "the file is too large for the emulator")
    const p = resolvePath(raw)
    const stat = await run(runtime.statFile(d.id, p))
    if (stat._tag === "Some" && stat.value.type === "directory") throw new HttpFailure(400, `${raw} is a directory`)
    await run(runtime.writeFile(d.id, p, new Uint8Array(await file.arrayBuffer()), { mode: "overwrite", createParents: false }))
    return json({})
  }

  return { download, upload }
}
