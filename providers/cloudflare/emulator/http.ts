/**
 * What the bridge emulator answers with: errors as `{error, code}` (the bridge's shape), and request bodies read
 * through Schemas (malformed JSON and wrong types are a 400 `BAD_REQUEST`; unknown fields are ignored).
 */
import { decodeJsonBody } from "../../core/emulator/server.ts"
import { Schema } from "effect"

export const json = (body: unknown, status = 200, headers: Record<string, string> = {}) => Response.json(body, { status, headers })

/** Thrown by a handler: answered with its status and code. */
export class HttpFailure extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message)
  }
}

export const bridgeError = (status: number, code: string, message: string) => json({ error: message, code }, status)

/** A JSON body decoded by `schema` (unknown fields accepted and ignored, as the provider does). */
export const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const body = await decodeJsonBody(request, schema)
  if (!body.ok) throw new HttpFailure(400, "BAD_REQUEST", body.message)
  return body.value
}
