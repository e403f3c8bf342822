/**
 * What the Vercel emulator answers with: errors as `{error: {code, message}}`, and request bodies read through
 * Schemas (malformed JSON and wrong types are Vercel's 400 `bad_request`; unknown fields are ignored).
 */
import { decodeJsonBody } from "../../core/emulator/server.ts"
import { failureAnswer, HttpFailure } from "../../core/emulator/failure.ts"
import { Schema } from "effect"

export const json = (body: unknown, status = 200, headers: Record<string, string> = {}) => Response.json(body, { status, headers })

/** Handlers throw the kit's failure; `answerFailure` writes it, or a runtime failure, in this provider's error body. */
export { HttpFailure }

/** Vercel's error codes by status, for failures without a more specific one. */
const ERROR_CODES: Readonly<Record<number, string>> = { 400: "bad_request", 404: "not_found", 409: "conflict", 500: "internal_server_error" }
export const vercelError = (status: number, code: string, message: string) => json({ error: { code, message } }, status)
export const answerFailure = failureAnswer("vercel", (f) => vercelError(f.status, f.code ?? "error", f.message), { codeOf: (status) => ERROR_CODES[status] })

/** A JSON body decoded by `schema` (unknown fields accepted and ignored, as the provider does). */
export const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const body = await decodeJsonBody(request, schema)
  if (!body.ok) throw new HttpFailure(400, body.message, "bad_request")
  return body.value
}

export const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })

const SIGNAL_NUMBERS: Readonly<Record<string, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGUSR1: 10, SIGUSR2: 12, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 }
export const signalNumber = (name: string | null) => (name === null ? undefined : SIGNAL_NUMBERS[name])
export const signalName = (n: number) => Object.entries(SIGNAL_NUMBERS).find(([, v]) => v === n)?.[0]
