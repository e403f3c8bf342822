/**
 * Forwarding to the owner node (docs/operations/scaling-out.md). A sandbox on the local runtime lives on one node; the few
 * requests about it that call its provider synchronously (raw files, standard input), its terminal attaches
 * (src/http/Attach.ts) and its endpoints' traffic, plain or WebSocket, in either addressing
 * (src/http/EndpointProxy.ts) must be served there. A replica that receives one forwards (or relays) it,
 * unchanged, to the owner — the client's own credentials (or the endpoint's token) go along and the owner checks
 * them as for any request — and marks it with `x-gateway-forwarded-by`, so it is never forwarded twice. With
 * CLUSTER_SECRET set the mark carries an HMAC of the method and path, and the owner serves a marked request only
 * when it verifies. An owner that does not answer is 503 `node_unreachable`.
 *
 * Nothing is forwarded to a node that is lost or silent past the grace period (the request is then served here:
 * the sandbox is, or is about to be, `node_lost`), nor for a sandbox on no node.
 */
import { Effect } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"
import { type AppConfigShape, nodeIdOf } from "../Config.ts"
import { NodesRepo } from "../db/repos/Nodes.ts"
import { nowIso } from "../domain/Time.ts"

export const FORWARDED_HEADER = "x-gateway-forwarded-by"

/** Headers that describe one hop (RFC 9110 §7.6.1), plus what fetch sets itself. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"])

const mac = (secret: string, node: string, method: string, path: string) =>
  createHmac("sha256", secret).update(`${node}\n${method}\n${path}`).digest("hex")

/** The mark this node puts on a request it forwards. */
export const forwardMark = (config: AppConfigShape, method: string, path: string): string => {
  const node = nodeIdOf(config)
  return config.clusterSecret === undefined ? node : `${node};${mac(config.clusterSecret, node, method, path)}`
}

/**
 * Whether a request came forwarded (it is then served here, whatever node the sandbox is on). False also when a
 * mark does not verify against CLUSTER_SECRET: such a request is treated as a client's.
 */
export const wasForwarded = (config: AppConfigShape, request: Request): boolean =>
  isForwardMark(config, request.method, request.url, request.headers.get(FORWARDED_HEADER))

/** `wasForwarded` of a request's parts: its method, URL and forward mark (null: none). */
export const isForwardMark = (config: AppConfigShape, method: string, requestUrl: string, mark: string | null | undefined): boolean => {
  if (mark === null || mark === undefined) return false
  if (config.clusterSecret === undefined) return true
  const [node, given] = mark.split(";")
  if (node === undefined || given === undefined) return false
  const url = new URL(requestUrl, "http://forwarded")
  const expected = Buffer.from(mac(config.clusterSecret, node, method, url.pathname + url.search))
  const actual = Buffer.from(given)
  return expected.length === actual.length && timingSafeEqual(expected, actual)
}

/** Whether other replicas may exist: they need PostgreSQL; on SQLite this gateway is the only node. */
export const isClustered = (config: AppConfigShape): boolean => config.databaseUrl !== undefined

/** The owner's base URL when `sandboxId` lives on another node that is alive; `pick` chooses which of its URLs. */
export const ownerUrl = (config: AppConfigShape, sandboxId: string, pick: "api" | "endpoints") =>
  Effect.gen(function*() {
    if (!isClustered(config)) return undefined
    const owner = yield* NodesRepo.ownerOf(sandboxId)
    if (owner === undefined || owner.id === nodeIdOf(config) || owner.lost_at !== null) return undefined
    const graceMs = (config.nodeGraceSeconds ?? 60) * 1000
    if (Date.parse(yield* nowIso) - Date.parse(owner.heartbeat_at) > graceMs) return undefined
    const url = pick === "api" ? owner.url : owner.endpoint_url
    return url === null ? undefined : url.replace(/\/+$/, "")
  })

/** Sends `request` to `base` + its path and query, marked; the owner's response, streamed back as it comes. */
export const forward = async (config: AppConfigShape, request: Request, base: string): Promise<Response> => {
  const url = new URL(request.url)
  const headers = new Headers()
  request.headers.forEach((value, name) => {
    if (!HOP_BY_HOP.has(name)) headers.set(name, value)
  })
  headers.set(FORWARDED_HEADER, forwardMark(config, request.method, url.pathname + url.search))
  try {
    const upstream = await fetch(base + url.pathname + url.search, {
      method: request.method,
      headers,
      redirect: "manual",
      ...(request.method === "GET" || request.method === "HEAD" ? {} : { body: request.body, duplex: "half" } as RequestInit)
    })
    const out = new Headers(upstream.headers)
    for (const name of HOP_BY_HOP) out.delete(name)
    out.delete("content-encoding") // fetch already decoded the body
    return new Response(upstream.body, { status: upstream.status, statusText: upstream.statusText, headers: out })
  } catch {
    return nodeUnreachable()
  }
}

export const NODE_UNREACHABLE_MESSAGE = "The gateway node this sandbox lives on did not answer"

/** 503 `node_unreachable` (retryable): the owner node did not answer a forwarded request. */
export const nodeUnreachable = (requestId = `req_${crypto.randomUUID().replaceAll("-", "")}`) =>
  Response.json(
    { code: "node_unreachable", message: NODE_UNREACHABLE_MESSAGE, request_id: requestId, retryable: true },
    { status: 503, headers: { "x-request-id": requestId } }
  )
