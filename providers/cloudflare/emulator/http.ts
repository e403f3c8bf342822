/**
 * What the bridge emulator answers with: errors as `{error, code}` (the bridge's shape), and request bodies read
 * through Schemas (malformed JSON, unknown fields and wrong types are a 400 `BAD_REQUEST`).
 */
import { Either, ParseResult, Schema } from "effect"

export const json = (body: unknown, status = 200, headers: Record<string, string> = {}) => Response.json(body, { status, headers })

/** Thrown by a handler: answered with its status and code. */
export class HttpFailure extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message)
  }
}

export const bridgeError = (status: number, code: string, message: string) => json({ error: message, code }, status)

/** A JSON body decoded by `schema`, strictly (unknown fields refused). */
export const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  let body: unknown
  try {
    body = await request.json()
  } catch {
    throw new HttpFailure(400, "BAD_REQUEST", "the request body is not valid JSON")
  }
  const decoded = Schema.decodeUnknownEither(schema, { onExcessProperty: "error", errors: "first" })(body)
  if (Either.isLeft(decoded)) {
    throw new HttpFailure(400, "BAD_REQUEST", `invalid request body: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left).replace(/\s+/g, " ").slice(0, 300)}`)
  }
  return decoded.right
}
