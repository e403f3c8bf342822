/** Helpers for endpoint tests: a web server inside a sandbox, endpoints to it, and slow downloads through them. */
import * as net from "node:net"
import { expect } from "vitest"
import { idempotencyKey, type KeyAuth, poll, waitRuntimeOperation } from "./sandbox.ts"
import type { api } from "./server.ts"

type Http = ReturnType<typeof api>

/**
 * A server for every port given: `/slow` streams 100 MiB at ~1.3 MB/s (64 KiB every 50 ms, announced with a
 * Content-Length), anything else answers `hello <x-forwarded-prefix or ->`.
 */
export const WEB_SERVER_PY = `
import sys, time, threading, http.server
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path.endswith("/slow"):
            self.send_response(200)
            self.send_header("content-type", "application/octet-stream")
            self.send_header("content-length", str(100 * 1024 * 1024))
            self.end_headers()
            chunk = b"x" * 65536
            try:
                for _ in range(1600):
                    self.wfile.write(chunk); self.wfile.flush(); time.sleep(0.05)
            except Exception:
                pass
            return
        body = ("hello " + (self.headers.get("x-forwarded-prefix") or "-")).encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
servers = [http.server.ThreadingHTTPServer(("127.0.0.1", int(p)), H) for p in sys.argv[1:]]
for s in servers[1:]:
    threading.Thread(target=s.serve_forever, daemon=True).start()
servers[0].serve_forever()
`

/** Writes the web server into the sandbox and starts it on these ports. */
export const startWebServer = async (http: Http, auth: KeyAuth, sandboxId: string, ports: ReadonlyArray<number>) => {
  const write = await http.post(`/v1/sandboxes/${sandboxId}/filesystem/write`, {
    ...auth,
    body: { path: "/workspace/srv.py", data_base64: Buffer.from(WEB_SERVER_PY).toString("base64") },
    headers: { "idempotency-key": idempotencyKey("srv") }
  })
  expect((await waitRuntimeOperation(http, auth, sandboxId, write.body.id)).state).toBe("succeeded")
  const started = await http.post(`/v1/sandboxes/${sandboxId}/processes`, {
    ...auth,
    body: { command: ["python3", "/workspace/srv.py", ...ports.map(String)], timeout_seconds: 3600 },
    headers: { "idempotency-key": idempotencyKey("srv") }
  })
  expect(started.status).toBe(202)
}

/** Creates an endpoint and waits until it is active and its server answers; returns the endpoint. */
export const activeEndpoint = async (http: Http, auth: KeyAuth, sandboxId: string, port: number, leaseSeconds = 600) => {
  const created = await http.post(`/v1/sandboxes/${sandboxId}/endpoints`, {
    ...auth,
    body: { port, lease_seconds: leaseSeconds },
    headers: { "idempotency-key": idempotencyKey("ep") }
  })
  expect(created.status).toBe(202)
  const active = await poll(
    async () => (await http.get(`/v1/sandboxes/${sandboxId}/endpoints`, auth)).body.endpoints.find((e: any) => e.id === created.body.id),
    (e) => e?.state === "active" || e?.state === "failed"
  )
  expect(active.state).toBe("active")
  // The last answer's status and start, should it never be 200: whose 404 it was (the gateway's envelope or another's).
  await poll(async () => {
    const res = await fetch(`${active.url}hello`).catch((e) => String(e))
    return typeof res === "string" ? res : `${res.status} ${(await res.text()).slice(0, 300)}`
  }, (answer) => answer.startsWith("200 "), 20_000, 50)
  return active as { id: string; url: string; lease_expires_at: string }
}

export interface Download {
  /** Bytes received so far. */
  readonly bytes: () => number
  /** Settles when the body ends: `error` is true when it was cut (not a clean end). */
  readonly ended: Promise<{ readonly error: boolean; readonly bytes: number; readonly at: number }>
}

/** Starts `/slow` through the endpoint and returns once bytes are flowing. */
export const startSlowDownload = async (url: string): Promise<Download> => {
  const response = await fetch(`${url}slow`)
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  let bytes = 0
  const ended = (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return { error: false, bytes, at: Date.now() }
        bytes += value.length
      }
    } catch {
      return { error: true, bytes, at: Date.now() }
    }
  })()
  await poll(async () => bytes, (b) => b >= 128 * 1024, 20_000, 10)
  return { bytes: () => bytes, ended }
}

/** Waits (up to `withinMs`) for a download to end; fails when it is still running then. */
export const expectCut = async (download: Download, since: number, withinMs: number) => {
  const outcome = await Promise.race([download.ended, Bun.sleep(withinMs + 5_000).then(() => undefined)])
  expect(outcome, "the download was still running").toBeDefined()
  expect(outcome!.error, "the download ended cleanly instead of being cut").toBe(true)
  expect(outcome!.bytes).toBeLessThan(100 * 1024 * 1024)
  const latency = outcome!.at - since
  expect(latency).toBeLessThan(withinMs)
  return latency
}

/** A TCP port nothing listens on right now. */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

/** A WebSocket echo server (Bun): greets with `hello <path>`, echoes each message, closes with 4001 on "bye", keeps the closes it saw (`/closes`). */
export const ECHO_SERVER = `
const closes = []
Bun.serve({
  port: Number(process.argv[2]),
  hostname: "127.0.0.1",
  fetch(req, server) {
    if (new URL(req.url).pathname === "/closes") return Response.json(closes)
    const protocols = (req.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) => p.trim()).filter(Boolean)
    if (server.upgrade(req, { headers: protocols.includes("chat") ? { "sec-websocket-protocol": "chat" } : {}, data: { path: new URL(req.url).pathname } })) return
    return new Response("plain " + new URL(req.url).pathname)
  },
  websocket: {
    open(ws) { ws.send("hello " + ws.data.path) },
    message(ws, m) { if (m === "bye") ws.close(4001, "bye from the sandbox"); else ws.send(m) },
    close(ws, code, reason) { closes.push({ code, reason }) }
  }
})
`

/**
 * A server that keeps the headers of every request it gets (`GET …/seen` lists them, with the path and whether it
 * was a WebSocket upgrade, which it accepts) and answers each with its headers.
 */
export const HEADERS_SERVER = `
const seen = []
Bun.serve({
  port: Number(process.argv[2]),
  hostname: "127.0.0.1",
  fetch(req, server) {
    const path = new URL(req.url).pathname
    if (path.endsWith("/seen")) return Response.json(seen)
    const headers = Object.fromEntries(req.headers)
    seen.push({ path, websocket: (req.headers.get("upgrade") ?? "").toLowerCase() === "websocket", headers })
    if (server.upgrade(req, { data: {} })) return
    return Response.json(headers)
  },
  websocket: { open(ws) { ws.send("hello") }, message() {} }
})
`

/** Writes a Bun server `script` into the sandbox as `name` and starts it on `port` (detached: out of the gateway's processes, `setsid -f`). */
export const startBunServer = async (http: Http, auth: KeyAuth, sandboxId: string, name: string, script: string, port: number, detached = false) => {
  const written = await http.put(`/v1/sandboxes/${sandboxId}/files/content?path=/workspace/${name}&mode=overwrite`, { ...auth, rawBody: script, headers: { "content-type": "application/octet-stream" } })
  expect([200, 201]).toContain(written.status)
  // Detached: the command ends only once the server is in its own session (it has written its mark), else the
  // agent's kill of the command's process group at its end can reach the server before it has left the group.
  const command = detached
    ? ["sh", "-c", `setsid -f sh -c 'touch "$0.detached"; exec /opt/agent/bun "$0" "$1"' /workspace/${name} ${port} </dev/null >/dev/null 2>&1\nwhile [ ! -e /workspace/${name}.detached ]; do sleep 0.02; done`]
    : ["/opt/agent/bun", `/workspace/${name}`, String(port)]
  const started = await http.post(`/v1/sandboxes/${sandboxId}/processes`, { ...auth, body: { command }, headers: { "idempotency-key": idempotencyKey(name) } })
  expect(started.status).toBe(202)
}

/** Writes the echo server into the sandbox and starts it on `port` (detached: out of the gateway's processes, `setsid -f`). */
export const startEchoServer = (http: Http, auth: KeyAuth, sandboxId: string, port: number, detached = false) =>
  startBunServer(http, auth, sandboxId, "echo.js", ECHO_SERVER, port, detached)

/** A WebSocket client keeping what it received; `headers` go with the handshake (a Host, say). */
export const connectWebSocket = (url: string, protocols: Array<string> = [], headers: Record<string, string> = {}) => {
  const ws = new WebSocket(url.replace(/^http/, "ws"), { protocols, headers } as unknown as Array<string>)
  ws.binaryType = "arraybuffer"
  const got: Array<string | Uint8Array> = []
  const state = { closed: null as null | { code: number; reason: string } }
  ws.onmessage = (e) => got.push(typeof e.data === "string" ? e.data : new Uint8Array(e.data as ArrayBuffer))
  ws.onclose = (e) => (state.closed = { code: e.code, reason: e.reason })
  const opened = new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve()
    ws.onerror = () => reject(new Error("the WebSocket did not open"))
  })
  const until = (what: string, done: () => boolean) => poll(async () => done(), (d) => d, 15_000, 10).catch(() => {
    throw new Error(`timed out waiting for ${what}: got ${JSON.stringify(got.map(String))}, closed ${JSON.stringify(state.closed)}`)
  })
  return { ws, got, state, opened, until }
}
