/**
 * The gateway's reverse proxy for sandbox endpoints, on its own listener (never the API's origin: a page served
 * by a sandbox must not run script where `/v1` and `/docs` live). Two addressings (src/domain/EndpointAddress.ts):
 *
 * - path (default): `<endpoint origin>/e/<endpoint id>/<token>/<path>`;
 * - host (ENDPOINT_BASE_URL): `ep-<id>-<token>.<base host>/<path>`, one origin per endpoint, routed by Host.
 *
 * The token is a capability (only its SHA-256 is stored). Every request checks the lease, the endpoint's state
 * and the sandbox's; every exchange is registered with EndpointConnections, which cuts it the moment the lease
 * ends, the endpoint is revoked or the sandbox stops serving. Nothing else is served on this listener.
 *
 * Connections are kept alive between requests (HTTP/1.1), and a WebSocket upgrade is proxied too: after the same
 * checks, the upstream WebSocket (the provider's URL, `ws:`/`wss:`) is opened first, then the client's is accepted
 * with the subprotocol the sandbox chose, and messages are relayed both ways (src/providers/websocket.ts) until
 * either side closes or the exchange is cut (then both are closed, 1001 or 1013 ...). Traffic through an
 * endpoint, plain or WebSocket, is activity for the sandbox's idle timeout.
 *
 * A visitor's gateway credentials (a key or user token in Authorization, X-Metal-Project-ID, the gateway's own
 * cookies) are taken out of every request and upgrade before it leaves (src/http/EndpointHeaders.ts).
 *
 * A sandbox on another live node (services/Forwarding.ts): its requests and upgrades, after the same checks, go to
 * that node's endpoint listener, as they came (path, query, and in host mode the Host), with the forward mark.
 */
import type { ErrorCode } from "../domain/ErrorCodes.ts"
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Context, Effect, FiberRef, Layer } from "effect"
import { isWebSocketUpgrade, openUpstream, type Relay, relay as relayWebSocket } from "../providers/websocket.ts"
import { AppConfig, type AppConfigShape } from "../Config.ts"
import { FORWARDED_HEADER, forwardMark, isForwardMark, NODE_UNREACHABLE_MESSAGE, ownerUrl } from "../services/Forwarding.ts"
import { recordEndpointUrl } from "../services/Nodes.ts"
import { type ServiceContext, serviceContext } from "../services/ServiceContext.ts"
import { endpointAccess } from "../services/sandboxes/Endpoints.ts"
import { type EndpointAddressing, parseEndpointLabel, parseEndpointPath } from "../domain/EndpointAddress.ts"
import { passedOn } from "../domain/Bodies.ts"
import { CurrentRequestId } from "../domain/Errors.ts"
import type { EndpointId, SandboxId } from "../domain/Ids.ts"
import { sha256Hex, timingSafeEqualHex } from "../domain/Tokens.ts"
import { type CutReason, EndpointConnections, refusal } from "../services/sandboxes/EndpointConnections.ts"
import { touchSandbox } from "../services/sandboxes/SandboxRows.ts"
import { newRequestId, withRequestId } from "./RequestId.ts"
import { atTheEdge, EDGE_SERVE_OPTIONS } from "./Edge.ts"
import { withoutGatewayCredentials } from "./EndpointHeaders.ts"

/** Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus what fetch sets itself. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"])
/** Seconds a connection may stay silent (a slow sandbox server, a long poll) before Bun closes it. */
const ENDPOINT_IDLE_TIMEOUT_SECONDS = 120
/** Request bodies are streamed to the sandbox, never held; Bun refuses (413) above this. */
export const ENDPOINT_MAX_BODY_BYTES = 1024 * 1024 * 1024

/** Where endpoints are served, for the URLs handed out by the API. */
export class EndpointOrigin extends Context.Tag("app/EndpointOrigin")<EndpointOrigin, {
  readonly addressing: EndpointAddressing
}>() {}

const envelope = (status: number, code: ErrorCode, message: string) =>
  Effect.flatMap(FiberRef.get(CurrentRequestId), (request_id) =>
    HttpServerResponse.json({ code, message, request_id, retryable: status >= 500 }, { status }).pipe(Effect.orDie))

const CUT_MESSAGES: Record<CutReason, [number, ErrorCode, string]> = {
  revoked: [410, "endpoint_inactive", "The endpoint was revoked"],
  expired: [410, "endpoint_inactive", "The endpoint's lease expired"],
  sandbox_unavailable: [503, "sandbox_unavailable", "The sandbox is not running"]
}

interface Located {
  readonly endpointId: EndpointId
  readonly token: string
  /** The path after the endpoint's root; undefined in path mode when the root lacks its trailing slash. */
  readonly rest: string | undefined
  /** The path prefix the sandbox's server does not see (path mode only). */
  readonly prefix: string | undefined
}

const locate = (addressing: EndpointAddressing, headers: Readonly<Record<string, string | undefined>>, url: URL): Located | undefined => {
  if (addressing._tag === "path") {
    const found = parseEndpointPath(url.pathname)
    return found === undefined ? undefined : { ...found, prefix: `/e/${found.endpointId}/${found.token}` }
  }
  // Host mode: exactly one label in front of the base host name (case-insensitive; port and a final dot dropped).
  const host = (headers["host"] ?? "").toLowerCase().replace(/:\d+$/, "").replace(/\.$/, "")
  const suffix = `.${addressing.baseHost}`
  if (!host.endsWith(suffix)) return undefined
  const found = parseEndpointLabel(host.slice(0, -suffix.length))
  return found === undefined ? undefined : { ...found, rest: url.pathname, prefix: undefined }
}

/**
 * The upstream body, handed to the client as it comes; on a cut the client's response errors out (Bun closes the
 * connection, so a truncated body can never pass for a complete one). `undefined` is the error value because Bun
 * prints any other value a response stream fails with.
 */
const relay = (upstream: ReadableStream<Uint8Array>, signal: AbortSignal, done: () => void): ReadableStream<Uint8Array> => {
  const reader = upstream.getReader()
  return new ReadableStream<Uint8Array>({
    start(controller) {
      signal.addEventListener("abort", () => {
        done()
        reader.cancel().catch(() => {})
        try {
          controller.error(undefined)
        } catch {
          // already closed
        }
      }, { once: true })
    },
    async pull(controller) {
      try {
        const { done: finished, value } = await reader.read()
        if (finished) {
          done()
          controller.close()
        } else {
          passedOn(value.length)
          controller.enqueue(value)
        }
      } catch {
        done()
        try {
          controller.error(undefined)
        } catch {
          // already errored by the abort
        }
      }
    },
    cancel(reason) {
      done()
      reader.cancel(reason).catch(() => {})
    }
  })
}

/** What a request to the endpoint listener comes to: a refusal, a redirect to the endpoint root, or the target. */
type Resolved =
  | { readonly _tag: "refused"; readonly status: number; readonly code: ErrorCode; readonly message: string }
  | { readonly _tag: "redirect"; readonly location: string }
  | {
    readonly _tag: "target"
    readonly endpointId: EndpointId
    readonly sandboxId: SandboxId
    readonly leaseExpiresAt: string
    readonly url: string
    readonly prefix: string | undefined
    /** The mark of a request forwarded to the sandbox's node (services/Forwarding.ts), which serves it. */
    readonly forwardMark: string | undefined
    /** The Host a forwarded request keeps (host addressing: it names the endpoint on the owner's listener). */
    readonly host: string | undefined
  }

const refused = (status: number, code: ErrorCode, message: string): Resolved => ({ _tag: "refused", status, code, message })

/** What a request forwarded to the owner node carries beside the client's headers: the mark, and its Host. */
const forwardingHeaders = (target: Extract<Resolved, { _tag: "target" }>): Record<string, string> => ({
  ...(target.forwardMark === undefined ? {} : { [FORWARDED_HEADER]: target.forwardMark }),
  ...(target.host === undefined ? {} : { host: target.host })
})

/** The checks every request and upgrade passes: the endpoint, its token, its lease and state, its sandbox's. */
const resolve = (
  addressing: EndpointAddressing,
  config: AppConfigShape,
  request: { readonly method: string; readonly url: string; readonly headers: Readonly<Record<string, string | undefined>> }
) =>
  Effect.gen(function*() {
    const url = new URL(request.url, "http://endpoint")
    const located = locate(addressing, request.headers, url)
    if (located === undefined) return refused(404, "not_found", "Endpoint not found")
    const row = yield* endpointAccess(located.endpointId)
    if (row === undefined || !timingSafeEqualHex(sha256Hex(located.token), row.token_hash)) return refused(404, "not_found", "Endpoint not found")
    if (row.state === "provisioning") return refused(503, "endpoint_provisioning", "The endpoint is still being provisioned")
    const cut = refusal(row)
    if (cut === "revoked") return refused(410, "endpoint_inactive", `The endpoint is ${row.state}`)
    if (cut !== undefined) return refused(...CUT_MESSAGES[cut])
    // Without a trailing slash relative links in the served page would resolve above the endpoint root.
    if (located.rest === undefined) return { _tag: "redirect", location: `${url.pathname}/${url.search}` } as const
    // A sandbox on another (live) node: its provider address is that node's; the request goes there, as is (the
    // endpoint's path, or its Host, names it on every node's listener).
    if (!isForwardMark(config, request.method, request.url, request.headers[FORWARDED_HEADER])) {
      const owner = yield* ownerUrl(config, row.sandbox_id, "endpoints")
      if (owner !== undefined) {
        return {
          _tag: "target",
          endpointId: row.id,
          sandboxId: row.sandbox_id,
          leaseExpiresAt: row.lease_expires_at,
          url: owner + url.pathname + url.search,
          prefix: undefined,
          forwardMark: forwardMark(config, request.method, url.pathname + url.search),
          host: addressing._tag === "host" ? request.headers["host"] : undefined
        } as const
      }
    }
    return {
      _tag: "target",
      endpointId: row.id,
      sandboxId: row.sandbox_id,
      leaseExpiresAt: row.lease_expires_at,
      url: row.provider_url!.replace(/\/+$/, "") + located.rest + url.search,
      prefix: located.prefix,
      forwardMark: undefined,
      host: undefined
    } as const
  })

export const proxy = (addressing: EndpointAddressing, config: AppConfigShape) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const connections = yield* EndpointConnections
    const resolved = yield* resolve(addressing, config, request)
    if (resolved._tag === "refused") return yield* envelope(resolved.status, resolved.code, resolved.message)
    if (resolved._tag === "redirect") return HttpServerResponse.redirect(resolved.location, { status: 308 })

    const headers = new Headers()
    for (const [name, value] of Object.entries(request.headers)) if (!HOP_BY_HOP.has(name) && name !== FORWARDED_HEADER) headers.set(name, value)
    // The gateway's credentials never reach the sandbox (src/http/EndpointHeaders.ts).
    for (const [name, value] of Object.entries(withoutGatewayCredentials(headers))) {
      if (value === undefined) headers.delete(name)
      else headers.set(name, value)
    }
    if (resolved.prefix !== undefined) headers.set("x-forwarded-prefix", resolved.prefix)
    for (const [name, value] of Object.entries(forwardingHeaders(resolved))) headers.set(name, value)
    const source = request.source as Request
    const exchange = connections.open({ id: resolved.endpointId, leaseExpiresAt: resolved.leaseExpiresAt })
    const response = yield* Effect.tryPromise({
      try: (interrupted) => {
        // Either the exchange is cut or the client went away.
        const signal = AbortSignal.any([exchange.signal, interrupted])
        return fetch(resolved.url, {
          method: request.method,
          headers,
          redirect: "manual",
          signal,
          // A sandbox's compressed answer passes as it came, with its Content-Encoding, for the visitor (who asked
          // for it) to inflate: a gzip bomb is never inflated in the gateway.
          decompress: false,
          ...(request.method === "GET" || request.method === "HEAD" ? {} : { body: source.body, duplex: "half" })
        } as RequestInit)
      },
      catch: (e) => e
    }).pipe(Effect.either, Effect.onInterrupt(() => Effect.sync(exchange.close)))
    yield* touchSandbox(resolved.sandboxId)
    if (response._tag === "Left") {
      exchange.close()
      const reason = exchange.cutReason()
      if (reason !== undefined) return yield* envelope(...CUT_MESSAGES[reason])
      if (resolved.forwardMark !== undefined) return yield* envelope(503, "node_unreachable", NODE_UNREACHABLE_MESSAGE)
      return yield* envelope(502, "endpoint_unreachable", "The sandbox did not answer on this port")
    }
    const upstream = response.right
    const out = new Headers(upstream.headers)
    for (const name of HOP_BY_HOP) out.delete(name)
    let body: ReadableStream<Uint8Array> | null = null
    if (upstream.body === null || request.method === "HEAD") {
      exchange.close()
      upstream.body?.cancel().catch(() => {})
    } else body = relay(upstream.body, exchange.signal, exchange.close)
    return HttpServerResponse.raw(new Response(body, { status: upstream.status, statusText: upstream.statusText, headers: out }))
  })

/** Whether the listener at `url`'s origin answers HTTP at all (a node's endpoint listener answers 404 at `/`). */
const answers = (url: string) =>
  fetch(new URL(url).origin, { method: "HEAD", redirect: "manual", signal: AbortSignal.timeout(5_000) }).then(() => true, () => false)

/** Close codes for a cut WebSocket: the lease or the endpoint ended (1001, going away), the sandbox stopped (1013). */
const CUT_CLOSE: Record<CutReason, number> = { revoked: 1001, expired: 1001, sandbox_unavailable: 1013 }
/** Traffic through a WebSocket touches its sandbox at most this often. */
const TOUCH_EVERY_MS = 1_000

/**
 * A WebSocket upgrade through an endpoint: the same checks as a request (a refusal is the same envelope), then
 * the upstream WebSocket, then the client's, relayed until either closes or the exchange is cut.
 */
const upgradeRoute = (addressing: EndpointAddressing, config: AppConfigShape, run: <A>(effect: Effect.Effect<A, never, ServiceContext | EndpointConnections>) => Promise<A>) =>
  async (request: Request, server: Bun.Server<EndpointSocketData>): Promise<Response | undefined> => {
    const requestId = newRequestId()
    const answer = (status: number, code: ErrorCode, message: string) =>
      Response.json({ code, message, request_id: requestId, retryable: status >= 500 }, { status, headers: { "x-request-id": requestId } })
    const resolved = await run(resolve(addressing, config, { method: request.method, url: request.url, headers: Object.fromEntries(request.headers) }))
    if (resolved._tag === "refused") return answer(resolved.status, resolved.code, resolved.message)
    if (resolved._tag === "redirect") return new Response(null, { status: 308, headers: { location: resolved.location, "x-request-id": requestId } })
    const connections = await run(EndpointConnections)
    const exchange = connections.open({ id: resolved.endpointId, leaseExpiresAt: resolved.leaseExpiresAt })
    // A client's own forward mark goes nowhere: replaced when forwarded, dropped before the sandbox; nor do the
    // gateway's credentials.
    const extra: Record<string, string | undefined> = {
      [FORWARDED_HEADER]: undefined,
      ...withoutGatewayCredentials(request.headers),
      ...(resolved.prefix === undefined ? {} : { "x-forwarded-prefix": resolved.prefix }),
      ...forwardingHeaders(resolved)
    }
    const upstream = await openUpstream(resolved.url.replace(/^http/, "ws"), request, extra).catch(() => undefined)
    if (upstream === undefined || exchange.signal.aborted) {
      exchange.close()
      upstream?.close()
      const reason = exchange.cutReason()
      if (reason !== undefined) return answer(...CUT_MESSAGES[reason])
      // Forwarded: the owner refused the upgrade (its sandbox did not take it), or the owner is gone.
      if (resolved.forwardMark !== undefined && !(await answers(resolved.url))) return answer(503, "node_unreachable", NODE_UNREACHABLE_MESSAGE)
      return answer(502, "endpoint_unreachable", "The sandbox did not accept a WebSocket on this port")
    }
    let touched = Date.now()
    const onOpen = (ws: Bun.ServerWebSocket<EndpointSocketData>) => {
      const relayed = relayWebSocket(ws, upstream, {
        onTraffic: () => {
          if (Date.now() - touched < TOUCH_EVERY_MS) return
          touched = Date.now()
          void run(touchSandbox(resolved.sandboxId))
        },
        onEnd: exchange.close
      })
      exchange.signal.addEventListener("abort", () => {
        const reason = exchange.cutReason()
        relayed.cut(reason === undefined ? 1001 : CUT_CLOSE[reason], reason === undefined ? "closed" : CUT_MESSAGES[reason][2])
      }, { once: true })
      return relayed
    }
    const headers = { "x-request-id": requestId, ...(upstream.protocol === "" ? {} : { "sec-websocket-protocol": upstream.protocol }) }
    if (!server.upgrade(request, { data: { upstream, onOpen, relay: null }, headers })) {
      exchange.close()
      upstream.close()
      return answer(400, "bad_request", "Not a valid WebSocket upgrade")
    }
    void run(touchSandbox(resolved.sandboxId))
    return undefined
  }

/** Anything unexpected is still an envelope (500, nothing internal). */
const guarded = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  app.pipe(Effect.catchAllCause((cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.failCause(cause)
      : Effect.zipRight(Effect.logError("endpoint proxy failed", cause), envelope(500, "internal_error", "Internal server error"))
  ))

/** An upgraded endpoint connection: its relay once the client side is open, and messages that came before. */
interface EndpointSocketData {
  readonly upstream: WebSocket
  readonly onOpen: (ws: Bun.ServerWebSocket<EndpointSocketData>) => Relay
  relay: Relay | null
}

/**
 * The endpoint listener: its own Bun server, serving the proxy and nothing else. Plain requests go to the Effect
 * app (as a web handler); WebSocket upgrades are taken first (only Bun's `fetch` with its `server` can upgrade).
 */
export const EndpointServerLive = Layer.scoped(
  EndpointOrigin,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const context = yield* serviceContext
    const connections = yield* EndpointConnections
    const base = config.endpoints.base
    const run = <A>(effect: Effect.Effect<A, never, ServiceContext | EndpointConnections>) =>
      Effect.runPromise(effect.pipe(Effect.provide(context), Effect.provideService(EndpointConnections, connections)))
    // Known once the server listens (path addressing names its own origin); requests are handled after that.
    let handle: (request: Request, server: Bun.Server<EndpointSocketData>) => Promise<Response | undefined> = async () => new Response(null, { status: 503 })
    const server = yield* Effect.acquireRelease(
      Effect.sync(() =>
        Bun.serve<EndpointSocketData>({
          ...EDGE_SERVE_OPTIONS,
          port: config.endpoints.port,
          hostname: config.endpoints.host,
          idleTimeout: ENDPOINT_IDLE_TIMEOUT_SECONDS,
          maxRequestBodySize: ENDPOINT_MAX_BODY_BYTES,
          // The edge first (a usable Host; a crash of the upgrade path answers the envelope), as on the API's listener.
          fetch: atTheEdge("endpoint proxy", (request: Request, bunServer: Bun.Server<EndpointSocketData>) => handle(request, bunServer)),
          websocket: {
            open: (ws) => {
              ws.data.relay = ws.data.onOpen(ws)
            },
            message: (ws, message) => ws.data.relay?.fromClient(message),
            close: (ws, code, reason) => ws.data.relay?.clientClosed(code, reason)
          }
        })
      ),
      (s) => Effect.promise(() => s.stop(true))
    )
    const addressing: EndpointAddressing = base !== undefined
      ? { _tag: "host", scheme: base.scheme, baseHost: base.baseHost, port: base.port }
      : { _tag: "path", origin: config.endpoints.publicOrigin ?? `http://${server.hostname}:${server.port}` }
    const app = guarded(proxy(addressing, config)).pipe(
      Effect.provide(context),
      Effect.provideService(EndpointConnections, connections)
    )
    const web = HttpApp.toWebHandlerRuntime(yield* Effect.runtime<never>())(withRequestId(app))
    const upgrade = upgradeRoute(addressing, config, run)
    handle = (request, bunServer) => (isWebSocketUpgrade(request) ? upgrade(request, bunServer) : web(request))
    // Where the other replicas forward this node's endpoint traffic: NODE_URL's host with this listener's port,
    // else the address it listens on (docs/operations/scaling-out.md).
    const own = config.nodeUrl === undefined
      ? `http://${server.hostname}:${server.port}`
      : (() => {
        const u = new URL(config.nodeUrl)
        u.port = String(server.port)
        return u.origin
      })()
    yield* recordEndpointUrl(config, own).pipe(Effect.provide(context))
    // Always printed, like the API's address: operators and the test harness read it.
    console.log(`Serving endpoints on http://${server.hostname}:${server.port}${base === undefined ? "" : ` for *.${base.baseHost}`}`)
    return { addressing }
  })
)
