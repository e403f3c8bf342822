/**
 * The Blaxel emulator's sandbox runtime, files: `GET /filesystem/{path}` (a directory's listing; a file as JSON,
 * or its bytes when asked with `Accept: application/octet-stream` or `?download=true`, with Go's ServeContent
 * Range semantics), `PUT /filesystem/{path}` (JSON: a directory, or a file's text content; or a multipart form with
 * the file, as the SDK's `writeBinary` sends files up to 5 MiB; parents are made),
 * `DELETE /filesystem/{path}?recursive=`, and multipart uploads (`/filesystem-multipart/initiate/{path}`,
 * `…/{uploadId}/part?partNumber=`, `…/complete`, `…/abort`). As at Blaxel, a path whose slashes arrive escaped
 * (`%2F`) is absolute; any other is relative to the runtime's working directory (`/` here). Uploads in progress are
 * held in memory, bounded (16 MiB a part, 64 MiB an upload, 64 uploads, an hour each).
 */
import { asBody } from "../../../src/domain/Bodies.ts"
import { Schema } from "effect"
import * as crypto from "node:crypto"
import * as path from "node:path"
import type { FileEntry, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { EmulatedSandbox } from "./books.ts"
import { HttpFailure, json, readBody } from "./http.ts"

/**
 * The provider lists a directory whole; the emulator bounds it (memory) far above the 10,000 entries an adapter
 * keeps, so an adapter still sees that a large directory has more than it kept.
 */
const LIST_ENTRIES = 100_000

const MAX_READ_BYTES = 100 * 1024 * 1024
const MAX_JSON_CONTENT_BYTES = 10 * 1024 * 1024
const MAX_PART_BYTES = 16 * 1024 * 1024
const MAX_UPLOAD_BYTES = 64 * 1024 * 1024
const MAX_UPLOADS = 64
const UPLOAD_TTL_MS = 3600 * 1000

const PutFile = Schema.Struct({
  content: Schema.optional(Schema.String),
  isDirectory: Schema.optional(Schema.Boolean),
  permissions: Schema.optional(Schema.String.pipe(Schema.pattern(/^[0-7]{3,4}$/)))
})
const Initiate = Schema.Struct({ permissions: Schema.optional(Schema.String.pipe(Schema.pattern(/^[0-7]{3,4}$/))) })
const Complete = Schema.Struct({ parts: Schema.Array(Schema.Struct({ partNumber: Schema.Int, etag: Schema.String })) })

interface Upload {
  readonly runtimeId: string
  readonly path: string
  readonly startedAt: number
  readonly parts: Map<number, { readonly data: Uint8Array; readonly etag: string }>
}

const permissions = (mode: number) => (mode & 0o777).toString(8).padStart(4, "0")
const fileWire = (e: FileEntry) => ({ path: e.path, name: path.posix.basename(e.path), size: e.sizeBytes, lastModified: e.modifiedAt, owner: "root", group: "root", permissions: permissions(e.mode) })

/** The path a runtime route names: `raw` is as sent (escaped), `decoded` as the router read it. */
export const resolvePath = (raw: string, decoded: string) =>
  raw.includes("%2F") || raw.includes("%2f") ? path.posix.normalize(decoded) : path.posix.normalize(`/${decoded}`)

export const makeFilesystem = (runtime: LocalRuntimeShape) => {
  const uploads = new Map<string, Upload>()
  const prune = () => {
    for (const [id, u] of uploads) if (Date.now() - u.startedAt > UPLOAD_TTL_MS) uploads.delete(id)
    while (uploads.size >= MAX_UPLOADS) uploads.delete(uploads.keys().next().value!)
  }

  const statOr404 = async (s: EmulatedSandbox, p: string) => {
    const stat = await run(runtime.statFile(s.runtimeId, p))
    if (stat._tag === "None") throw new HttpFailure(404, `stat ${p}: no such file or directory`)
    return stat.value
  }

  const listing = async (s: EmulatedSandbox, p: string) => {
    const listed = await run(runtime.listFiles(s.runtimeId, p, { recursive: false, maxEntries: LIST_ENTRIES }))
    const dirs = listed.entries.filter((e) => e.type === "directory")
    return json({
      path: p,
      name: path.posix.basename(p) || "/",
      files: listed.entries.filter((e) => e.type !== "directory").map(fileWire),
      subdirectories: dirs.map((d) => ({ path: d.path, name: path.posix.basename(d.path) }))
    })
  }

  /** Go's ServeContent: one range → 206 (or 416 naming the size), none → 200; an empty file ignores the range. */
  const download = async (s: EmulatedSandbox, p: string, request: Request, entry: FileEntry) => {
    const size = entry.sizeBytes
    const headers = { "content-type": "application/octet-stream", "content-disposition": `attachment; filename="${path.posix.basename(p)}"`, "accept-ranges": "bytes" }
    const single = /^bytes=(\d*)-(\d*)$/.exec((request.headers.get("range") ?? "").trim())
    if (single === null || size === 0) {
      if (size > MAX_READ_BYTES) throw new HttpFailure(422, `${p} is larger than the emulator serves at once`)
      const read = await run(runtime.readFile(s.runtimeId, p, 0, size))
      return new Response(asBody(read.data), { headers })
    }
    let start: number
    let end: number
    if (single[1] === "" && single[2] === "") [start, end] = [Number.POSITIVE_INFINITY, 0]
    else if (single[1] === "") [start, end] = [Math.max(0, size - Number(single[2])), size - 1]
    else [start, end] = [Number(single[1]), single[2] === "" ? size - 1 : Math.min(Number(single[2]), size - 1)]
    if (start >= size || end < start) return new Response(null, { status: 416, headers: { "content-range": `bytes */${size}` } })
    const read = await run(runtime.readFile(s.runtimeId, p, start, Math.min(end - start + 1, MAX_READ_BYTES)))
    return new Response(asBody(read.data), { status: 206, headers: { ...headers, "content-range": `bytes ${start}-${start + read.data.length - 1}/${size}` } })
  }

  const get = async (s: EmulatedSandbox, p: string, request: Request, url: URL) => {
    const entry = await statOr404(s, p)
    if (entry.type === "directory") return listing(s, p)
    const accept = request.headers.get("accept") ?? ""
    const wantsBytes = accept.includes("application/octet-stream") || (accept !== "" && !accept.includes("application/json") && !accept.includes("*/*")) ||
      url.searchParams.get("download") === "true"
    if (wantsBytes) return download(s, p, request, entry)
    if (entry.sizeBytes > MAX_JSON_CONTENT_BYTES) throw new HttpFailure(422, `error reading file: ${p} is too large to inline`)
    const read = await run(runtime.readFile(s.runtimeId, p, 0, entry.sizeBytes))
    return json({ ...fileWire(entry), content: Buffer.from(read.data).toString("utf8") })
  }

  const put = async (s: EmulatedSandbox, p: string, request: Request) => {
    const type = request.headers.get("content-type") ?? ""
    // The SDK's writeBinary: a multipart form with the file (and its permissions and path, the route's again).
    if (type.includes("multipart/form-data")) {
      if (Number(request.headers.get("content-length") ?? "0") > MAX_PART_BYTES + 64 * 1024) throw new HttpFailure(413, "the file is too large; upload it in parts")
      const form = await request.formData().catch(() => null)
      const file = form?.get("file")
      if (!(file instanceof Blob)) throw new HttpFailure(400, "missing 'file' field in multipart form")
      if (file.size > MAX_PART_BYTES) throw new HttpFailure(413, "the file is too large; upload it in parts")
      await run(runtime.writeFile(s.runtimeId, p, new Uint8Array(await file.arrayBuffer()), { mode: "overwrite", createParents: true }))
      return json({ path: p, message: "File created/updated successfully" })
    }
    if (!type.includes("application/json")) throw new HttpFailure(400, "the body must be JSON or a multipart form")
    const body = await readBody(request, PutFile)
    if (body.isDirectory === true) {
      await run(runtime.makeDir(s.runtimeId, p, { parents: true }))
      return json({ path: p, message: "Directory created successfully" })
    }
    await run(runtime.writeFile(s.runtimeId, p, new TextEncoder().encode(body.content ?? ""), { mode: "overwrite", createParents: true }))
    return json({ path: p, message: "File created/updated successfully" })
  }

  const remove = async (s: EmulatedSandbox, p: string, url: URL) => {
    const entry = await statOr404(s, p)
    const recursive = url.searchParams.get("recursive") === "true"
    if (entry.type === "directory" && !recursive && (await run(runtime.listFiles(s.runtimeId, p, { recursive: false, maxEntries: 1 }))).entries.length > 0) {
      throw new HttpFailure(422, `error deleting directory: ${p} is not empty`)
    }
    await run(runtime.deleteFile(s.runtimeId, p, { recursive }))
    return json({ path: p, message: entry.type === "directory" ? "Directory deleted successfully" : "File deleted successfully" })
  }

  const uploadOr404 = (s: EmulatedSandbox, id: string) => {
    const u = uploads.get(id)
    if (u === undefined || u.runtimeId !== s.runtimeId) throw new HttpFailure(404, `upload not found: ${id}`)
    return u
  }

  const initiate = async (s: EmulatedSandbox, p: string, request: Request) => {
    await readBody(request, Initiate)
    prune()
    const uploadId = crypto.randomUUID()
    uploads.set(uploadId, { runtimeId: s.runtimeId, path: p, startedAt: Date.now(), parts: new Map() })
    return json({ uploadId, path: p })
  }

  const part = async (s: EmulatedSandbox, id: string, request: Request, url: URL) => {
    const upload = uploadOr404(s, id)
    const partNumber = Number(url.searchParams.get("partNumber"))
    if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 10_000) throw new HttpFailure(400, "part number must be between 1 and 10000")
    if (Number(request.headers.get("content-length") ?? "0") > MAX_PART_BYTES + 64 * 1024) throw new HttpFailure(413, "the part is too large")
    const form = await request.formData().catch(() => null)
    const file = form?.get("file")
    if (!(file instanceof Blob)) throw new HttpFailure(400, "missing 'file' field in multipart form")
    if (file.size > MAX_PART_BYTES) throw new HttpFailure(413, "the part is too large")
    const data = new Uint8Array(await file.arrayBuffer())
    const held = [...upload.parts.entries()].reduce((sum, [n, p]) => sum + (n === partNumber ? 0 : p.data.length), 0)
    if (held + data.length > MAX_UPLOAD_BYTES) throw new HttpFailure(413, "the upload is too large for the emulator")
    const etag = crypto.createHash("md5").update(data).digest("hex")
    upload.parts.set(partNumber, { data, etag })
    return json({ partNumber, etag, size: data.length, uploadedAt: new Date().toISOString() })
  }

  const complete = async (s: EmulatedSandbox, id: string, request: Request) => {
    const upload = uploadOr404(s, id)
    const body = await readBody(request, Complete)
    if (body.parts.length === 0) throw new HttpFailure(400, "at least one part is required")
    for (const p of body.parts) {
      const stored = upload.parts.get(p.partNumber)
      if (stored === undefined) throw new HttpFailure(500, `failed to complete upload: part ${p.partNumber} not found`)
      if (stored.etag !== p.etag) throw new HttpFailure(500, `failed to complete upload: etag mismatch for part ${p.partNumber}`)
    }
    const ordered = [...body.parts].sort((a, b) => a.partNumber - b.partNumber).map((p) => upload.parts.get(p.partNumber)!.data)
    await run(runtime.writeFile(s.runtimeId, upload.path, new Uint8Array(Buffer.concat(ordered)), { mode: "overwrite", createParents: true }))
    uploads.delete(id)
    return json({ path: upload.path, message: "Multipart upload completed successfully" })
  }

  return {
    get,
    put,
    remove,
    initiate,
    part,
    complete,
    abort: (s: EmulatedSandbox, id: string) => {
      uploadOr404(s, id)
      uploads.delete(id)
      return json({ message: "Multipart upload aborted successfully" })
    },
    dropSandbox: (runtimeId: string) => {
      for (const [id, u] of uploads) if (u.runtimeId === runtimeId) uploads.delete(id)
    }
  }
}
