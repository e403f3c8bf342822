/**
 * Accepting a WebSocket on one of the gateway's Bun servers from a Bun route (a terminal's attach, an endpoint's
 * upgrade). Bun upgrades a connection only in the route that received it, with its `server`; the server's
 * WebSocket handlers are @effect/platform-bun's (they serve `HttpServerRequest.upgrade`), so the upgrade hands
 * them the context they expect — `deferred` resolved on open, `run` per message, `closeDeferred` on close — and
 * both kinds of upgrade share one server. test/e2e/terminals.test.ts and endpoint-websockets.test.ts fail if
 * that shape changes.
 */
import { Deferred, Effect, Either, FiberId } from "effect"

/** @effect/platform-bun's WebSocket context (internal/httpServer.ts), as its handlers use it. */
interface PlatformSocketContext {
  readonly deferred: Deferred.Deferred<Bun.ServerWebSocket<PlatformSocketContext>>
  readonly closeDeferred: Deferred.Deferred<void, { readonly code?: number; readonly closeReason?: string }>
  readonly buffer: Array<Uint8Array | string>
  run: (message: Uint8Array | string) => void
}

export interface AcceptedWebSocket {
  readonly ws: Bun.ServerWebSocket<unknown>
  /** Hands each message to `handler`, first those that came before it was set. */
  readonly onMessage: (handler: (message: Uint8Array | string) => void) => void
  /** Resolves with the close's code and reason once the client side is closed. */
  readonly closed: Promise<{ readonly code: number; readonly reason: string }>
}

/** Upgrades `request` (with these response headers); undefined when Bun refuses (it is no upgrade request). */
export const acceptWebSocket = (server: Bun.Server<unknown>, request: Request, headers: Record<string, string> = {}): Promise<AcceptedWebSocket> | undefined => {
  const data: PlatformSocketContext = {
    deferred: Deferred.unsafeMake(FiberId.none),
    closeDeferred: Deferred.unsafeMake(FiberId.none),
    buffer: [],
    // Messages that come before a handler is set wait for it.
    run: (message) => void data.buffer.push(message)
  }
  if (!(server as Bun.Server<PlatformSocketContext>).upgrade(request, { data, headers })) return undefined
  const closed = Effect.runPromise(Effect.either(Deferred.await(data.closeDeferred))).then((exit) =>
    Either.isRight(exit) ? { code: 1000, reason: "" } : { code: exit.left.code ?? 1006, reason: exit.left.closeReason ?? "" }
  )
  return Effect.runPromise(Deferred.await(data.deferred)).then((ws) => ({
    ws: ws as Bun.ServerWebSocket<unknown>,
    onMessage: (handler) => {
      data.run = handler
      for (const message of data.buffer.splice(0)) handler(message)
    },
    closed
  }))
}
