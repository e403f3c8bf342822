/**
 * What the Freestyle emulator answers with: JSON bodies, errors as Freestyle's `{code: "SCREAMING_CODE", message}`
 * with their status, and request bodies read through Schemas (malformed JSON and wrong types are
 * the provider's 400 `INVALID_PARAMETERS`; unknown fields are ignored).
 */
import { decodeJsonBody } from "../../core/emulator/server.ts"
import { failureAnswer, HttpFailure } from "../../core/emulator/failure.ts"
import { Schema } from "effect"

export const json = (body: unknown, status = 200) => Response.json(body, { status })

/** Handlers throw the kit's failure; `answerFailure` writes it, or a runtime failure, in this provider's error body. */
export { HttpFailure }

/** Freestyle's error codes by status, for failures without a more specific one. */
const CODES: Readonly<Record<number, string>> = { 400: "INVALID_PARAMETERS", 404: "NOT_FOUND", 409: "CONFLICT", 500: "INTERNAL_ERROR" }
export const errorResponse = (status: number, code: string, message: string) => json({ code, message }, status)
export const answerFailure = failureAnswer("freestyle", (f) => errorResponse(f.status, f.code ?? "INTERNAL_ERROR", f.message), { codeOf: (status) => CODES[status] })

/** A JSON body decoded by `schema` (unknown fields accepted and ignored, as the provider does). An empty body reads as `{}`. */
export const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const body = await decodeJsonBody(request, schema, { emptyIsObject: true })
  if (!body.ok) throw new HttpFailure(400, body.message, "INVALID_PARAMETERS")
  return body.value
}

export const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })
