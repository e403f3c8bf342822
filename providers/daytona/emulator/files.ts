/**
 * The Daytona emulator's files (`/toolbox/{id}/files…`), as the daemon serves them (apps/daemon/pkg/toolbox/fs), over
 * the local runtime (every path resolved inside the jail; relative ones against the sandbox's working directory):
 * - `GET /files?path&depth` (a list of FileInfo; `depth` levels deep, each entry with its full `path`), `GET
 *   /files/info`, `GET /files/download` (a Range is answered 206), `POST /files/folder` 201, `DELETE
 *   /files?recursive` 204 (a directory only with `recursive=true`);
 * - `POST /files/upload-v2?path` (multipart with a `file` part, or the raw body) → `{name, path, type}`; parents are
 *   made, a file there is replaced;
 * - `POST /files/bulk-upload` (multipart: `files[i].path`, then `files[i].file`) → `{files: [{path, bytes}]}`, or 400
 *   `{errors, files}`;
 * - `POST /files/bulk-download {paths}` → multipart/form-data (boundary `DAYTONA-FILE-BOUNDARY`): a `file` part per
 *   path found (its file name the path as asked, its Content-Length), an `error` part (the daemon's error body, code
 *   FILE_NOT_FOUND or INVALID_FILE_PATH) per path not.
 * Bodies go through as streams, never held whole. Errors carry the daemon's codes (FILE_NOT_FOUND …).
 */
import { Cause, Effect, Option, Schema } from "effect"
import * as path from "node:path"
import { asBody } from "../../../src/domain/Bodies.ts"
import { SANDBOX_UID } from "../../../src/runtime/Disk.ts"
import type { FileEntry, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { boundaryOf, multipartFile, multipartParts } from "../../core/emulator/multipart.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { EmulatedSandbox } from "./books.ts"
import type { Execute } from "./execute.ts"
import { decodeBody, goFileMode, json, readTextAtMost, HttpFailure } from "./wire.ts"

/**
 * The provider lists a directory whole; the emulator bounds it (memory) far above the 10,000 entries an adapter
 * keeps, so an adapter still sees that a large directory has more than it kept.
 */
const LIST_ENTRIES = 100_000
/** A download up to this size is read whole; a larger one is streamed. */
const WHOLE_READ_BYTES = 16 * 1024 * 1024
/** The largest file this emulator takes in one upload (real Daytona takes what the sandbox's disk holds). */
const MAX_UPLOAD_BYTES = 16 * 1024 * 1024 * 1024
/** A bulk upload's `files[i].path` part. */
const MAX_PATH_PART_BYTES = 64 * 1024
const BULK_BOUNDARY = "DAYTONA-FILE-BOUNDARY"
const NOT_FOUND = "FILE_NOT_FOUND"

const DownloadBody = Schema.Struct({ paths: Schema.Array(Schema.String) })

/**
 * A FileInfo as the daemon sends it (Go's os.FileInfo: mode string, modTime, owner and group ids, permissions); every
 * file of a jail belongs to its one user.
 */
const fileInfo = (e: FileEntry, full?: string) => ({
  name: path.posix.basename(e.path),
  size: e.sizeBytes,
  mode: goFileMode(e),
  modTime: e.modifiedAt,
  modifiedAt: e.modifiedAt,
  isDir: e.type === "directory",
  owner: String(SANDBOX_UID),
  group: String(SANDBOX_UID),
  permissions: (e.mode & 0o777).toString(8).padStart(4, "0"),
  ...(full === undefined ? {} : { path: full })
})

/** `filename` of a Content-Disposition as the daemon writes it: Latin-1 with quotes escaped, and the UTF-8 form beside. */
const disposition = (field: string, name: string) => {
  const latin = name.replaceAll("\\", "\\\\").replaceAll("\"", "\\\"").replace(/[\r\n\0]/g, "").replace(/[^\x20-\x7e\xa0-\xff]/g, "_")
  const rfc5987 = [...Buffer.from(name)].map((b) => (/[A-Za-z0-9!#$&+\-.^_`|~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, "0")}`)).join("")
  return `form-data; name="${field}"; filename="${latin}"; filename*=utf-8''${rfc5987}`
}

export const makeFiles = (runtime: LocalRuntimeShape, dirs: Execute) => {
  const { resolvePath } = dirs
  const pathOf = async (sandbox: EmulatedSandbox, url: URL, required = true) => {
    const p = url.searchParams.get("path") ?? ""
    if (p === "" && required) throw new HttpFailure(400, "path is required")
    return resolvePath(sandbox, p)
  }
  const statOf = async (sandbox: EmulatedSandbox, p: string) => {
    const stat = await run(runtime.statFile(sandbox.id, p))
    if (Option.isNone(stat)) throw new HttpFailure(404, `file not found: ${p}`, NOT_FOUND)
    return stat.value
  }

  const list = async (sandbox: EmulatedSandbox, url: URL) => {
    const dir = await pathOf(sandbox, url, false)
    const depthParam = url.searchParams.get("depth")
    const depth = depthParam === null ? 1 : Number(depthParam)
    if (!Number.isSafeInteger(depth) || depth < 1) throw new HttpFailure(400, "depth must be an integer of at least 1")
    if ((await statOf(sandbox, dir)).type !== "directory") throw new HttpFailure(400, `not a directory: ${dir}`)
    const listed = await run(runtime.listFiles(sandbox.id, dir, { recursive: depth > 1, maxEntries: LIST_ENTRIES }))
    const within = (e: FileEntry) => path.posix.relative(dir, e.path).split("/").length <= depth
    return json(listed.entries.filter(within).map((e) => fileInfo(e, e.path)))
  }

  const info = async (sandbox: EmulatedSandbox, url: URL) => json(fileInfo(await statOf(sandbox, await pathOf(sandbox, url))))

  const download = async (request: Request, sandbox: EmulatedSandbox, url: URL) => {
    const p = await pathOf(sandbox, url)
    if ((await statOf(sandbox, p)).type === "directory") throw new HttpFailure(400, "path must be a file")
    const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.get("range") ?? "")
    const offset = range ? Number(range[1]) : 0
    const end = range && range[2] !== "" ? Number(range[2]) + 1 : Number.MAX_SAFE_INTEGER
    const wanted = end - offset
    const headers = (length: number, size: number) => ({ "content-type": "application/octet-stream", ...(range ? { "content-range": `bytes ${offset}-${offset + length - 1}/${size}` } : {}) })
    // Up to a piece, read whole (one native copy each way is faster than a piped stream); beyond, streamed from
    // the jail as it is read, so the emulator never holds a large file whole.
    if (wanted <= WHOLE_READ_BYTES) {
      const read = await run(runtime.readFile(sandbox.id, p, offset, wanted))
      return new Response(asBody(read.data), { status: range ? 206 : 200, headers: headers(read.data.length, read.size) })
    }
    const read = await run(runtime.readFileStream(sandbox.id, p, offset, wanted))
    return new Response(read.stream, { status: range ? 206 : 200, headers: headers(read.length, read.size) })
  }

  /** Writes `body` at `p` (parents made, a file there replaced), as it comes. */
  const writeStream = async (sandbox: EmulatedSandbox, p: string, body: ReadableStream<Uint8Array>) => {
    const written = await Effect.runPromiseExit(runtime.writeFileStream(sandbox.id, p, body, { mode: "overwrite", createParents: true, maxBytes: MAX_UPLOAD_BYTES }))
    if (written._tag === "Success") return written.value.bytesWritten
    const failure = Cause.failureOption(written.cause)
    // The form itself was bad (no file part, cut short): the request's fault, as Go's multipart reader says.
    if (Option.isNone(failure)) throw new HttpFailure(400, "the upload ended early or has no file")
    throw failure.value
  }

  const uploadV2 = async (request: Request, sandbox: EmulatedSandbox, url: URL) => {
    const p = await pathOf(sandbox, url)
    const boundary = boundaryOf(request.headers.get("content-type") ?? "")
    // A raw body may be empty (an empty file); a multipart one needs its `file` part.
    const body = request.body ?? new Blob([]).stream()
    await writeStream(sandbox, p, boundary === undefined ? body : multipartFile(body, boundary, "file"))
    return json({ name: path.posix.basename(p), path: p, type: "file" })
  }

  const bulkUpload = async (request: Request, sandbox: EmulatedSandbox) => {
    const boundary = boundaryOf(request.headers.get("content-type") ?? "")
    if (boundary === undefined || request.body === null) return json({ errors: ["invalid multipart form"] }, 400)
    const destinations = new Map<string, string>()
    const errors: Array<string> = []
    const files: Array<{ readonly path: string; readonly bytes: number }> = []
    const indexOf = (name: string) => name.replace(/^files\[/, "").replace(/\]\.(path|file)$/, "")
    try {
      for await (const part of multipartParts(request.body, boundary)) {
        const name = part.name ?? ""
        if (name.endsWith(".path")) {
          const dest = (await readTextAtMost(new Request("http://part.invalid/", { method: "POST", body: part.body }), MAX_PATH_PART_BYTES)).trim()
          if (dest === "") errors.push(`path[${indexOf(name)}]: empty path`)
          else destinations.set(indexOf(name), dest)
        } else if (name.endsWith(".file")) {
          const dest = destinations.get(indexOf(name))
          if (dest === undefined) {
            errors.push(`file[${indexOf(name)}]: missing .path metadata`)
            continue
          }
          try {
            files.push({ path: dest, bytes: await writeStream(sandbox, await resolvePath(sandbox, dest), part.body) })
          } catch (e) {
            errors.push(`${dest}: ${e instanceof Error ? e.message : "write failed"}`)
          }
        }
      }
    } catch (e) {
      errors.push(`reading part: ${e instanceof Error ? e.message : "the form is malformed"}`)
    }
    return errors.length > 0 ? json({ errors, files }, 400) : json({ files })
  }

  /** The parts of a bulk download, one path after the other, each file streamed from the jail as it is read. */
  const bulkDownload = async (request: Request, sandbox: EmulatedSandbox) => {
    const { paths } = await decodeBody(request, DownloadBody)
    if (paths.length === 0) return json({ error: "request body must be {\"paths\": [ ... ]} and non-empty" }, 400)
    const encoder = new TextEncoder()
    const errorPart = (asked: string, status: number, code: string, message: string) =>
      encoder.encode(
        `--${BULK_BOUNDARY}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Disposition: ${disposition("error", asked)}\r\n\r\n` +
          `${JSON.stringify({ statusCode: status, message, code, source: "DAYTONA_DAEMON", timestamp: new Date().toISOString(), path: asked, method: request.method })}\r\n`
      )
    let index = 0
    let current: ReadableStreamDefaultReader<Uint8Array> | null = null
    const body = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        if (current !== null) {
          const chunk = await current.read()
          if (chunk.done !== true) return controller.enqueue(chunk.value)
          current = null
          return controller.enqueue(encoder.encode("\r\n"))
        }
        if (index >= paths.length) {
          controller.enqueue(encoder.encode(`--${BULK_BOUNDARY}--\r\n`))
          return controller.close()
        }
        const asked = paths[index++]!
        if (asked === "") return controller.enqueue(errorPart(asked, 400, "INVALID_FILE_PATH", "invalid file path: path is empty"))
        const p = await resolvePath(sandbox, asked)
        const stat = await Effect.runPromise(Effect.either(runtime.statFile(sandbox.id, p)))
        if (stat._tag === "Left") return controller.enqueue(errorPart(asked, 500, "FILE_READ_FAILED", `failed to access file: ${stat.left.message}`))
        if (Option.isNone(stat.right)) return controller.enqueue(errorPart(asked, 404, NOT_FOUND, `file not found: ${asked}`))
        if (stat.right.value.type === "directory") return controller.enqueue(errorPart(asked, 400, "INVALID_FILE_PATH", `invalid file path: path points to a directory: ${asked}`))
        const read = await Effect.runPromise(Effect.either(runtime.readFileStream(sandbox.id, p, 0, stat.right.value.sizeBytes)))
        if (read._tag === "Left") return controller.enqueue(errorPart(asked, read.left.kind === "not_found" ? 404 : 500, read.left.kind === "not_found" ? NOT_FOUND : "FILE_READ_FAILED", `failed to open file: ${read.left.message}`))
        current = read.right.stream.getReader()
        controller.enqueue(encoder.encode(
          `--${BULK_BOUNDARY}\r\nContent-Type: application/octet-stream\r\nContent-Disposition: ${disposition("file", asked)}\r\nContent-Length: ${read.right.length}\r\n\r\n`
        ))
      },
      cancel: async (reason) => {
        await current?.cancel(reason)
      }
    })
    return new Response(body, { headers: { "content-type": `multipart/form-data; boundary=${BULK_BOUNDARY}` } })
  }

  const folder = async (sandbox: EmulatedSandbox, url: URL) => {
    const mode = url.searchParams.get("mode")
    if (mode !== null && mode !== "" && !/^[0-7]{1,4}$/.test(mode)) throw new HttpFailure(400, "invalid mode format")
    await run(runtime.makeDir(sandbox.id, await pathOf(sandbox, url), { parents: true }))
    return new Response(null, { status: 201 })
  }

  const remove = async (sandbox: EmulatedSandbox, url: URL) => {
    const p = await pathOf(sandbox, url)
    const recursive = url.searchParams.get("recursive") === "true"
    if ((await statOf(sandbox, p)).type === "directory" && !recursive) throw new HttpFailure(400, "cannot delete directory without recursive flag")
    if (!(await run(runtime.deleteFile(sandbox.id, p, { recursive })))) throw new HttpFailure(404, `file not found: ${p}`, NOT_FOUND)
    return new Response(null, { status: 204 })
  }

  return { list, info, download, uploadV2, bulkUpload, bulkDownload, folder, remove }
}
