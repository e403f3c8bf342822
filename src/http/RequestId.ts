/**
 * Every response carries `x-request-id`: a well-formed incoming one is echoed, otherwise a new one is made.
 * Set at the serve level (outermost), so error encoding deep inside sees it through `CurrentRequestId`.
 */
import { HttpApp, HttpMiddleware, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
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
    const incoming = (yield* HttpServerRequest.HttpServerRequest).headers["x-request-id"]
    const id = incoming !== undefined && WELL_FORMED_REQUEST_ID.test(incoming) ? incoming : newRequestId()
    yield* HttpApp.appendPreResponseHandler((_req, res) => Effect.succeed(HttpServerResponse.setHeader(res, "x-request-id", id)))
    return yield* Effect.locally(app, CurrentRequestId, id).pipe(Effect.annotateLogs("request_id", id))
  })
)
