/**
 * Previews as an emulator keeps them: leases with an expiry (kept in its books, re-armed after a restart) that
 * forward HTTP to a sandbox port through a port bridge (`bridges.ts`: a root-only unix socket, one per preview).
 * A preview ends at its expiry or when the emulator drops it (revoked, its sandbox stopped or gone): its bridge
 * closes then, cutting the connections through it. The emulator decides who may use a preview and answers its
 * own provider's errors; this kit holds the timers, the bridges and the forwarding — of plain requests, and of
 * WebSockets (`upgrade`, relayed message for message by `src/providers/websocket.ts`; the emulator's server takes
 * `previewSocketHandlers` as its `websocket` option).
 */
import type * as net from "node:net"
import { isWebSocketUpgrade, openUpstream, type Relay, relay } from "../../../src/providers/websocket.ts"
import { makePortBridges } from "./bridges.ts"

/** What an upgraded preview connection carries: the sandbox side, and the relay once the client side is open. */
export interface PreviewSocketData {
  readonly upstream: WebSocket
  relay: Relay | null
}

/** The `websocket` handlers of an emulator's server, for the connections `upgrade` accepted. */
export const previewSocketHandlers: Bun.WebSocketHandler<PreviewSocketData> = {
  open: (ws) => {
    ws.data.relay = relay(ws, ws.data.upstream)
  },
  message: (ws, message) => ws.data.relay?.fromClient(message),
  close: (ws, code, reason) => ws.data.relay?.clientClosed(code, reason)
}

/** setTimeout's longest delay: a longer expiry is waited for in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1

export interface PreviewLease {
  readonly expiresAt: number
}

export const makePreviewLeases = (books: {
  readonly dir: string
  /** The emulator's preview records (read each time: the books own them). */
  readonly previews: () => Record<string, PreviewLease>
  readonly save: () => void
}) => {
  const bridges = makePortBridges(books.dir)
  const timers = new Map<string, ReturnType<typeof setTimeout>>()

  /** The preview is over: its record, its timer and its bridge go. */
  const drop = (token: string) => {
    clearTimeout(timers.get(token))
    timers.delete(token)
    bridges.close(token)
    const previews = books.previews()
    if (previews[token] !== undefined) {
      delete previews[token]
      books.save()
    }
  }
  /** A preview ends at its expiry, whether or not anything uses it. */
  const arm = (token: string) => {
    const preview = books.previews()[token]
    if (preview === undefined) return
    clearTimeout(timers.get(token))
    const wait = Math.max(0, preview.expiresAt - Date.now())
    timers.set(token, setTimeout(() => (wait > MAX_TIMER_MS ? arm(token) : drop(token)), Math.min(wait, MAX_TIMER_MS)))
  }
  for (const token of Object.keys(books.previews())) arm(token)

  /**
   * Forwards a request to the preview's port, through its bridge (opened on first use with `connect`); null when
   * nothing answers there (the emulator says so in its provider's words).
   */
  const forward = async (request: Request, token: string, sandboxKey: string, target: string, connect: () => Promise<net.Socket>): Promise<Response | null> => {
    const bridge = bridges.open(token, sandboxKey, connect)
    try {
      await bridge.ready
      const upstream = await fetch(`http://sandbox/${target}`, {
        unix: bridge.socketPath,
        method: request.method,
        headers: request.headers,
        redirect: "manual",
        // The caller going away ends the exchange with the sandbox too.
        signal: request.signal,
        // The sandbox's bytes as it sent them (a compressed answer keeps its Content-Encoding): never inflated here.
        decompress: false,
        ...(request.method === "GET" || request.method === "HEAD" ? {} : { body: request.body, duplex: "half" })
      } as RequestInit)
      return new Response(upstream.body, { status: upstream.status, headers: upstream.headers })
    } catch {
      return null
    }
  }

  /**
   * A WebSocket to the preview's port: the upstream one is opened first (through the bridge), then the request is
   * upgraded with the subprotocol the sandbox chose. Null when nothing accepts it there; undefined once upgraded.
   */
  const upgrade = async (
    request: Request,
    server: Bun.Server<PreviewSocketData>,
    token: string,
    sandboxKey: string,
    target: string,
    connect: () => Promise<net.Socket>
  ): Promise<null | undefined> => {
    const bridge = bridges.open(token, sandboxKey, connect)
    try {
      await bridge.ready
      const upstream = await openUpstream(`ws+unix://${bridge.socketPath}:/${target}`, request)
      const headers: Record<string, string> = upstream.protocol === "" ? {} : { "sec-websocket-protocol": upstream.protocol }
      if (server.upgrade(request, { data: { upstream, relay: null }, headers })) return undefined
      upstream.close()
      return null
    } catch {
      return null
    }
  }

  /** A request, or a WebSocket (undefined once upgraded), to the preview's port; null when nothing answers there. */
  const pass = (request: Request, server: Bun.Server<PreviewSocketData>, token: string, sandboxKey: string, target: string, connect: () => Promise<net.Socket>) =>
    isWebSocketUpgrade(request) ? upgrade(request, server, token, sandboxKey, target, connect) : forward(request, token, sandboxKey, target, connect)

  return {
    arm,
    drop,
    pass,
    /** The sandbox stopped or went: nothing reaches it any more (its previews' records stay until they end). */
    closeSandbox: bridges.closeSandbox,
    stop: () => {
      for (const timer of timers.values()) clearTimeout(timer)
      bridges.closeAll()
    }
  }
}
