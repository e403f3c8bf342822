/**
 * The Freestyle emulator's files in a running VM (absolute paths, `?path=`):
 * - `GET …/fs/stat` → `{path, kind, size, modifiedAt}` (404 `FILE_NOT_FOUND`);
 * - `GET …/fs/read` with an optional `Range: bytes=a-b` → 206 with `Content-Range` (200 with the whole file
 *   without one; 416 with `bytes *\/size` for a range past the end; 400 for a directory);
 * - `PUT …/fs/write?path=&sha256=` with the bytes → replaces the file once the digest matches (400
 *   `CHECKSUM_MISMATCH`); its directory must exist (404 `PARENT_NOT_FOUND`);
 * - `POST …/fs/mkdir {path, recursive?}`; `GET …/fs/dir?path=&recursive=&limit=` → `{entries, truncated}`;
 *   `GET …/fs/exists` → `{exists}`; `POST …/fs/remove {path, recursive?}` → `{removed}`.
 * The emulator holds a file in memory while it moves, so both directions are bounded (64 MiB).
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

const PathBody = Schema.Struct({ path: Schema.String.pipe(Schema.minLength(1)), recursive: Schema.optional(Schema.Boolean) })

const pathOf = (url: URL) => {
  const p = url.searchParams.get("path")
  if (p === null || !p.startsWith("/")) throw new HttpFailure(400, "FILES_BAD_REQUEST", "path must be an absolute path")
  return path.posix.normalize(p)
}
const absolute = (p: string) => {
  if (!p.startsWith("/")) throw new HttpFailure(400, "FILES_BAD_REQUEST", "path must be an absolute path")
  return path.posix.normalize(p)
}
const entry = (e: FileEntry) => ({ path: e.path, kind: e.type, size: e.sizeBytes, modifiedAt: e.modifiedAt })

export const makeFilesystem = (runtime: LocalRuntimeShape) => {
  const statOf = (vm: Vm, p: string) => run(runtime.statFile(vm.id, p))

  const stat = async (vm: Vm, url: URL) => {
    const p = pathOf(url)
    const found = await statOf(vm, p)
    if (found._tag === "None") throw new HttpFailure(404, "FILE_NOT_FOUND", `${p}: no such file or directory`)
    return json(entry(found.value))
  }

  const read = async (vm: Vm, url: URL, request: Request) => {
    const p = pathOf(url)
    const found = await statOf(vm, p)
    if (found._tag === "None") throw new HttpFailure(404, "FILE_NOT_FOUND", `${p}: no such file or directory`)
    if (found.value.type === "directory") throw new HttpFailure(400, "FILES_BAD_REQUEST", `${p} is a directory`)
    const size = found.value.sizeBytes
    const header = request.headers.get("range")
    if (header === null) {
      if (size > MAX_BYTES) throw new HttpFailure(400, "FILES_BAD_REQUEST", `${p} is larger than the emulator serves whole; ask for a range`)
      const whole = await run(runtime.readFile(vm.id, p, 0, size))
      return new Response(asBody(whole.data), { headers: { "content-type": "application/octet-stream", "content-length": String(whole.data.length) } })
    }
    const range = RANGE.exec(header)
    if (range === null) throw new HttpFailure(400, "FILES_BAD_REQUEST", `unreadable Range ${header}`)
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
    if (Number(request.headers.get("content-length") ?? "0") > MAX_BYTES) throw new HttpFailure(413, "FILE_TOO_LARGE", "the file is too large for the emulator")
    const data = new Uint8Array(await request.arrayBuffer())
    if (data.length > MAX_BYTES) throw new HttpFailure(413, "FILE_TOO_LARGE", "the file is too large for the emulator")
    if (sha256 !== null && createHash("sha256").update(data).digest("hex") !== sha256.toLowerCase()) {
      throw new HttpFailure(400, "CHECKSUM_MISMATCH", "the body does not match its sha256")
    }
    const found = await statOf(vm, p)
    if (found._tag === "Some" && found.value.type === "directory") throw new HttpFailure(400, "FILES_BAD_REQUEST", `${p} is a directory`)
    const parent = await statOf(vm, path.posix.dirname(p))
    if (parent._tag === "None" || parent.value.type !== "directory") throw new HttpFailure(404, "PARENT_NOT_FOUND", `${path.posix.dirname(p)} is not a directory`)
    await run(runtime.writeFile(vm.id, p, data, { mode: "overwrite", createParents: false }))
    return json({ path: p, size: data.length, created: found._tag === "None" })
  }

  const mkdir = async (vm: Vm, request: Request) => {
    const body = await readBody(request, PathBody)
    const p = absolute(body.path)
    const found = await statOf(vm, p)
    if (found._tag === "Some") {
      if (found.value.type === "directory" && body.recursive === true) return json({ path: p })
      throw new HttpFailure(409, "FILE_EXISTS", `${p} already exists`)
    }
    await run(runtime.makeDir(vm.id, p, { parents: body.recursive === true }))
    return json({ path: p })
  }

  const dir = async (vm: Vm, url: URL) => {
    const p = pathOf(url)
    const limitParam = Number(url.searchParams.get("limit") ?? "1000")
    const limit = Number.isInteger(limitParam) && limitParam >= 1 ? Math.min(limitParam, MAX_LIST) : 1000
    const found = await statOf(vm, p)
    if (found._tag === "None") throw new HttpFailure(404, "FILE_NOT_FOUND", `${p}: no such file or directory`)
    if (found.value.type !== "directory") throw new HttpFailure(400, "FILES_BAD_REQUEST", `${p} is not a directory`)
    const listed = await run(runtime.listFiles(vm.id, p, { recursive: url.searchParams.get("recursive") === "true", maxEntries: limit }))
    return json({ entries: listed.entries.map(entry), truncated: listed.truncated })
  }

  const exists = async (vm: Vm, url: URL) => json({ exists: (await statOf(vm, pathOf(url)))._tag === "Some" })

  const remove = async (vm: Vm, request: Request) => {
    const body = await readBody(request, PathBody)
    return json({ removed: await run(runtime.deleteFile(vm.id, absolute(body.path), { recursive: body.recursive === true })) })
  }

  return { stat, read, write, mkdir, dir, exists, remove }
}
