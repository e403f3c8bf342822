/**
 * What the Freestyle emulator answers with: JSON bodies, errors as Freestyle's `{error: "SCREAMING_CODE", message}`
 * with their status, and request bodies read through Schemas (malformed JSON, unknown fields and wrong types are
 * the provider's 400 `INVALID_PARAMETERS`).
 */
import { Either, ParseResult, Schema } from "effect"

export const json = (body: unknown, status = 200) => Response.json(body, { status })

/** Thrown by a handler: answered with its status as `{error, message}`. */
export class HttpFailure extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message)
  }
}

export const errorResponse = (status: number, code: string, message: string) => json({ error: code, message }, status)

/** A JSON body decoded by `schema`, strictly (unknown fields refused). An empty body reads as `{}`. */
export const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  let body: unknown
  try {
    const text = await request.text()
    body = text.trim() === "" ? {} : JSON.parse(text)
  } catch {
    throw new HttpFailure(400, "INVALID_PARAMETERS", "the request body is not valid JSON")
  }
  const decoded = Schema.decodeUnknownEither(schema, { onExcessProperty: "error", errors: "first" })(body)
  if (Either.isLeft(decoded)) {
    throw new HttpFailure(400, "INVALID_PARAMETERS", `invalid request body: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left).replace(/\s+/g, " ").slice(0, 300)}`)
  }
  return decoded.right
}

export const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })
