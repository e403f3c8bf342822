/** Bodies: reading one with a limit, counted as it comes (a chunked body states no length up front); bytes as one. */

/** Bytes as a response body without a copy (a view on the same memory: `BodyInit` wants an ArrayBuffer's view). */
export const asBody = (data: Uint8Array): Uint8Array<ArrayBuffer> => new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.length)

/**
 * The whole body, or undefined as soon as it passes `max` bytes (the rest is not read: the stream is cancelled).
 * `signal` (its reader's interruption) cancels the stream too, and the read fails.
 */
export const readAtMost = async (body: ReadableStream<Uint8Array>, max: number, signal?: AbortSignal): Promise<Uint8Array<ArrayBuffer> | undefined> => {
  const reader = body.getReader()
  const cancel = () => void reader.cancel(signal?.reason).catch(() => {})
  if (signal?.aborted === true) cancel()
  signal?.addEventListener("abort", cancel, { once: true })
  try {
    const whole = await readAll(reader, max)
    // A cancelled stream reads as ended: what arrived is not the whole body.
    signal?.throwIfAborted()
    return whole
  } finally {
    signal?.removeEventListener("abort", cancel)
  }
}

const readAll = async (reader: ReadableStreamDefaultReader<Uint8Array>, max: number): Promise<Uint8Array<ArrayBuffer> | undefined> => {
  const chunks: Array<Uint8Array> = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) {
      const whole = new Uint8Array(total)
      let at = 0
      for (const chunk of chunks) {
        whole.set(chunk, at)
        at += chunk.length
      }
      return whole
    }
    total += value.length
    if (total > max) {
      reader.cancel().catch(() => {})
      return undefined
    }
    chunks.push(value)
  }
}
