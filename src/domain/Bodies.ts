/**
 * Bodies: reading one with a limit, counted as it comes (a chunked body states no length up front); bytes as one;
 * the collection of what passed through JavaScript on its way on.
 */
import { edenGC } from "bun:jsc"

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

/** Bytes passed on through JavaScript between two young-generation collections (see `passedOn`). */
const COLLECT_EVERY_BYTES = 16 * 1024 * 1024
let passedSinceCollection = 0

/**
 * Counts `bytes` of a body that a JavaScript stage passed on (a stage that counts or bounds a stream as it goes),
 * and after every COLLECT_EVERY_BYTES of them runs a young-generation collection. The collector goes by its own
 * heap, and a chunk's bytes live outside it: relayed at hundreds of MiB a second, chunks long passed on piled up
 * by ~100 MiB before a collection took them (a 1 GiB chunked download through the in-process emulator: +118 MiB of
 * the gateway's RSS, +24 MiB with this; docs/benchmarks.md). A young collection looks at the young objects alone —
 * the chunks, not the whole heap: ~0.3 ms, so ~8 ms a second at 400 MiB/s.
 */
export const passedOn = (bytes: number) => {
  passedSinceCollection += bytes
  if (passedSinceCollection < COLLECT_EVERY_BYTES) return
  passedSinceCollection = 0
  edenGC()
}
