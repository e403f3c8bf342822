/**
 * Relaying a WebSocket to another one: an accepted connection (a Bun server socket) and the connection opened for
 * it upstream (a WebSocket client), message for message, text staying text and binary binary, closes passed on with
 * their code and reason. Used by the emulators' preview proxies (to a sandbox port) and by the gateway's endpoint
 * proxy (to the provider's URL). A WebSocket client cannot be paused, so neither side may queue without bound:
 * when what one side has not taken yet passes `MAX_QUEUED_BYTES`, both are closed with 1009 ("too big").
 *
 * Also used by the gateway's terminal attach on a replica that is not the sandbox's node (the upstream is then
 * the owner node's attach).
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
  const early = arrivedEarly.get(upstream)
  arrivedEarly.delete(upstream)
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
  const onMessage = (event: MessageEvent) => {
    if (over) return
    if (client.getBufferedAmount() > MAX_QUEUED_BYTES) return cut(1009, "the client does not keep up")
    client.send(typeof event.data === "string" ? event.data : new Uint8Array(event.data as ArrayBuffer))
    hooks.onTraffic?.()
  }
  const onClose = (event: CloseEvent) => {
    if (!end()) return
    try {
      client.close(sendable(event.code), fitting(event.reason))
    } catch {}
  }
  upstream.onmessage = onMessage
  upstream.onclose = onClose
  upstream.onerror = () => cut(1011, "the upstream connection failed")
  // What came between the upstream's open and now, in order, then its close if it came too.
  for (const event of early?.messages ?? []) onMessage(event)
  if (early?.close !== undefined) onClose(early.close)
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

/** An upstream waits this long for its handshake, then counts as not opened (a host that never answers). */
export const OPEN_TIMEOUT_MS = 10_000

/**
 * Messages (and a close) an opened upstream received before `relay` took it: the client's side is accepted only
 * after the upstream opened, and the upstream may speak first (a greeting, a terminal's replayed output).
 */
const arrivedEarly = new WeakMap<WebSocket, { readonly messages: Array<MessageEvent>; close: CloseEvent | undefined }>()

/**
 * Opens the upstream WebSocket for an upgrade request: the request's headers (but the handshake's own; `extra`
 * ones set or override, a `host` included, or remove when `undefined`) and its subprotocols. Resolves once it is
 * open; rejects when it cannot open (nothing listens, the handshake is refused, no answer within OPEN_TIMEOUT_MS).
 */
export const openUpstream = (url: string, request: Request, extraHeaders: Record<string, string | undefined> = {}): Promise<WebSocket> =>
  new Promise((resolve, reject) => {
    const headers: Record<string, string> = {}
    request.headers.forEach((value, name) => {
      if (!HANDSHAKE_HEADERS.has(name)) headers[name] = value
    })
    for (const [name, value] of Object.entries(extraHeaders)) {
      if (value === undefined) delete headers[name]
      else headers[name] = value
    }
    const protocols = offeredProtocols(request.headers)
    // Bun's client takes headers (and protocols) in its options; the DOM typing knows only protocols. No
    // permessage-deflate: a message is bounded by the bytes that came, never inflated from a small frame.
    const socket = new WebSocket(url, { headers, protocols, perMessageDeflate: false } as unknown as Array<string>)
    socket.binaryType = "arraybuffer"
    const timer = setTimeout(() => {
      reject(new Error("the upstream WebSocket did not open in time"))
      socket.close()
    }, OPEN_TIMEOUT_MS)
    socket.onopen = () => {
      clearTimeout(timer)
      const early = { messages: [] as Array<MessageEvent>, close: undefined as CloseEvent | undefined }
      arrivedEarly.set(socket, early)
      socket.onerror = null
      socket.onmessage = (event) => void early.messages.push(event)
      socket.onclose = (event) => void (early.close = event)
      resolve(socket)
    }
    socket.onerror = () => {
      clearTimeout(timer)
      reject(new Error("the upstream WebSocket did not open"))
    }
    socket.onclose = () => {
      clearTimeout(timer)
      reject(new Error("the upstream WebSocket closed before it opened"))
    }
  })

/** Whether a request asks for a WebSocket. */
export const isWebSocketUpgrade = (request: Request) => (request.headers.get("upgrade") ?? "").toLowerCase() === "websocket"
