/**
 * Endpoints carry WebSockets and keep-alive connections (issue 13, item 7), through the whole chain: the gateway's
 * endpoint proxy, the provider's preview (Daytona's emulator), its port bridge, a WebSocket server in the sandbox
 * (Bun, run from the jail's own bun). Text stays text and binary binary, the subprotocol the sandbox picks is the
 * one the client gets, closes pass through with their codes both ways, a revoked endpoint cuts an open WebSocket,
 * every refusal is the proxy's envelope, and traffic through an endpoint keeps its sandbox from the idle timeout.
 */
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type RunningServer, openGateway } from "../support/server.ts"
import { connectWebSocket, startEchoServer } from "../support/endpoints.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, poll } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

const expose = async (sandboxId: string, port: number) => {
  const ep = await http.post(`/v1/sandboxes/${sandboxId}/endpoints`, { ...auth, body: { port, lease_seconds: 600 }, headers: { "idempotency-key": idempotencyKey("e") } })
  return poll(async () => (await http.get(`/v1/sandboxes/${sandboxId}/endpoints`, auth)).body.endpoints.find((e: any) => e.id === ep.body.id), (e) => e?.state === "active")
}
const serveEcho = async (sandboxId: string, port: number, detached = false) => {
  await startEchoServer(http, auth, sandboxId, port, detached)
  const endpoint = await expose(sandboxId, port)
  await poll(async () => (await fetch(endpoint.url).catch(() => undefined))?.status, (s) => s === 200, 20_000, 100)
  return endpoint
}
const connect = (url: string, protocols: Array<string> = []) => connectWebSocket(url, protocols)

/**
 * What a raw HTTP connection receives: each request is written once the answers so far hold the `after` text of
 * the one before it (it was answered); ends when the last one's `after` text came, the server closes, or in 3 s.
 */
const rawExchange = (url: string, requests: Array<string>, after: Array<string> = []) =>
  new Promise<string>((resolve, reject) => {
    const u = new URL(url)
    const socket = net.connect(Number(u.port), u.hostname)
    let answer = ""
    let sent = 1
    socket.on("data", (d) => {
      answer += d.toString()
      while (sent < requests.length && answer.includes(after[sent - 1] ?? "")) socket.write(requests[sent++]!)
      if (sent === requests.length && after[sent - 1] !== undefined && answer.includes(after[sent - 1]!)) socket.end()
    })
    socket.on("error", reject)
    socket.on("close", () => resolve(answer))
    socket.write(requests[0]!)
    setTimeout(() => socket.end(), 3000)
  })

beforeAll(async () => void ({ server, http, auth } = await openGateway("endpoint-ws@example.com")))
afterAll(() => server.stop())

describe("endpoints carry WebSockets", () => {
  let sandbox: any
  let endpoint: any
  beforeAll(async () => {
    sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
    endpoint = await serveEcho(sandbox.id, 8100)
  }, 60_000)

  it("relays text and binary both ways, with the subprotocol the sandbox chose and the path below the endpoint", async () => {
    const c = connect(`${endpoint.url}chat/room`, ["chat", "other"])
    await c.opened
    expect(c.ws.protocol).toBe("chat")
    c.ws.send("ping")
    c.ws.send(new Uint8Array([0, 1, 2, 255]))
    await c.until("the echoes", () => c.got.length >= 3)
    expect(c.got[0]).toBe("hello /chat/room")
    expect(c.got[1]).toBe("ping")
    expect(c.got[2]).toEqual(new Uint8Array([0, 1, 2, 255]))
    // A larger message passes whole.
    const big = new Uint8Array(3 * 1024 * 1024).map((_, i) => i % 251)
    c.ws.send(big)
    await c.until("the big echo", () => c.got.length >= 4)
    expect(Buffer.compare(Buffer.from(c.got[3] as Uint8Array), Buffer.from(big))).toBe(0)
    c.ws.close(4002, "done here")
    await c.until("the close", () => c.state.closed !== null)
    // The sandbox saw the client's own close code.
    const closes = await poll(async () => (await (await fetch(`${endpoint.url}closes`)).json()) as Array<{ code: number }>, (l) => l.some((x) => x.code === 4002))
    expect(closes).toContainEqual({ code: 4002, reason: "done here" })
  }, 60_000)

  it("a close from the sandbox reaches the client with its code and reason", async () => {
    const c = connect(endpoint.url)
    await c.opened
    c.ws.send("bye")
    await c.until("the close", () => c.state.closed !== null)
    expect(c.state.closed).toEqual({ code: 4001, reason: "bye from the sandbox" })
  })

  it("keeps a connection alive across requests", async () => {
    const u = new URL(endpoint.url)
    const get = (path: string) => `GET ${u.pathname}${path} HTTP/1.1\r\nHost: ${u.host}\r\n\r\n`
    const answer = await rawExchange(endpoint.url, [get("a"), get("b")], ["plain /a", "plain /b"])
    expect(answer.match(/HTTP\/1\.1 200/g)?.length).toBe(2)
    expect(answer).toContain("plain /a")
    expect(answer).toContain("plain /b")
  })

  it("refuses in the proxy's envelope: a wrong token, nothing listening; a revoke cuts an open WebSocket", async () => {
    const upgrade = (path: string) =>
      `GET ${path} HTTP/1.1\r\nHost: ${new URL(endpoint.url).host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`
    const wrong = await rawExchange(endpoint.url, [upgrade(new URL(endpoint.url).pathname.replace(/\/e\/(ep_[^/]+)\/[^/]+/, "/e/$1/wrongtokenwrongtoken"))])
    expect(wrong).toMatch(/^HTTP\/1\.1 404/)
    expect(wrong).toContain('"code":"not_found"')

    const quiet = await expose(sandbox.id, 8199)
    const nothing = await rawExchange(quiet.url, [upgrade(new URL(quiet.url).pathname)])
    expect(nothing).toMatch(/^HTTP\/1\.1 502/)
    expect(nothing).toContain('"code":"endpoint_unreachable"')

    const second = await serveEcho(sandbox.id, 8101)
    const c = connect(second.url)
    await c.opened
    await http.delete(`/v1/sandboxes/${sandbox.id}/endpoints/${second.id}`, auth)
    await c.until("the cut", () => c.state.closed !== null)
    expect(c.state.closed?.code).toBe(1001)
  }, 60_000)
})

describe("traffic through an endpoint is activity", () => {
  it("a sandbox with an idle timeout stays ready while WebSocket messages flow, and goes idle after", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona", lifecycle: { runtime_timeout_seconds: 3600, idle_timeout_seconds: 4, on_idle_timeout: "pause" } }))
    const endpoint = await serveEcho(sandbox.id, 8102, true)
    const c = connect(endpoint.url)
    await c.opened
    const until = Date.now() + 9_000
    while (Date.now() < until) {
      c.ws.send("tick")
      await Bun.sleep(500)
    }
    expect((await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body.state).toBe("ready")
    c.ws.close()
    const idle = await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body, (s) => s.state === "paused", 30_000, 200)
    expect(idle.state_reason).toBe("idle_timeout")
  }, 90_000)
})
