/**
 * The dashboard's sign-in (docs/guide/dashboard.md): a session is a user credential of its own kind, kept in
 * `user_tokens` beside the access tokens (`kind` 'session'; only its SHA-256 is stored, with its expiry and
 * revocation), so whatever re-checks a user's credential by id (revocation, expiry) treats both alike; the two
 * kinds are never interchangeable (a session's value is accepted only from its cookie, a token's only as a
 * bearer). A session signed in with a pasted access token names it (`parent_id`): revoking the token revokes its
 * sessions, and a session never outlives its token's expiry. `login_links` holds the one-time sign-in links of `login-link` in the operator CLI: the hash of the
 * code, its expiry (10 minutes) and when it was used (once).
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  yield* ddl([
    `ALTER TABLE user_tokens ADD COLUMN kind TEXT NOT NULL DEFAULT 'token'`,
    `ALTER TABLE user_tokens ADD COLUMN parent_id TEXT`,
    `CREATE INDEX user_tokens_parent ON user_tokens(parent_id)`,
    `CREATE TABLE login_links (
      id TEXT PRIMARY KEY,
      user_id TEXT NOT NULL REFERENCES users(id),
      code_hash TEXT NOT NULL UNIQUE,
      created_at TEXT NOT NULL,
      expires_at TEXT NOT NULL,
      used_at TEXT
    )`,
    `CREATE INDEX login_links_expiry ON login_links(expires_at)`
  ])
})
