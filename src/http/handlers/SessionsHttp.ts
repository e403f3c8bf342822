/** `/v1/sessions`: the dashboard's sign-in (services/Sessions.ts) and its cookie (SessionCookie.ts). */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { AppConfig } from "../../Config.ts"
import { apiError, Forbidden, notFound } from "../../domain/Errors.ts"
import { CurrentUser } from "../../domain/Principals.ts"
import { Session, SignedOut } from "../../domain/Sessions.ts"
import { accessChanged } from "../../services/LiveStreams.ts"
import { endSession, sessionExpiry, startSession } from "../../services/Sessions.ts"
import { provideServiceContext } from "../../services/ServiceContext.ts"
import { Api } from "../Api.ts"
import { clearedSessionCookie, csrfRefusal, sessionCookie, sessionFromCookies } from "../SessionCookie.ts"

const viaBearer = (request: HttpServerRequest.HttpServerRequest) => /^bearer\s/i.test(request.headers["authorization"] ?? "")

export const SessionsLive = HttpApiBuilder.group(Api, "sessions", (handlers) =>
  Effect.gen(function*() {
    const provide = yield* provideServiceContext
    const { publicUrl } = yield* AppConfig
    const secure = publicUrl.startsWith("https:")

    return handlers
      .handle("signIn", ({ payload }) =>
        Effect.gen(function*() {
          // Signing in is a change made by the page, checked as one (a page elsewhere must not sign a visitor in).
          const refusal = csrfRefusal(yield* HttpServerRequest.HttpServerRequest, publicUrl)
          if (refusal !== undefined) return yield* apiError(Forbidden, "csrf_failed", refusal)
          const session = yield* startSession(payload)
          const body = { user: session.user, expires_at: session.expiresAt, via: "session" as const }
          return yield* HttpServerResponse.schemaJson(Session)(body, { status: 201, headers: { "set-cookie": sessionCookie(session.token, session.expiresAt, secure) } }).pipe(Effect.orDie)
        }).pipe(provide))
      .handle("current", () =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const request = yield* HttpServerRequest.HttpServerRequest
          const who = { id: user.userId, email: user.email }
          if (viaBearer(request)) return { user: who, expires_at: null, via: "token" as const }
          return { user: who, expires_at: yield* sessionExpiry(sessionFromCookies(request.headers["cookie"]) ?? ""), via: "session" as const }
        }).pipe(provide))
      .handle("signOut", () =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          if (viaBearer(yield* HttpServerRequest.HttpServerRequest)) return yield* notFound("Dashboard session (this request carries a bearer token)")
          yield* endSession(user.tokenId)
          yield* accessChanged // the session's live streams and terminals end at once, on every replica
          return yield* HttpServerResponse.schemaJson(SignedOut)({ signed_out: true }, { headers: { "set-cookie": clearedSessionCookie(secure) } }).pipe(Effect.orDie)
        }).pipe(provide))
  }))
