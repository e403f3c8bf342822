/**
 * What the Prime emulator answers with: JSON bodies, errors as FastAPI's `{detail}` with their status (422 for a
 * body of the wrong shape, as Prime's API does), and request bodies read through Schemas.
 */
import { decodeJsonBody } from "../../core/emulator/server.ts"
import { failureAnswer, HttpFailure } from "../../core/emulator/failure.ts"
import { Schema } from "effect"

export const json = (body: unknown, status = 200) => Response.json(body, { status })

/** Handlers throw the kit's failure; `answerFailure` writes it, or a runtime failure, in this provider's error body. */
export { HttpFailure }

/** Errors are FastAPI's `{detail}` with their status. */
export const errorResponse = (status: number, detail: string) => json({ detail }, status)
export const answerFailure = failureAnswer("prime", (f) => errorResponse(f.status, f.message))

/** A JSON body decoded by `schema` (unknown fields accepted and ignored, as the provider does). */
export const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const body = await decodeJsonBody(request, schema)
  if (!body.ok) throw body.problem === "json" ? new HttpFailure(400, body.message) : new HttpFailure(422, body.message)
  return body.value
}
