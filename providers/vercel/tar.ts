/**
 * The gzipped USTAR archives of Vercel's `fs/write` (the adapter packs one file; the emulator unpacks what it is
 * sent). Only what that needs: regular files and directories, names up to 255 bytes through USTAR's prefix field
 * (no pax headers), sizes below 8 GiB.
 */
import * as zlib from "node:zlib"

const BLOCK = 512

const octal = (value: number, width: number) => `${value.toString(8).padStart(width - 1, "0")}\0`

/** Splits a name into USTAR's (prefix, name) at a slash; undefined when it cannot fit. */
const splitName = (name: Uint8Array): { readonly prefix: Uint8Array; readonly name: Uint8Array } | undefined => {
  if (name.length <= 100) return { prefix: new Uint8Array(), name }
  for (let i = Math.min(name.length - 1, 155); i > 0; i--) {
    if (name[i] === 0x2f && name.length - i - 1 <= 100 && name.length - i - 1 > 0) return { prefix: name.subarray(0, i), name: name.subarray(i + 1) }
  }
  return undefined
}

const header = (name: string, size: number, type: "0" | "5", mode: number): Uint8Array => {
  const split = splitName(new TextEncoder().encode(name))
  if (split === undefined) throw new Error(`${name} is too long for a tar header`)
  const block = new Uint8Array(BLOCK)
  const put = (offset: number, text: string) => block.set(new TextEncoder().encode(text), offset)
  block.set(split.name, 0)
  put(100, octal(mode, 8))
  put(108, octal(0, 8))
  put(116, octal(0, 8))
  put(124, octal(size, 12))
  put(136, octal(Math.floor(Date.now() / 1000), 12))
  put(148, "        ")
  put(156, type)
  put(257, "ustar\0")
  put(263, "00")
  block.set(split.prefix, 345)
  const sum = block.reduce((a, b) => a + b, 0)
  put(148, `${sum.toString(8).padStart(6, "0")}\0 `)
  return block
}

/** True when the archive cannot name this path (longer than USTAR allows). */
export const tarNameFits = (name: string) => splitName(new TextEncoder().encode(name)) !== undefined

/** A gzipped tar of one file (`name` relative to the extraction directory). */
export const tarGzOneFile = (name: string, data: Uint8Array, mode = 0o644): Uint8Array => {
  const padding = (BLOCK - (data.length % BLOCK)) % BLOCK
  const tar = new Uint8Array(BLOCK + data.length + padding + 2 * BLOCK)
  tar.set(header(name, data.length, "0", mode), 0)
  tar.set(data, BLOCK)
  return new Uint8Array(zlib.gzipSync(tar))
}

export interface TarEntry {
  readonly name: string
  readonly type: "file" | "directory"
  readonly mode: number
  readonly data: Uint8Array
}

/**
 * The entries of a gzipped tar, at most `maxBytes` once unzipped. Throws on anything else than regular files and
 * directories, on a damaged header, and when it is larger.
 */
export const untarGz = (gz: Uint8Array, maxBytes: number): Array<TarEntry> => {
  const tar = zlib.gunzipSync(gz, { maxOutputLength: maxBytes })
  const entries: Array<TarEntry> = []
  const text = (from: number, length: number) => {
    const bytes = tar.subarray(from, from + length)
    const end = bytes.indexOf(0)
    return new TextDecoder().decode(end < 0 ? bytes : bytes.subarray(0, end))
  }
  for (let offset = 0; offset + BLOCK <= tar.length;) {
    const block = tar.subarray(offset, offset + BLOCK)
    if (block.every((b) => b === 0)) break
    let sum = 0
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i]!
    if (sum !== parseInt(text(offset + 148, 8).trim(), 8)) throw new Error("a tar header's checksum does not match")
    const size = parseInt(text(offset + 124, 12).trim() || "0", 8)
    const mode = parseInt(text(offset + 100, 8).trim() || "644", 8)
    const type = String.fromCharCode(block[156]!)
    const prefix = text(offset + 345, 155)
    const name = prefix === "" ? text(offset, 100) : `${prefix}/${text(offset, 100)}`
    const start = offset + BLOCK
    if (!Number.isSafeInteger(size) || size < 0 || start + size > tar.length) throw new Error("a tar entry runs past the archive's end")
    if (type === "0" || type === "\0") entries.push({ name, type: "file", mode, data: tar.subarray(start, start + size) })
    else if (type === "5") entries.push({ name, type: "directory", mode, data: new Uint8Array() })
    else throw new Error(`tar entries of type ${JSON.stringify(type)} are not taken`)
    offset = start + size + ((BLOCK - (size % BLOCK)) % BLOCK)
  }
  return entries
}
