/**
 * The dashboard's sign-in (docs/guide/dashboard.md). A session is a user credential of its own kind (a row of
 * `user_tokens`, kind 'session': hashed, with its expiry and revocation), carried only by its cookie
 * (src/http/SessionCookie.ts) and taken by every route a user access token takes, with the same rules. It is
 * started with either
 * - a user access token, pasted once: the session names it, never outlives its expiry, and is revoked with it;
 * - a one-time sign-in link's code (`login-link` in the operator CLI): valid LOGIN_LINK_SECONDS, used once.
 * Signing out revokes the session.
 */
import { Effect } from "effect"
import { inTransaction } from "../db/Db.ts"
import { UsersRepo } from "../db/repos/Users.ts"
import { unauthenticated } from "../domain/Errors.ts"
import { isoAfter, nowIso } from "../domain/Time.ts"
import { sha256Hex } from "../domain/Tokens.ts"
import type { UserId } from "../domain/Ids.ts"

/** How long a session lasts (not extended by use); a session signed in with a token ends with it, if sooner. */
export const SESSION_SECONDS = 7 * 24 * 3600
/** How long a sign-in link may be used (once). */
export const LOGIN_LINK_SECONDS = 600

export type SignIn = { readonly user_token: string } | { readonly login_code: string }

export interface StartedSession {
  readonly id: string
  /** The cookie's value: returned this once, only its hash is kept. */
  readonly token: string
  readonly expiresAt: string
  readonly user: { readonly id: string; readonly email: string }
}

/** A one-time sign-in link's code for an existing user, valid LOGIN_LINK_SECONDS from now. */
export const issueLoginLink = (userId: UserId) =>
  Effect.gen(function*() {
    const expiresAt = isoAfter(yield* nowIso, LOGIN_LINK_SECONDS)
    const code = yield* UsersRepo.issueLoginLink(userId, expiresAt)
    return { code, expiresAt }
  }).pipe(Effect.withSpan("Sessions.issueLoginLink"))

const earlier = (a: string, b: string | null) => (b !== null && b < a ? b : a)

/** Starts a session for whoever the token or the link's code names, in one transaction; 401 when it names no one (now). */
export const startSession = (how: SignIn) =>
  inTransaction(Effect.gen(function*() {
    const now = yield* nowIso
    const until = isoAfter(now, SESSION_SECONDS)
    if ("user_token" in how) {
      const token = yield* UsersRepo.liveTokenByHash(sha256Hex(how.user_token))
      if (token === undefined || (token.expires_at !== null && token.expires_at <= now)) return yield* unauthenticated("Unknown, revoked or expired user access token")
      const expiresAt = earlier(until, token.expires_at)
      const session = yield* UsersRepo.issueToken(token.user_id, "dashboard", expiresAt, "session", token.id)
      return { id: session.id, token: session.token, expiresAt, user: { id: token.user_id, email: token.email } } satisfies StartedSession
    }
    const userId = yield* UsersRepo.useLoginLink(how.login_code, now)
    const user = userId === undefined ? undefined : yield* UsersRepo.byId(userId)
    if (user === undefined) return yield* unauthenticated("This sign-in link is unknown, was used already or expired: ask for a new one")
    const session = yield* UsersRepo.issueToken(user.id, "dashboard", until, "session")
    return { id: session.id, token: session.token, expiresAt: until, user: { id: user.id, email: user.email } } satisfies StartedSession
  })).pipe(Effect.withSpan("Sessions.startSession"))

/** Whether any user exists yet (the welcome says how to make the first one). */
export const hasUsers = UsersRepo.any

/** Signs a session out (revokes it); whether it was live. */
export const endSession = (sessionId: string) => inTransaction(UsersRepo.revokeToken({ id: sessionId }, "session")).pipe(Effect.withSpan("Sessions.endSession"))

/** When the session its cookie carries ends (null: no live session by that token). */
export const sessionExpiry = (cookieToken: string) =>
  Effect.map(UsersRepo.liveTokenByHash(sha256Hex(cookieToken), "session"), (row) => row?.expires_at ?? null)
