/**
 * Resolves bearer credentials to principals. Only SHA-256 hashes are stored; `last_used_at` is refreshed at
 * most once a minute per credential so that reads do not turn every request into a write.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { nowIso } from "../domain/Time.ts"
import type { KeyPrincipal, UserPrincipal } from "../domain/Principals.ts"
import { sha256Hex } from "../domain/Tokens.ts"

/** A live API key by the hash of its secret (also read by the fast reads, src/http/FastReads.ts). */
export const API_KEY_BY_HASH = `SELECT k.id, k.project_id, p.organization_id, k.expires_at, k.last_used_at
  FROM api_keys k JOIN projects p ON p.id = k.project_id JOIN organizations o ON o.id = p.organization_id
  WHERE k.key_hash = ? AND k.revoked_at IS NULL AND k.deleted_at IS NULL AND p.deleted_at IS NULL AND o.deleted_at IS NULL`

export interface ApiKeyRow {
  readonly id: string
  readonly project_id: string
  readonly organization_id: string
  readonly expires_at: string | null
  readonly last_used_at: string | null
}

const LAST_USED_GRANULARITY_MS = 60_000

export interface CredentialsShape {
  readonly resolveUserToken: (raw: string) => Effect.Effect<Option.Option<UserPrincipal>>
  readonly resolveApiKey: (raw: string) => Effect.Effect<Option.Option<KeyPrincipal>>
}

export class Credentials extends Context.Tag("app/Credentials")<Credentials, CredentialsShape>() {}

/** Whether `last_used_at` is due to be written again (at most once a minute, so reads stay reads). */
export const lastUsedIsStale = (lastUsed: string | null, now: string) =>
  lastUsed === null || Date.parse(now) - Date.parse(lastUsed) >= LAST_USED_GRANULARITY_MS

export const CredentialsLive = Layer.effect(
  Credentials,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const resolveUserToken = (raw: string) =>
      Effect.gen(function*() {
        const now = yield* nowIso
        const rows = yield* sql<{ id: string; user_id: string; email: string; expires_at: string | null; last_used_at: string | null }>`
          SELECT t.id, t.user_id, u.email, t.expires_at, t.last_used_at
          FROM user_tokens t JOIN users u ON u.id = t.user_id
          WHERE t.token_hash = ${sha256Hex(raw)} AND t.revoked_at IS NULL`
        const row = rows[0]
        if (row === undefined || (row.expires_at !== null && row.expires_at <= now)) return Option.none<UserPrincipal>()
        if (lastUsedIsStale(row.last_used_at, now)) yield* sql`UPDATE user_tokens SET last_used_at = ${now} WHERE id = ${row.id}`
        return Option.some<UserPrincipal>({ userId: row.user_id, email: row.email, tokenId: row.id })
      }).pipe(Effect.orDie)

    const resolveApiKey = (raw: string) =>
      Effect.gen(function*() {
        const now = yield* nowIso
        const rows = yield* sql.unsafe<ApiKeyRow>(API_KEY_BY_HASH, [sha256Hex(raw)])
        const row = rows[0]
        if (row === undefined || (row.expires_at !== null && row.expires_at <= now)) return Option.none<KeyPrincipal>()
        if (lastUsedIsStale(row.last_used_at, now)) yield* sql`UPDATE api_keys SET last_used_at = ${now} WHERE id = ${row.id}`
        return Option.some<KeyPrincipal>({ keyId: row.id, projectId: row.project_id, organizationId: row.organization_id })
      }).pipe(Effect.orDie)

    return { resolveUserToken, resolveApiKey }
  })
)
