/**
 * Reading a tar stream (Unpack.ts): exact byte counts from the decompressed chunks, and the header fields — octal
 * (or GNU base-256) numbers, NUL-terminated names, PAX records. Anything malformed refuses the layer as unsafe.
 */
import { ImagePullError } from "./Errors.ts"

export const unsafe = (message: string) => new ImagePullError("unsafe_layer", `a layer of the image is unsafe: ${message}`)

/** Reads exact byte counts from an async chunk stream. */
export class ByteReader {
  private chunks: Array<Buffer> = []
  private buffered = 0
  private done = false
  constructor(private readonly source: AsyncIterator<Buffer>) {}
  private async fill(n: number) {
    while (this.buffered < n && !this.done) {
      const next = await this.source.next()
      if (next.done === true) this.done = true
      else if (next.value.length > 0) {
        this.chunks.push(next.value)
        this.buffered += next.value.length
      }
    }
  }
  /** Exactly n bytes, or null at a clean end (nothing left); a short read is an error. */
  async exact(n: number): Promise<Buffer | null> {
    await this.fill(n)
    if (this.buffered === 0 && this.done) return null
    if (this.buffered < n) throw unsafe("the tar ends in the middle of an entry")
    return this.take(n)
  }
  /** Up to n bytes (at least one), for streaming file data. */
  async some(n: number): Promise<Buffer> {
    await this.fill(1)
    if (this.buffered === 0) throw unsafe("the tar ends in the middle of an entry")
    return this.take(Math.min(n, this.chunks[0]!.length))
  }
  private take(n: number): Buffer {
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks)
    const out = all.subarray(0, n)
    const rest = all.subarray(n)
    this.chunks = rest.length > 0 ? [rest] : []
    this.buffered = rest.length
    return out
  }
  async skip(n: number) {
    let left = n
    while (left > 0) left -= (await this.some(Math.min(left, 1 << 20))).length
  }
}

export const octal = (field: Buffer, what: string): number => {
  // GNU base-256 for large values.
  if ((field[0]! & 0x80) !== 0) {
    let value = 0
    for (let i = 1; i < field.length; i++) value = value * 256 + field[i]!
    if (!Number.isSafeInteger(value)) throw unsafe(`an entry's ${what} is out of range`)
    return value
  }
  const text = field.toString("latin1").replace(/\0.*$/s, "").trim()
  if (text === "") return 0
  if (!/^[0-7]+$/.test(text)) throw unsafe(`an entry's ${what} is malformed`)
  return parseInt(text, 8)
}

export const cString = (field: Buffer) => {
  const nul = field.indexOf(0)
  return field.subarray(0, nul < 0 ? field.length : nul).toString("utf8")
}

export const parsePax = (data: Buffer): Record<string, string> => {
  const out: Record<string, string> = {}
  let i = 0
  while (i < data.length) {
    const space = data.indexOf(0x20, i)
    if (space < 0) break
    const length = Number(data.subarray(i, space).toString("latin1"))
    if (!Number.isSafeInteger(length) || length <= 0 || i + length > data.length) throw unsafe("a PAX header is malformed")
    const record = data.subarray(space + 1, i + length - 1).toString("utf8")
    const eq = record.indexOf("=")
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1)
    i += length
  }
  return out
}
