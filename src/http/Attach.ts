/**
 * `GET /v1/sandboxes/{id}/processes/{id}/attach` as a WebSocket (Terminals.ts runs the session). Bun upgrades a
 * connection only in the route that received it, with its `server`, so this is a Bun route ahead of the API; but
 * every check and every error is the API's own: the request is first passed to the API without its upgrade
 * headers and marked as this gateway's check (a per-process secret), and only a 204 from it — credentials,
 * project, the process is the caller's, has a terminal and runs — lets the upgrade happen. Anything else (401,
 * 404, 409 …) is answered as the API answered it; a plain GET gets the API's 426.
 *
 * The WebSocket handlers of the server are @effect/platform-bun's (they serve `HttpServerRequest.upgrade`): the
 * upgrade hands them the context they expect (`deferred` resolved on open, `run` per message, `closeDeferred` on
 * close), so both kinds of upgrade share the one server. test/http/attach.test.ts fails if that shape changes.
 */
import { Deferred, Effect, FiberId, Runtime } from "effect"
import type { ProviderAccounts } from "../services/ProviderAccounts.ts"
import type { ProcessesRepo } from "../db/repos/Processes.ts"
import { SandboxesRepo } from "../db/repos/Sandboxes.ts"
import { openAttach } from "../services/sandboxes/Terminals.ts"

export const ATTACH_PATH = "/v1/sandboxes/:sandbox_id/processes/:process_id/attach"

const CHECK_HEADER = "x-gateway-attach-check"
/** Known only to this process: a client cannot pass its request off as the gateway's check. */
const CHECK_SECRET = crypto.randomUUID()

export const isAttachCheck = (headers: Readonly<Record<string, string | undefined>>) => headers[CHECK_HEADER] === CHECK_SECRET

/** @effect/platform-bun's WebSocket context (internal/httpServer.ts), as its handlers use it. */
interface PlatformSocketContext {
  readonly deferred: Deferred.Deferred<Bun.ServerWebSocket<PlatformSocketContext>>
  readonly closeDeferred: Deferred.Deferred<void, unknown>
  readonly buffer: Array<Uint8Array | string>
  run: (message: Uint8Array | string) => void
}

type Services = ProcessesRepo | SandboxesRepo | ProviderAccounts
type Route = (request: Bun.BunRequest<typeof ATTACH_PATH>, server: Bun.Server<unknown>) => Promise<Response | undefined>

export const attachRoute = (runtime: Runtime.Runtime<Services>): Route => {
  const run = Runtime.runPromise(runtime)
  const fork = Runtime.runFork(runtime)
  return async (request, server) => {
    if ((request.headers.get("upgrade") ?? "").toLowerCase() !== "websocket") return server.fetch(request)
    const headers = new Headers(request.headers)
    for (const name of ["upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol"]) headers.delete(name)
    headers.set(CHECK_HEADER, CHECK_SECRET)
    const check = await server.fetch(new Request(request.url, { method: "GET", headers }))
    if (check.status !== 204) return check
    const after = Number(new URL(request.url).searchParams.get("after") ?? "0")
    const sandbox = await run(SandboxesRepo.get(request.params.sandbox_id))
    if (sandbox === undefined) return server.fetch(request) // gone since the check: the API says so
    const data: PlatformSocketContext = {
      deferred: Deferred.unsafeMake(FiberId.none),
      closeDeferred: Deferred.unsafeMake(FiberId.none),
      buffer: [],
      // Frames that come before the session starts wait for it.
      run: (message) => void data.buffer.push(message)
    }
    if (!(server as Bun.Server<PlatformSocketContext>).upgrade(request, { data, headers: { "x-request-id": check.headers.get("x-request-id") ?? "" } })) {
      return server.fetch(request)
    }
    void run(Deferred.await(data.deferred)).then((ws) => {
      const session = openAttach(sandbox, request.params.process_id, after, {
        send: (chunk) => void (typeof chunk === "string" ? ws.sendText(chunk) : ws.sendBinary(chunk)),
        close: (code, reason) => ws.close(code, reason),
        buffered: () => ws.getBufferedAmount(),
        ping: () => void ws.ping()
      }, run, fork)
      data.run = session.receive
      for (const message of data.buffer.splice(0)) session.receive(message)
      void run(Effect.exit(Deferred.await(data.closeDeferred))).then(session.closed)
    })
    return undefined
  }
}
