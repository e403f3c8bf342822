/**
 * Every response carries `x-request-id`: a well-formed incoming one is echoed, otherwise a new one is made.
 * Set at the serve level (outermost), so error encoding deep inside sees it through `CurrentRequestId`.
 * It also opens the request's span (src/services/Tracing.ts), the child of an incoming W3C `traceparent` when there
 * is one, so the services' and jobs' spans hang under the request that caused them.
 */
import { HttpApp, HttpMiddleware, HttpServerRequest, HttpServerResponse, HttpTraceContext } from "@effect/platform"
import { Effect, Option } from "effect"
import { CurrentRequestId } from "../domain/Errors.ts"

export const WELL_FORMED_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

export const newRequestId = () => `req_${crypto.randomUUID().replaceAll("-", "")}`

/** A request's id for an answer made outside the Effect app: its own when well-formed, else a new one. */
export const requestIdOf = (request: Request): string => {
  const incoming = request.headers.get("x-request-id")
  return incoming !== null && WELL_FORMED_REQUEST_ID.test(incoming) ? incoming : newRequestId()
}

export const withRequestId = HttpMiddleware.make((app) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const incoming = request.headers["x-request-id"]
    const id = incoming !== undefined && WELL_FORMED_REQUEST_ID.test(incoming) ? incoming : newRequestId()
    yield* HttpApp.appendPreResponseHandler((_req, res) => Effect.succeed(HttpServerResponse.setHeader(res, "x-request-id", id)))
    // The path, not a route template: the route is chosen further in; the services' spans name the operation.
    const path = request.url.split("?")[0] ?? request.url
    return yield* Effect.locally(app, CurrentRequestId, id).pipe(
      Effect.tap((response) => Effect.annotateCurrentSpan("http.response.status_code", response.status)),
      Effect.annotateLogs("request_id", id),
      Effect.withSpan(`HTTP ${request.method}`, {
        kind: "server",
        parent: Option.getOrUndefined(HttpTraceContext.fromHeaders(request.headers)),
        attributes: { "http.request.method": request.method, "url.path": path, "request_id": id }
      })
    )
  })
)
