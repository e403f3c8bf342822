/**
 * What the Blaxel emulator answers with: the control API's errors `{code, error, message}`, the sandbox runtime's
 * `{error}`, and request bodies read through Schemas (malformed JSON and wrong types are the
 * provider's 400; unknown fields are ignored).
 */
import { decodeJsonBody, statusOfRuntimeError } from "../../core/emulator/server.ts"
import { failureAnswer, HttpFailure } from "../../core/emulator/failure.ts"
import { Schema } from "effect"

export const json = (body: unknown, status = 200, headers: Record<string, string> = {}) => Response.json(body, { status, headers })

/** Handlers throw the kit's failure; `answerControlFailure` and `answerRuntimeFailure` write it, or a runtime failure, in each plane's error body. */
export { HttpFailure }

const ERROR_NAMES: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  413: "Payload Too Large",
  416: "Range Not Satisfiable",
  422: "Unprocessable Entity",
  500: "Internal Server Error"
}
/** The control API: `{code, error, message}`; create failures carry a string code (`QUOTA_EXCEEDED`, …). */
export const controlError = (status: number, message: string, code?: string) =>
  json(code === undefined ? { code: status, error: ERROR_NAMES[status] ?? "Error", message } : { code, message, status_code: status }, status)
/** The sandbox runtime: `{error}`. */
export const runtimeError = (status: number, message: string) => json({ error: message }, status)

export const answerControlFailure = failureAnswer("blaxel", (f) => controlError(f.status, f.message, f.code))
/** The sandbox runtime answers a runtime conflict (a state that forbids the call) with 422, not 409. */
export const answerRuntimeFailure = failureAnswer("blaxel", (f) => runtimeError(f.status, f.message), {
  statusOf: (e) => (statusOfRuntimeError(e) === 409 ? 422 : statusOfRuntimeError(e))
})

/** A JSON body decoded by `schema` (unknown fields accepted and ignored, as the provider does). */
export const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const body = await decodeJsonBody(request, schema)
  if (!body.ok) throw new HttpFailure(400, body.message)
  return body.value
}

export const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })
/** Blaxel durations: a count and a unit (`90s`, `30m`, `24h`, `7d`, `2w`). */
export const Duration = Schema.String.pipe(Schema.pattern(/^\d{1,9}[smhdw]$/))
export const durationSeconds = (d: string) => Number(d.slice(0, -1)) * { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 }[d.slice(-1) as "s"]
