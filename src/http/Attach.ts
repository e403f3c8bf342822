/**
 * `GET /v1/sandboxes/{id}/processes/{id}/attach` as a WebSocket (Terminals.ts runs the session). A Bun route
 * ahead of the API, since only the route that received a connection can upgrade it (WebSocketUpgrade.ts); but
 * every check and every error is the API's own: the request is first passed to the API without its upgrade
 * headers and marked as this gateway's check (a per-process secret), and only a 204 from it — credentials,
 * project, the process is the caller's, has a terminal and runs — lets the upgrade happen. Anything else (401,
 * 404, 409 …) is answered as the API answered it; a plain GET gets the API's 426.
 *
 * A sandbox on another node's local runtime (docs/operations/scaling-out.md) has its session there: after the same check
 * here (the state it reads is the database's, shared by every node), the attach is relayed to the owner — a
 * WebSocket opened to its attach with the client's headers and the forward mark (services/Forwarding.ts), then
 * the client's accepted, and frames and closes passed both ways (src/providers/websocket.ts).
 *
 * The attach is held for the API key that opened it (services/LiveStreams.ts): once that key is revoked or
 * expires, or its project is deleted, the client gets a text frame `{"type":"error","code","message"}` and the
 * close ACCESS_ENDED with a short reason — on the node that holds the client's socket and on the owner alike.
 */
import { HttpServerResponse } from "@effect/platform"
import { Context, Option, Runtime, Schema } from "effect"
import { ProcessId, SandboxId } from "../domain/Ids.ts"
import { isWebSocketUpgrade, openUpstream, relay } from "../providers/websocket.ts"
import type { AppConfigShape } from "../Config.ts"
import type { ProviderAccounts } from "../services/ProviderAccounts.ts"
import type { ServiceContext } from "../services/ServiceContext.ts"
import { getSandboxRow } from "../services/sandboxes/SandboxRows.ts"
import { FORWARDED_HEADER, forward, forwardMark, nodeUnreachable, wasForwarded } from "../services/Forwarding.ts"
import { END_REASONS, type LiveStreamsShape, LiveStreams, StreamHolder } from "../services/LiveStreams.ts"
import { openAttach } from "../services/sandboxes/Terminals.ts"
import { guardedRoute } from "./GuardedRoute.ts"
import { acceptWebSocket } from "./WebSocketUpgrade.ts"

export const ATTACH_PATH = "/v1/sandboxes/:sandbox_id/processes/:process_id/attach"
/** The same route on the project path (a member's: the dashboard's terminal). */
export const PROJECT_ATTACH_PATH = "/v1/projects/:project_id/sandboxes/:sandbox_id/processes/:process_id/attach"

const CHECK_HEADER = "x-gateway-attach-check"
/** Known only to this process: a client cannot pass its request off as the gateway's check. */
const CHECK_SECRET = crypto.randomUUID()

export const isAttachCheck = (headers: Readonly<Record<string, string | undefined>>) => headers[CHECK_HEADER] === CHECK_SECRET

/** The check's answer when everything passed: 204, naming the credential the attach is then held for. */
const HOLDER_HEADER = "x-gateway-attach-holder"
export const attachCheckPassed = (holder: StreamHolder) =>
  HttpServerResponse.empty({ status: 204, headers: { [HOLDER_HEADER]: JSON.stringify(holder) } })
const decodeHolder = Schema.decodeUnknownSync(Schema.parseJson(StreamHolder))

/** The close of an attach whose credential was revoked or expired or lost its access (RFC 6455 §7.4.2: ours). */
export const ACCESS_ENDED = 4001

/**
 * Holds an accepted attach for `holder`: when the credential may no longer attach, `end` gets the error frame
 * and the close's code and reason. Returns what to call once the socket closed.
 */
const holdFor = (streams: LiveStreamsShape, holder: StreamHolder, end: (frame: string, code: number, reason: string) => void) => {
  const held = streams.open(holder)
  held.signal.addEventListener("abort", () => {
    const reason = held.endReason()
    if (reason === undefined) return
    const { code, message, short } = END_REASONS[reason]
    end(JSON.stringify({ type: "error", code, message }), ACCESS_ENDED, short)
  }, { once: true })
  return held.close
}

type Services = ServiceContext | ProviderAccounts | LiveStreams
/** The ids the route names, typed (the API's check decoded them already: a malformed one never gets this far). */
const decodeIds = Schema.decodeUnknownOption(Schema.Struct({ sandbox_id: SandboxId, process_id: ProcessId }))
type Path = typeof ATTACH_PATH | typeof PROJECT_ATTACH_PATH
type Route = (request: Bun.BunRequest<Path>, server: Bun.Server<unknown>) => Promise<Response | undefined>
/** The API base URL of the live node a sandbox lives on, when that is another node (services/Forwarding.ts). */
export type OwnerOf = (sandboxId: string) => Promise<string | undefined>

const UPGRADE_HEADERS = ["upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol"]

export const attachRoute = (runtime: Runtime.Runtime<Services>, config: AppConfigShape, ownerOf: OwnerOf): Route => {
  const run = Runtime.runPromise(runtime)
  const fork = Runtime.runFork(runtime)
  const streams = Context.get(runtime.context, LiveStreams)
  return guardedRoute("terminal attach", async (request: Bun.BunRequest<Path>, server: Bun.Server<unknown>) => {
    if (!isWebSocketUpgrade(request)) return server.fetch(request)
    const plain = new Headers(request.headers)
    for (const name of UPGRADE_HEADERS) plain.delete(name)
    const checkHeaders = new Headers(plain)
    checkHeaders.set(CHECK_HEADER, CHECK_SECRET)
    const check = await server.fetch(new Request(request.url, { method: "GET", headers: checkHeaders }))
    if (check.status !== 204) return check
    const requestId = check.headers.get("x-request-id") ?? ""
    const holder = decodeHolder(check.headers.get(HOLDER_HEADER))
    const owner = wasForwarded(config, request) ? undefined : await ownerOf(request.params.sandbox_id)
    if (owner !== undefined) return relayToOwner(config, request, server, owner, new Request(request.url, { method: "GET", headers: plain }), requestId, (end) => holdFor(streams, holder, end))
    const after = Number(new URL(request.url).searchParams.get("after") ?? "0")
    const ids = decodeIds(request.params)
    if (Option.isNone(ids)) return server.fetch(request)
    const sandbox = await run(getSandboxRow(ids.value.sandbox_id))
    if (sandbox === undefined) return server.fetch(request) // gone since the check: the API says so
    const accepted = acceptWebSocket(server, request, { "x-request-id": requestId })
    if (accepted === undefined) return server.fetch(request)
    void accepted.then(({ ws, onMessage, closed }) => {
      const release = holdFor(streams, holder, (frame, code, reason) => {
        ws.sendText(frame)
        ws.close(code, reason)
      })
      const session = openAttach(sandbox, ids.value.process_id, after, {
        send: (chunk) => void (typeof chunk === "string" ? ws.sendText(chunk) : ws.sendBinary(chunk)),
        close: (code, reason) => ws.close(code, reason),
        buffered: () => ws.getBufferedAmount(),
        ping: () => void ws.ping()
      }, run, fork)
      onMessage(session.receive)
      void closed.then(() => {
        release()
        session.closed()
      })
    })
    return undefined
  })
}

/**
 * The attach, relayed to the owner node at `base`. When its WebSocket does not open, the owner's answer to the
 * plain request (its API's refusal: the process ended meanwhile …) is the answer, or 503 `node_unreachable`.
 */
const relayToOwner = async (
  config: AppConfigShape,
  request: Request,
  server: Bun.Server<unknown>,
  base: string,
  plain: Request,
  requestId: string,
  hold: (end: (frame: string, code: number, reason: string) => void) => () => void
) => {
  const url = new URL(request.url)
  const target = base.replace(/^http/, "ws") + url.pathname + url.search
  const upstream = await openUpstream(target, request, { [FORWARDED_HEADER]: forwardMark(config, "GET", url.pathname + url.search) }).catch(() => undefined)
  if (upstream === undefined) {
    const answer = await forward(config, plain, base)
    // 426: the owner would have accepted the attach, yet its WebSocket did not open.
    return answer.status === 426 ? nodeUnreachable(requestId) : answer
  }
  const accepted = acceptWebSocket(server, request, { "x-request-id": requestId })
  if (accepted === undefined) {
    upstream.close()
    return server.fetch(request)
  }
  void accepted.then(({ ws, onMessage, closed }) => {
    const relayed = relay(ws, upstream)
    // The owner ends the attach as well; this node does not wait for it.
    const release = hold((frame, code, reason) => {
      ws.sendText(frame)
      relayed.cut(code, reason)
    })
    onMessage(relayed.fromClient)
    void closed.then(({ code, reason }) => {
      release()
      relayed.clientClosed(code, reason)
    })
  })
  return undefined
}
