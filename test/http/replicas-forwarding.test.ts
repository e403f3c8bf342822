/**
 * What a replica relays to the node a local sandbox lives on (docs/operations/scaling-out.md), with two gateway processes on
 * one PostgreSQL database, endpoints in host addressing (ENDPOINT_BASE_URL, one host name per endpoint: reached
 * here with a Host header on loopback) and a CLUSTER_SECRET. PostgreSQL run only.
 *
 * Node A starts alone and provisions the sandboxes (so they live on A), then B starts; everything below goes
 * through B:
 * - a terminal attach (a typed line answered, a resize, closing leaves the process running, an attach through A
 *   takes over, the exit frame and close), refused as A's API refuses (401, another tenant's 404, 409, 426);
 * - a forged forward mark (wrong HMAC) is not honoured: the attach is still relayed to A;
 * - a host-addressed endpoint's requests and WebSockets (text, binary, subprotocol, closes both ways; nothing
 *   listening on the port is A's 502, not a node error);
 * - A killed: attach, endpoint request and endpoint WebSocket answer 503 `node_unreachable` at once, forged mark or not.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { querySql } from "../support/accounts.ts"
import { connectWebSocket, startEchoServer, startWebServer } from "../support/endpoints.ts"
import { databaseUrlFor, onPostgres } from "../support/postgres.ts"
import { refusedUpgrade } from "../support/raw-http.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, poll } from "../support/sandbox.ts"
import { api, bootstrap, destroyJails, expectEnvelope, type RunningServer, startServer, tempDataDir } from "../support/server.ts"
import { attachTerminal, keyHeaders, shellRoundTrip } from "../support/terminals.ts"

const SECRET = "replicas-forwarding-cluster-secret"
/** A client's own mark, in the right shape but not signed with the cluster's secret. */
const FORGED = { "x-gateway-forwarded-by": `node-b;${"0".repeat(64)}` }

describe.skipIf(!onPostgres())("forwarding between replicas: terminal attach, host-addressed endpoints, endpoint WebSockets", () => {
  const dataA = tempDataDir("fwd-a")
  const dataB = tempDataDir("fwd-b")
  let a: RunningServer
  let b: RunningServer
  let http: { a: ReturnType<typeof api>; b: ReturnType<typeof api> }
  let auth: KeyAuth
  let stranger: KeyAuth
  let terminalSandbox: string
  let webSandbox: string

  const env = (node: string) => ({
    DATABASE_URL: databaseUrlFor(dataA)!,
    NODE_ID: node,
    NODE_GRACE_SECONDS: "60",
    CLUSTER_SECRET: SECRET,
    ENDPOINT_BASE_URL: "http://endpoints.test"
  })
  const boot = async (email: string): Promise<KeyAuth> => {
    const booted = await bootstrap(dataA, email)
    return { token: booted.api_key, project: booted.project_id }
  }
  const terminal = async (command: Array<string>) => {
    const started = await http.b.post(`/v1/sandboxes/${terminalSandbox}/processes`, { ...auth, body: { command, pty: { cols: 80, rows: 24 } }, headers: { "idempotency-key": idempotencyKey("t") } })
    expect(started.status).toBe(202)
    return started.body.id as string
  }
  const attachPath = (processId: string) => `/v1/sandboxes/${terminalSandbox}/processes/${processId}/attach`
  const hosts = new Map<number, string>()
  /** The host name (ENDPOINT_BASE_URL's subdomain) of an endpoint to `port`, created through B once. */
  const hostOf = async (port: number) => {
    const known = hosts.get(port)
    if (known !== undefined) return known
    const created = await http.b.post(`/v1/sandboxes/${webSandbox}/endpoints`, { ...auth, body: { port, lease_seconds: 600 }, headers: { "idempotency-key": idempotencyKey("ep") } })
    expect(created.status).toBe(202)
    const active = await poll(async () => (await http.b.get(`/v1/sandboxes/${webSandbox}/endpoints`, auth)).body.endpoints.find((e: any) => e.id === created.body.id), (e) => e?.state === "active")
    expect(active.url).toMatch(/^http:\/\/ep-[a-z0-9]{32}-[a-z2-7]{26}\.endpoints\.test\/$/)
    hosts.set(port, new URL(active.url).host)
    return new URL(active.url).host
  }
  /** A request to a node's endpoint listener for the endpoint named by `host`. */
  const viaEndpoint = (server: RunningServer, host: string, path: string, headers: Record<string, string> = {}) =>
    fetch(`${server.endpointUrl}${path}`, { headers: { host, ...headers } })

  beforeAll(async () => {
    a = await startServer({ dataDir: dataA, env: env("node-a") })
    auth = await boot("forwarding@example.com")
    stranger = await boot("forwarding-stranger@example.com")
    const httpA = api(a.url)
    // A alone: both sandboxes live on A.
    const [pty, web] = await Promise.all([
      createReadySandbox(httpA, auth, minimalSandbox({ features: { pty: true } })),
      createReadySandbox(httpA, auth, minimalSandbox({ provider: "daytona" }))
    ])
    terminalSandbox = pty.id
    webSandbox = web.id
    await startWebServer(httpA, auth, webSandbox, [8000])
    await startEchoServer(httpA, auth, webSandbox, 8100)
    b = await startServer({ dataDir: dataB, env: env("node-b") })
    http = { a: httpA, b: api(b.url) }
    expect(querySql<{ node_id: string }>(dataA, "SELECT node_id FROM sandboxes ORDER BY node_id")).toEqual([{ node_id: "node-a" }, { node_id: "node-a" }])
  }, 120_000)

  afterAll(async () => {
    await b?.stop()
    await a?.stop({ kill: true })
    await destroyJails(dataA)
  })

  it("a terminal attach through B is relayed to A: input, resize, close, take-over, exit", async () => {
    const processId = await terminal(["sh", "-i"])
    const first = attachTerminal(b.url, terminalSandbox, processId, auth)
    await shellRoundTrip(first)
    expect((await http.b.get(`/v1/sandboxes/${terminalSandbox}/processes/${processId}`, auth)).body.pty).toEqual({ cols: 120, rows: 40 })
    // Closing the attach (through B) leaves the process running.
    first.ws.close()
    await first.waitClose()
    await Bun.sleep(200)
    expect((await http.b.get(`/v1/sandboxes/${terminalSandbox}/processes/${processId}`, auth)).body.state).toBe("running")

    // A forged mark is not honoured: B still relays the attach to A, where an attach through A takes it over.
    const forged = attachTerminal(b.url, terminalSandbox, processId, auth, { headers: FORGED })
    await forged.opened
    await forged.waitOutput("sum=42") // replayed
    const onA = attachTerminal(a.url, terminalSandbox, processId, auth)
    await onA.opened
    await forged.waitClose()
    expect(forged.state.closed?.code).toBe(4000)
    onA.type("echo marker-a\n")
    await onA.waitOutput("marker-a")
    onA.ws.close()
    await onA.waitClose()

    // The end of the process reaches a client attached through B: the exit frame, then close 1000.
    const last = attachTerminal(b.url, terminalSandbox, processId, auth)
    await last.opened
    await last.waitOutput("marker-a")
    last.type("exit 3\n")
    await last.waitFrame("exit")
    await last.waitClose()
    expect(last.state.frames.find((f) => f.type === "exit")).toEqual({ type: "exit", state: "failed", exit_code: 3 })
    expect(last.state.closed?.code).toBe(1000)
  }, 90_000)

  it("an attach through B is refused as A's API refuses it", async () => {
    const live = await terminal(["sh", "-i"])
    const plain = await http.b.post(`/v1/sandboxes/${terminalSandbox}/processes`, { ...auth, body: { command: ["sleep", "60"] }, headers: { "idempotency-key": idempotencyKey("p") } })
    const cases: Array<[string, Record<string, string>]> = [
      [attachPath(live), {}],
      [attachPath(live), keyHeaders(stranger)],
      [attachPath("proc_00000000000000000000000000"), keyHeaders(auth)],
      [attachPath(plain.body.id), keyHeaders(auth)]
    ]
    const throughB = await Promise.all(cases.map(([path, headers]) => refusedUpgrade(b.url, path, headers)))
    const throughA = await Promise.all(cases.map(([path, headers]) => refusedUpgrade(a.url, path, headers)))
    expect(throughB.map((r) => [r.status, r.body.code])).toEqual([[401, "unauthenticated"], [404, "not_found"], [404, "not_found"], [409, "invalid_process_state"]])
    expect(throughA.map((r) => [r.status, r.body.code])).toEqual(throughB.map((r) => [r.status, r.body.code]))
    expectEnvelope(await http.b.get(attachPath(live), auth), 426, "upgrade_required")
    for (const id of [live, plain.body.id]) await http.b.post(`/v1/sandboxes/${terminalSandbox}/processes/${id}/actions/cancel`, { ...auth, headers: { "idempotency-key": idempotencyKey("c") } })
  }, 60_000)

  it("a host-addressed endpoint served by A answers through B, plain requests and WebSockets", async () => {
    const web = await hostOf(8000)
    expect(await poll(async () => (await viaEndpoint(b, web, "/hello")).status, (s) => s === 200, 20_000, 100)).toBe(200)
    expect(await (await viaEndpoint(b, web, "/hello")).text()).toBe("hello -")
    expect(await (await viaEndpoint(a, web, "/hello")).text()).toBe("hello -")
    // Not an endpoint of this gateway: B's own 404, as A's.
    const unknown = `ep-${"a".repeat(32)}-${"a".repeat(26)}.endpoints.test`
    expect((await viaEndpoint(b, unknown, "/hello")).status).toBe(404)

    const echo = await hostOf(8100)
    await poll(async () => (await viaEndpoint(b, echo, "/").catch(() => undefined))?.status, (s) => s === 200, 20_000, 100)
    const c = connectWebSocket(`${b.endpointUrl}/chat/room`, ["chat", "other"], { host: echo })
    await c.opened
    expect(c.ws.protocol).toBe("chat")
    c.ws.send("ping")
    c.ws.send(new Uint8Array([0, 1, 2, 255]))
    await c.until("the echoes", () => c.got.length >= 3)
    expect(c.got.slice(0, 3)).toEqual(["hello /chat/room", "ping", new Uint8Array([0, 1, 2, 255])])
    // The sandbox's close reaches the client with its code and reason.
    c.ws.send("bye")
    await c.until("the close", () => c.state.closed !== null)
    expect(c.state.closed).toEqual({ code: 4001, reason: "bye from the sandbox" })
    // The client's close reaches the sandbox with its code and reason.
    const d = connectWebSocket(`${b.endpointUrl}/other`, [], { host: echo })
    await d.opened
    await d.until("the greeting", () => d.got.length >= 1)
    d.ws.close(4002, "done here")
    const closes = await poll(async () => (await (await viaEndpoint(b, echo, "/closes")).json()) as Array<{ code: number }>, (l) => l.some((x) => x.code === 4002))
    expect(closes).toContainEqual({ code: 4002, reason: "done here" })

    // Nothing listens on the sandbox's port: A's answer (502), not a node-level error.
    const quiet = await hostOf(8199)
    expect(await refusedUpgrade(b.endpointUrl, "/", { host: quiet })).toMatchObject({ status: 502, body: { code: "endpoint_unreachable" } })
    expect((await viaEndpoint(b, quiet, "/")).status).toBe(502)
  }, 90_000)

  it("with A dead, B answers 503 node_unreachable at once (forged mark or not), never hangs", async () => {
    const live = await terminal(["sh", "-i"])
    const web = await hostOf(8000)
    expect(await poll(async () => (await viaEndpoint(b, web, "/hello")).status, (s) => s === 200, 20_000, 100)).toBe(200)
    await a.stop({ kill: true })
    // Within the grace period A is still the sandboxes' node: nothing is served in its place.
    for (const headers of [keyHeaders(auth), { ...keyHeaders(auth), ...FORGED }]) {
      expect(await refusedUpgrade(b.url, attachPath(live), headers)).toMatchObject({ status: 503, body: { code: "node_unreachable", retryable: true } })
    }
    for (const headers of [{}, FORGED]) {
      const answer = await viaEndpoint(b, web, "/hello", headers)
      expect(answer.status).toBe(503)
      expect(await answer.json()).toMatchObject({ code: "node_unreachable", retryable: true })
      expect(await refusedUpgrade(b.endpointUrl, "/", { host: web, ...headers })).toMatchObject({ status: 503, body: { code: "node_unreachable" } })
    }
    const raw = await fetch(`${b.url}/v1/sandboxes/${webSandbox}/files/content?path=${encodeURIComponent("/workspace/srv.py")}`, { headers: keyHeaders(auth) })
    expect(raw.status).toBe(503)
    expect(await raw.json()).toMatchObject({ code: "node_unreachable" })
  }, 60_000)
})
