/**
 * "PORT <n>\n" on /run/agent/bridge.sock, answered "OK\n", then raw bytes both ways to 127.0.0.1:<n> in this
 * network namespace. Bun's own sockets (node:net alone costs ~10 ms of start-up); reading from one side pauses
 * while the other side has unwritten bytes, so a slow peer never makes the agent buffer without bound.
 */
type BunSocket = import("bun").Socket<Link>
interface Link {
  head: Uint8Array
  peer: BunSocket | null
  /** Bytes this socket could not take yet (its peer is paused meanwhile). */
  pending: Array<Uint8Array>
  ending: boolean
  closed: boolean
}

const newLink = (): Link => ({ head: new Uint8Array(), peer: null, pending: [], ending: false, closed: false })

/** Writes to `to`; what does not fit waits for its drain, and `from` stops reading until then. */
const forward = (from: BunSocket, to: BunSocket, chunk: Uint8Array) => {
  if (to.data.pending.length > 0) {
    to.data.pending.push(chunk)
    return
  }
  const written = to.write(chunk)
  if (written < chunk.length) {
    to.data.pending.push(chunk.subarray(Math.max(0, written)))
    from.pause()
  }
}

const drain = (socket: BunSocket) => {
  while (socket.data.pending.length > 0) {
    const chunk = socket.data.pending[0]!
    const written = socket.write(chunk)
    if (written < chunk.length) {
      socket.data.pending[0] = chunk.subarray(Math.max(0, written))
      return
    }
    socket.data.pending.shift()
  }
  if (socket.data.ending) socket.end()
  else socket.data.peer?.resume()
}

/** Ends a socket once what it still has to send is out. */
const endAfterPending = (socket: BunSocket | null) => {
  if (socket === null || socket.data.closed) return
  if (socket.data.pending.length === 0) socket.end()
  else socket.data.ending = true
}

export const startBridge = (file: string) => {
  const upstreamHandlers = {
    data: (upstream: BunSocket, chunk: Uint8Array) => {
      if (upstream.data.peer !== null) forward(upstream, upstream.data.peer, chunk)
    },
    drain,
    end: (upstream: BunSocket) => endAfterPending(upstream.data.peer),
    close: (upstream: BunSocket) => {
      upstream.data.closed = true
      endAfterPending(upstream.data.peer)
    },
    error: () => {}
  }
  Bun.listen<Link>({
    unix: file,
    socket: {
      open: (client) => {
        client.data = newLink()
      },
      data: (client, chunk) => {
        if (client.data.peer !== null) return forward(client, client.data.peer, chunk)
        const head = new Uint8Array(client.data.head.length + chunk.length)
        head.set(client.data.head)
        head.set(chunk, client.data.head.length)
        client.data.head = head
        const newline = head.indexOf(10)
        if (newline < 0) {
          if (head.length > 64) client.end()
          return
        }
        client.pause()
        const match = /^PORT (\d{1,5})$/.exec(Buffer.from(head.subarray(0, newline)).toString())
        const port = match ? Number(match[1]) : 0
        if (port < 1 || port > 65535) return void client.end("ERR bad port\n")
        const rest = head.subarray(newline + 1)
        client.data.head = new Uint8Array()
        Bun.connect<Link>({ hostname: "127.0.0.1", port, data: newLink(), socket: upstreamHandlers }).then(
          (upstream) => {
            if (client.data.closed) return void upstream.end()
            upstream.data.peer = client
            client.data.peer = upstream
            forward(upstream, client, new TextEncoder().encode("OK\n"))
            if (rest.length > 0) forward(client, upstream, rest)
            client.resume()
          },
          () => void client.end("ERR unreachable\n")
        )
      },
      drain,
      end: (client) => endAfterPending(client.data.peer),
      close: (client) => {
        client.data.closed = true
        endAfterPending(client.data.peer)
      },
      error: () => {}
    }
  })
}

