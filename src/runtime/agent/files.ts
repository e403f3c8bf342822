/**
 * File operations from inside the jail, so paths, `..` and symlinks resolve in the jail, never on the host; the
 * file routes of the agent's HTTP API; and errno failures in the user's words.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Protocol from "../AgentProtocol.ts"
import { AgentError, intParam, invalid, json, type Query, queryOf, shortPath } from "./common.ts"

const entryType = (stat: fs.Stats) => (stat.isFile() ? "file" : stat.isDirectory() ? "directory" : stat.isSymbolicLink() ? "symlink" : "other")
const entry = (p: string, stat: fs.Stats): Protocol.FileEntry => ({ path: p, type: entryType(stat), sizeBytes: stat.size, modifiedAt: stat.mtime.toISOString(), mode: stat.mode & 0o7777 })

/** What an errno means, in the user's words. */
const ERRNO_TEXT: Record<string, readonly [number, Protocol.ErrorAnswer["kind"], string]> = {
  ENOENT: [404, "not_found", "no such file or directory"],
  EEXIST: [409, "conflict", "already exists"],
  ENOTEMPTY: [409, "conflict", "the directory is not empty"],
  ENOTDIR: [400, "invalid", "not a directory"],
  EISDIR: [400, "invalid", "is a directory"],
  EINVAL: [400, "invalid", "invalid argument"],
  ELOOP: [400, "invalid", "too many levels of symbolic links"],
  ENAMETOOLONG: [400, "invalid", "file name too long"],
  EACCES: [403, "invalid", "permission denied"],
  EPERM: [403, "invalid", "operation not permitted"],
  EROFS: [403, "invalid", "read-only file system"],
  ETXTBSY: [409, "conflict", "the file is busy"],
  EMFILE: [503, "unavailable", "too many open files in the sandbox"],
  ENOSPC: [507, "unavailable", "no space left on the sandbox's disk"],
  EDQUOT: [507, "unavailable", "no space left on the sandbox's disk"],
  EFBIG: [507, "unavailable", "the file is too large"]
}

export const errnoError = (e: unknown, subject: string | undefined): AgentError => {
  if (e instanceof AgentError) return e
  const code = (e as NodeJS.ErrnoException | null)?.code
  const known = code === undefined ? undefined : ERRNO_TEXT[code]
  if (known !== undefined) return new AgentError(known[0], known[1], subject === undefined ? known[2] : `${known[2]}: ${shortPath(subject)}`)
  // Never a stack or an engine's message: the errno name is all a user could act on.
  return new AgentError(500, "internal", `the operation failed${code ? ` (${code})` : ""}${subject === undefined ? "" : `: ${shortPath(subject)}`}`)
}

const listDir = (root: string, recursive: boolean, max: number): Protocol.ListAnswer => {
  const entries: Array<Protocol.FileEntry> = []
  let truncated = false
  const walk = (dir: string): void => {
    let names: Array<string>
    try {
      names = fs.readdirSync(dir).sort()
    } catch (e) {
      if (dir === root) throw e
      return // an unreadable subdirectory is listed, not entered
    }
    for (const name of names) {
      if (entries.length >= max) {
        truncated = true
        return
      }
      const p = dir === "/" ? `/${name}` : `${dir}/${name}`
      let stat: fs.Stats
      try {
        stat = fs.lstatSync(p)
      } catch {
        continue // vanished meanwhile
      }
      entries.push(entry(p, stat))
      if (recursive && stat.isDirectory()) walk(p)
      if (truncated) return
    }
  }
  walk(root)
  return { entries, truncated }
}

const existsNoFollow = (p: string) => {
  try {
    fs.lstatSync(p)
    return true
  } catch {
    return false
  }
}

/** Appends the file `from` to `to` (created if missing), in pieces. */
const appendFile = (from: string, to: string) => {
  const input = fs.openSync(from, "r")
  const output = fs.openSync(to, "a")
  try {
    const buffer = Buffer.alloc(1 << 20)
    for (;;) {
      const n = fs.readSync(input, buffer, 0, buffer.length, null)
      if (n === 0) break
      let written = 0
      while (written < n) written += fs.writeSync(output, buffer, written, n - written)
    }
  } finally {
    fs.closeSync(input)
    fs.closeSync(output)
  }
}

export const normalize = (p: string | null) => {
  if (p === null || !p.startsWith("/")) throw invalid("path must be absolute")
  if (p.includes("\0")) throw invalid("path cannot contain NUL")
  return path.posix.normalize(p).replace(/(.)\/$/, "$1")
}

/** `/files` (GET read, PUT write, DELETE), `/stat`, `/list`, `/mkdir` on the absolute path `p`. */
export const fileRoute = async (request: Request, parts: ReadonlyArray<string>, q: URLSearchParams, p: string): Promise<Response> => {
  if (parts[0] === "files" && request.method === "GET") {
    const read: Query<Protocol.ReadQuery> = q
    const offset = intParam(read, "offset", 0)
    const limit = intParam(read, "limit", 1 << 20)
    const fd = fs.openSync(p, "r")
    let stat: fs.Stats
    try {
      stat = fs.fstatSync(fd)
    } finally {
      fs.closeSync(fd)
    }
    if (!stat.isFile()) throw invalid(`not a regular file: ${shortPath(p)}`)
    const length = Math.max(0, Math.min(limit, stat.size - offset))
    // Bun sends the range straight from the file (sendfile): no copy through this process. The path is opened
    // again here, inside the jail; a file changed meanwhile gives a short body, which the caller refuses.
    return new Response(length === 0 ? new Uint8Array() : Bun.file(p).slice(offset, offset + length), {
      headers: { "content-type": "application/octet-stream", ...({ "x-size": String(stat.size), "x-eof": offset + length >= stat.size ? "true" : "false" } satisfies Protocol.ReadHead) }
    })
  }
  if (parts[0] === "files" && request.method === "PUT") {
    const write: Query<Protocol.WriteQuery> = q
    const mode = write.get("mode") ?? "overwrite"
    if (mode !== "create" && mode !== "overwrite" && mode !== "append") throw invalid("mode must be create, overwrite or append")
    if (p === "/") throw invalid("/ is a directory")
    const limit = intParam(write, "limit", Number.MAX_SAFE_INTEGER)
    if (write.get("parents") === "1") fs.mkdirSync(path.dirname(p), { recursive: true })
    const existed = existsNoFollow(p)
    if (mode === "create" && existed) throw new AgentError(409, "conflict", `already exists: ${shortPath(p)}`)
    // The body goes to a file of its own beside the target, as it comes (flat memory, any size); only a body
    // received whole takes the target's place, so a broken upload leaves the target as it was.
    const temp = path.join(path.dirname(p), `.sgw-upload-${crypto.randomUUID()}`)
    const fd = fs.openSync(temp, "wx", 0o644)
    let received = 0
    try {
      try {
        if (request.body !== null) {
          for await (const chunk of request.body) {
            received += chunk.length
            if (received > limit) throw new AgentError(413, "invalid", `the body is larger than ${limit} bytes`)
            let written = 0
            while (written < chunk.length) written += fs.writeSync(fd, chunk, written, chunk.length - written)
          }
        }
      } finally {
        fs.closeSync(fd)
      }
      if (mode === "overwrite") fs.renameSync(temp, p)
      else if (mode === "create") fs.linkSync(temp, p) // fails if the path appeared meanwhile: never replaced
      else appendFile(temp, p)
    } finally {
      fs.rmSync(temp, { force: true })
    }
    return json({ bytesWritten: received, created: !existed } satisfies Protocol.WriteAnswer)
  }
  if (parts[0] === "files" && request.method === "DELETE") {
    if (p === "/") throw invalid("/ cannot be deleted")
    let stat: fs.Stats
    try {
      stat = fs.lstatSync(p)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return json({ deleted: false } satisfies Protocol.DeleteAnswer)
      throw e
    }
    if (stat.isDirectory()) {
      if (queryOf<Protocol.DeleteQuery>(q).get("recursive") === "1") fs.rmSync(p, { recursive: true, force: true })
      else fs.rmdirSync(p)
    } else fs.unlinkSync(p)
    return json({ deleted: true } satisfies Protocol.DeleteAnswer)
  }
  if (parts[0] === "stat" && request.method === "GET") {
    try {
      return json({ entry: entry(p, fs.lstatSync(p)) } satisfies Protocol.StatAnswer)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT" || (e as NodeJS.ErrnoException).code === "ENOTDIR") return json({ entry: null } satisfies Protocol.StatAnswer)
      throw e
    }
  }
  if (parts[0] === "list" && request.method === "GET") {
    if (!fs.statSync(p).isDirectory()) throw invalid(`not a directory: ${shortPath(p)}`)
    const list: Query<Protocol.ListQuery> = q
    return json(listDir(p, list.get("recursive") === "1", intParam(list, "max", 1000)))
  }
  if (parts[0] === "mkdir" && request.method === "POST") {
    const parents = queryOf<Protocol.MkdirQuery>(q).get("parents") === "1"
    if (parents && existsNoFollow(p) && !fs.statSync(p).isDirectory()) throw new AgentError(409, "conflict", `exists and is not a directory: ${shortPath(p)}`)
    fs.mkdirSync(p, { recursive: parents })
    return json({ ok: true } satisfies Protocol.Acknowledged)
  }
  throw new AgentError(404, "not_found", "no such route")
}
