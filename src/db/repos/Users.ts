/** Users and their access tokens, `users` and `user_tokens` (self-hosted identity: tokens come from the CLI). */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { newUuid } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { randomToken, sha256Hex, USER_TOKEN_PREFIX } from "../../domain/Tokens.ts"
import { rowsOf, run } from "../Rows.ts"

export const UserRow = Schema.Struct({ id: Schema.String, email: Schema.String, created_at: Schema.String })
export type UserRow = typeof UserRow.Type

/** A live token with its user, as the credential check reads it. */
const TokenRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  email: Schema.String,
  expires_at: Schema.NullOr(Schema.String),
  last_used_at: Schema.NullOr(Schema.String)
})

/** A token as a held-open stream's credential is re-checked (services/LiveStreams.ts). */
export const UserTokenStateRow = Schema.Struct({ id: Schema.String, expires_at: Schema.NullOr(Schema.String), revoked_at: Schema.NullOr(Schema.String) })
export type UserTokenStateRow = typeof UserTokenStateRow.Type

export interface IssuedToken {
  readonly id: string
  readonly token: string
  readonly expires_at: string | null
}

export class UsersRepo extends Effect.Service<UsersRepo>()("app/db/UsersRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const users = rowsOf("users", UserRow)
    const tokens = rowsOf("user_tokens", TokenRow)
    const tokenStates = rowsOf("user_tokens", UserTokenStateRow)

    const findByEmail = (email: string) => users.first(sql`SELECT * FROM users WHERE email = ${email.toLowerCase()}`)

    return {
      findByEmail,
      /** Whether any user exists (none yet: a fresh gateway, waiting for its bootstrap). */
      any: Effect.map(users.first(sql`SELECT * FROM users LIMIT 1`), (row) => row !== undefined),
      /** The user with this email, created if missing. */
      ensure: (email: string) =>
        Effect.gen(function*() {
          const existing = yield* findByEmail(email)
          if (existing !== undefined) return { user: existing, created: false }
          const user: UserRow = { id: newUuid(), email: email.toLowerCase(), created_at: yield* nowIso }
          yield* run(sql`INSERT INTO users ${sql.insert({ ...user })}`)
          return { user, created: true }
        }),
      /** Issues a token: only its SHA-256 is kept; the value is returned this once. */
      issueToken: (userId: string, name: string, expiresAt: string | null) =>
        Effect.gen(function*() {
          const token = randomToken(USER_TOKEN_PREFIX)
          const id = newUuid()
          yield* run(sql`INSERT INTO user_tokens ${sql.insert({
            id,
            user_id: userId,
            name,
            prefix: token.slice(0, 20),
            token_hash: sha256Hex(token),
            created_at: yield* nowIso,
            expires_at: expiresAt
          })}`)
          return { id, token, expires_at: expiresAt } satisfies IssuedToken
        }),
      /** Revokes by id or by the token itself; returns whether a live token was revoked. */
      revokeToken: (by: { readonly id?: string | undefined; readonly token?: string | undefined }) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const rows = yield* (by.id !== undefined
            ? sql`UPDATE user_tokens SET revoked_at = ${now} WHERE id = ${by.id} AND revoked_at IS NULL RETURNING id`
            : sql`UPDATE user_tokens SET revoked_at = ${now} WHERE token_hash = ${sha256Hex(by.token ?? "")} AND revoked_at IS NULL RETURNING id`
          ).pipe(Effect.orDie)
          return rows.length > 0
        }),
      /** The unrevoked token with this hash, with its user's email (expiry is the caller's to check). */
      liveTokenByHash: (tokenHash: string) =>
        tokens.first(sql`SELECT t.id, t.user_id, u.email, t.expires_at, t.last_used_at
          FROM user_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = ${tokenHash} AND t.revoked_at IS NULL`),
      touchToken: (id: string, now: string) => run(sql`UPDATE user_tokens SET last_used_at = ${now} WHERE id = ${id}`),
      /** The state of these tokens, in one read (a token missing from the answer no longer exists). */
      tokenStates: (ids: ReadonlyArray<string>) =>
        ids.length === 0
          ? Effect.succeed<ReadonlyArray<UserTokenStateRow>>([])
          : tokenStates.all(sql`SELECT id, expires_at, revoked_at FROM user_tokens WHERE id IN ${sql.in(ids)}`)
    }
  })
}) {}
