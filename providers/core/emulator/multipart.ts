/**
 * `multipart/form-data` uploads as streams: an emulator writes a file part to the runtime as it comes instead of
 * holding the whole form (which `Request.formData()` would). A part's bytes end where the next boundary begins; a
 * body that ends before that boundary errors the stream, so a broken upload is never taken for a whole file.
 */

/** The boundary of a multipart content type, or undefined. */
export const boundaryOf = (contentType: string): string | undefined => {
  const m = /^multipart\/form-data\s*;.*?boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType)
  return m?.[1] ?? m?.[2]
}

const indexOf = (haystack: Uint8Array, needle: Uint8Array, from = 0) => Buffer.from(haystack.buffer, haystack.byteOffset, haystack.length).indexOf(needle, from)
const concat = (a: Uint8Array, b: Uint8Array) => {
  const out = new Uint8Array(a.length + b.length)
  out.set(a)
  out.set(b, a.length)
  return out
}

/** Longest part head (its header lines) read before giving up. */
const MAX_HEAD_BYTES = 16 * 1024

/**
 * The bytes of the part named `field` in `body` (multipart with `boundary`): the parts before it are skipped, and
 * the body is not read past its end. The stream errors when the body is not multipart as declared, has no such part
 * or ends early.
 */
export const multipartFile = (body: ReadableStream<Uint8Array>, boundary: string, field: string): ReadableStream<Uint8Array> => {
  const parts = multipartParts(body, boundary)
  let file: ReadableStreamDefaultReader<Uint8Array> | undefined
  const done = () => void parts.return(undefined).catch(() => {})
  return new ReadableStream<Uint8Array>({
    pull: async (controller) => {
      try {
        while (file === undefined) {
          const next = await parts.next()
          if (next.done) throw new Error(`the multipart body has no "${field}" part`)
          // A part not read is skipped when the next is asked for.
          if (next.value.name === field) file = next.value.body.getReader()
        }
        const read = await file.read()
        if (read.done) {
          done()
          return controller.close()
        }
        controller.enqueue(read.value)
      } catch (e) {
        done()
        controller.error(e)
      }
    },
    cancel: async (reason) => {
      await file?.cancel(reason).catch(() => {})
      done()
    }
  })
}

/** One part of a multipart body: its name and file name (from its Content-Disposition) and its bytes. */
export interface MultipartPart {
  readonly name: string | undefined
  readonly fileName: string | undefined
  readonly body: ReadableStream<Uint8Array>
}

/**
 * Every part of a multipart body, in order, each as a stream (for a bulk upload of several files, none held whole).
 * A part's body is read to its end, or left: what of it was not read is skipped when the next part is asked for.
 * Throws (or errors the part's stream) when the body is not multipart as declared or ends before its closing
 * boundary.
 */
export async function* multipartParts(body: ReadableStream<Uint8Array>, boundary: string): AsyncGenerator<MultipartPart> {
  const delimiter = new TextEncoder().encode(`\r\n--${boundary}`)
  const headEndMark = new TextEncoder().encode("\r\n\r\n")
  const reader = body.getReader()
  let pending: Uint8Array = new TextEncoder().encode("\r\n")
  const more = async () => {
    const { done, value } = await reader.read()
    if (done) throw new Error("the multipart body ended before its closing boundary")
    pending = concat(pending, value)
  }
  try {
    // The preamble, up to the first boundary.
    let at = indexOf(pending, delimiter)
    while (at < 0) {
      pending = pending.subarray(Math.max(0, pending.length - delimiter.length))
      await more()
      at = indexOf(pending, delimiter)
    }
    pending = pending.subarray(at + delimiter.length)
    for (;;) {
      while (pending.length < 2) await more()
      if (pending[0] === 45 && pending[1] === 45) return // "--": the closing boundary
      let headEnd = indexOf(pending, headEndMark)
      while (headEnd < 0) {
        if (pending.length > MAX_HEAD_BYTES) throw new Error("a multipart part head is too long")
        await more()
        headEnd = indexOf(pending, headEndMark)
      }
      const head = Buffer.from(pending.subarray(0, headEnd)).toString("latin1")
      pending = pending.subarray(headEnd + 4)
      const disposition = /content-disposition:[^\r\n]*/i.exec(head)?.[0] ?? ""
      let ended = false
      const part = new ReadableStream<Uint8Array>({
        pull: async (controller) => {
          try {
            for (;;) {
              const end = indexOf(pending, delimiter)
              if (end >= 0) {
                if (end > 0) controller.enqueue(pending.slice(0, end))
                pending = pending.subarray(end + delimiter.length)
                ended = true
                return controller.close()
              }
              // Everything but what could be the start of the delimiter can go on.
              const safe = pending.length - (delimiter.length - 1)
              if (safe > 0) {
                controller.enqueue(pending.slice(0, safe))
                pending = pending.subarray(safe)
                return
              }
              await more()
            }
          } catch (e) {
            controller.error(e)
          }
        }
        // Read only when asked (no read-ahead): a pull of its own would race the skip below for `pending`.
      }, { highWaterMark: 0 })
      yield {
        name: /;\s*name="([^"]*)"/i.exec(disposition)?.[1],
        fileName: /;\s*filename="([^"]*)"/i.exec(disposition)?.[1],
        body: part
      }
      // What the caller left of the part is skipped (a stream it cancelled ends here too).
      if (!ended) {
        let end = indexOf(pending, delimiter)
        while (end < 0) {
          pending = pending.subarray(Math.max(0, pending.length - delimiter.length))
          await more()
          end = indexOf(pending, delimiter)
        }
        pending = pending.subarray(end + delimiter.length)
      }
    }
  } finally {
    void reader.cancel().catch(() => {})
  }
}
