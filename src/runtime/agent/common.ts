/**
 * What every part of the agent shares: where it keeps its state, its error, request parameters, JSON answers. The
 * shapes of requests and answers are the protocol's (../AgentProtocol.ts): imported as types only, so none of its
 * code (nor Effect) reaches the jail.
 */
import type * as Protocol from "../AgentProtocol.ts"

export const RUN_DIR = process.env["AGENT_RUN_DIR"] ?? "/run/agent"

export class AgentError extends Error {
  constructor(readonly status: number, readonly kind: Protocol.ErrorAnswer["kind"], message: string) {
    super(message)
  }
}
export const invalid = (message: string) => new AgentError(400, "invalid", message)

/** A path for a message: the caller's own path, shortened when long. */
export const shortPath = (p: string) => (p.length > 200 ? `${p.slice(0, 120)}…${p.slice(-60)}` : p)

/**
 * A request's query as its route declares it (one of the protocol's `…Query`, encoded): a URLSearchParams read
 * only by the names the route has.
 */
export interface Query<Q> {
  readonly get: (name: keyof Q & string) => string | null
  readonly has: (name: keyof Q & string) => boolean
}

/** `q` read as the query of a route of the protocol. */
export const queryOf = <Q>(q: URLSearchParams): Query<Q> => q

export const intParam = <Q>(q: Query<Q>, name: keyof Q & string, fallback: number) => {
  const raw = q.get(name)
  if (raw === null) return fallback
  const value = Number(raw)
  if (!Number.isSafeInteger(value) || value < 0) throw invalid(`${name} must be a non-negative integer`)
  return value
}

export const json = (body: unknown, status = 200) => Response.json(body, { status })
