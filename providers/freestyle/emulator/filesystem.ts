/**
 * The Freestyle emulator's files in a running VM (absolute paths, `?path=`), as Freestyle's SDK calls them:
 * - `GET …/fs/stat` → `{size, isFile, isDirectory, isSymlink, permissions, owner, group, modified}` (404
 *   `FILE_NOT_FOUND`);
 * - `GET …/fs/read` with an optional `Range: bytes=a-b` → 206 with `Content-Range` (200 with the whole file
 *   without one; 416 with `bytes *\/size` for a range past the end; 400 for a directory);
 * - `PUT …/fs/write?path=&sha256=` with the bytes → replaces the file once the digest matches (400
 *   `CHECKSUM_MISMATCH`); its directory must exist (404 `PARENT_NOT_FOUND`);
 * - `POST …/fs/mkdir {path}` (its parents too; an existing directory is fine); `GET …/fs/dir?path=` → `{entries:
 *   [{name, kind}]}`; `GET …/fs/exists` → `{exists}`; `DELETE …/fs/remove?path=` (a directory with what it holds);
 * - resumable uploads (the SDK's past 8 MiB): `POST …/fs/uploads {path, size, sha256?}` → `{uploadId, path, size,
 *   receivedBytes}`, `PUT …/fs/uploads/{id}?offset=` with the next bytes, `GET …/fs/uploads/{id}`, `POST
 *   …/fs/uploads/{id}/commit` (the file takes its place once whole and matching its digest), `DELETE …/fs/uploads/{id}`.
 * The emulator holds a file in memory while it moves, so everything is bounded (64 MiB a file, 16 uploads, an hour each).
 */
import { asBody } from "../../../src/domain/Bodies.ts"
import { Schema } from "effect"
import { createHash } from "node:crypto"
import * as path from "node:path"
import type { FileEntry, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Vm } from "./books.ts"
import { HttpFailure, json, readBody } from "./http.ts"

const MAX_BYTES = 64 * 1024 * 1024
const MAX_LIST = 10_000
const RANGE = /^bytes=(\d+)-(\d*)$/

const MAX_UPLOADS = 16
const UPLOAD_TTL_MS = 3600 * 1000

const PathBody = Schema.Struct({ path: Schema.String.pipe(Schema.minLength(1)) })
const StartUpload = Schema.Struct({
  path: Schema.String.pipe(Schema.minLength(1)),
  size: Schema.Int.pipe(Schema.between(0, MAX_BYTES)),
  sha256: Schema.optional(Schema.NullOr(Schema.String)),
  mode: Schema.optional(Schema.NullOr(Schema.Int))
})

interface Upload {
  readonly vmId: string
  readonly path: string
  readonly size: number
  readonly sha256: string | null
  readonly startedAt: number
  readonly parts: Array<Uint8Array>
  received: number
}

const pathOf = (url: URL) => {
  const p = url.searchParams.get("path")
  if (p === null || !p.startsWith("/")) throw new HttpFailure(400, "path must be an absolute path", "FILES_BAD_REQUEST")
  return path.posix.normalize(p)
}
const absolute = (p: string) => {
  if (!p.startsWith("/")) throw new HttpFailure(400, "path must be an absolute path", "FILES_BAD_REQUEST")
  return path.posix.normalize(p)
}
const statWire = (e: FileEntry) => ({
  size: e.sizeBytes,
  isFile: e.type === "file",
  isDirectory: e.type === "directory",
  isSymlink: e.type === "symlink",
  permissions: (e.mode & 0o7777).toString(8).padStart(4, "0"),
  owner: "user",
  group: "user",
  modified: e.modifiedAt
})

export const makeFilesystem = (runtime: LocalRuntimeShape) => {
  const statOf = (vm: Vm, p: string) => run(runtime.statFile(vm.id, p))

  const stat = async (vm: Vm, url: URL) => {
    const p = pathOf(url)
    const found = await statOf(vm, p)
    if (found._tag === "None") throw new HttpFailure(404, `${p}: no such file or directory`, "FILE_NOT_FOUND")
    return json(statWire(found.value))
  }

  const read = async (vm: Vm, url: URL, request: Request) => {
    const p = pathOf(url)
    const found = await statOf(vm, p)
    if (found._tag === "None") throw new HttpFailure(404, `${p}: no such file or directory`, "FILE_NOT_FOUND")
    if (found.value.type === "directory") throw new HttpFailure(400, `${p} is a directory`, "FILES_BAD_REQUEST")
    const size = found.value.sizeBytes
    const header = request.headers.get("range")
    if (header === null) {
      if (size > MAX_BYTES) throw new HttpFailure(400, `${p} is larger than the emulator serves whole; ask for a range`, "FILES_BAD_REQUEST")
      const whole = await run(runtime.readFile(vm.id, p, 0, size))
      return new Response(asBody(whole.data), { headers: { "content-type": "application/octet-stream", "content-length": String(whole.data.length) } })
    }
    const range = RANGE.exec(header)
    if (range === null) throw new HttpFailure(400, `unreadable Range ${header}`, "FILES_BAD_REQUEST")
    const start = Number(range[1])
    const last = range[2] === "" ? size - 1 : Math.min(Number(range[2]), size - 1)
    if (start >= size || last < start) {
      return new Response(null, { status: 416, headers: { "content-range": `bytes */${size}` } })
    }
    const length = Math.min(last - start + 1, MAX_BYTES)
    const chunk = await run(runtime.readFile(vm.id, p, start, length))
    const end = start + chunk.data.length - 1
    return new Response(asBody(chunk.data), {
      status: 206,
      headers: { "content-type": "application/octet-stream", "content-range": `bytes ${start}-${end}/${chunk.size}`, "content-length": String(chunk.data.length) }
    })
  }

  const write = async (vm: Vm, url: URL, request: Request) => {
    const p = pathOf(url)
    const sha256 = url.searchParams.get("sha256")
    if (Number(request.headers.get("content-length") ?? "0") > MAX_BYTES) throw new HttpFailure(413, "the file is too large for the emulator", "FILE_TOO_LARGE")
    const data = new Uint8Array(await request.arrayBuffer())
    if (data.length > MAX_BYTES) throw new HttpFailure(413, "the file is too large for the emulator", "FILE_TOO_LARGE")
    if (sha256 !== null && createHash("sha256").update(data).digest("hex") !== sha256.toLowerCase()) {
      throw new HttpFailure(400, "the body does not match its sha256", "CHECKSUM_MISMATCH")
    }
    const found = await statOf(vm, p)
    if (found._tag === "Some" && found.value.type === "directory") throw new HttpFailure(400, `${p} is a directory`, "FILES_BAD_REQUEST")
    const parent = await statOf(vm, path.posix.dirname(p))
    if (parent._tag === "None" || parent.value.type !== "directory") throw new HttpFailure(404, `${path.posix.dirname(p)} is not a directory`, "PARENT_NOT_FOUND")
    await run(runtime.writeFile(vm.id, p, data, { mode: "overwrite", createParents: false }))
    return json({ path: p, size: data.length, created: found._tag === "None" })
  }

  const mkdir = async (vm: Vm, request: Request) => {
    const body = await readBody(request, PathBody)
    const p = absolute(body.path)
    const found = await statOf(vm, p)
    if (found._tag === "Some") {
      if (found.value.type === "directory") return json({})
      throw new HttpFailure(409, `${p} already exists`, "FILE_EXISTS")
    }
    await run(runtime.makeDir(vm.id, p, { parents: true }))
    return json({})
  }

  const dir = async (vm: Vm, url: URL) => {
    const p = pathOf(url)
    const found = await statOf(vm, p)
    if (found._tag === "None") throw new HttpFailure(404, `${p}: no such file or directory`, "FILE_NOT_FOUND")
    if (found.value.type !== "directory") throw new HttpFailure(400, `${p} is not a directory`, "FILES_BAD_REQUEST")
    const listed = await run(runtime.listFiles(vm.id, p, { recursive: false, maxEntries: MAX_LIST }))
    if (listed.truncated) throw new HttpFailure(400, `${p} holds more than the ${MAX_LIST} entries the emulator lists`, "FILES_BAD_REQUEST")
    return json({ entries: listed.entries.map((e) => ({ name: path.posix.basename(e.path), kind: e.type })) })
  }

  const exists = async (vm: Vm, url: URL) => json({ exists: (await statOf(vm, pathOf(url)))._tag === "Some" })

  const remove = async (vm: Vm, url: URL) => {
    const p = pathOf(url)
    if (!(await run(runtime.deleteFile(vm.id, p, { recursive: true })))) throw new HttpFailure(404, `${p}: no such file or directory`, "FILE_NOT_FOUND")
    return json({})
  }

  const uploads = new Map<string, Upload>()
  const prune = () => {
    for (const [id, u] of uploads) if (Date.now() - u.startedAt > UPLOAD_TTL_MS) uploads.delete(id)
  }
  const uploadOr404 = (vm: Vm, id: string) => {
    const u = uploads.get(id)
    if (u === undefined || u.vmId !== vm.id) throw new HttpFailure(404, `upload ${id} not found`, "UPLOAD_NOT_FOUND")
    return u
  }
  const status = (id: string, u: Upload) => ({ uploadId: id, path: u.path, size: u.size, receivedBytes: u.received })

  const startUpload = async (vm: Vm, request: Request) => {
    const body = await readBody(request, StartUpload)
    prune()
    if (uploads.size >= MAX_UPLOADS) throw new HttpFailure(429, `at most ${MAX_UPLOADS} uploads at once`, "TOO_MANY_UPLOADS")
    const id = crypto.randomUUID()
    const u: Upload = { vmId: vm.id, path: absolute(body.path), size: body.size, sha256: body.sha256 ?? null, startedAt: Date.now(), parts: [], received: 0 }
    uploads.set(id, u)
    return json(status(id, u))
  }

  const putUpload = async (vm: Vm, id: string, url: URL, request: Request) => {
    const u = uploadOr404(vm, id)
    const offset = Number(url.searchParams.get("offset") ?? "-1")
    if (offset !== u.received) throw new HttpFailure(409, `the upload has ${u.received} bytes; the next part starts there, not at ${offset}`, "OFFSET_MISMATCH")
    if (Number(request.headers.get("content-length") ?? "0") > u.size - u.received) throw new HttpFailure(400, "more bytes than the upload's size", "FILES_BAD_REQUEST")
    const data = new Uint8Array(await request.arrayBuffer())
    if (data.length > u.size - u.received) throw new HttpFailure(400, "more bytes than the upload's size", "FILES_BAD_REQUEST")
    u.parts.push(data)
    u.received += data.length
    return json(status(id, u))
  }

  const commit = async (vm: Vm, id: string) => {
    const u = uploadOr404(vm, id)
    if (u.received !== u.size) throw new HttpFailure(409, `the upload has ${u.received} of ${u.size} bytes`, "UPLOAD_INCOMPLETE")
    const data = new Uint8Array(Buffer.concat(u.parts))
    if (u.sha256 !== null && createHash("sha256").update(data).digest("hex") !== u.sha256.toLowerCase()) {
      uploads.delete(id)
      throw new HttpFailure(400, "the upload does not match its sha256", "CHECKSUM_MISMATCH")
    }
    const parent = await statOf(vm, path.posix.dirname(u.path))
    if (parent._tag === "None" || parent.value.type !== "directory") throw new HttpFailure(404, `${path.posix.dirname(u.path)} is not a directory`, "PARENT_NOT_FOUND")
    await run(runtime.writeFile(vm.id, u.path, data, { mode: "overwrite", createParents: false }))
    uploads.delete(id)
    return json({ path: u.path, size: u.size })
  }

  return {
    stat,
    read,
    write,
    mkdir,
    dir,
    exists,
    remove,
    startUpload,
    putUpload,
    uploadStatus: (vm: Vm, id: string) => json(status(id, uploadOr404(vm, id))),
    commit,
    abort: (vm: Vm, id: string) => {
      uploadOr404(vm, id)
      uploads.delete(id)
      return new Response(null, { status: 204 })
    }
  }
}
