/**
 * A minimal X11 client for the desktop's screenshots and pointer input (desktop.ts): the core protocol's connection
 * set-up, GetImage and QueryPointer, XFIXES GetCursorImage and XTEST FakeInput, over the display's unix socket in
 * the jail's own /tmp/.X11-unix. The pixels come straight from the X server into memory and are encoded here (PNG
 * with node's zlib): no program is started and no file is written for a screenshot. Node builtins only, like the
 * rest of the agent.
 */
import * as net from "node:net"
import * as zlib from "node:zlib"

export interface Screen {
  readonly root: number
  readonly width: number
  readonly height: number
}

/** Pixels as RGB, three bytes each, row after row. */
export interface Rgb {
  readonly width: number
  readonly height: number
  readonly data: Uint8Array
}

export interface Cursor {
  readonly x: number
  readonly y: number
  readonly width: number
  readonly height: number
  readonly xhot: number
  readonly yhot: number
  /** Premultiplied ARGB, one 32-bit word per pixel. */
  readonly argb: Uint32Array
}

export type PointerEvent = { readonly type: "motion"; readonly x: number; readonly y: number } | { readonly type: "press" | "release"; readonly button: number }

const pad4 = (n: number) => (4 - (n % 4)) % 4

/** Bytes as they arrived, taken from the front: pieces are joined only as far as a taker needs them. */
export class ByteQueue {
  private chunks: Array<Buffer> = []
  private size = 0

  get length() {
    return this.size
  }

  push(chunk: Buffer) {
    this.chunks.push(chunk)
    this.size += chunk.length
  }

  /** The front of the queue in one piece, at least `n` bytes long when that many are there. */
  peek(n: number): Buffer {
    if (this.chunks.length > 1 && this.chunks[0]!.length < n) this.chunks = [Buffer.concat(this.chunks)]
    return this.chunks[0] ?? Buffer.alloc(0)
  }

  /** Takes the first `n` bytes (at most what there is); what came after them stays, in order. */
  take(n: number): Buffer {
    const front = this.peek(n)
    const out = front.subarray(0, n)
    const rest = front.subarray(out.length)
    this.chunks = rest.length === 0 ? this.chunks.slice(1) : [rest, ...this.chunks.slice(1)]
    this.size -= out.length
    return out
  }
}

/** What went wrong with the display: our own words, safe to hand to the caller. */
export class DisplayError extends Error {}

const connectionFailed = (e: NodeJS.ErrnoException) => new DisplayError(`the display's connection failed${e.code === undefined ? "" : ` (${e.code})`}`)

/**
 * One connection, shared by screenshots and pointer input: its calls take turns (each awaits its replies before
 * the next writes), so a reply — or an error, which names no caller — always belongs to the call that reads it.
 */
export class X11 {
  /** What arrived and was not read yet, as it came (joined only once a reply is whole: replies run to megabytes). */
  private readonly received = new ByteQueue()
  private waiting: { readonly need: (b: Buffer) => number; readonly resolve: (b: Buffer) => void; readonly reject: (e: Error) => void } | undefined
  private failure: Error | undefined
  private sequence = 0
  /** The call whose turn it is (settled when it is done). */
  private turn: Promise<unknown> = Promise.resolve()
  private xfixes: number | undefined | null
  private xtest: number | undefined | null
  screen: Screen = { root: 0, width: 0, height: 0 }
  private littleEndianImage = true
  private bitsPerPixel32 = false

  private constructor(private readonly socket: net.Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.received.push(chunk)
      this.pump()
    })
    const fail = (e: Error) => {
      this.failure ??= e
      const w = this.waiting
      this.waiting = undefined
      w?.reject(e)
    }
    socket.on("error", (e) => fail(connectionFailed(e)))
    socket.on("close", () => fail(new DisplayError("the display closed the connection")))
  }

  static async connect(socketPath: string, timeoutMs: number): Promise<X11> {
    const socket = net.createConnection(socketPath)
    const x = new X11(socket)
    const timer = setTimeout(() => socket.destroy(new DisplayError("the display did not answer")), timeoutMs)
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once("connect", resolve)
        socket.once("error", (e) => reject(connectionFailed(e)))
      })
      // Set-up: little-endian, protocol 11.0, no authorization (the server is the sandbox's own, on its own socket).
      const setup = Buffer.alloc(12)
      setup.write("l", 0, "latin1")
      setup.writeUInt16LE(11, 2)
      socket.write(setup)
      const head = await x.read((b) => (b.length < 8 ? -1 : 8 + b.readUInt16LE(6) * 4))
      if (head[0] !== 1) throw new DisplayError("the display refused the connection")
      x.parseSetup(head)
      return x
    } catch (e) {
      socket.destroy()
      throw e
    } finally {
      clearTimeout(timer)
    }
  }

  close() {
    this.socket.destroy()
  }

  /** The pointer's position on the screen. */
  pointer() {
    return this.serial(() => this.queryPointer())
  }

  /** A rectangle of the root window as RGB. */
  image(x: number, y: number, width: number, height: number) {
    return this.serial(() => this.readImage(x, y, width, height))
  }

  /** The cursor's image and position (XFIXES), or undefined when the server lacks the extension. */
  cursor() {
    return this.serial(() => this.readCursor())
  }

  /**
   * Pointer input through XTEST (what xdotool itself sends), without a program: `motion` to (x, y), `press` and
   * `release` of a button. The events go in one write; the pointer query that follows is answered only once the
   * server has processed them, and says where the pointer is.
   */
  pointerInput(events: ReadonlyArray<PointerEvent>) {
    return this.serial(() => this.sendPointerInput(events))
  }

  /** Runs `call` once the calls before it are done. */
  private serial<A>(call: () => Promise<A>): Promise<A> {
    const result = this.turn.then(call, call)
    this.turn = result.catch(() => undefined)
    return result
  }

  get broken() {
    return this.failure !== undefined || this.socket.destroyed
  }

  private parseSetup(b: Buffer) {
    const vendorLength = b.readUInt16LE(24)
    const screens = b[28]!
    const formats = b[29]!
    this.littleEndianImage = b[30] === 0
    let offset = 40 + vendorLength + pad4(vendorLength)
    const depthsBpp = new Map<number, number>()
    for (let i = 0; i < formats; i++, offset += 8) depthsBpp.set(b[offset]!, b[offset + 1]!)
    if (screens < 1) throw new DisplayError("the display has no screen")
    const rootDepth = b[offset + 38]!
    this.bitsPerPixel32 = depthsBpp.get(rootDepth) === 32
    this.screen = { root: b.readUInt32LE(offset), width: b.readUInt16LE(offset + 20), height: b.readUInt16LE(offset + 22) }
    if (rootDepth !== 24 || !this.bitsPerPixel32 || !this.littleEndianImage) throw new DisplayError(`the display's pixel format (depth ${rootDepth}) is not supported`)
  }

  /** Resolves with the first `need(buffer)` bytes once they are there (need < 0: not known yet). */
  private read(need: (b: Buffer) => number): Promise<Buffer> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    return new Promise((resolve, reject) => {
      this.waiting = { need, resolve, reject }
      this.pump()
    })
  }

  private pump() {
    const w = this.waiting
    if (w === undefined) return
    // The length is in a packet's first 32 bytes; the rest is joined once all of it is there.
    const n = w.need(this.received.peek(32))
    if (n < 0 || this.received.length < n) return
    this.waiting = undefined
    w.resolve(this.received.take(n))
  }

  /** Sends one request and reads its reply (events in between are skipped; an error fails the call). */
  private async request(body: Buffer): Promise<Buffer> {
    this.sequence = (this.sequence + 1) & 0xffff
    const sequence = this.sequence
    this.socket.write(body)
    for (;;) {
      const packet = await this.read((b) => {
        if (b.length < 32) return -1
        // A reply (1) or a generic event (35) carries a length; errors and other events are 32 bytes.
        return b[0] === 1 || (b[0]! & 0x7f) === 35 ? 32 + b.readUInt32LE(4) * 4 : 32
      })
      if (packet[0] === 0) throw new DisplayError(`the display refused a request (error ${packet[1]})`)
      if (packet[0] === 1 && packet.readUInt16LE(2) === sequence) return packet
    }
  }

  private async queryPointer(): Promise<{ readonly x: number; readonly y: number }> {
    const r = Buffer.alloc(8)
    r[0] = 38
    r.writeUInt16LE(2, 2)
    r.writeUInt32LE(this.screen.root, 4)
    const reply = await this.request(r)
    return { x: reply.readInt16LE(16), y: reply.readInt16LE(18) }
  }

  private async readImage(x: number, y: number, width: number, height: number): Promise<Rgb> {
    const r = Buffer.alloc(20)
    r[0] = 73
    r[1] = 2 // ZPixmap
    r.writeUInt16LE(5, 2)
    r.writeUInt32LE(this.screen.root, 4)
    r.writeInt16LE(x, 8)
    r.writeInt16LE(y, 10)
    r.writeUInt16LE(width, 12)
    r.writeUInt16LE(height, 14)
    r.writeUInt32LE(0xffffffff, 16)
    const reply = await this.request(r)
    const pixels = reply.subarray(32)
    if (pixels.length < width * height * 4) throw new DisplayError("the display sent a short image")
    // BGRX (depth 24 in 32-bit pixels, least significant byte first) to RGB.
    const data = new Uint8Array(width * height * 3)
    for (let i = 0, o = 0, n = width * height * 4; i < n; i += 4, o += 3) {
      data[o] = pixels[i + 2]!
      data[o + 1] = pixels[i + 1]!
      data[o + 2] = pixels[i]!
    }
    return { width, height, data }
  }

  private async readCursor(): Promise<Cursor | undefined> {
    if (this.xfixes === undefined) this.xfixes = await this.queryXfixes()
    if (this.xfixes === null) return undefined
    const r = Buffer.alloc(4)
    r[0] = this.xfixes
    r[1] = 4 // GetCursorImage
    r.writeUInt16LE(1, 2)
    const reply = await this.request(r)
    const width = reply.readUInt16LE(12)
    const height = reply.readUInt16LE(14)
    const argb = new Uint32Array(width * height)
    for (let i = 0; i < argb.length; i++) argb[i] = reply.readUInt32LE(32 + i * 4)
    return { x: reply.readInt16LE(8), y: reply.readInt16LE(10), width, height, xhot: reply.readUInt16LE(16), yhot: reply.readUInt16LE(18), argb }
  }

  private async sendPointerInput(events: ReadonlyArray<PointerEvent>) {
    if (this.xtest === undefined) this.xtest = await this.queryExtension("XTEST")
    if (this.xtest === null) throw new DisplayError("the display has no XTEST extension")
    const body = Buffer.alloc(36 * events.length)
    events.forEach((e, i) => {
      const r = body.subarray(i * 36, (i + 1) * 36)
      r[0] = this.xtest!
      r[1] = 2 // FakeInput
      r.writeUInt16LE(9, 2)
      // The rest is a core event: type, detail, (sequence), time 0 (now), root, …, root x and y.
      r[4] = e.type === "motion" ? 6 : e.type === "press" ? 4 : 5
      r[5] = e.type === "motion" ? 0 : e.button
      r.writeUInt32LE(e.type === "motion" ? this.screen.root : 0, 12)
      if (e.type === "motion") {
        r.writeInt16LE(e.x, 24)
        r.writeInt16LE(e.y, 26)
      }
    })
    // FakeInput has no reply: only the sequence numbers move on.
    this.sequence = (this.sequence + events.length) & 0xffff
    this.socket.write(body)
    return this.queryPointer()
  }

  private async queryExtension(extension: string): Promise<number | null> {
    const name = Buffer.from(extension, "latin1")
    const q = Buffer.alloc(8 + name.length + pad4(name.length))
    q[0] = 98
    q.writeUInt16LE(q.length / 4, 2)
    q.writeUInt16LE(name.length, 4)
    name.copy(q, 8)
    const reply = await this.request(q)
    return reply[8] === 1 ? reply[9]! : null
  }

  private async queryXfixes(): Promise<number | null> {
    const name = Buffer.from("XFIXES", "latin1")
    const q = Buffer.alloc(8 + name.length + pad4(name.length))
    q[0] = 98
    q.writeUInt16LE(q.length / 4, 2)
    q.writeUInt16LE(name.length, 4)
    name.copy(q, 8)
    const reply = await this.request(q)
    if (reply[8] !== 1) return null
    const opcode = reply[9]!
    // The client's version must be announced before any other XFIXES request.
    const v = Buffer.alloc(12)
    v[0] = opcode
    v[1] = 0
    v.writeUInt16LE(3, 2)
    v.writeUInt32LE(4, 4)
    v.writeUInt32LE(0, 8)
    await this.request(v)
    return opcode
  }
}

/** Draws the cursor (premultiplied ARGB) onto an RGB image whose top-left is (originX, originY) on the screen. */
export const drawCursor = (image: Rgb, cursor: Cursor, originX: number, originY: number) => {
  const left = cursor.x - cursor.xhot - originX
  const top = cursor.y - cursor.yhot - originY
  for (let cy = 0; cy < cursor.height; cy++) {
    const y = top + cy
    if (y < 0 || y >= image.height) continue
    for (let cx = 0; cx < cursor.width; cx++) {
      const x = left + cx
      if (x < 0 || x >= image.width) continue
      const p = cursor.argb[cy * cursor.width + cx]!
      const a = p >>> 24
      if (a === 0) continue
      const o = (y * image.width + x) * 3
      const keep = 255 - a
      image.data[o] = Math.min(255, ((p >>> 16) & 0xff) + Math.round((image.data[o]! * keep) / 255))
      image.data[o + 1] = Math.min(255, ((p >>> 8) & 0xff) + Math.round((image.data[o + 1]! * keep) / 255))
      image.data[o + 2] = Math.min(255, (p & 0xff) + Math.round((image.data[o + 2]! * keep) / 255))
    }
  }
}

/** The image scaled by `scale` (0.1–1): each output pixel the average of the source pixels it covers. */
export const scaleImage = (image: Rgb, scale: number): Rgb => {
  if (scale >= 1) return image
  const width = Math.max(1, Math.round(image.width * scale))
  const height = Math.max(1, Math.round(image.height * scale))
  const data = new Uint8Array(width * height * 3)
  for (let y = 0; y < height; y++) {
    const y0 = Math.floor((y * image.height) / height)
    const y1 = Math.max(y0 + 1, Math.floor(((y + 1) * image.height) / height))
    for (let x = 0; x < width; x++) {
      const x0 = Math.floor((x * image.width) / width)
      const x1 = Math.max(x0 + 1, Math.floor(((x + 1) * image.width) / width))
      let r = 0, g = 0, b = 0
      for (let sy = y0; sy < y1; sy++) {
        for (let sx = x0; sx < x1; sx++) {
          const i = (sy * image.width + sx) * 3
          r += image.data[i]!
          g += image.data[i + 1]!
          b += image.data[i + 2]!
        }
      }
      const n = (y1 - y0) * (x1 - x0)
      const o = (y * width + x) * 3
      data[o] = Math.round(r / n)
      data[o + 1] = Math.round(g / n)
      data[o + 2] = Math.round(b / n)
    }
  }
  return { width, height, data }
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    table[n] = c >>> 0
  }
  return table
})()

const crc32 = (parts: ReadonlyArray<Uint8Array>) => {
  let c = 0xffffffff
  for (const part of parts) for (let i = 0; i < part.length; i++) c = CRC_TABLE[(c ^ part[i]!) & 0xff]! ^ (c >>> 8)
  return (c ^ 0xffffffff) >>> 0
}

const chunk = (type: string, data: Uint8Array) => {
  const head = Buffer.alloc(8)
  head.writeUInt32BE(data.length, 0)
  head.write(type, 4, "latin1")
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32([head.subarray(4), data]), 0)
  return [head, data, crc]
}

/** An 8-bit RGB PNG (each row with the Sub filter: desktops are mostly flat, which it turns into runs of zeros). */
export const encodePng = (image: Rgb): Buffer => {
  const stride = image.width * 3
  const raw = Buffer.allocUnsafe((stride + 1) * image.height)
  const src = image.data
  for (let y = 0; y < image.height; y++) {
    const row = y * (stride + 1)
    const from = y * stride
    raw[row] = 1
    raw[row + 1] = src[from]!
    raw[row + 2] = src[from + 1]!
    raw[row + 3] = src[from + 2]!
    for (let i = 3; i < stride; i++) raw[row + 1 + i] = (src[from + i]! - src[from + i - 3]!) & 0xff
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(image.width, 0)
  ihdr.writeUInt32BE(image.height, 4)
  ihdr[8] = 8
  ihdr[9] = 2
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    ...chunk("IHDR", ihdr),
    // Level 1: screenshots are mostly runs that any level finds; the higher ones only cost time.
    ...chunk("IDAT", zlib.deflateSync(raw, { level: 1 })),
    ...chunk("IEND", new Uint8Array())
  ])
}
