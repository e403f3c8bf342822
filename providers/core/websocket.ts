/**
 * Relaying a WebSocket to another one: an accepted connection (a Bun server socket) and the connection opened for
 * it upstream (a WebSocket client), message for message, text staying text and binary binary, closes passed on with
 * their code and reason. Used by the emulators' preview proxies (to a sandbox port) and by the gateway's endpoint
 * proxy (to the provider's URL). A WebSocket client cannot be paused, so neither side may queue without bound:
 * when what one side has not taken yet passes `MAX_QUEUED_BYTES`, both are closed with 1009 ("too big").
 */

/** The accepted side, as a Bun ServerWebSocket offers it. */
export interface AcceptedSocket {
  readonly send: (data: string | Uint8Array) => number
  readonly close: (code?: number, reason?: string) => void
  readonly getBufferedAmount: () => number
}

export const MAX_QUEUED_BYTES = 16 * 1024 * 1024

/** A close code the other side may be sent: 1005, 1006 and 1015 only describe a close, they are never sent. */
const sendable = (code: number) => (code === 1000 || (code >= 1001 && code <= 1014 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999) ? code : code === 1005 ? 1000 : 1011)
/** A reason fits a close frame (at most 123 bytes). */
const fitting = (reason: string) => (Buffer.byteLength(reason) <= 123 ? reason : Buffer.from(reason).subarray(0, 120).toString())

export interface Relay {
  /** A message from the accepted side. */
  readonly fromClient: (message: string | Uint8Array) => void
  /** The accepted side closed. */
  readonly clientClosed: (code: number, reason: string) => void
  /** Ends both sides (a revoked grant, a stopped sandbox). */
  readonly cut: (code: number, reason: string) => void
}

/**
 * Relays between `client` (accepted, open) and `upstream` (open). `onTraffic` is called for each message either
 * way; `onEnd` once, when the relay is over for whatever reason.
 */
export const relay = (client: AcceptedSocket, upstream: WebSocket, hooks: { readonly onTraffic?: () => void; readonly onEnd?: () => void } = {}): Relay => {
  let over = false
  const end = () => {
    if (over) return false
    over = true
    hooks.onEnd?.()
    return true
  }
  const cut = (code: number, reason: string) => {
    if (!end()) return
    try {
      client.close(sendable(code), fitting(reason))
    } catch {}
    try {
      upstream.close(sendable(code), fitting(reason))
    } catch {}
  }
  upstream.binaryType = "arraybuffer"
  upstream.onmessage = (event) => {
    if (over) return
    if (client.getBufferedAmount() > MAX_QUEUED_BYTES) return cut(1009, "the client does not keep up")
    client.send(typeof event.data === "string" ? event.data : new Uint8Array(event.data as ArrayBuffer))
    hooks.onTraffic?.()
  }
  upstream.onclose = (event) => {
    if (!end()) return
    try {
      client.close(sendable(event.code), fitting(event.reason))
    } catch {}
  }
  upstream.onerror = () => cut(1011, "the upstream connection failed")
  return {
    fromClient: (message) => {
      if (over) return
      if (upstream.bufferedAmount > MAX_QUEUED_BYTES) return cut(1009, "the upstream does not keep up")
      upstream.send(typeof message === "string" ? message : new Uint8Array(message))
      hooks.onTraffic?.()
    },
    clientClosed: (code, reason) => {
      if (!end()) return
      try {
        upstream.close(sendable(code), fitting(reason))
      } catch {}
    },
    cut
  }
}

/** Headers that describe one hop or one WebSocket handshake, never passed on to the next hop. */
export const HANDSHAKE_HEADERS = new Set([
  "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length",
  "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-accept", "sec-websocket-protocol"
])

/** The subprotocols a client offered (`Sec-WebSocket-Protocol`), to offer upstream in turn. */
export const offeredProtocols = (headers: Headers): Array<string> =>
  (headers.get("sec-websocket-protocol") ?? "").split(",").map((p) => p.trim()).filter((p) => p !== "")

/**
 * Opens the upstream WebSocket for an upgrade request: the request's headers (but the handshake's own) and its
 * subprotocols. Resolves once it is open; rejects when it cannot open (nothing listens, the handshake is refused).
 */
export const openUpstream = (url: string, request: Request, extraHeaders: Record<string, string> = {}): Promise<WebSocket> =>
  new Promise((resolve, reject) => {
    const headers: Record<string, string> = {}
    request.headers.forEach((value, name) => {
      if (!HANDSHAKE_HEADERS.has(name)) headers[name] = value
    })
    Object.assign(headers, extraHeaders)
    const protocols = offeredProtocols(request.headers)
    // Bun's client takes headers (and protocols) in its options; the DOM typing knows only protocols.
    const socket = new WebSocket(url, { headers, protocols } as unknown as Array<string>)
    socket.onopen = () => {
      socket.onerror = null
      socket.onclose = null
      resolve(socket)
    }
    socket.onerror = () => reject(new Error("the upstream WebSocket did not open"))
    socket.onclose = () => reject(new Error("the upstream WebSocket closed before it opened"))
  })

/** Whether a request asks for a WebSocket. */
export const isWebSocketUpgrade = (request: Request) => (request.headers.get("upgrade") ?? "").toLowerCase() === "websocket"
