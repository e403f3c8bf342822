/**
 * Turns everything that is not already a declared error into one: schema violations (422 with
 * `details.issues`, also for JSON nested too deeply), unknown routes (404), unparseable JSON (400), wrong content
 * type (415) and crashes (500 without internals). Runs api-first, before HttpApi encodes failures.
 */
import { HttpApiBuilder, HttpApiError, HttpServerError, HttpServerRequest } from "@effect/platform"
import { Cause, Effect, Option } from "effect"
import {
  apiError,
  BadRequest,
  type Coded,
  InternalError,
  NotFound,
  ServiceUnavailable,
  Unprocessable,
  UnsupportedMediaType
} from "../domain/Errors.ts"
import { isDatabaseBusy } from "../services/ServiceContext.ts"
import { issuesSummary, readableIssues } from "../domain/Issues.ts"
import { Api } from "./Api.ts"
import { jsonNestingExceeds, MAX_JSON_DEPTH } from "./BodyLimits.ts"

const BODY_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** A schema violation as a 422: readable issues (domain/Issues.ts), the first one as the message. */
const validationFailed = (error: HttpApiError.HttpApiDecodeError) => {
  const issues = readableIssues(error.issues)
  return apiError(Unprocessable, "validation_error", issuesSummary(issues), { issues })
}

/**
 * Refuses bodies that are not JSON, or nested too deeply to parse safely, before any route reads them. (Their size
 * was checked in front of the server: BodyLimits.guardBodySize.) The text read here is cached on the request, so
 * the route's decoding parses the same text without reading the body again.
 */
const RAW_FILE_PATH = /^\/v1\/sandboxes\/[^/]+\/files\/content$/

const checkBody = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  if (!BODY_METHODS.has(request.method)) return
  const length = Number(request.headers["content-length"] ?? "0")
  const chunked = (request.headers["transfer-encoding"] ?? "").includes("chunked")
  if (length === 0 && !chunked) return
  const contentType = (request.headers["content-type"] ?? "").toLowerCase()
  // The raw file route takes bytes as they are (src/http/groups/FilesystemApi.ts, writeContent).
  if (RAW_FILE_PATH.test(new URL(request.url, "http://gateway").pathname)) {
    if (contentType.startsWith("application/octet-stream")) return
    return yield* apiError(UnsupportedMediaType, "unsupported_media_type", "A raw file body is sent as application/octet-stream")
  }
  if (!contentType.startsWith("application/json")) {
    return yield* apiError(UnsupportedMediaType, "unsupported_media_type", "Request bodies must be JSON (Content-Type: application/json)")
  }
  const text = yield* request.text
  if (jsonNestingExceeds(text, MAX_JSON_DEPTH)) {
    const message = `The JSON body nests arrays or objects deeper than ${MAX_JSON_DEPTH} levels`
    return yield* apiError(Unprocessable, "validation_error", message, { issues: [{ path: "", message }], max_depth: MAX_JSON_DEPTH })
  }
})

/** What the server itself answers with on any route (Api.ts declares them for every route). */
type ServerFailure =
  | Coded<BadRequest, "invalid_json">
  | Coded<NotFound, "not_found">
  | Coded<Unprocessable, "validation_error">
  | Coded<InternalError, "internal_error">
  | Coded<UnsupportedMediaType, "unsupported_media_type">
  | Coded<ServiceUnavailable, "database_busy">

export const ErrorEnvelopeLive = HttpApiBuilder.middleware(
  Api,
  (app) =>
    Effect.zipRight(checkBody, app).pipe(
      Effect.catchAllCause((cause): Effect.Effect<never, ServerFailure> => {
        if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
        const failure = Cause.failureOption(cause)
        const defect = Cause.dieOption(cause)
        if (Option.isSome(failure)) {
          const error: unknown = failure.value
          if (error instanceof HttpApiError.HttpApiDecodeError) {
            return Effect.fail(validationFailed(error))
          }
          if (HttpServerError.isServerError(error) && error._tag === "RouteNotFound") {
            return Effect.fail(apiError(NotFound, "not_found", "Route not found"))
          }
          if (HttpServerError.isServerError(error) && error._tag === "RequestError") {
            return Effect.fail(apiError(BadRequest, "invalid_json", "The request body could not be read"))
          }
          return Effect.failCause(cause as Cause.Cause<never>) // a declared error: encoded by HttpApi
        }
        if (Option.isSome(defect) && HttpServerError.isServerError(defect.value) && defect.value._tag === "RequestError") {
          return Effect.fail(apiError(BadRequest, "invalid_json", "The request body is not valid JSON"))
        }
        // Another process (the CLI, a backup) held the database: nothing was written, so the request can be sent again.
        if (Option.isSome(defect) && isDatabaseBusy(defect.value)) {
          return Effect.zipRight(
            Effect.logWarning("database busy", cause),
            Effect.fail(apiError(ServiceUnavailable, "database_busy", "The database is busy; send the request again"))
          )
        }
        return Effect.zipRight(
          Effect.logError("unhandled failure", cause),
          Effect.fail(apiError(InternalError, "internal_error", "Internal server error"))
        )
      })
    )
)
