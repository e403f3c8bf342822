/**
 * What the Freestyle emulator answers with: JSON bodies, errors as Freestyle's `{code: "SCREAMING_CODE", message}`
 * with their status, and request bodies read through Schemas (malformed JSON and wrong types are
 * the provider's 400 `INVALID_PARAMETERS`; unknown fields are ignored).
 */
import { decodeJsonBody } from "../../core/emulator/server.ts"
import { Schema } from "effect"

export const json = (body: unknown, status = 200) => Response.json(body, { status })

/** Thrown by a handler: answered with its status as `{code, message}`. */
export class HttpFailure extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message)
  }
}

export const errorResponse = (status: number, code: string, message: string) => json({ code, message }, status)

/** A JSON body decoded by `schema` (unknown fields accepted and ignored, as the provider does). An empty body reads as `{}`. */
export const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const body = await decodeJsonBody(request, schema, { emptyIsObject: true })
  if (!body.ok) throw new HttpFailure(400, "INVALID_PARAMETERS", body.message)
  return body.value
}

export const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })
