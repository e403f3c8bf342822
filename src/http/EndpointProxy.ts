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
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { HttpServer } from "@effect/platform"
import { BunHttpServer } from "@effect/platform-bun"
import { Cause, Context, Effect, FiberRef, Layer } from "effect"
import { AppConfig } from "../Config.ts"
import { repositories } from "../db/Database.ts"
import { EndpointsRepo } from "../db/repos/Endpoints.ts"
import { type EndpointAddressing, parseEndpointLabel, parseEndpointPath } from "../domain/EndpointAddress.ts"
import { CurrentRequestId } from "../domain/Errors.ts"
import { sha256Hex, timingSafeEqualHex } from "../domain/Tokens.ts"
import { type CutReason, EndpointConnections, refusal } from "../services/sandboxes/EndpointConnections.ts"
import { touchSandbox } from "../services/sandboxes/SandboxRows.ts"
import { withRequestId } from "./RequestId.ts"

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

const envelope = (status: number, code: string, message: string) =>
  Effect.flatMap(FiberRef.get(CurrentRequestId), (request_id) =>
    HttpServerResponse.json({ code, message, request_id, retryable: status >= 500 }, { status }).pipe(Effect.orDie))

const CUT_MESSAGES: Record<CutReason, [number, string, string]> = {
  revoked: [410, "endpoint_inactive", "The endpoint was revoked"],
  expired: [410, "endpoint_inactive", "The endpoint's lease expired"],
  sandbox_unavailable: [503, "sandbox_unavailable", "The sandbox is not running"]
}

interface Located {
  readonly endpointId: string
  readonly token: string
  /** The path after the endpoint's root; undefined in path mode when the root lacks its trailing slash. */
  readonly rest: string | undefined
  /** The path prefix the sandbox's server does not see (path mode only). */
  readonly prefix: string | undefined
}

const locate = (addressing: EndpointAddressing, request: HttpServerRequest.HttpServerRequest, url: URL): Located | undefined => {
  if (addressing._tag === "path") {
    const found = parseEndpointPath(url.pathname)
    return found === undefined ? undefined : { ...found, prefix: `/e/${found.endpointId}/${found.token}` }
  }
  // Host mode: exactly one label in front of the base host name (case-insensitive; port and a final dot dropped).
  const host = (request.headers["host"] ?? "").toLowerCase().replace(/:\d+$/, "").replace(/\.$/, "")
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
        } else controller.enqueue(value)
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

export const proxy = (addressing: EndpointAddressing) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const connections = yield* EndpointConnections
    const url = new URL(request.url, "http://endpoint")
    const located = locate(addressing, request, url)
    if (located === undefined) return yield* envelope(404, "not_found", "Endpoint not found")
    const row = yield* EndpointsRepo.access(located.endpointId)
    if (row === undefined || !timingSafeEqualHex(sha256Hex(located.token), row.token_hash)) {
      return yield* envelope(404, "not_found", "Endpoint not found")
    }
    if (row.state === "provisioning") return yield* envelope(503, "endpoint_provisioning", "The endpoint is still being provisioned")
    const refused = refusal(row)
    if (refused === "revoked") return yield* envelope(410, "endpoint_inactive", `The endpoint is ${row.state}`)
    if (refused !== undefined) return yield* envelope(...CUT_MESSAGES[refused])
    // Without a trailing slash relative links in the served page would resolve above the endpoint root.
    if (located.rest === undefined) return HttpServerResponse.redirect(`${url.pathname}/${url.search}`, { status: 308 })

    const headers = new Headers()
    for (const [name, value] of Object.entries(request.headers)) if (!HOP_BY_HOP.has(name)) headers.set(name, value)
    if (located.prefix !== undefined) headers.set("x-forwarded-prefix", located.prefix)
    const source = request.source as Request
    const target = row.provider_url!.replace(/\/+$/, "") + located.rest + url.search
    const exchange = connections.open({ id: row.id, leaseExpiresAt: row.lease_expires_at })
    const response = yield* Effect.tryPromise({
      try: (interrupted) => {
        // Either the exchange is cut or the client went away.
        const signal = AbortSignal.any([exchange.signal, interrupted])
        return fetch(target, {
          method: request.method,
          headers,
          redirect: "manual",
          signal,
          ...(request.method === "GET" || request.method === "HEAD" ? {} : { body: source.body, duplex: "half" } as RequestInit)
        })
      },
      catch: (e) => e
    }).pipe(Effect.either, Effect.onInterrupt(() => Effect.sync(exchange.close)))
    yield* touchSandbox(row.sandbox_id)
    if (response._tag === "Left") {
      exchange.close()
      const reason = exchange.cutReason()
      if (reason !== undefined) return yield* envelope(...CUT_MESSAGES[reason])
      return yield* envelope(502, "endpoint_unreachable", "The sandbox did not answer on this port")
    }
    const upstream = response.right
    const out = new Headers(upstream.headers)
    for (const name of HOP_BY_HOP) out.delete(name)
    out.delete("content-encoding") // fetch already decoded the body
    let body: ReadableStream<Uint8Array> | null = null
    if (upstream.body === null || request.method === "HEAD") {
      exchange.close()
      upstream.body?.cancel().catch(() => {})
    } else body = relay(upstream.body, exchange.signal, exchange.close)
    return HttpServerResponse.raw(new Response(body, { status: upstream.status, statusText: upstream.statusText, headers: out }))
  })

/** Anything unexpected is still an envelope (500, nothing internal). */
const guarded = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  app.pipe(Effect.catchAllCause((cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.failCause(cause)
      : Effect.zipRight(Effect.logError("endpoint proxy failed", cause), envelope(500, "internal_error", "Internal server error"))
  ))

/** The endpoint listener: its own Bun server, serving the proxy and nothing else. */
export const EndpointServerLive = Layer.scoped(
  EndpointOrigin,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const context = yield* repositories
    const connections = yield* EndpointConnections
    const server: HttpServer.HttpServer = yield* BunHttpServer.make({
      port: config.endpoints.port,
      hostname: config.endpoints.host,
      idleTimeout: ENDPOINT_IDLE_TIMEOUT_SECONDS,
      maxRequestBodySize: ENDPOINT_MAX_BODY_BYTES
    })
    const address = server.address as HttpServer.TcpAddress
    const base = config.endpoints.base
    const addressing: EndpointAddressing = base !== undefined
      ? { _tag: "host", scheme: base.scheme, baseHost: base.baseHost, port: base.port }
      : { _tag: "path", origin: config.endpoints.publicOrigin ?? `http://${address.hostname}:${address.port}` }
    const app = guarded(proxy(addressing)).pipe(
      Effect.provide(context),
      Effect.provideService(EndpointConnections, connections)
    )
    yield* server.serve(withRequestId(app))
    // Always printed, like the API's address: operators and the test harness read it.
    console.log(`Serving endpoints on http://${address.hostname}:${address.port}${base === undefined ? "" : ` for *.${base.baseHost}`}`)
    return { addressing }
  })
)
