/**
 * The reads agents poll (a sandbox, a process, a runtime operation, an operation), for http/FastReads.ts, which
 * answers their plain success ahead of the full stack: the db layer's fast-read queries (src/db/FastReadQueries.ts:
 * the repositories' SQL and row Schemas on a read connection of their own, synchronous on SQLite) and the rule a
 * key passes there. Thin on purpose: no Effect per read, so a poll costs no more than the query.
 */
import type { ApiKeyCredentialRow } from "../db/repos/Projects.ts"
import { openFastReadQueries } from "../db/FastReadQueries.ts"
import { lastUsedIsStale } from "./Credentials.ts"

export type { FastReadQueries as PolledReads, MaybePromise } from "../db/FastReadQueries.ts"
export type { ApiKeyCredentialRow }

/** The queries over the configured engine, closed with the scope (with the server). */
export const openPolledReads = openFastReadQueries

/**
 * Whether a key read by hash may answer for `project` here, as Credentials.resolveApiKey decides: live, not
 * expired, of that project; a key whose use is due to be recorded is refused (the full stack records it).
 */
export const keyAccepted = (key: ApiKeyCredentialRow | undefined, project: string): key is ApiKeyCredentialRow => {
  if (key === undefined) return false
  const now = new Date().toISOString()
  if ((key.expires_at !== null && key.expires_at <= now) || lastUsedIsStale(key.last_used_at, now)) return false
  return key.project_id === project
}
