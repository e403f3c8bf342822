/**
 * Limits on request bodies that must hold before any parser runs, so that each refusal is our JSON envelope
 * rather than Bun's empty answer or a crash:
 *
 * - size: Bun's own limit is set far above MAX_BODY_BYTES and this guard, in front of every route, refuses a
 *   larger body itself (413 envelope): by its Content-Length before reading it, or, for a chunked body, by counting
 *   while it streams in (never holding more than the limit);
 * - nesting: JSON nested deeper than MAX_JSON_DEPTH is refused (422) by a linear scan before `JSON.parse`, whose
 *   recursion would otherwise overflow the stack (a 500) on input like `[[[[…]]]]` 100,000 levels deep.
 */
import { readAtMost } from "../domain/Bodies.ts"
import { envelopeResponse } from "./Edge.ts"
import { requestIdOf } from "./RequestId.ts"

/** Deepest nesting of arrays and objects accepted in a JSON body; the API's own bodies need fewer than 10. */
export const MAX_JSON_DEPTH = 64

/** Bun's own limit: high enough that every refusal by size is ours. */
export const SERVER_BODY_LIMIT = Number.MAX_SAFE_INTEGER

const STRUCTURE = /["[\]{}]/g
const STRING_END = /["\\]/g

/**
 * True when the JSON text nests arrays or objects deeper than `limit`. Strings are skipped (with their escapes),
 * so brackets inside them do not count; the scan never recurses, and text that is not JSON at all is left to the
 * parser to refuse. Native regex search jumps over long runs of plain characters (a base64 file is one string).
 */
export const jsonNestingExceeds = (text: string, limit: number): boolean => {
  let depth = 0
  let at = 0
  for (;;) {
    STRUCTURE.lastIndex = at
    const found = STRUCTURE.exec(text)
    if (found === null) return false
    const char = text.charCodeAt(found.index)
    if (char === 34 /* " */) {
      let end = found.index + 1
      for (;;) {
        STRING_END.lastIndex = end
        const stop = STRING_END.exec(text)
        if (stop === null) return false // an unterminated string: not JSON
        if (text.charCodeAt(stop.index) === 92 /* \ */) end = stop.index + 2
        else {
          at = stop.index + 1
          break
        }
      }
    } else if (char === 91 /* [ */ || char === 123 /* { */) {
      if (++depth > limit) return true
      at = found.index + 1
    } else {
      depth -= 1
      at = found.index + 1
    }
  }
}

const BODY_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"])

type Route = (request: Request, server: Bun.Server<unknown>) => Response | Promise<Response>

const tooLarge = (request: Request, maxBodyBytes: number) =>
  envelopeResponse(413, "payload_too_large", `The request body is larger than ${maxBodyBytes} bytes`, {
    requestId: requestIdOf(request),
    details: { max_bytes: maxBodyBytes }
  })

/**
 * The guard in front of the server's handler (`next`): requests without a body pass untouched; a body over the
 * limit is refused; a chunked body within it is handed on, read (a Content-Length body is exact already: Bun
 * checks it against the length it declares).
 */
export const guardBodySize = (maxBodyBytes: number, next: Route): Route => async (request, server) => {
  if (!BODY_METHODS.has(request.method) || request.body === null) return next(request, server)
  const declared = request.headers.get("content-length")
  if (declared !== null) return Number(declared) > maxBodyBytes ? tooLarge(request, maxBodyBytes) : next(request, server)
  const body = await readAtMost(request.body, maxBodyBytes)
  if (body === undefined) return tooLarge(request, maxBodyBytes)
  const headers = new Headers(request.headers)
  headers.delete("transfer-encoding")
  headers.set("content-length", String(body.length))
  return next(new Request(request.url, { method: request.method, headers, body }), server)
}
