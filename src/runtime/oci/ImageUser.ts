/**
 * The user an image's processes run as: its config's `User`, resolved as Docker (runc) resolves it — `uid`,
 * `uid:gid`, `name`, `name:group`, `uid:group`, `name:gid`; empty is root (0:0). A name must be in the image's own
 * /etc/passwd (a group name in its /etc/group); a numeric uid with an entry there takes the entry's gid and home, one
 * without runs with gid 0 (unless a group is given); the first matching entry wins. Supplementary groups are not
 * applied: a jail maps one uid and one gid (Jail.ts).
 *
 * Those files are the image's, so attacker-controlled. They are read from the layer cache (root only; no sandbox
 * ever writes there), never from a sandbox's disk, as overlayfs shows the merged root: the topmost layer holding
 * the path wins, a whiteout deletes it, an opaque directory hides the layers below; each component is lstat'ed
 * (a symlink is never followed: a file reached through one counts as absent), the file is opened O_NOFOLLOW and
 * must be a regular file of at most 1 MiB, and it is parsed line by line into bounded fields.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { ImagePullError } from "./Errors.ts"
import { isOpaque, isWhiteout } from "./OverlayMarks.ts"

export interface ImageUser {
  readonly uid: number
  readonly gid: number
  /** The /etc/passwd entry's name and home directory, when the uid has an entry. */
  readonly name?: string | undefined
  readonly home?: string | undefined
}

/** Largest uid or gid (as runc allows). */
export const MAX_ID = 2 ** 31 - 1
/** The largest /etc/passwd or /etc/group read. */
const MAX_FILE_BYTES = 1024 * 1024
/** A User longer than this is refused (real ones are a name or two numbers). */
const MAX_SPEC_BYTES = 256
const DIGITS = /^[0-9]+$/

type ImageFile = { readonly text: string } | { readonly missing: string }

/** What a path's final component is, at the topmost layer that has it. */
const findInLayers = (layers: ReadonlyArray<string>, rel: string): { readonly file: string } | { readonly missing: string } => {
  const parts = rel.split("/")
  // The directories that make up the merged parent, topmost first, down to an opaque one.
  let dirs = [...layers]
  for (const part of parts.slice(0, -1)) {
    const next: Array<string> = []
    for (const dir of dirs) {
      const entry = path.join(dir, part)
      const stat = lstatOrUndefined(entry)
      if (stat === undefined) continue
      // A whiteout or a non-directory hides everything below it; a symlink is not followed.
      if (!stat.isDirectory()) break
      next.push(entry)
      if (isOpaque(entry)) break
    }
    if (next.length === 0) return { missing: "there is none" }
    dirs = next
  }
  const name = parts.at(-1)!
  for (const dir of dirs) {
    const entry = path.join(dir, name)
    const stat = lstatOrUndefined(entry)
    if (stat === undefined) continue
    if (isWhiteout(stat)) return { missing: "there is none" }
    return stat.isFile() ? { file: entry } : { missing: stat.isSymbolicLink() ? "it is a symlink" : "it is not a regular file" }
  }
  return { missing: "there is none" }
}

const lstatOrUndefined = (p: string) => {
  try {
    return fs.lstatSync(p)
  } catch (e) {
    if ((e as { code?: unknown }).code === "ENOENT" || (e as { code?: unknown }).code === "ENOTDIR") return undefined
    throw e
  }
}

/** A file of the image (`etc/passwd`) as its root shows it, read within its byte cap; or why there is none to read. */
export const readImageFile = (layersTopFirst: ReadonlyArray<string>, rel: string): ImageFile => {
  const found = findInLayers(layersTopFirst, rel)
  if ("missing" in found) return found
  const fd = fs.openSync(found.file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  try {
    const stat = fs.fstatSync(fd)
    if (!stat.isFile()) return { missing: "it is not a regular file" }
    if (stat.size > MAX_FILE_BYTES) return { missing: `it is larger than ${MAX_FILE_BYTES / 1024} KiB` }
    const buffer = Buffer.alloc(stat.size)
    let read = 0
    while (read < buffer.length) {
      const n = fs.readSync(fd, buffer, read, buffer.length - read, read)
      if (n === 0) break
      read += n
    }
    return { text: buffer.subarray(0, read).toString("utf8") }
  } finally {
    fs.closeSync(fd)
  }
}

interface PasswdEntry {
  readonly name: string
  readonly uid: number
  readonly gid: number
  readonly home: string
}

/** The entries of a passwd or group file: lines of `:`-separated fields; comments, blank and malformed lines skipped. */
const records = (file: ImageFile): Array<Array<string>> =>
  "text" in file ? file.text.split("\n").filter((line) => line !== "" && !line.startsWith("#")).map((line) => line.split(":", 8)) : []

const id = (text: string | undefined): number | undefined => {
  if (text === undefined || !DIGITS.test(text) || text.length > 10) return undefined
  const n = Number(text)
  return n <= MAX_ID ? n : undefined
}

const passwdEntries = (file: ImageFile): Array<PasswdEntry> =>
  records(file).flatMap(([name = "", , uid, gid, , home = ""]) => {
    const u = id(uid)
    const g = id(gid)
    return name === "" || u === undefined || g === undefined ? [] : [{ name, uid: u, gid: g, home }]
  })

const groupEntries = (file: ImageFile): Array<{ readonly name: string; readonly gid: number }> =>
  records(file).flatMap(([name = "", , gid]) => {
    const g = id(gid)
    return name === "" || g === undefined ? [] : [{ name, gid: g }]
  })

/** A home directory worth setting as HOME: absolute, of sane length. */
const usableHome = (home: string) => (home.startsWith("/") && home.length <= 4096 ? home : undefined)

const show = (text: string) => JSON.stringify(text.length > 64 ? `${text.slice(0, 60)}…` : text)

/**
 * The uid, gid and (when the image's /etc/passwd has the uid) name and home of `user` (the config's User) in the
 * image whose unpacked layers are `layersTopFirst`. Fails with `unknown_user` (a name the image does not have) or
 * `invalid_image` (an id out of range, a User that is no user at all).
 */
export const resolveImageUser = (user: string, layersTopFirst: ReadonlyArray<string>): ImageUser => {
  if (Buffer.byteLength(user) > MAX_SPEC_BYTES || user.includes("\0") || user.includes("\n")) {
    throw new ImagePullError("invalid_image", `its User ${show(user)} is not a user (uid, name, uid:gid or name:group)`)
  }
  // As runc: `user[:group]`; fields past the second are ignored.
  const [userArg = "", groupArg = ""] = user.split(":")
  const outOfRange = (what: string, value: string) =>
    new ImagePullError("invalid_image", `its User ${show(user)} names ${what} ${show(value)}, outside 0 to ${MAX_ID}`)
  const numericUser = DIGITS.test(userArg)
  if (numericUser && id(userArg) === undefined) throw outOfRange("the uid", userArg)

  const passwd = readImageFile(layersTopFirst, "etc/passwd")
  // Empty: root's entry (for its home), else 0:0.
  const wanted = userArg === "" ? 0 : numericUser ? id(userArg)! : userArg
  const entry = passwdEntries(passwd).find((e) => (typeof wanted === "number" ? e.uid === wanted : e.name === wanted))
  if (entry === undefined && typeof wanted === "string") {
    const why = "missing" in passwd ? ` (the image has no usable /etc/passwd: ${passwd.missing})` : ""
    throw new ImagePullError("unknown_user", `its User ${show(user)}: no user ${show(userArg)} in the image's /etc/passwd${why}`)
  }
  const uid = entry?.uid ?? (wanted as number)
  let gid = entry?.gid ?? 0
  if (groupArg !== "") {
    if (DIGITS.test(groupArg)) {
      const g = id(groupArg)
      if (g === undefined) throw outOfRange("the gid", groupArg)
      gid = g
    } else {
      const group = readImageFile(layersTopFirst, "etc/group")
      const found = groupEntries(group).find((g) => g.name === groupArg)
      if (found === undefined) {
        const why = "missing" in group ? ` (the image has no usable /etc/group: ${group.missing})` : ""
        throw new ImagePullError("unknown_user", `its User ${show(user)}: no group ${show(groupArg)} in the image's /etc/group${why}`)
      }
      gid = found.gid
    }
  }
  const home = entry === undefined ? undefined : usableHome(entry.home)
  return { uid, gid, ...(entry === undefined ? {} : { name: entry.name }), ...(home === undefined ? {} : { home }) }
}
