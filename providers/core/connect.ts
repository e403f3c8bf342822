/**
 * The framing of the Connect protocol's streams (connectrpc.com/docs/protocol), whatever the codec: a series of
 * envelopes of 1 flag byte, a 4-byte big-endian length, then that many bytes of message. The last envelope has
 * flag 0x02 (end of stream) and carries a JSON trailer. E2B's envd speaks it with JSON messages
 * (providers/e2b/connect.ts), Prime's sandbox gateway with protobuf (providers/prime/command-session.ts).
 */
export const COMPRESSED = 0x01
export const END_STREAM = 0x02

/** One envelope around `message`. */
export const frame = (message: Uint8Array, flags = 0): Uint8Array<ArrayBuffer> => {
  const out = new Uint8Array(5 + message.length)
  out[0] = flags
  new DataView(out.buffer).setUint32(1, message.length, false)
  out.set(message, 5)
  return out
}

export interface Frame {
  readonly flags: number
  readonly data: Uint8Array
}

export class EnvelopeError extends Error {}

/**
 * Incremental decoder: push bytes as they arrive, take whole envelopes. Throws `EnvelopeError` on a compressed
 * message (never negotiated) or one longer than `maxMessageBytes` (never buffered).
 */
export class FrameDecoder {
  private buffer: Uint8Array = new Uint8Array(0)

  constructor(private readonly maxMessageBytes: number) {}

  push(chunk: Uint8Array): Array<Frame> {
    if (this.buffer.length === 0) {
      this.buffer = chunk
    } else {
      const merged = new Uint8Array(this.buffer.length + chunk.length)
      merged.set(this.buffer)
      merged.set(chunk, this.buffer.length)
      this.buffer = merged
    }
    const out: Array<Frame> = []
    let offset = 0
    while (this.buffer.length - offset >= 5) {
      const flags = this.buffer[offset]!
      const length = new DataView(this.buffer.buffer, this.buffer.byteOffset + offset).getUint32(1, false)
      if ((flags & COMPRESSED) !== 0) throw new EnvelopeError("compressed Connect messages were not negotiated")
      if (length > this.maxMessageBytes) throw new EnvelopeError(`a Connect message of ${length} bytes is too large`)
      if (this.buffer.length - offset < 5 + length) break
      out.push({ flags, data: this.buffer.slice(offset + 5, offset + 5 + length) })
      offset += 5 + length
    }
    this.buffer = offset === this.buffer.length ? new Uint8Array(0) : this.buffer.slice(offset)
    return out
  }

  /** Bytes of an incomplete envelope still waiting for the rest. */
  get pending(): number {
    return this.buffer.length
  }
}
