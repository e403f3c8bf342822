/**
 * The edge of the gateway's two listeners (the API's and the endpoint listener's): what holds before any route
 * runs, and the answer for anything thrown outside the Effect app (Telemetry, FastReads, raw writes, attach, MCP,
 * the endpoint proxy's upgrades).
 *
 * - Production mode, always (`EDGE_SERVE_OPTIONS`): in Bun's development mode — its default unless NODE_ENV is
 *   `production` when the process starts — an exception becomes a 50 KB error page naming the checkout's path and
 *   quoting the source around the throw. Here anything thrown is logged and answered with the 500 envelope.
 * - A usable Host (`atTheEdge`): a request without one (HTTP/1.0 may omit it), with two, or with one that is not
 *   `host[:port]` has no URL (Bun's `request.url` is then just the path, which `new URL` refuses); it is refused
 *   with the 400 envelope before any route reads its URL.
 */
import type { ErrorCode } from "../domain/ErrorCodes.ts"
import { newRequestId, requestIdOf } from "./RequestId.ts"

/** Bun route or fetch handler; no response (undefined) when it upgraded the connection to a WebSocket. */
type Handler<Req extends Request, S, R extends Response | undefined> = (request: Req, server: S) => R | Promise<R>

/** The error envelope as a plain Response, for the code that runs before the Effect app. */
export const envelopeResponse = (
  status: number,
  code: ErrorCode,
  message: string,
  options: { readonly requestId?: string; readonly headers?: Record<string, string>; readonly details?: Record<string, unknown> } = {}
): Response => {
  const requestId = options.requestId ?? newRequestId()
  return Response.json({ code, message, request_id: requestId, retryable: status >= 500, details: options.details ?? {} }, {
    status,
    headers: { "x-request-id": requestId, ...options.headers }
  })
}

/** What a crash at the edge answers: the envelope, with nothing internal in it; the error itself goes to the log. */
export const internalErrorResponse = (what: string, error: unknown, requestId: string = newRequestId()): Response => {
  console.error(`${what} failed`, { request_id: requestId, error: error instanceof Error ? (error.stack ?? error.message) : String(error) })
  return envelopeResponse(500, "internal_error", "Internal server error", { requestId })
}

/** `host` or `host:port` (RFC 9110 §7.2): a name, an IPv4 address or a bracketed IPv6 one; never a list. */
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+;=-]+)(?::[0-9]{0,5})?$/

/** Whether the request names the server it is for, so that it has a URL. */
export const hasUsableHost = (request: Request): boolean => {
  const host = request.headers.get("host")
  return host !== null && HOST.test(host) && URL.canParse(request.url)
}

const noUsableHost = (request: Request) =>
  envelopeResponse(400, "invalid_host", "The request needs one Host header naming the server (host or host:port)", { requestId: requestIdOf(request) })

/**
 * A route or fetch handler behind the edge: a request without a usable Host is refused (400), and whatever the
 * handler throws or rejects with is the 500 envelope.
 */
export const atTheEdge = <Req extends Request, S, R extends Response | undefined>(name: string, handler: Handler<Req, S, R>) =>
  async (request: Req, server: S): Promise<R | Response> => {
    if (!hasUsableHost(request)) return noUsableHost(request)
    try {
      return await handler(request, server)
    } catch (e) {
      return internalErrorResponse(name, e, requestIdOf(request))
    }
  }

/** Every route of a Bun route table behind the edge. */
export const edgeRoutes = <Req extends Request, S, R extends Response | undefined>(
  routes: Record<string, Handler<Req, S, R>>
): Record<string, (request: Req, server: S) => Promise<R | Response>> =>
  Object.fromEntries(Object.entries(routes).map(([path, route]) => [path, atTheEdge(`route ${path}`, route)]))

/**
 * Options every Bun server of the gateway is started with: never Bun's development error page, and an answer
 * without internals for anything that still escapes a handler.
 */
export const EDGE_SERVE_OPTIONS = {
  development: false,
  error: (error: unknown) => internalErrorResponse("request", error)
} as const
