/**
 * Bring your own key (issue 11 item 3) and fallback routing (item 4), through the real gateway. An organization's
 * stored credential for a provider runs its sandboxes there on its own account: the emulator's own key stands for
 * a real account's (the emulator checks it like the provider would), a wrong key for a rejected one.
 */
import { Database } from "bun:sqlite"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Bootstrap, bootstrap, type RunningServer, startServer } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, parseSse, poll, runProcess, waitOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let org: Bootstrap
let auth: KeyAuth
let daytonaKey: string

const credentialsPath = (provider: string) => `/v1/organizations/${org.organization_id}/provider-credentials/${provider}`
const store = (provider: string, fields: Record<string, string>) =>
  http.put(credentialsPath(provider), { token: org.user_token, body: { provider, ...fields } })

/** Every text the gateway keeps where clients or operators read: rows of the database, and its log. */
const everythingKept = () => {
  const db = new Database(path.join(server.dataDir, "gateway.sqlite"), { readonly: true })
  try {
    const tables = (db.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>).map((t) => t.name)
    const rows = tables.flatMap((t) => db.query(`SELECT * FROM ${t}`).all().map((row) => JSON.stringify(row)))
    return rows.join("\n") + server.logs()
  } finally {
    db.close()
  }
}

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  org = await bootstrap(server.dataDir, "byok@example.com")
  auth = { token: org.api_key, project: org.project_id }
  daytonaKey = fs.readFileSync(path.join(server.dataDir, "emulators", "daytona", "api-key"), "utf8").trim()
})
afterAll(() => server.stop())

describe("bring your own key", () => {
  let sandbox: any

  it("runs the organization's sandboxes on its own account: byok, usage recorded, nothing charged, the key kept nowhere readable", async () => {
    expect((await store("daytona", { api_key: daytonaKey })).status).toBe(201)
    sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
    expect(sandbox).toMatchObject({ provider: "daytona", billing_mode: "byok", state: "ready" })
    const hi = await runProcess(http, auth, sandbox.id, ["echo", "hi"])
    expect([hi.process.state, hi.stdout]).toEqual(["succeeded", "hi\n"])
    // The first cost sync (5 s after ready) records usage; a BYOK sandbox is billed by its provider, not us.
    const metered = await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body, (x) => x.cost_microusd !== null, 20_000, 200)
    expect(BigInt(metered.cost_microusd)).toBeGreaterThan(0n)
    const usage = (await http.get(`/v1/organizations/${org.organization_id}/usage`, { token: org.user_token })).body
    expect(usage.top_sandboxes.find((s: any) => s.sandbox_id === sandbox.id)).toMatchObject({ billing_mode: "byok" })
    const billing = (await http.get(`/v1/organizations/${org.organization_id}/billing`, { token: org.user_token })).body
    expect(billing.ledger.filter((l: any) => l.kind === "usage_charge")).toEqual([])
    expect(everythingKept()).not.toContain(daytonaKey)
  }, 60_000)

  it("a rotated credential takes effect at the next call, and a removed one fails it clearly, never on the gateway's account", async () => {
    const exec = async () => {
      const started = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body: { command: ["echo", "again"] }, headers: { "idempotency-key": idempotencyKey() } })
      expect(started.status).toBe(202)
      return poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}/processes/${started.body.id}`, auth)).body, (p) => ["succeeded", "failed"].includes(p.state))
    }
    expect((await store("daytona", { api_key: "dtn_not-the-key" })).status).toBe(200)
    const refused = await exec()
    expect(refused.state).toBe("failed")
    expect(refused.error).toMatchObject({ code: "provider_credentials_rejected", details: { provider: "daytona", reason: "provider_credentials_rejected" } })
    expect(refused.error.message).toContain("daytona refused the organization's stored credentials")
    expect(JSON.stringify(refused)).not.toContain("dtn_not-the-key")

    expect((await store("daytona", { api_key: daytonaKey })).status).toBe(200)
    expect((await exec()).state).toBe("succeeded")

    expect((await http.delete(credentialsPath("daytona"), { token: org.user_token })).status).toBe(200)
    const removed = await exec()
    expect(removed.state).toBe("failed")
    expect(removed.error.code).toBe("provider_credentials_rejected")

    // Back, so that the sandbox can be destroyed on its account.
    expect((await store("daytona", { api_key: daytonaKey })).status).toBe(201)
    const deleted = await http.delete(`/v1/sandboxes/${sandbox.id}`, auth)
    expect((await waitOperation(http, auth, deleted.body.operation.id)).state).toBe("succeeded")
  }, 60_000)

  it("a credential the provider refuses fails the create with a code that names it, and the attempt says so", async () => {
    expect((await store("e2b", { api_key: "e2b_0000000000000000000000000000000000000000" })).status).toBe(201)
    const created = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider: "e2b" }), headers: { "idempotency-key": idempotencyKey() } })
    expect(created.status).toBe(202)
    const op = await waitOperation(http, auth, created.body.operation.id)
    expect(op.state).toBe("failed")
    expect(op.error).toMatchObject({ code: "provider_credentials_rejected", details: { provider: "e2b" } })
    expect(op.error.message).toContain("e2b refused the organization's stored credentials")
    const events = parseSse((await http.get(`/v1/operations/${created.body.operation.id}/events`, auth)).text)
    expect(events.find((e) => e.event === "attempt_failed")?.data.data).toMatchObject({ provider: "e2b", code: "provider_credentials_rejected" })
    // Placed with the organization's stored credentials: byok, whether the provider accepted them or not.
    expect((await http.get(`/v1/sandboxes/${created.body.sandbox.id}`, auth)).body).toMatchObject({ state: "failed", provider: "e2b", billing_mode: "byok" })
    expect((await http.delete(credentialsPath("e2b"), { token: org.user_token })).status).toBe(200)
  }, 60_000)
})

describe("fallback routing", () => {
  it("falls back from a provider that answers 503 to the next eligible one, with both attempts recorded", async () => {
    // A Daytona that is down: every call answers 503 (as its API does in an outage).
    const down = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => Response.json({ statusCode: 503, message: "Service Unavailable" }, { status: 503 }) })
    const other = await startServer({ env: { DAYTONA_API_KEY: "dtn_down", DAYTONA_API_URL: `http://127.0.0.1:${down.port}/api` } })
    try {
      const otherHttp = api(other.url)
      const o = await bootstrap(other.dataDir, "fallback@example.com")
      const otherAuth = { token: o.api_key, project: o.project_id }
      const body = minimalSandbox({ provider: "daytona", fallback: { providers: ["e2b"] } })
      const created = await otherHttp.post("/v1/sandboxes", { ...otherAuth, body, headers: { "idempotency-key": idempotencyKey() } })
      expect((await waitOperation(otherHttp, otherAuth, created.body.operation.id)).state).toBe("succeeded")
      expect((await otherHttp.get(`/v1/sandboxes/${created.body.sandbox.id}`, otherAuth)).body).toMatchObject({ provider: "e2b", state: "ready" })
      const attempts = parseSse((await otherHttp.get(`/v1/operations/${created.body.operation.id}/events`, otherAuth)).text)
        .filter((e) => e.event === "attempt_failed" || e.event === "attempt_started")
        .map((e) => [e.event, e.data.data.provider, e.data.data.code])
      expect(attempts).toEqual([["attempt_failed", "daytona", "provider_unavailable"], ["attempt_started", "e2b", null]])
    } finally {
      await other.stop()
      down.stop(true)
    }
  }, 60_000)
})
