/**
 * The credential checks behind the contract's two security middlewares (`Security.ts`): a user access token
 * `metal_ut_…` (or the dashboard's session cookie, with the origin and CSRF checks of `SessionCookie.ts`) resolves
 * to `CurrentUser`; a project API key `metal_sk_…` plus `X-Metal-Project-ID` to `CurrentProjectKey` (a missing
 * header is 400, a malformed one 422, another project's id 403). Kept apart from the tags so the contract (and
 * the client built from it) does not pull in the credential store.
 */
import { HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "../Config.ts"
import { apiError, badRequest, Forbidden, forbidden, unauthenticated, validationError } from "../domain/Errors.ts"
import { API_KEY_PREFIX, SESSION_TOKEN_PREFIX, TOKEN_SHAPE, USER_TOKEN_PREFIX } from "../domain/Tokens.ts"
import { Credentials } from "../services/Credentials.ts"
import { ProjectKeyAuth, UserAuth } from "./Security.ts"
import { csrfRefusal } from "./SessionCookie.ts"

const PROJECT_ID = /^prj_[A-Za-z0-9]+$/

const isBearer = (request: HttpServerRequest.HttpServerRequest) =>
  /^bearer\s/i.test(request.headers["authorization"] ?? "")

export const UserAuthLive = Layer.effect(
  UserAuth,
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const { publicUrl } = yield* AppConfig
    const userToken = (request: HttpServerRequest.HttpServerRequest, token: string) =>
      Effect.gen(function*() {
        const raw = token.trim()
        if (!isBearer(request) || raw === "") return yield* unauthenticated("Missing bearer token")
        if (!raw.startsWith(USER_TOKEN_PREFIX) || !TOKEN_SHAPE.test(raw)) {
          return yield* unauthenticated("This route takes a user access token (metal_ut_…)")
        }
        const principal = yield* credentials.resolveUserToken(raw)
        return yield* Option.match(principal, {
          onNone: () => unauthenticated("Unknown, revoked or expired user access token"),
          onSome: Effect.succeed
        })
      })
    return UserAuth.of({
      userToken: (token) => Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => userToken(request, Redacted.value(token))),
      session: (cookie) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          // A bearer was tried first and refused: its answer stands, whatever cookie came with it.
          if (isBearer(request)) return yield* userToken(request, (request.headers["authorization"] ?? "").slice("bearer ".length))
          const raw = Redacted.value(cookie)
          if (raw === "") return yield* unauthenticated("Missing bearer token")
          const refusal = csrfRefusal(request, publicUrl)
          if (refusal !== undefined) return yield* apiError(Forbidden, "csrf_failed", refusal)
          const principal = raw.startsWith(SESSION_TOKEN_PREFIX) && TOKEN_SHAPE.test(raw) ? yield* credentials.resolveSession(raw) : Option.none()
          return yield* Option.match(principal, {
            onNone: () => unauthenticated("The session ended (signed out, expired or revoked): sign in again"),
            onSome: Effect.succeed
          })
        })
    })
  })
)

export const ProjectKeyAuthLive = Layer.effect(
  ProjectKeyAuth,
  Effect.gen(function*() {
    const credentials = yield* Credentials
    return ProjectKeyAuth.of({
      projectKey: (token) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const raw = Redacted.value(token).trim()
          if (!isBearer(request) || raw === "") return yield* unauthenticated("Missing bearer token")
          if (!raw.startsWith(API_KEY_PREFIX) || !TOKEN_SHAPE.test(raw)) {
            return yield* unauthenticated("This route takes a project API key (metal_sk_…)")
          }
          const principal = yield* credentials.resolveApiKey(raw)
          if (Option.isNone(principal)) return yield* unauthenticated("Unknown, revoked or expired API key")
          const header = request.headers["x-metal-project-id"]
          if (header === undefined || header === "") {
            return yield* badRequest("project_header_required", "The X-Metal-Project-ID header is required")
          }
          if (!PROJECT_ID.test(header) || header.length > 128) {
            return yield* validationError("X-Metal-Project-ID is malformed", [
              { path: "headers.x-metal-project-id", message: "must match ^prj_[A-Za-z0-9]+$" }
            ])
          }
          if (header !== principal.value.projectId) return yield* forbidden("This API key belongs to another project")
          return principal.value
        })
    })
  })
)
