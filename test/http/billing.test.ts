/** Billing, usage, webhooks and BYOK provider credentials over real HTTP with a real SQLite file. */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { databaseBytes, execSql } from "../support/accounts.ts"
import { api, type Bootstrap, bootstrap, expectEnvelope, runCli, type RunningServer, startServer } from "../support/server.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let owner: Bootstrap
let member: string
let outsider: Bootstrap

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  owner = await bootstrap(server.dataDir, "billing-owner@example.com")
  outsider = await bootstrap(server.dataDir, "billing-outsider@example.com")
  await runCli(server.dataDir, ["users", "create", "--email", "billing-member@example.com"])
  member = JSON.parse((await runCli(server.dataDir, ["tokens", "create", "--email", "billing-member@example.com", "--json"])).stdout).token
  await http.post(`/v1/organizations/${owner.organization_id}/invitations`, { token: owner.user_token, body: { email: "billing-member@example.com" } })
  await http.get("/v1/organizations", { token: member })
})
afterAll(() => server.stop())

const billingPath = () => `/v1/organizations/${owner.organization_id}/billing`

describe("billing", () => {
  it("shows the welcome credit, the ledger and a zero-filled week", async () => {
    const billing = (await http.get(billingPath(), { token: owner.user_token })).body
    expect(billing).toMatchObject({ organization_id: owner.organization_id, balance_microusd: "500000000", balance_usd: "500.00", can_manage: true, payment_method: null })
    expect(billing.purchases[0]).toMatchObject({ source: "welcome_grant", status: "paid", credit_usd: "500.00", fee_usd: "0.00" })
    expect(billing.ledger[0]).toMatchObject({ kind: "deposit", amount_microusd: "500000000", amount_usd: "500.00" })
    expect(billing.weekly_activity).toHaveLength(7)
    expect(billing.weekly_activity.every((d: any) => d.amount_microusd === "0")).toBe(true)
    expect(billing.weekly_activity[6].date).toBe(new Date().toISOString().slice(0, 10))
    expect(billing.auto_topup).toMatchObject({ enabled: false, status: "disabled", threshold_usd: "10.00", refill_usd: "50.00", monthly_cap_usd: "500.00" })
  })

  it("weekly_activity sums usage charges per UTC day", async () => {
    const today = new Date().toISOString().slice(0, 10)
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000).toISOString().slice(0, 10)
    const insert = (...params: Array<string | number>) =>
      execSql(server.dataDir, `INSERT INTO ledger_entries (id, organization_id, kind, amount_microusd, balance_after_microusd, description, created_at)
      VALUES (?, ?, 'usage_charge', ?, 0, 'usage', ?)`, ...params)
    insert(crypto.randomUUID(), owner.organization_id, -1500, `${today}T00:00:01.000Z`)
    insert(crypto.randomUUID(), owner.organization_id, -500, `${today}T23:00:00.000Z`)
    insert(crypto.randomUUID(), owner.organization_id, -7, `${twoDaysAgo}T12:00:00.000Z`)
    insert(crypto.randomUUID(), owner.organization_id, -9, new Date(Date.now() - 9 * 86_400_000).toISOString())
    const week = (await http.get(billingPath(), { token: owner.user_token })).body.weekly_activity
    expect(week[6]).toEqual({ date: today, amount_microusd: "2000" })
    expect(week[4]).toEqual({ date: twoDaysAgo, amount_microusd: "7" })
    expect(week.reduce((t: number, d: any) => t + Number(d.amount_microusd), 0)).toBe(2007)
  })

  it("quotes purchases with the 5.5% fee and its $0.80 minimum", async () => {
    const quote = async (amount: string) => http.get(`${billingPath()}/quote?amount_usd=${amount}`, { token: member })
    expect((await quote("5")).body).toMatchObject({ credit_usd: "5.00", fee_usd: "0.80", total_usd: "5.80", fee_rate: "0.055", min_fee_usd: "0.80" })
    expect((await quote("100")).body).toMatchObject({ fee_usd: "5.50", total_usd: "105.50", total_microusd: "105500000" })
    expect((await quote("10000.00")).body.fee_usd).toBe("550.00")
    expectEnvelope(await quote("4.99"), 422, "validation_error")
    expectEnvelope(await quote("10000.01"), 422, "validation_error")
    expectEnvelope(await quote("1.234"), 422, "validation_error")
    expectEnvelope(await http.get(`${billingPath()}/quote`, { token: member }), 422, "validation_error")
  })

  it("auto top-up: validation, the payment-method rule, and roles", async () => {
    const put = (token: string, body: unknown) => http.put(`${billingPath()}/auto-topup`, { token, body })
    const ok = { enabled: false, threshold_usd: "20", refill_usd: "100.00", monthly_cap_usd: "300" }
    const saved = await put(owner.user_token, ok)
    expect(saved.status).toBe(200)
    expect(saved.body.auto_topup).toMatchObject({ enabled: false, status: "disabled", threshold_usd: "20.00", refill_usd: "100.00", monthly_cap_usd: "300.00" })
    expectEnvelope(await put(owner.user_token, { ...ok, enabled: true }), 409, "conflict")
    const issues = (body: unknown) => put(owner.user_token, body).then((r) => expectEnvelope(r, 422, "validation_error").details.issues.map((i: any) => i.path))
    expect(await issues({ ...ok, threshold_usd: "0" })).toEqual(["threshold_usd"])
    expect(await issues({ ...ok, refill_usd: "4.99" })).toContain("refill_usd")
    expect(await issues({ ...ok, monthly_cap_usd: "99" })).toEqual(["monthly_cap_usd"])
    expect(await issues({ ...ok, threshold_usd: "1.001" })).toEqual(["threshold_usd"])
    expect(await issues({ enabled: true })).toEqual(expect.arrayContaining(["threshold_usd", "refill_usd", "monthly_cap_usd"]))
    expectEnvelope(await put(member, ok), 403, "forbidden")
    expectEnvelope(await put(outsider.user_token, ok), 403, "forbidden")
  })

  it("credits grant adds a paid admin_grant purchase and a deposit; bad input fails with a clear message", async () => {
    const granted = await runCli(server.dataDir, ["credits", "grant", "--org", owner.organization_id, "--amount-usd", "25.50", "--json"])
    expect(granted.code).toBe(0)
    expect(JSON.parse(granted.stdout)).toMatchObject({ kind: "deposit", amount_microusd: "25500000" })
    const billing = (await http.get(billingPath(), { token: owner.user_token })).body
    expect(billing.purchases[0]).toMatchObject({ source: "admin_grant", status: "paid", credit_usd: "25.50" })
    const adjust = await runCli(server.dataDir, ["credits", "grant", "--org", owner.organization_id, "--amount-usd", "-0.50", "--kind", "adjustment"])
    expect(adjust.code).toBe(0)
    const after = (await http.get(billingPath(), { token: owner.user_token })).body
    expect(BigInt(after.balance_microusd) - BigInt(billing.balance_microusd)).toBe(-500000n)
    const bad = await runCli(server.dataDir, ["credits", "grant", "--org", owner.organization_id, "--amount-usd", "-3"])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain("deposit must be positive")
    expect((await runCli(server.dataDir, ["credits", "grant", "--org", crypto.randomUUID(), "--amount-usd", "3"])).stderr).toContain("no organization")
    expect((await runCli(server.dataDir, ["credits", "grant", "--org", "not-an-id", "--amount-usd", "3"])).stderr).toContain("no organization not-an-id")
  })
})

describe("usage", () => {
  it("is a well-formed zero answer without data, and sums usage records with filters", async () => {
    const usagePath = `/v1/organizations/${outsider.organization_id}/usage`
    const empty = (await http.get(usagePath, { token: outsider.user_token })).body
    expect(empty.summary.total_cost.current).toEqual({ microusd: "0", usd: "0.00" })
    expect(empty.daily.length).toBeGreaterThanOrEqual(30)
    expect(empty.period.timezone).toBe("UTC")
    const insert = (...params: Array<string | number>) =>
      execSql(server.dataDir, `INSERT INTO usage_records (id, organization_id, project_id, sandbox_id, provider, billing_mode, cost_delta_microusd,
      cumulative_microusd, provenance, confidence, rate_card_version, measured_through, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'estimated_rate_card', 'low', 'v1', ?, ?)`, ...params)
    const now = new Date().toISOString()
    insert(crypto.randomUUID(), outsider.organization_id, outsider.project_id, "sbx_a", "e2b", "emulated", 1000, 1000, now, now)
    insert(crypto.randomUUID(), outsider.organization_id, outsider.project_id, "sbx_a", "e2b", "emulated", 500, 1500, now, now)
    insert(crypto.randomUUID(), outsider.organization_id, outsider.project_id, "sbx_b", "daytona", "managed", 250, 250, now, now)
    const usage = (await http.get(usagePath, { token: outsider.user_token })).body
    expect(usage.summary.total_cost.current.microusd).toBe("1750")
    expect(usage.summary.emulated_cost.current.microusd).toBe("1500")
    expect(usage.summary.managed_cost.current.microusd).toBe("250")
    expect(usage.top_sandboxes[0]).toMatchObject({ sandbox_id: "sbx_a", cost: { microusd: "1500" } })
    expect(usage.by_provider.find((p: any) => p.provider === "e2b")).toMatchObject({ sandbox_count: 1 })
    const filtered = (await http.get(`${usagePath}?provider=daytona`, { token: outsider.user_token })).body
    expect(filtered.summary.total_cost.current.microusd).toBe("250")
    expectEnvelope(await http.get(`${usagePath}?from=2020-01-01&through=2022-01-01`, { token: outsider.user_token }), 422, "validation_error")
    expectEnvelope(await http.get(`${usagePath}?from=yesterday`, { token: outsider.user_token }), 422, "validation_error")
    expectEnvelope(await http.get(`${usagePath}?billing_mode=free`, { token: outsider.user_token }), 422, "validation_error")
    expectEnvelope(await http.get(usagePath, { token: owner.user_token }), 403, "forbidden")
  })
})

describe("webhooks", () => {
  const base = () => `/v1/organizations/${owner.organization_id}/webhooks`

  it("shows the secret only at create and rotate; rotation replaces it", async () => {
    const created = await http.post(base(), { token: owner.user_token, body: { name: "ops", url: "https://hooks.example.com/x", event_types: ["sandbox.ready"] } })
    expect(created.status).toBe(201)
    expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/)
    expect(created.body.secret_prefix).toBe(created.body.secret.slice(0, 14))
    expect(created.body).toMatchObject({ enabled: true, event_types: ["sandbox.ready"], disabled_at: null })
    const id = created.body.id
    const fetched = (await http.get(`${base()}/${id}`, { token: member })).body
    expect(fetched.secret).toBeUndefined()
    expect(JSON.stringify((await http.get(base(), { token: member })).body)).not.toContain(created.body.secret)
    const rotated = (await http.post(`${base()}/${id}/rotate`, { token: owner.user_token })).body
    expect(rotated.secret).not.toBe(created.body.secret)
    expect(rotated.secret_prefix).toBe(rotated.secret.slice(0, 14))
    expect(rotated.rotated_at).not.toBeNull()
    const db = databaseBytes(server.dataDir)
    expect(db.includes(Buffer.from(rotated.secret))).toBe(false)
  })

  it("updates, disables and deletes; validates urls, types and roles", async () => {
    // Loopback (and every other non-public target) is refused by default (test/services/webhook-policy.test.ts).
    expectEnvelope(await http.post(base(), { token: owner.user_token, body: { name: "all", url: "http://127.0.0.1:9/hook" } }), 422, "validation_error")
    // A name that does not resolve (the test DNS server knows no name here) is accepted; attempts check again.
    const created = (await http.post(base(), { token: owner.user_token, body: { name: "all", url: "https://unresolved.hooks.test/hook" } })).body
    expect(created.event_types).toEqual([])
    const path_ = `${base()}/${created.id}`
    const disabled = (await http.patch(path_, { token: owner.user_token, body: { enabled: false } })).body
    expect(disabled.enabled).toBe(false)
    expect(disabled.disabled_at).not.toBeNull()
    expect((await http.patch(path_, { token: owner.user_token, body: { name: "renamed", enabled: true } })).body).toMatchObject({ name: "renamed", enabled: true, disabled_at: null })
    expectEnvelope(await http.patch(path_, { token: owner.user_token, body: {} }), 422, "validation_error")
    expectEnvelope(await http.patch(path_, { token: member, body: { name: "x" } }), 403, "forbidden")
    const bad = async (body: unknown) => expectEnvelope(await http.post(base(), { token: owner.user_token, body }), 422, "validation_error")
    await bad({ name: "x", url: "ftp://example.com" })
    await bad({ name: "x", url: "https://user:pw@example.com" })
    await bad({ name: "x", url: "not a url" })
    await bad({ name: "x", url: `https://e.com/${"a".repeat(2050)}` })
    await bad({ name: "x", url: "https://e.com", event_types: ["sandbox.exploded"] })
    await bad({ name: "x", url: "https://e.com", event_types: ["sandbox.ready", "sandbox.ready"] })
    await bad({ name: "", url: "https://e.com" })
    expectEnvelope(await http.post(base(), { token: member, body: { name: "x", url: "https://e.com" } }), 403, "forbidden")
    expect((await http.delete(path_, { token: owner.user_token })).body).toEqual({ id: created.id, deleted: true })
    expectEnvelope(await http.get(path_, { token: owner.user_token }), 404, "not_found")
    expectEnvelope(await http.post(`${path_}/rotate`, { token: owner.user_token }), 404, "not_found")
    expectEnvelope(await http.get(`/v1/organizations/${owner.organization_id}/webhooks/${created.id}`, { token: outsider.user_token }), 403, "forbidden")
  })
})

describe("provider credentials", () => {
  const base = () => `/v1/organizations/${owner.organization_id}/provider-credentials`

  it("stores sealed credentials, merges updates, never returns or stores the secret in plain text", async () => {
    const secret = `e2b_${crypto.randomUUID()}`
    const created = await http.put(`${base()}/e2b`, { token: owner.user_token, body: { provider: "e2b", api_key: secret } })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ provider: "e2b", organization_id: owner.organization_id })
    expect(JSON.stringify(created.body)).not.toContain(secret)
    const replaced = await http.put(`${base()}/e2b`, { token: owner.user_token, body: { provider: "e2b", api_key: `${secret}-2` } })
    expect(replaced.status).toBe(200)
    const modal = await http.put(`${base()}/modal`, { token: owner.user_token, body: { provider: "modal", token_id: "id" } })
    expect(expectEnvelope(modal, 422, "validation_error").details.issues).toEqual([{ path: "token_secret", message: "is required" }])
    expect((await http.put(`${base()}/modal`, { token: owner.user_token, body: { provider: "modal", token_id: "id", token_secret: "s3cret-modal" } })).status).toBe(201)
    // A partial update keeps the stored secret.
    expect((await http.put(`${base()}/modal`, { token: owner.user_token, body: { provider: "modal", environment: "dev" } })).status).toBe(200)
    const list = (await http.get(base(), { token: member })).body.provider_credentials
    expect(list.map((c: any) => c.provider)).toEqual(["e2b", "modal"])
    expect(JSON.stringify(list)).not.toContain(secret)
    const dbBytes = databaseBytes(server.dataDir)
    expect(dbBytes.includes(Buffer.from(secret))).toBe(false)
    expect(dbBytes.includes(Buffer.from("s3cret-modal"))).toBe(false)
    expect(server.logs()).not.toContain(secret)
    expect(fs.statSync(path.join(server.dataDir, "secret.key")).mode & 0o777).toBe(0o600)
  })

  it("rejects mismatched or unknown providers and fields, enforces roles, deletes", async () => {
    expectEnvelope(await http.put(`${base()}/e2b`, { token: owner.user_token, body: { provider: "daytona", api_key: "k" } }), 422, "validation_error")
    expectEnvelope(await http.put(`${base()}/e2b`, { token: owner.user_token, body: { provider: "e2b", api_key: "k", bogus: "x" } }), 422, "validation_error")
    expectEnvelope(await http.put(`${base()}/acme`, { token: owner.user_token, body: { provider: "acme", api_key: "k" } }), 422, "validation_error")
    expectEnvelope(await http.put(`${base()}/e2b`, { token: owner.user_token, body: { provider: "e2b", api_key: "x".repeat(16_385) } }), 422, "validation_error")
    expectEnvelope(await http.put(`${base()}/e2b`, { token: member, body: { provider: "e2b", api_key: "k" } }), 403, "forbidden")
    expectEnvelope(await http.delete(`${base()}/vercel`, { token: owner.user_token }), 404, "not_found")
    expect((await http.delete(`${base()}/e2b`, { token: owner.user_token })).body).toEqual({ provider: "e2b", deleted: true })
    expectEnvelope(await http.delete(`${base()}/e2b`, { token: owner.user_token }), 404, "not_found")
  })
})
