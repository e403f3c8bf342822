/**
 * Endpoints over real HTTP, served by a real web server inside a real sandbox:
 * - their own origin: the endpoint listener (path mode) or one host name per endpoint (ENDPOINT_BASE_URL), never
 *   the API's; neither listener serves the other's routes;
 * - a visitor's gateway credentials (a key or user token in Authorization, X-Metal-Project-ID, the gateway's
 *   cookies) never reach the sandbox's app, plain or WebSocket, while the app's own Authorization and cookies do;
 * - a lease that ends cuts what is in flight: revoke, expiry, pausing and deleting the sandbox each cut a slow
 *   download through the endpoint at once (the sandbox's server would go on for 80 s) — through the emulator, and
 *   by the gateway alone (to an upstream that never stops by itself).
 */
import { Database } from "bun:sqlite"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { activeEndpoint, connectWebSocket, expectCut, freePort, HEADERS_SERVER, startBunServer, startSlowDownload, startWebServer } from "../support/endpoints.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, poll, waitOperation } from "../support/sandbox.ts"
import { api, type Bootstrap, bootstrap, expectEnvelope, type RunningServer, startServer, openGatewayDatabase } from "../support/server.ts"

/** A cut must come this soon after the lease ends (it takes well under a second; the margin is for a loaded host). */
const CUT_WITHIN_MS = 3_000

const envelopeOf = async (response: Response) => {
  const text = await response.text()
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  return { status: response.status, body, headers: response.headers }
}

describe("path mode (the default): endpoints on their own listener", () => {
  let server: RunningServer
  let http: ReturnType<typeof api>
  let boot: Bootstrap
  let auth: KeyAuth
  let sandbox: any

  beforeAll(async () => {
    server = await startServer()
    http = api(server.url)
    boot = await bootstrap(server.dataDir, "endpoints@example.com")
    auth = { token: boot.api_key, project: boot.project_id }
    sandbox = await createReadySandbox(http, auth, minimalSandbox({ features: { public_ports: [8000], pause_resume: true } }))
    await startWebServer(http, auth, sandbox.id, [8000, 8001, 8002, 8003, 8004])
  })
  afterAll(() => server.stop())

  it("hands out URLs on the endpoint listener, never on the API's origin; neither listener serves the other's routes", async () => {
    const endpoint = await activeEndpoint(http, auth, sandbox.id, 8000)
    const url = new URL(endpoint.url)
    expect(url.origin).toBe(new URL(server.endpointUrl).origin)
    expect(url.origin).not.toBe(new URL(server.url).origin)
    expect(url.pathname).toMatch(/^\/e\/ep_[a-z0-9]{32}\/[a-z2-7]{26}\/$/)

    // The sandbox's server sees the prefix it is served under; the root without its slash is redirected.
    const hello = await fetch(`${endpoint.url}hello`)
    expect(await hello.text()).toBe(`hello ${url.pathname.replace(/\/$/, "")}`)
    expect(hello.headers.get("x-request-id")).toMatch(/^req_/)
    const bare = await fetch(endpoint.url.replace(/\/$/, ""), { redirect: "manual" })
    expect(bare.status).toBe(308)
    expect(bare.headers.get("location")).toBe(url.pathname)

    // The API's listener does not serve endpoints any more ...
    expectEnvelope(await envelopeOf(await fetch(`${server.url}${url.pathname}hello`)), 404, "not_found")
    // ... and the endpoint listener serves nothing of the API.
    for (const route of ["/v1/sandboxes", "/v1/openapi.json", "/docs", "/ready", "/"]) {
      expectEnvelope(await envelopeOf(await fetch(`${server.endpointUrl}${route}`, { headers: { authorization: `Bearer ${boot.api_key}`, "x-metal-project-id": boot.project_id } })), 404, "not_found")
    }
    // A wrong token is no endpoint at all.
    expectEnvelope(await envelopeOf(await fetch(endpoint.url.replace(/\/[a-z2-7]{26}\/$/, `/${"a".repeat(26)}/`))), 404, "not_found")
  })

  it("the sandbox's app never sees the visitor's gateway credentials; its own cookies and Authorization pass", async () => {
    await startBunServer(http, auth, sandbox.id, "headers.js", HEADERS_SERVER, 8005)
    const endpoint = await activeEndpoint(http, auth, sandbox.id, 8005)
    const seenBy = async (headers: Record<string, string>) => (await (await fetch(`${endpoint.url}look`, { headers })).json()) as Record<string, string>
    const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`

    // The gateway's key and user token, in any scheme, and its project header: none reaches the sandbox.
    for (const authorization of [`Bearer ${boot.api_key}`, `Bearer ${boot.user_token}`, basic("me", boot.api_key), basic(boot.user_token, ""), `Token ${boot.api_key}`]) {
      const seen = await seenBy({ authorization, "x-metal-project-id": boot.project_id })
      expect(seen["authorization"], authorization).toBeUndefined()
      expect(seen["x-metal-project-id"]).toBeUndefined()
    }
    // The gateway's own cookies (by name, also __Host-/__Secure- ones) and a cookie holding a key are taken out of
    // Cookie; the app's own cookies pass as they came.
    const mixed = await seenBy({ cookie: `metal_gw_session=s3cret; app_session=keep-me; __Host-metal_gw_csrf=x; stash=${boot.api_key}; theme=dark` })
    expect(mixed["cookie"]).toBe("app_session=keep-me; theme=dark")
    expect((await seenBy({ cookie: "metal_gw_session=s3cret" }))["cookie"]).toBeUndefined()
    // What belongs to the app passes untouched: its own basic auth, its own bearer token, its own cookies.
    const own = await seenBy({ authorization: basic("admin", "hunter2"), cookie: "app_session=keep-me; theme=dark" })
    expect(own["authorization"]).toBe(basic("admin", "hunter2"))
    expect(own["cookie"]).toBe("app_session=keep-me; theme=dark")
    expect((await seenBy({ authorization: "Bearer app-token-123" }))["authorization"]).toBe("Bearer app-token-123")

    // A WebSocket upgrade is relayed with the same headers taken out.
    const socket = connectWebSocket(endpoint.url + "socket", [], {
      authorization: `Bearer ${boot.api_key}`,
      "x-metal-project-id": boot.project_id,
      cookie: `metal_gw_session=s3cret; app_session=keep-me`
    })
    await socket.opened
    await socket.until("the greeting", () => socket.got.length > 0)
    socket.ws.close()
    const record = (await (await fetch(`${endpoint.url}seen`)).json()) as Array<{ path: string; websocket: boolean; headers: Record<string, string> }>
    const upgrade = record.find((r) => r.websocket)
    expect(upgrade?.path).toBe("/socket")
    expect(upgrade?.headers["authorization"]).toBeUndefined()
    expect(upgrade?.headers["x-metal-project-id"]).toBeUndefined()
    expect(upgrade?.headers["cookie"]).toBe("app_session=keep-me")
    // Over everything the app was sent, no gateway credential at all.
    const everything = JSON.stringify(record)
    for (const secret of [boot.api_key, boot.user_token, boot.project_id, "s3cret"]) expect(everything).not.toContain(secret)
  })

  it("revoking an endpoint cuts a download in flight at once, and it serves no more", async () => {
    const endpoint = await activeEndpoint(http, auth, sandbox.id, 8001)
    const download = await startSlowDownload(endpoint.url)
    const since = Date.now()
    expect((await http.delete(`/v1/sandboxes/${sandbox.id}/endpoints/${endpoint.id}`, auth)).status).toBe(202)
    const latency = await expectCut(download, since, CUT_WITHIN_MS)
    console.log(`revoke cut the download after ${latency} ms`)
    expectEnvelope(await envelopeOf(await fetch(`${endpoint.url}hello`)), 410, "endpoint_inactive")
  })

  it("the lease's end cuts a download in flight at once", async () => {
    const endpoint = await activeEndpoint(http, auth, sandbox.id, 8002)
    // The lease (60 s at least through the API) is made to end in 4 s.
    const leaseEnd = Date.now() + 4_000
    const db = openGatewayDatabase(server.dataDir)
    db.exec("PRAGMA busy_timeout = 5000")
    db.query("UPDATE endpoints SET lease_expires_at = ? WHERE id = ?").run(new Date(leaseEnd).toISOString(), endpoint.id)
    db.close()
    const download = await startSlowDownload(endpoint.url)
    const latency = await expectCut(download, leaseEnd, CUT_WITHIN_MS)
    console.log(`expiry cut the download ${latency} ms after the lease ended`)
    expectEnvelope(await envelopeOf(await fetch(`${endpoint.url}hello`)), 410, "endpoint_inactive")
  })

  it("pausing the sandbox cuts a download in flight; paused, the endpoint answers 503; resumed, it serves again", async () => {
    const endpoint = await activeEndpoint(http, auth, sandbox.id, 8003)
    const download = await startSlowDownload(endpoint.url)
    const since = Date.now()
    const paused = await http.post(`/v1/sandboxes/${sandbox.id}/actions/pause`, auth)
    expect(paused.status).toBe(202)
    const latency = await expectCut(download, since, CUT_WITHIN_MS)
    console.log(`pause cut the download after ${latency} ms`)
    expect((await waitOperation(http, auth, paused.body.operation.id)).state).toBe("succeeded")
    expectEnvelope(await envelopeOf(await fetch(`${endpoint.url}hello`)), 503, "sandbox_unavailable")
    const resumed = await http.post(`/v1/sandboxes/${sandbox.id}/actions/resume`, auth)
    expect((await waitOperation(http, auth, resumed.body.operation.id)).state).toBe("succeeded")
    const again = await fetch(`${endpoint.url}hello`)
    expect(again.status).toBe(200)
    expect(await again.text()).toContain("hello")
  })

  it("deleting the sandbox cuts a download in flight at once; its endpoints are revoked", async () => {
    const endpoint = await activeEndpoint(http, auth, sandbox.id, 8004)
    const download = await startSlowDownload(endpoint.url)
    const since = Date.now()
    const deleted = await http.delete(`/v1/sandboxes/${sandbox.id}`, auth)
    expect(deleted.status).toBe(202)
    const latency = await expectCut(download, since, CUT_WITHIN_MS)
    console.log(`delete cut the download after ${latency} ms`)
    expect((await waitOperation(http, auth, deleted.body.operation.id)).state).toBe("succeeded")
    expectEnvelope(await envelopeOf(await fetch(`${endpoint.url}hello`)), 410, "endpoint_inactive")
  })
})

describe("the gateway cuts exchanges by itself, whatever the provider does", () => {
  // Here the endpoint forwards to a test server on loopback that streams forever and never stops on its own (as a
  // remote provider's proxy might), so only the gateway can end a download: by its lease timer or its watchdog.
  let server: RunningServer
  let http: ReturnType<typeof api>
  let auth: KeyAuth
  let upstream: ReturnType<typeof Bun.serve>
  let cancelled = 0

  beforeAll(async () => {
    upstream = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: 0,
      fetch: () => {
        let timer: ReturnType<typeof setInterval>
        return new Response(new ReadableStream<Uint8Array>({
          start(controller) {
            timer = setInterval(() => controller.enqueue(new Uint8Array(64 * 1024)), 20)
          },
          cancel() {
            clearInterval(timer)
            cancelled += 1
          }
        }))
      }
    })
    server = await startServer()
    http = api(server.url)
    const boot = await bootstrap(server.dataDir, "cuts@example.com")
    auth = { token: boot.api_key, project: boot.project_id }
  })
  afterAll(async () => {
    await server.stop()
    upstream.stop(true)
  })

  /** An active endpoint of a new sandbox, forwarding to the test server (its lease ending `leaseMs` from now). */
  const endpointToUpstream = async (leaseMs?: number) => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ features: { public_ports: [8000], pause_resume: true } }))
    const created = await http.post(`/v1/sandboxes/${sandbox.id}/endpoints`, { ...auth, body: { port: 9999 }, headers: { "idempotency-key": idempotencyKey("ep") } })
    const active = await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}/endpoints`, auth)).body.endpoints[0], (e) => e?.state === "active")
    const db = openGatewayDatabase(server.dataDir)
    db.exec("PRAGMA busy_timeout = 5000")
    db.query("UPDATE endpoints SET provider_url = ?, lease_expires_at = COALESCE(?, lease_expires_at) WHERE id = ?")
      .run(`http://127.0.0.1:${upstream.port}`, leaseMs === undefined ? null : new Date(Date.now() + leaseMs).toISOString(), created.body.id)
    db.close()
    return { sandbox, endpoint: active as { id: string; url: string }, leaseEnd: leaseMs === undefined ? undefined : Date.now() + leaseMs }
  }

  const cutsWhen = async (name: string, trigger: (sandboxId: string, endpointId: string) => Promise<number>) => {
    const { sandbox, endpoint } = await endpointToUpstream()
    const before = cancelled
    const download = await startSlowDownload(endpoint.url)
    const since = await trigger(sandbox.id, endpoint.id)
    const latency = await expectCut(download, since, CUT_WITHIN_MS)
    console.log(`${name} cut the download (gateway alone) after ${latency} ms`)
    // The request to the upstream was aborted too.
    await poll(async () => cancelled, (n) => n > before, 5_000, 10)
  }

  it("revoke", () =>
    cutsWhen("revoke", async (sandboxId, endpointId) => {
      const since = Date.now()
      expect((await http.delete(`/v1/sandboxes/${sandboxId}/endpoints/${endpointId}`, auth)).status).toBe(202)
      return since
    }))

  it("the lease's end", async () => {
    const { endpoint, leaseEnd } = await endpointToUpstream(3_000)
    const download = await startSlowDownload(endpoint.url)
    const latency = await expectCut(download, leaseEnd!, CUT_WITHIN_MS)
    console.log(`expiry cut the download (gateway alone) ${latency} ms after the lease ended`)
  })

  it("pause", () =>
    cutsWhen("pause", async (sandboxId) => {
      const since = Date.now()
      expect((await http.post(`/v1/sandboxes/${sandboxId}/actions/pause`, auth)).status).toBe(202)
      return since
    }))

  it("delete", () =>
    cutsWhen("delete", async (sandboxId) => {
      const since = Date.now()
      expect((await http.delete(`/v1/sandboxes/${sandboxId}`, auth)).status).toBe(202)
      return since
    }))
})

describe("host mode (ENDPOINT_BASE_URL): one origin per endpoint", () => {
  let server: RunningServer
  let http: ReturnType<typeof api>
  let auth: KeyAuth
  let sandbox: any
  let port: number

  beforeAll(async () => {
    port = await freePort()
    // *.localhost resolves to this host, so the URLs handed out are fetched as they are.
    server = await startServer({ env: { ENDPOINT_PORT: String(port), ENDPOINT_BASE_URL: `http://sbx.localhost:${port}` } })
    http = api(server.url)
    const boot = await bootstrap(server.dataDir, "hosts@example.com")
    auth = { token: boot.api_key, project: boot.project_id }
    sandbox = await createReadySandbox(http, auth, minimalSandbox({ features: { public_ports: [8000] } }))
    await startWebServer(http, auth, sandbox.id, [8000, 8001])
  })
  afterAll(() => server.stop())

  it("serves each endpoint on its own host name, by the Host header only", async () => {
    const one = await activeEndpoint(http, auth, sandbox.id, 8000)
    const two = await activeEndpoint(http, auth, sandbox.id, 8001)
    const pattern = new RegExp(`^http://ep-[a-z0-9]{32}-[a-z2-7]{26}\\.sbx\\.localhost:${port}/$`)
    expect(one.url).toMatch(pattern)
    expect(two.url).toMatch(pattern)
    expect(new URL(one.url).origin).not.toBe(new URL(two.url).origin)
    expect(new URL(one.url).origin).not.toBe(new URL(server.url).origin)
    // The whole path is the sandbox's: no prefix.
    expect(await (await fetch(`${one.url}hello`)).text()).toBe("hello -")
    const label = new URL(one.url).hostname.split(".")[0]!
    const direct = (host: string, route = "/hello") => fetch(`http://127.0.0.1:${port}${route}`, { headers: { host } })
    // Host names are case-insensitive.
    expect((await direct(`${label.toUpperCase()}.SBX.LOCALHOST:${port}`)).status).toBe(200)
    // Not under the base host, the bare base host, a wrong token, two labels, or a path-mode URL: not found.
    for (const host of ["sbx.localhost", `${label}.other.localhost`, `${label.slice(0, -26)}${"a".repeat(26)}.sbx.localhost`, `x.${label}.sbx.localhost`, "127.0.0.1"]) {
      expectEnvelope(await envelopeOf(await direct(host)), 404, "not_found")
    }
    const id = `ep_${label.slice(3, 35)}`
    const token = label.slice(36)
    expectEnvelope(await envelopeOf(await direct("sbx.localhost", `/e/${id}/${token}/hello`)), 404, "not_found")
  })

  it("revoke cuts a download in flight here too", async () => {
    const list = (await http.get(`/v1/sandboxes/${sandbox.id}/endpoints`, auth)).body.endpoints
    const endpoint = list.find((e: any) => e.port === 8000 && e.state === "active")
    const download = await startSlowDownload(endpoint.url)
    const since = Date.now()
    expect((await http.delete(`/v1/sandboxes/${sandbox.id}/endpoints/${endpoint.id}`, auth)).status).toBe(202)
    await expectCut(download, since, CUT_WITHIN_MS)
    expectEnvelope(await envelopeOf(await fetch(`${endpoint.url}hello`)), 410, "endpoint_inactive")
  })
})

describe("endpoint settings are checked at start", () => {
  const refused = async (env: Record<string, string>, message: RegExp) => {
    const error = await startServer({ env }).then(
      async (s) => {
        await s.stop()
        return undefined
      },
      (e: Error) => e
    )
    expect(error?.message).toMatch(message)
  }

  it("refuses endpoints on the API's own origin, both modes at once, and base URLs with a path or an IP address", async () => {
    const port = await freePort()
    await refused({ PORT: String(port), ENDPOINT_PORT: String(port) }, /ENDPOINT_PORT must differ from PORT/)
    await refused({ PUBLIC_URL: "https://api.example.com", ENDPOINT_PUBLIC_URL: "https://api.example.com" }, /ENDPOINT_PUBLIC_URL must be another origin/)
    await refused({ ENDPOINT_PUBLIC_URL: "https://e.example.com", ENDPOINT_BASE_URL: "https://sbx.example.com" }, /not both/)
    await refused({ ENDPOINT_BASE_URL: "https://sbx.example.com/endpoints" }, /origin only/)
    await refused({ ENDPOINT_BASE_URL: "http://10.0.0.1" }, /DNS name/)
  })
})
