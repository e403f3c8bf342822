/** Bodies: reading one with a limit, counted as it comes (a chunked body states no length up front); bytes as one. */

/** Bytes as a response body without a copy (a view on the same memory: `BodyInit` wants an ArrayBuffer's view). */
export const asBody = (data: Uint8Array): Uint8Array<ArrayBuffer> => new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.length)

/** The whole body, or undefined as soon as it passes `max` bytes (the rest is not read: the stream is cancelled). */
export const readAtMost = async (body: ReadableStream<Uint8Array>, max: number): Promise<Uint8Array<ArrayBuffer> | undefined> => {
  const reader = body.getReader()
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
