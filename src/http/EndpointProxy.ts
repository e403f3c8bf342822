/**
 * The gateway's reverse proxy for sandbox endpoints: `<PUBLIC_URL>/e/<endpoint id>/<token>/<path>` forwards to
 * the provider's URL for that port. The token is a capability (only its SHA-256 is stored); the lease is checked
 * on every request, so a revoked or expired endpoint stops serving at once.
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef } from "effect"
import { repositories } from "../db/Database.ts"
import { CurrentRequestId } from "../domain/Errors.ts"
import { sha256Hex, timingSafeEqualHex } from "../domain/Tokens.ts"
import { getEndpointRow } from "../services/sandboxes/Endpoints.ts"
import { touchSandbox } from "../services/sandboxes/SandboxRows.ts"

export const ENDPOINT_PATH_PREFIX = "/e/"
const PATH = /^\/e\/(ep_[A-Za-z0-9]+)\/([A-Za-z0-9_-]{16,128})(\/.*)?$/
/** Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus what fetch sets itself. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"])

const envelope = (status: number, code: string, message: string) =>
  Effect.flatMap(FiberRef.get(CurrentRequestId), (request_id) =>
    HttpServerResponse.json({ code, message, request_id, retryable: status >= 500 }, { status }).pipe(Effect.orDie))

const proxy = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const url = new URL(request.url, "http://gateway")
  const match = PATH.exec(url.pathname)
  if (match === null) return yield* envelope(404, "not_found", "Endpoint not found")
  const [, endpointId, token, rest] = match as unknown as [string, string, string, string | undefined]
  const row = yield* getEndpointRow(endpointId)
  if (row === undefined || !timingSafeEqualHex(sha256Hex(token), row.token_hash)) {
    return yield* envelope(404, "not_found", "Endpoint not found")
  }
  if (row.state === "provisioning") return yield* envelope(503, "endpoint_provisioning", "The endpoint is still being provisioned")
  if (row.state !== "active" || row.provider_url === null || Date.parse(row.lease_expires_at) <= Date.now()) {
    return yield* envelope(410, "endpoint_inactive", `The endpoint is ${row.state === "active" ? "expired" : row.state}`)
  }
  // Without a trailing slash relative links in the served page would resolve above the endpoint root.
  if (rest === undefined) return HttpServerResponse.redirect(`${url.pathname}/${url.search}`, { status: 308 })
  const headers = new Headers()
  for (const [name, value] of Object.entries(request.headers)) if (!HOP_BY_HOP.has(name)) headers.set(name, value)
  headers.set("x-forwarded-prefix", `/e/${endpointId}/${token}`)
  const source = request.source as Request
  const target = row.provider_url.replace(/\/+$/, "") + rest + url.search
  const response = yield* Effect.tryPromise({
    try: (signal) =>
      fetch(target, {
        method: request.method,
        headers,
        redirect: "manual",
        signal,
        ...(request.method === "GET" || request.method === "HEAD" ? {} : { body: source.body, duplex: "half" } as RequestInit)
      }),
    catch: (e) => e
  }).pipe(Effect.either)
  yield* touchSandbox(row.sandbox_id)
  if (response._tag === "Left") return yield* envelope(502, "endpoint_unreachable", "The sandbox did not answer on this port")
  const out = new Headers(response.right.headers)
  for (const name of HOP_BY_HOP) out.delete(name)
  out.delete("content-encoding") // fetch already decoded the body
  return HttpServerResponse.fromWeb(new Response(response.right.body, { status: response.right.status, headers: out }))
})

/** Registers the proxy on the API router (outside the HttpApi contract: it serves arbitrary sandbox traffic). */
export const EndpointProxyLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const handler = Effect.provide(proxy, yield* repositories)
    yield* router.all("/e/*", handler)
  }))
