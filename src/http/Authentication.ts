/**
 * The credential checks behind the contract's two security middlewares (`Security.ts`): a user access token
 * `metal_ut_…` resolves to `CurrentUser`; a project API key `metal_sk_…` plus `X-Metal-Project-ID` to
 * `CurrentProjectKey` (a missing header is 400, a malformed one 422, another project's id 403). Kept apart from
 * the tags so the contract (and the client built from it) does not pull in the credential store.
 */
import { HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option, Redacted } from "effect"
import { badRequest, forbidden, unauthenticated, validationError } from "../domain/Errors.ts"
import { API_KEY_PREFIX, TOKEN_SHAPE, USER_TOKEN_PREFIX } from "../domain/Tokens.ts"
import { Credentials } from "../services/Credentials.ts"
import { ProjectKeyAuth, UserAuth } from "./Security.ts"

const PROJECT_ID = /^prj_[A-Za-z0-9]+$/

const isBearer = (request: HttpServerRequest.HttpServerRequest) =>
  /^bearer\s/i.test(request.headers["authorization"] ?? "")

export const UserAuthLive = Layer.effect(
  UserAuth,
  Effect.gen(function*() {
    const credentials = yield* Credentials
    return UserAuth.of({
      userToken: (token) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const raw = Redacted.value(token).trim()
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
