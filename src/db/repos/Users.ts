/** Users and their access tokens (self-hosted identity: tokens are issued by the operator CLI). */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { newUuid } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { USER_TOKEN_PREFIX, randomToken, sha256Hex } from "../../domain/Tokens.ts"

export interface UserRow {
  readonly id: string
  readonly email: string
  readonly created_at: string
}

export const findUserByEmail = (email: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<UserRow>`SELECT * FROM users WHERE email = ${email.toLowerCase()}`).pipe(
    Effect.map((rows) => rows[0]),
    Effect.orDie
  )

/** The user with this email, created if missing. */
export const ensureUser = (email: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const existing = yield* findUserByEmail(email)
    if (existing !== undefined) return { user: existing, created: false }
    const user: UserRow = { id: newUuid(), email: email.toLowerCase(), created_at: yield* nowIso }
    yield* sql`INSERT INTO users ${sql.insert({ ...user })}`
    return { user, created: true }
  }).pipe(Effect.orDie)

export interface IssuedToken {
  readonly id: string
  readonly token: string
  readonly expires_at: string | null
}


export const issueUserToken = (userId: string, name: string, expiresAt: string | null) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const token = randomToken(USER_TOKEN_PREFIX)
    const id = newUuid()
    yield* sql`INSERT INTO user_tokens ${sql.insert({
      id,
      user_id: userId,
      name,
      prefix: token.slice(0, 20),
      token_hash: sha256Hex(token),
      created_at: yield* nowIso,
      expires_at: expiresAt
    })}`
    return { id, token, expires_at: expiresAt } satisfies IssuedToken
  }).pipe(Effect.orDie)

/** Revokes by id or by the token itself; returns whether a live token was revoked. */
export const revokeUserToken = (by: { readonly id?: string | undefined; readonly token?: string | undefined }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    const rows = by.id !== undefined
      ? yield* sql`UPDATE user_tokens SET revoked_at = ${now} WHERE id = ${by.id} AND revoked_at IS NULL RETURNING id`
      : yield* sql`UPDATE user_tokens SET revoked_at = ${now} WHERE token_hash = ${sha256Hex(by.token ?? "")} AND revoked_at IS NULL RETURNING id`
    return rows.length > 0
  }).pipe(Effect.orDie)
