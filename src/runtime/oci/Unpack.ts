/**
 * Unpacks one image layer (a tar, plain or gzip) into its own directory, as an overlayfs lower layer, refusing
 * anything hostile. A careful tar parser of our own (ustar, GNU long names, PAX path/linkpath/size; its fields
 * read by TarReader.ts), because the gateway unpacks as root:
 * - no entry leaves the layer: a `..` component refuses the layer, a leading `/` is dropped, and no entry is
 *   written through a symlink or a non-directory (each parent must be a real directory of this layer);
 * - hard links only to a regular file or symlink already in this layer, named the same way;
 * - no device nodes, fifos or sockets (skipped); no setuid/setgid bits; no ownership (everything belongs to the
 *   cache's owner, and the sandbox sees it as its own user through an idmapped mount); no xattrs;
 * - whiteouts become overlayfs whiteouts (`.wh.name` → a 0/0 character device, `.wh..wh..opq` → the
 *   directory's `trusted.overlay.opaque`; OverlayMarks.ts), so a file deleted by an upper layer stays deleted;
 * - bounded in bytes and in entries: every file, directory (those a path implies included), link and whiteout
 *   counts, so a small layer of many empty files cannot exhaust the host's inodes; paths are bounded in depth and
 *   length (and each name to 255 bytes), so none costs more than its share of lookups or overflows PATH_MAX on
 *   the host; each entry is charged to the image's and the cache's budget before it is made (ImageCache.ts).
 * Files are created with O_EXCL|O_NOFOLLOW in a directory only root can reach (DATA_DIR is 0700). A refused layer
 * is removed whole by the caller (it unpacks into a directory of its own under images/tmp/).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { ImagePullError } from "./Errors.ts"
import { markOpaque, whiteout } from "./OverlayMarks.ts"
import { ByteReader, cString, octal, parsePax, unsafe } from "./TarReader.ts"

const show = (name: string) => JSON.stringify(name.length > 120 ? `${name.slice(0, 100)}…` : name)

/** Longest name of one path component on the host's file systems. */
const NAME_MAX = 255

/** An entry's path as components inside the layer; `..`, or a path too deep or too long, refuses the layer. */
const components = (raw: string, limits: UnpackLimits): Array<string> => {
  if (raw.includes("\0")) throw unsafe(`entry ${show(raw)} has a NUL in its name`)
  const parts = raw.split("/").filter((p) => p !== "" && p !== ".")
  if (parts.includes("..")) throw unsafe(`entry ${show(raw)} leaves the image's root`)
  if (parts.length > limits.maxDepth) throw unsafe(`entry ${show(raw)} is nested deeper than ${limits.maxDepth} directories (IMAGE_MAX_PATH_DEPTH)`)
  if (Buffer.byteLength(raw) > limits.maxPathBytes) throw unsafe(`entry ${show(raw)} has a path longer than ${limits.maxPathBytes} bytes (IMAGE_MAX_PATH_BYTES)`)
  if (parts.some((p) => Buffer.byteLength(p) > NAME_MAX)) throw unsafe(`entry ${show(raw)} has a name longer than ${NAME_MAX} bytes`)
  return parts
}

export interface UnpackLimits {
  /** Refuse the layer once its files exceed this many bytes. */
  readonly maxBytes: number
  /** Refuse the layer once it has made this many entries: files, directories (implied ones too), links, whiteouts. */
  readonly maxFiles: number
  /** Components in an entry's path (a hard link's target too). */
  readonly maxDepth: number
  /** Bytes of an entry's path as the tar names it, and of a symlink's target. */
  readonly maxPathBytes: number
}

export interface UnpackOptions extends UnpackLimits {
  /**
   * Hears every entry before it is made (its data's bytes, and 1) and refuses the layer by throwing: the image's
   * and the cache's budget (ImageCache.ts).
   */
  readonly charge?: ((bytes: number, files: number) => void) | undefined
}

/** What a layer unpacked to: the bytes of its files and the entries it made. */
export interface Unpacked {
  readonly bytes: number
  readonly files: number
}

/** Consecutive metadata entries (long names, PAX headers) allowed before the entry they describe. */
const MAX_METADATA_RUN = 16
/** Directories of its own a layer may replace (by a file, a link, a whiteout). */
const MAX_DIRS_REPLACED = 1000

/** Unpacks the layer blob `blob` into the empty directory `dest`. */
export const unpackLayer = async (blob: string, dest: string, options: UnpackOptions): Promise<Unpacked> => {
  const head = Buffer.alloc(4)
  const fd = fs.openSync(blob, "r")
  try {
    fs.readSync(fd, head, 0, 4, 0)
  } finally {
    fs.closeSync(fd)
  }
  const raw = fs.createReadStream(blob, { highWaterMark: 1 << 20 })
  let stream: NodeJS.ReadableStream = raw
  if (head[0] === 0x1f && head[1] === 0x8b) stream = raw.pipe(zlib.createGunzip())
  else if (head.readUInt32LE(0) === 0xfd2fb528) {
    const zstd = (zlib as unknown as { createZstdDecompress?: () => NodeJS.ReadWriteStream }).createZstdDecompress
    if (zstd === undefined) throw new ImagePullError("unsupported", "zstd-compressed layers are not supported on this host")
    stream = raw.pipe(zstd())
  }
  const reader = new ByteReader((stream as AsyncIterable<Buffer>)[Symbol.asyncIterator]())
  try {
    return await unpackTar(reader, dest, options)
  } catch (e) {
    if (e instanceof ImagePullError) throw e
    const code = (e as { code?: unknown }).code
    if (code === "Z_DATA_ERROR" || code === "Z_BUF_ERROR") throw unsafe("its compressed data is corrupt")
    if (code === "ENOSPC" || code === "EDQUOT") throw new ImagePullError("cache_full", "the host has no space left to unpack the image", (e as Error).message)
    // The message names host paths: only the operator's log gets it.
    throw new ImagePullError("unsafe_layer", `a layer of the image is unsafe: it could not be unpacked${typeof code === "string" ? ` (${code})` : ""}`, (e as Error).message)
  } finally {
    raw.destroy()
  }
}

const unpackTar = async (reader: ByteReader, root: string, options: UnpackOptions): Promise<Unpacked> => {
  let total = 0
  let files = 0
  let metadataRun = 0
  /** Counts an entry about to be made (and its data's bytes) against the layer's limits, then the caller's budget. */
  const count = (bytes: number) => {
    total += bytes
    files += 1
    if (total > options.maxBytes) throw new ImagePullError("too_large", `the image unpacks to more than ${Math.floor(options.maxBytes / 1048576)} MiB`)
    if (files > options.maxFiles) throw new ImagePullError("too_large", `a layer of the image has more than ${options.maxFiles} files and directories (IMAGE_LAYER_MAX_FILES)`)
    options.charge?.(bytes, 1)
  }
  let longName: string | undefined
  let longLink: string | undefined
  let pax: Record<string, string> = {}
  const globalPax: Record<string, string> = {}

  /**
   * Directories of this layer (relative paths) checked to be real directories, each after all its ancestors: an
   * entry whose parent is known costs no lookup, where checking each component again would cost depth² in the
   * kernel's path walks (minutes for 20,000 entries 127 deep). Forgotten whole when a directory is removed.
   */
  const knownDirs = new Set<string>()
  let dirsReplaced = 0

  /** Whether `parts` (relative to the layer) are each a real directory; `create`: make the missing ones. */
  const directories = (parts: ReadonlyArray<string>, create: boolean, name: string, what: string): string => {
    const rel = parts.join("/")
    if (rel === "" || knownDirs.has(rel)) return path.join(root, rel)
    let dir = root
    let prefix = ""
    for (const part of parts) {
      dir = path.join(dir, part)
      prefix = prefix === "" ? part : `${prefix}/${part}`
      if (knownDirs.has(prefix)) continue
      let stat: fs.Stats | undefined
      try {
        stat = fs.lstatSync(dir)
      } catch {}
      if (stat === undefined && create) {
        count(0)
        fs.mkdirSync(dir, { mode: 0o755 })
      } else if (stat === undefined) throw unsafe(`${what} ${show(name)} names a path that is not in this layer`)
      else if (!stat.isDirectory()) throw unsafe(`${what} ${show(name)} goes through a ${stat.isSymbolicLink() ? "symlink" : "file"}`)
      knownDirs.add(prefix)
    }
    return dir
  }

  /** The parent directory of an entry, every component a real directory of this layer (created as needed). */
  const parentOf = (parts: ReadonlyArray<string>, name: string): string => directories(parts.slice(0, -1), true, name, "entry")

  /** Removes whatever is at `file` (not following symlinks), so the entry replaces it. */
  const clear = (file: string, keepDir: boolean) => {
    let stat: fs.Stats
    try {
      stat = fs.lstatSync(file)
    } catch {
      return
    }
    if (stat.isDirectory() && keepDir) return
    if (stat.isDirectory()) {
      // Real layers hardly ever replace a directory of their own; each time costs the known directories.
      if (++dirsReplaced > MAX_DIRS_REPLACED) throw unsafe(`it replaces more than ${MAX_DIRS_REPLACED} of its own directories`)
      knownDirs.clear()
    }
    fs.rmSync(file, { recursive: true, force: true })
  }

  for (;;) {
    const header = await reader.exact(512)
    if (header === null || header.every((b) => b === 0)) break
    let sum = 0
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i]!
    if (sum !== octal(header.subarray(148, 156), "checksum")) throw unsafe("a tar header's checksum is wrong")
    const type = String.fromCharCode(header[156]!)
    let size = octal(header.subarray(124, 136), "size")
    const ustar = header.subarray(257, 262).toString("latin1") === "ustar"
    const prefix = ustar ? cString(header.subarray(345, 500)) : ""
    let name = longName ?? pax["path"] ?? globalPax["path"] ?? (prefix !== "" ? `${prefix}/${cString(header.subarray(0, 100))}` : cString(header.subarray(0, 100)))
    const linkName = longLink ?? pax["linkpath"] ?? cString(header.subarray(157, 257))
    if (pax["size"] !== undefined) size = Number(pax["size"])
    if (!Number.isSafeInteger(size) || size < 0) throw unsafe("an entry's size is out of range")
    const padded = Math.ceil(size / 512) * 512

    // Metadata entries describe the next one.
    if (type === "L" || type === "K" || type === "x" || type === "g") {
      if (size > 1024 * 1024) throw unsafe("a tar metadata entry is too large")
      if (++metadataRun > MAX_METADATA_RUN) throw unsafe("too many tar metadata entries in a row")
      const data = (await reader.exact(padded)) ?? Buffer.alloc(0)
      const body = data.subarray(0, size)
      if (type === "L") longName = cString(body)
      else if (type === "K") longLink = cString(body)
      else if (type === "x") pax = parsePax(body)
      else Object.assign(globalPax, parsePax(body))
      continue
    }
    longName = undefined
    longLink = undefined
    pax = {}
    metadataRun = 0

    const mode = octal(header.subarray(100, 108), "mode")
    const parts = components(name, options)
    name = parts.join("/")
    if (parts.length === 0) {
      // The root itself ("./"): nothing to create.
      await reader.skip(padded)
      continue
    }
    const base = parts.at(-1)!
    const parent = parentOf(parts, name)
    const target = path.join(parent, base)

    if (base.startsWith(".wh.")) {
      await reader.skip(padded)
      if (base === ".wh..wh..opq") {
        markOpaque(parent)
        continue
      }
      const hidden = base.slice(4)
      if (hidden === "" || hidden === "." || hidden === "..") throw unsafe(`whiteout ${show(name)} is malformed`)
      count(0)
      clear(path.join(parent, hidden), false)
      whiteout(path.join(parent, hidden))
      continue
    }

    switch (type) {
      case "0":
      case "\0":
      case "7": {
        count(size)
        clear(target, false)
        const out = fs.openSync(target, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600)
        try {
          let left = size
          while (left > 0) {
            const chunk = await reader.some(Math.min(left, 1 << 20))
            fs.writeSync(out, chunk)
            left -= chunk.length
          }
          fs.fchmodSync(out, mode & 0o777)
        } finally {
          fs.closeSync(out)
        }
        await reader.skip(padded - size)
        break
      }
      case "5": {
        await reader.skip(padded)
        clear(target, true)
        if (!fs.existsSync(target)) {
          count(0)
          fs.mkdirSync(target, { mode: 0o755 })
        }
        fs.chmodSync(target, mode & 0o1777)
        break
      }
      case "2": {
        await reader.skip(padded)
        if (linkName === "" || linkName.includes("\0")) throw unsafe(`symlink ${show(name)} is malformed`)
        if (Buffer.byteLength(linkName) > options.maxPathBytes) throw unsafe(`symlink ${show(name)} has a target longer than ${options.maxPathBytes} bytes (IMAGE_MAX_PATH_BYTES)`)
        count(0)
        clear(target, false)
        // The link's text is resolved inside the jail only; nothing here ever follows it.
        fs.symlinkSync(linkName, target)
        break
      }
      case "1": {
        await reader.skip(padded)
        const linkParts = components(linkName, options)
        if (linkParts.length === 0) throw unsafe(`hard link ${show(name)} names the root`)
        const source = path.join(directories(linkParts.slice(0, -1), false, name, "hard link"), linkParts.at(-1)!)
        let stat: fs.Stats
        try {
          stat = fs.lstatSync(source)
        } catch {
          throw unsafe(`hard link ${show(name)} names ${show(linkName)}, which is not in this layer`)
        }
        if (!stat.isFile() && !stat.isSymbolicLink()) throw unsafe(`hard link ${show(name)} names a directory or a special file`)
        if (source === target) break
        count(0)
        clear(target, false)
        fs.linkSync(source, target)
        break
      }
      default:
        // Character and block devices, fifos, sockets and unknown types: never created.
        await reader.skip(padded)
    }
  }
  return { bytes: total, files }
}
