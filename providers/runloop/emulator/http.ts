/**
 * What the Runloop emulator answers with: JSON bodies, errors as `{message}` with their status, and request
 * bodies read through Schemas (malformed JSON and wrong types are the provider's 400; unknown fields are ignored).
 */
import { decodeJsonBody } from "../../core/emulator/server.ts"
import { failureAnswer, HttpFailure } from "../../core/emulator/failure.ts"
import { Schema } from "effect"

export const json = (body: unknown, status = 200) => Response.json(body, { status })

/** Handlers throw the kit's failure; `answerFailure` writes it, or a runtime failure, in this provider's error body. */
export { HttpFailure }

/** Errors are `{message}` with their status. */
export const errorResponse = (status: number, message: string) => json({ message }, status)
export const answerFailure = failureAnswer("runloop", (f) => errorResponse(f.status, f.message))

/** A long-poll whose window passed: 408, which Runloop marks as one to ask again (its clients then retry). */
export const longPollTimeout = (message: string) => Response.json({ message }, { status: 408, headers: { "x-should-retry": "true" } })

/** A JSON body decoded by `schema` (unknown fields accepted and ignored, as the provider does). An empty body reads as `{}`. */
export const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const body = await decodeJsonBody(request, schema, { emptyIsObject: true })
  if (!body.ok) throw new HttpFailure(400, body.message)
  return body.value
}

export const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })
