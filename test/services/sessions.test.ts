/**
 * The dashboard's sign-in (services/Sessions.ts) against a real database written by the CLI: a sign-in link
 * signs in once and only within its 10 minutes; a session is a credential of its own kind (never a bearer token,
 * and a token never a session), ends with the token it was signed in with (its expiry, its revocation), and
 * signing out revokes it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Either, Layer, Option } from "effect"
import { AppConfig } from "../../src/Config.ts"
import { DatabaseLive } from "../../src/db/Database.ts"
import { UsersRepo } from "../../src/db/repos/Users.ts"
import { Credentials, CredentialsLive } from "../../src/services/Credentials.ts"
import { endSession, issueLoginLink, LOGIN_LINK_SECONDS, startSession } from "../../src/services/Sessions.ts"
import { databaseUrlFor } from "../support/postgres.ts"
import { bootstrap, tempDataDir } from "../support/server.ts"
import { UserId } from "../../src/domain/Ids.ts"

const layerFor = (dataDir: string) =>
  CredentialsLive.pipe(
    Layer.provideMerge(DatabaseLive),
    Layer.provide(Layer.succeed(AppConfig, { port: 0, host: "127.0.0.1", dataDir, databaseUrl: databaseUrlFor(dataDir), publicUrl: "http://x", publicUrlSet: true, logLevel: "info", maxBodyBytes: 1, rawWriteMaxBytes: 1 << 30, endpoints: { port: 0, host: "127.0.0.1", publicOrigin: undefined, base: undefined } }))
  )

/** Runs `effect` with the clock standing at `ms` (so "10 minutes later" needs no waiting). */
const at = (ms: number) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.clock, (real) => {
    const fixed: Clock.Clock = Object.assign(Object.create(real) as Clock.Clock, {
      unsafeCurrentTimeMillis: () => ms,
      currentTimeMillis: Effect.succeed(ms),
      unsafeCurrentTimeNanos: () => BigInt(ms) * 1_000_000n,
      currentTimeNanos: Effect.succeed(BigInt(ms) * 1_000_000n)
    })
    return Effect.withClock(effect, fixed)
  })

describe("dashboard sessions", () => {
  it.live("a sign-in link signs in once, and only within its 10 minutes", () =>
    Effect.gen(function*() {
      const dataDir = tempDataDir("sessions")
      const owner = yield* Effect.promise(() => bootstrap(dataDir, "links@example.com", { init: true }))
      const ownerId = UserId.make(owner.user_id)
      yield* Effect.gen(function*() {
        const t0 = Date.parse("2030-01-01T00:00:00.000Z")
        const last = t0 + LOGIN_LINK_SECONDS * 1000 - 1
        expect(LOGIN_LINK_SECONDS).toBe(600)

        const first = yield* at(t0)(issueLoginLink(ownerId))
        expect(first.expiresAt).toBe("2030-01-01T00:10:00.000Z")
        const session = yield* at(last)(startSession({ login_code: first.code }))
        expect(session.user).toEqual({ id: owner.user_id, email: "links@example.com" })
        // Used: refused the second time, even within the 10 minutes.
        const again = yield* at(last)(Effect.either(startSession({ login_code: first.code })))
        expect(Either.isLeft(again) && again.left.code).toBe("unauthenticated")

        // Unused, but 10 minutes old: refused.
        const late = yield* at(t0)(issueLoginLink(ownerId))
        const tooLate = yield* at(t0 + LOGIN_LINK_SECONDS * 1000)(Effect.either(startSession({ login_code: late.code })))
        expect(Either.isLeft(tooLate) && tooLate.left.message).toMatch(/unknown, was used already or expired/)
        // An unknown code, and a user token given as a code.
        for (const code of ["metal_ll_nothing-like-a-real-code-at-all", owner.user_token]) {
          expect(Either.isLeft(yield* Effect.either(startSession({ login_code: code })))).toBe(true)
        }
      }).pipe(Effect.provide(layerFor(dataDir)))
    }))

  it.live("a session is its own credential and ends with the token it was signed in with", () =>
    Effect.gen(function*() {
      const dataDir = tempDataDir("sessions")
      const owner = yield* Effect.promise(() => bootstrap(dataDir, "kinds@example.com", { init: true }))
      yield* Effect.gen(function*() {
        const credentials = yield* Credentials
        const session = yield* startSession({ user_token: owner.user_token })
        expect(session.token).toMatch(/^metal_us_/)
        expect(Option.getOrThrow(yield* credentials.resolveSession(session.token))).toMatchObject({ userId: owner.user_id, tokenId: session.id })
        // Never interchangeable.
        expect(Option.isNone(yield* credentials.resolveUserToken(session.token))).toBe(true)
        expect(Option.isNone(yield* credentials.resolveSession(owner.user_token))).toBe(true)
        // A wrong token signs no one in.
        expect(Either.isLeft(yield* Effect.either(startSession({ user_token: `${owner.user_token}x` })))).toBe(true)

        // A token that expires sooner than a session lasts: the session ends with it.
        const short = yield* UsersRepo.issueToken(UserId.make(owner.user_id), "short", "2099-01-01T00:00:00.000Z")
        const bounded = yield* at(Date.parse("2098-12-31T23:00:00.000Z"))(startSession({ user_token: short.token }))
        expect(bounded.expiresAt).toBe("2099-01-01T00:00:00.000Z")

        // Revoking the token revokes the sessions signed in with it; signing out revokes a session.
        expect(yield* UsersRepo.revokeToken({ token: owner.user_token })).toBe(true)
        expect(Option.isNone(yield* credentials.resolveSession(session.token))).toBe(true)
        expect(Option.isSome(yield* credentials.resolveSession(bounded.token))).toBe(true)
        expect(yield* endSession(bounded.id)).toBe(true)
        expect(Option.isNone(yield* credentials.resolveSession(bounded.token))).toBe(true)
        expect(yield* endSession(bounded.id)).toBe(false)
      }).pipe(Effect.provide(layerFor(dataDir)))
    }))
})
