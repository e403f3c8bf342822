/** A small PNG reader for tests: 8-bit RGB or RGBA, non-interlaced (what desktops' screenshots are), as RGB pixels. */
import * as zlib from "node:zlib"

export interface Pixels {
  readonly width: number
  readonly height: number
  /** RGB, three bytes a pixel, row after row. */
  readonly rgb: Uint8Array
}

export const decodePng = (png: Uint8Array): Pixels => {
  const buf = Buffer.from(png)
  if (buf.readUInt32BE(0) !== 0x89504e47) throw new Error("not a PNG")
  let offset = 8
  let width = 0, height = 0, colorType = 0
  const idat: Array<Buffer> = []
  while (offset < buf.length) {
    const length = buf.readUInt32BE(offset)
    const type = buf.toString("latin1", offset + 4, offset + 8)
    const data = buf.subarray(offset + 8, offset + 8 + length)
    if (type === "IHDR") {
      width = data.readUInt32BE(0)
      height = data.readUInt32BE(4)
      if (data[8] !== 8 || data[12] !== 0) throw new Error("only 8-bit, non-interlaced PNGs")
      colorType = data[9]!
    } else if (type === "IDAT") idat.push(data)
    offset += 12 + length
  }
  const channels = colorType === 2 ? 3 : colorType === 6 ? 4 : 0
  if (channels === 0) throw new Error(`color type ${colorType} is not read here`)
  const raw = zlib.inflateSync(Buffer.concat(idat))
  const stride = width * channels
  const out = new Uint8Array(stride * height)
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!
    const row = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1))
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? out[y * stride + i - channels]! : 0
      const b = y > 0 ? out[(y - 1) * stride + i]! : 0
      const c = i >= channels && y > 0 ? out[(y - 1) * stride + i - channels]! : 0
      const p = a + b - c
      const pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c)
      const predictor = filter === 0 ? 0 : filter === 1 ? a : filter === 2 ? b : filter === 3 ? (a + b) >> 1 : pa <= pb && pa <= pc ? a : pb <= pc ? b : c
      out[y * stride + i] = (row[i]! + predictor) & 0xff
    }
  }
  if (channels === 3) return { width, height, rgb: out }
  const rgb = new Uint8Array(width * height * 3)
  for (let i = 0, o = 0; i < out.length; i += 4, o += 3) rgb.set(out.subarray(i, i + 3), o)
  return { width, height, rgb }
}

/** How many pixels differ between two images of the same size inside the rectangle. */
export const changedPixels = (a: Pixels, b: Pixels, rect: { x: number; y: number; width: number; height: number }) => {
  let changed = 0
  for (let y = rect.y; y < rect.y + rect.height; y++) {
    for (let x = rect.x; x < rect.x + rect.width; x++) {
      const i = (y * a.width + x) * 3
      if (a.rgb[i] !== b.rgb[i] || a.rgb[i + 1] !== b.rgb[i + 1] || a.rgb[i + 2] !== b.rgb[i + 2]) changed++
    }
  }
  return changed
}
