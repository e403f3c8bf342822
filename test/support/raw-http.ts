/** Raw HTTP/1.1 over a TCP socket, for input no HTTP client would send; the ports a process listens on. */
import * as fs from "node:fs"
import * as net from "node:net"

export interface RawAnswer {
  /** Everything the server sent before it closed the connection (or the wait ended). */
  readonly text: string
  readonly status: number | undefined
  readonly headers: Record<string, string>
  readonly body: string
  /** The server closed the connection. */
  readonly closed: boolean
}

/**
 * Sends `data` (optionally in pieces, `gapMs` apart) and collects the answer until the server closes the
 * connection or `waitMs` passes.
 */
export const rawRequest = (baseUrl: string, data: string | Buffer | ReadonlyArray<string | Buffer>, options: { readonly waitMs?: number; readonly gapMs?: number } = {}) =>
  new Promise<RawAnswer>((resolve) => {
    const url = new URL(baseUrl)
    const socket = net.connect(Number(url.port), url.hostname)
    const chunks: Array<Buffer> = []
    let closed = false
    const finish = () => {
      clearTimeout(timer)
      const text = Buffer.concat(chunks).toString("latin1")
      const headEnd = text.indexOf("\r\n\r\n")
      const head = headEnd < 0 ? text : text.slice(0, headEnd)
      const [statusLine, ...lines] = head.split("\r\n")
      const headers: Record<string, string> = {}
      for (const line of lines) {
        const colon = line.indexOf(":")
        if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
      }
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1]
      resolve({ text, status: status === undefined ? undefined : Number(status), headers, body: headEnd < 0 ? "" : text.slice(headEnd + 4), closed })
      socket.destroy()
    }
    const timer = setTimeout(finish, options.waitMs ?? 2_000)
    socket.on("data", (chunk: Buffer) => chunks.push(chunk))
    socket.on("close", () => {
      closed = true
      finish()
    })
    socket.on("error", () => {})
    const pieces = Array.isArray(data) ? data : [data]
    void (async () => {
      for (const piece of pieces) {
        if (socket.destroyed) return
        socket.write(piece)
        if (options.gapMs !== undefined) await Bun.sleep(options.gapMs)
      }
    })()
  })

/** The JSON body of a raw answer (handles a chunked transfer encoding), or undefined. */
export const rawJson = (answer: RawAnswer): any => {
  let body = answer.body
  if ((answer.headers["transfer-encoding"] ?? "").includes("chunked")) {
    let out = ""
    let rest = body
    for (;;) {
      const lineEnd = rest.indexOf("\r\n")
      const size = parseInt(rest.slice(0, lineEnd), 16)
      if (!(size > 0)) break
      out += rest.slice(lineEnd + 2, lineEnd + 2 + size)
      rest = rest.slice(lineEnd + 2 + size + 2)
    }
    body = out
  }
  try {
    return JSON.parse(Buffer.from(body, "latin1").toString("utf8"))
  } catch {
    return undefined
  }
}

/**
 * An upgrade to a WebSocket the server is expected to refuse: its status and its body (JSON when it is), read off a
 * raw socket since a WebSocket client shows neither. A `host` among `headers` replaces the URL's.
 */
export const refusedUpgrade = async (baseUrl: string, path: string, headers: Record<string, string> = {}) => {
  const url = new URL(baseUrl)
  const lines = [
    `GET ${path} HTTP/1.1`,
    `host: ${headers["host"] ?? url.host}`,
    "upgrade: websocket",
    "connection: Upgrade, close",
    "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==",
    "sec-websocket-version: 13",
    ...Object.entries(headers).filter(([k]) => k !== "host").map(([k, v]) => `${k}: ${v}`)
  ]
  const answer = await rawRequest(baseUrl, `${lines.join("\r\n")}\r\n\r\n`, { waitMs: 15_000 })
  return { status: answer.status, body: rawJson(answer) ?? answer.body }
}

/**
 * The TCP ports a process listens on (IPv4 and IPv6), from its open sockets in /proc: every listener it started,
 * whatever started it (the API, the endpoint listener, each provider emulator).
 */
export const listeningPorts = (pid: number): Array<number> => {
  const inodes = new Set<string>()
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`)
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1]
      if (inode !== undefined) inodes.add(inode)
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>()
  for (const table of [`/proc/${pid}/net/tcp`, `/proc/${pid}/net/tcp6`]) {
    if (!fs.existsSync(table)) continue
    for (const line of fs.readFileSync(table, "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/)
      // local address, state 0A (LISTEN), inode
      if (fields[3] === "0A" && inodes.has(fields[9] ?? "")) ports.add(parseInt(fields[1]!.split(":")[1]!, 16))
    }
  }
  return [...ports].sort((a, b) => a - b)
}
