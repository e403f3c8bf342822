/** Bun routes ahead of the API (attach, raw writes): their unexpected failures still answer the envelope. */
import { internalErrorResponse } from "./Edge.ts"
import { requestIdOf } from "./RequestId.ts"

/**
 * A Bun route that never answers a bare 500: whatever it throws is logged and answered with the error envelope
 * (`internal_error`, retryable), as the API answers its own failures.
 */
export const guardedRoute = <Req extends Request, S, R extends Response | undefined>(name: string, route: (request: Req, server: S) => Promise<R>) =>
  async (request: Req, server: S): Promise<R | Response> => {
    try {
      return await route(request, server)
    } catch (e) {
      return internalErrorResponse(name, e, requestIdOf(request))
    }
  }
