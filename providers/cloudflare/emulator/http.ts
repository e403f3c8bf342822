/**
 * What the bridge emulator answers with: errors as `{error, code}` (the bridge's shape), and request bodies read
 * through Schemas (malformed JSON and wrong types are a 400 `BAD_REQUEST`; unknown fields are ignored).
 */
import { decodeJsonBody } from "../../core/emulator/server.ts"
import { failureAnswer, HttpFailure } from "../../core/emulator/failure.ts"
import { Schema } from "effect"

export const json = (body: unknown, status = 200, headers: Record<string, string> = {}) => Response.json(body, { status, headers })

/** Handlers throw the kit's failure; `answerFailure` writes it, or a runtime failure, in this provider's error body. */
export { HttpFailure }

/** The bridge's error codes by status, for failures without a more specific one. */
const CODES: Readonly<Record<number, string>> = { 400: "BAD_REQUEST", 404: "NOT_FOUND", 409: "CONFLICT", 500: "INTERNAL_ERROR" }
export const bridgeError = (status: number, code: string, message: string) => json({ error: message, code }, status)
export const answerFailure = failureAnswer("cloudflare", (f) => bridgeError(f.status, f.code ?? "ERROR", f.message), { codeOf: (status) => CODES[status] })

/** A JSON body decoded by `schema` (unknown fields accepted and ignored, as the provider does). */
export const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const body = await decodeJsonBody(request, schema)
  if (!body.ok) throw new HttpFailure(400, body.message, "BAD_REQUEST")
  return body.value
}
