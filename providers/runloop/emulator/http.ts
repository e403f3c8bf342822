/**
 * What the Runloop emulator answers with: JSON bodies, errors as `{message}` with their status, and request
 * bodies read through Schemas (malformed JSON and wrong types are the provider's 400; unknown fields are ignored).
 */
import { decodeJsonBody } from "../../core/emulator/server.ts"
import { Schema } from "effect"

export const json = (body: unknown, status = 200) => Response.json(body, { status })

/** Thrown by a handler: answered with its status as `{message}`. */
export class HttpFailure extends Error {
  constructor(readonly status: number, message: string) {
    super(message)
  }
}

export const errorResponse = (status: number, message: string) => json({ message }, status)

/** A long-poll whose window passed: 408, which Runloop marks as one to ask again (its clients then retry). */
export const longPollTimeout = (message: string) => Response.json({ message }, { status: 408, headers: { "x-should-retry": "true" } })

/** A JSON body decoded by `schema` (unknown fields accepted and ignored, as the provider does). An empty body reads as `{}`. */
export const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const body = await decodeJsonBody(request, schema, { emptyIsObject: true })
  if (!body.ok) throw new HttpFailure(400, body.message)
  return body.value
}

export const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })
