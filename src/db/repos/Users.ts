/**
 * Users and their credentials, `users`, `user_tokens` and `login_links` (self-hosted identity: tokens and sign-in
 * links come from the CLI). A row of `user_tokens` is an access token (`kind` 'token', a bearer) or a dashboard
 * session (`kind` 'session', its cookie): each lookup names its kind, so neither is ever taken for the other.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { newUserId, newUuid, type UserId } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { LOGIN_CODE_PREFIX, randomToken, SESSION_TOKEN_PREFIX, sha256Hex, USER_TOKEN_PREFIX } from "../../domain/Tokens.ts"
import { IdColumn, rowsOf, run } from "../Rows.ts"

export const UserRow = Schema.Struct({ id: IdColumn.user, email: Schema.String, created_at: Schema.String })
export type UserRow = typeof UserRow.Type

/** A live token with its user, as the credential check reads it. */
const TokenRow = Schema.Struct({
  id: Schema.String,
  user_id: IdColumn.user,
  email: Schema.String,
  expires_at: Schema.NullOr(Schema.String),
  last_used_at: Schema.NullOr(Schema.String)
})

/** The two kinds of user credential in `user_tokens`. */
export type UserCredentialKind = "token" | "session"

const PREFIX_OF: Record<UserCredentialKind, string> = { token: USER_TOKEN_PREFIX, session: SESSION_TOKEN_PREFIX }

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
    const usedLinks = rowsOf("login_links", Schema.Struct({ user_id: IdColumn.user }))

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
          const user: UserRow = { id: newUserId(), email: email.toLowerCase(), created_at: yield* nowIso }
          yield* run(sql`INSERT INTO users ${sql.insert({ ...user })}`)
          return { user, created: true }
        }),
      /** Issues a token (or a session): only its SHA-256 is kept; the value is returned this once. */
      issueToken: (userId: UserId, name: string, expiresAt: string | null, kind: UserCredentialKind = "token", parentId: string | null = null) =>
        Effect.gen(function*() {
          const token = randomToken(PREFIX_OF[kind])
          const id = newUuid()
          yield* run(sql`INSERT INTO user_tokens ${sql.insert({
            id,
            user_id: userId,
            name,
            prefix: token.slice(0, 20),
            token_hash: sha256Hex(token),
            created_at: yield* nowIso,
            expires_at: expiresAt,
            kind,
            parent_id: parentId
          })}`)
          return { id, token, expires_at: expiresAt } satisfies IssuedToken
        }),
      /**
       * Revokes by id or by the token itself (of `kind`), with the sessions signed in with it; returns whether a
       * live one was revoked.
       */
      revokeToken: (by: { readonly id?: string | undefined; readonly token?: string | undefined }, kind: UserCredentialKind = "token") =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const rows = yield* (by.id !== undefined
            ? sql<{ id: string }>`UPDATE user_tokens SET revoked_at = ${now} WHERE id = ${by.id} AND kind = ${kind} AND revoked_at IS NULL RETURNING id`
            : sql<{ id: string }>`UPDATE user_tokens SET revoked_at = ${now} WHERE token_hash = ${sha256Hex(by.token ?? "")} AND kind = ${kind} AND revoked_at IS NULL RETURNING id`
          ).pipe(Effect.orDie)
          const revoked = rows[0]?.id
          if (revoked !== undefined) yield* run(sql`UPDATE user_tokens SET revoked_at = ${now} WHERE parent_id = ${revoked} AND revoked_at IS NULL`)
          return rows.length > 0
        }),
      /** The unrevoked credential of `kind` with this hash, with its user's email (expiry is the caller's to check). */
      liveTokenByHash: (tokenHash: string, kind: UserCredentialKind = "token") =>
        tokens.first(sql`SELECT t.id, t.user_id, u.email, t.expires_at, t.last_used_at
          FROM user_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = ${tokenHash} AND t.kind = ${kind} AND t.revoked_at IS NULL`),
      /** A one-time sign-in link for the user: only the SHA-256 of its code is kept; the code is returned this once. */
      issueLoginLink: (userId: UserId, expiresAt: string) =>
        Effect.gen(function*() {
          const code = randomToken(LOGIN_CODE_PREFIX)
          yield* run(sql`INSERT INTO login_links ${sql.insert({ id: newUuid(), user_id: userId, code_hash: sha256Hex(code), created_at: yield* nowIso, expires_at: expiresAt })}`)
          return code
        }),
      /**
       * Uses a sign-in link's code: marks it used and answers its user, in one statement — so of two requests
       * with the same code only one gets the user — or undefined when the code is unknown, used or expired.
       */
      useLoginLink: (code: string, now: string) =>
        Effect.map(
          usedLinks.first(sql`UPDATE login_links SET used_at = ${now}
            WHERE code_hash = ${sha256Hex(code)} AND used_at IS NULL AND expires_at > ${now} RETURNING user_id`),
          (row) => row?.user_id
        ),
      /** The user with this id. */
      byId: (id: UserId) => users.first(sql`SELECT * FROM users WHERE id = ${id}`),
      /** Forgets sign-in links that expired before `before` (used or not); returns how many went. */
      deleteLoginLinksExpiredBefore: (before: string, limit: number) =>
        Effect.map(
          sql`DELETE FROM login_links WHERE id IN (SELECT id FROM login_links WHERE expires_at < ${before} LIMIT ${limit}) RETURNING id`.pipe(Effect.orDie),
          (rows) => rows.length
        ),
      touchToken: (id: string, now: string) => run(sql`UPDATE user_tokens SET last_used_at = ${now} WHERE id = ${id}`),
      /** The state of these credentials (tokens and sessions), in one read (one missing from the answer no longer exists). */
      tokenStates: (ids: ReadonlyArray<string>) =>
        ids.length === 0
          ? Effect.succeed<ReadonlyArray<UserTokenStateRow>>([])
          : tokenStates.all(sql`SELECT id, expires_at, revoked_at FROM user_tokens WHERE id IN ${sql.in(ids)}`)
    }
  })
}) {}
