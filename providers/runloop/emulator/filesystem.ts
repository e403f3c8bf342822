/**
 * The Runloop emulator's files: `POST /v1/devboxes/{id}/download_file {path}` answers the whole file as bytes
 * (404 when there is none, 400 for a directory), and multipart `POST …/upload_file` (`path`, `file`) replaces
 * or creates it; the SDK's text calls `POST …/read_file_contents {file_path}` (the file as text/plain) and
 * `POST …/write_file_contents {file_path, contents}` (answered as an execution that exited 0) do the same with a
 * string. Paths are relative to the user's home (`/workspace` here); an absolute path is taken as given.
 * Writes make no parent directories (a missing one is a 404); the emulator holds a file in memory while it
 * moves, so every transfer is bounded (100 MiB down, 64 MiB up).
 */
import { asBody } from "../../../src/domain/Bodies.ts"
import * as path from "node:path"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Devbox } from "./books.ts"
import { Schema } from "effect"
import { HttpFailure, json, readBody } from "./http.ts"

const HOME = "/workspace"
const MAX_DOWNLOAD_BYTES = 100 * 1024 * 1024
const MAX_UPLOAD_BYTES = 64 * 1024 * 1024

/** A path as the devbox user means it: relative to the home, or absolute. */
export const resolvePath = (p: string) => path.posix.normalize(p.startsWith("/") ? p : `${HOME}/${p}`)

const requireRunning = (d: Devbox) => {
  if (d.status !== "running") throw new HttpFailure(400, `Devbox ${d.id} is ${d.status}, not running`)
}

const PathBody = Schema.Struct({ path: Schema.String.pipe(Schema.minLength(1)) })
const FilePathBody = Schema.Struct({ file_path: Schema.String.pipe(Schema.minLength(1)) })
const WriteContents = Schema.Struct({ file_path: Schema.String.pipe(Schema.minLength(1)), contents: Schema.String })

export const makeFilesystem = (runtime: LocalRuntimeShape) => {
  /** The whole file at `raw` (404 when there is none, 400 for a directory or past what the emulator serves). */
  const wholeFile = async (d: Devbox, raw: string) => {
    requireRunning(d)
    const p = resolvePath(raw)
    const stat = await run(runtime.statFile(d.id, p))
    if (stat._tag === "None") throw new HttpFailure(404, `File not found: ${raw}`)
    if (stat.value.type === "directory") throw new HttpFailure(400, `${raw} is a directory`)
    if (stat.value.sizeBytes > MAX_DOWNLOAD_BYTES) throw new HttpFailure(400, `${raw} is larger than the emulator serves`)
    return { p, data: (await run(runtime.readFile(d.id, p, 0, stat.value.sizeBytes))).data }
  }

  /** Replaces or creates the file at `raw` (its parent must exist). */
  const replace = async (d: Devbox, raw: string, data: Uint8Array) => {
    requireRunning(d)
    const p = resolvePath(raw)
    const stat = await run(runtime.statFile(d.id, p))
    if (stat._tag === "Some" && stat.value.type === "directory") throw new HttpFailure(400, `${raw} is a directory`)
    await run(runtime.writeFile(d.id, p, data, { mode: "overwrite", createParents: false }))
  }

  const download = async (d: Devbox, request: Request) => {
    const { p, data } = await wholeFile(d, (await readBody(request, PathBody)).path)
    return new Response(asBody(data), {
      headers: { "content-type": "application/octet-stream", "content-disposition": `attachment; filename="${path.posix.basename(p)}"` }
    })
  }

  const readContents = async (d: Devbox, request: Request) => {
    const { data } = await wholeFile(d, (await readBody(request, FilePathBody)).file_path)
    return new Response(asBody(data), { headers: { "content-type": "text/plain; charset=utf-8" } })
  }

  const writeContents = async (d: Devbox, request: Request) => {
    if (Number(request.headers.get("content-length") ?? "0") > MAX_UPLOAD_BYTES * 2) throw new HttpFailure(413, "the file is too large for the emulator")
    const body = await readBody(request, WriteContents)
    const data = Buffer.from(body.contents, "utf8")
    if (data.length > MAX_UPLOAD_BYTES) throw new HttpFailure(413, "the file is too large for the emulator")
    await replace(d, body.file_path, data)
    return json({ devbox_id: d.id, exit_status: 0, stdout: "", stderr: "", shell_name: null })
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
    await replace(d, raw, new Uint8Array(await file.arrayBuffer()))
    return json({})
  }

  return { download, upload, readContents, writeContents }
}
