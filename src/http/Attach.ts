/**
 * `GET /v1/sandboxes/{id}/processes/{id}/attach` as a WebSocket (Terminals.ts runs the session). A Bun route
 * ahead of the API, since only the route that received a connection can upgrade it (WebSocketUpgrade.ts); but
 * every check and every error is the API's own: the request is first passed to the API without its upgrade
 * headers and marked as this gateway's check (a per-process secret), and only a 204 from it — credentials,
 * project, the process is the caller's, has a terminal and runs — lets the upgrade happen. Anything else (401,
 * 404, 409 …) is answered as the API answered it; a plain GET gets the API's 426.
 */
import { Runtime } from "effect"
import type { ProviderAccounts } from "../services/ProviderAccounts.ts"
import type { ProcessesRepo } from "../db/repos/Processes.ts"
import { SandboxesRepo } from "../db/repos/Sandboxes.ts"
import { openAttach } from "../services/sandboxes/Terminals.ts"
import { guardedRoute } from "./GuardedRoute.ts"
import { acceptWebSocket } from "./WebSocketUpgrade.ts"

export const ATTACH_PATH = "/v1/sandboxes/:sandbox_id/processes/:process_id/attach"

const CHECK_HEADER = "x-gateway-attach-check"
/** Known only to this process: a client cannot pass its request off as the gateway's check. */
const CHECK_SECRET = crypto.randomUUID()

export const isAttachCheck = (headers: Readonly<Record<string, string | undefined>>) => headers[CHECK_HEADER] === CHECK_SECRET

type Services = ProcessesRepo | SandboxesRepo | ProviderAccounts
type Route = (request: Bun.BunRequest<typeof ATTACH_PATH>, server: Bun.Server<unknown>) => Promise<Response | undefined>

export const attachRoute = (runtime: Runtime.Runtime<Services>): Route => {
  const run = Runtime.runPromise(runtime)
  const fork = Runtime.runFork(runtime)
  return guardedRoute("terminal attach", async (request: Bun.BunRequest<typeof ATTACH_PATH>, server: Bun.Server<unknown>) => {
    if ((request.headers.get("upgrade") ?? "").toLowerCase() !== "websocket") return server.fetch(request)
    const headers = new Headers(request.headers)
    for (const name of ["upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol"]) headers.delete(name)
    headers.set(CHECK_HEADER, CHECK_SECRET)
    const check = await server.fetch(new Request(request.url, { method: "GET", headers }))
    if (check.status !== 204) return check
    const after = Number(new URL(request.url).searchParams.get("after") ?? "0")
    const sandbox = await run(SandboxesRepo.get(request.params.sandbox_id))
    if (sandbox === undefined) return server.fetch(request) // gone since the check: the API says so
    const accepted = acceptWebSocket(server, request, { "x-request-id": check.headers.get("x-request-id") ?? "" })
    if (accepted === undefined) return server.fetch(request)
    void accepted.then(({ ws, onMessage, closed }) => {
      const session = openAttach(sandbox, request.params.process_id, after, {
        send: (chunk) => void (typeof chunk === "string" ? ws.sendText(chunk) : ws.sendBinary(chunk)),
        close: (code, reason) => ws.close(code, reason),
        buffered: () => ws.getBufferedAmount(),
        ping: () => void ws.ping()
      }, run, fork)
      onMessage(session.receive)
      void closed.then(session.closed)
    })
    return undefined
  })
}
