/**
 * Bring your own key for every other plugin (issue 11 item 3; daytona and e2b are in byok.test.ts), through the
 * real gateway. One organization stores each emulator's own credentials, read from DATA_DIR/emulators/<name>/
 * where the emulator keeps them (its `api-key`, Blaxel's `workspace`, Vercel's `team-id` and `project-id`, the
 * Cloudflare bridge's URL from its `port`): its sandboxes there are ready with `billing_mode: "byok"` and run
 * `echo hi`. Another organization stores a wrong secret: its create fails with `provider_credentials_rejected`
 * naming the provider. Modal (its in-process SDK fake's token pair), and CodeSandbox and Northflank (lifecycle only:
 * ready and destroyed, no command) are covered too. The sandboxes are created concurrently, to keep the file fast.
 */
import { Database } from "bun:sqlite"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Bootstrap, bootstrap, type RunningServer, startServer } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, runProcess, waitOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let own: Bootstrap
let wrong: Bootstrap

const auth = (org: Bootstrap): KeyAuth => ({ token: org.api_key, project: org.project_id })
const kept = (emulator: string, file: string) => fs.readFileSync(path.join(server.dataDir, "emulators", emulator, file), "utf8").trim()
const store = (org: Bootstrap, provider: string, fields: Record<string, string>) =>
  http.put(`/v1/organizations/${org.organization_id}/provider-credentials/${provider}`, { token: org.user_token, body: { provider, ...fields } })

interface Case {
  readonly provider: string
  /** What the request needs to be placed there (most of these providers cannot keep a sandbox off the internet). */
  readonly body: Record<string, unknown>
  /** The emulator's own credentials, as an organization would store its account's. */
  readonly credentials: () => Record<string, string>
  /** The secret field, replaced by a wrong value for the other organization. */
  readonly secret: string
}

const internet = { network: { internet_access: true } }
/** The project the Northflank emulator serves (an account's project id). */
const NORTHFLANK_PROJECT = "metal-emulated"
const CASES: ReadonlyArray<Case> = [
  { provider: "blaxel", body: internet, secret: "api_key", credentials: () => ({ api_key: kept("blaxel", "api-key"), workspace: kept("blaxel", "workspace") }) },
  {
    provider: "cloudflare",
    body: internet,
    secret: "api_key",
    credentials: () => ({ api_url: `http://127.0.0.1:${kept("cloudflare", "port")}`, api_key: kept("cloudflare", "api-key") })
  },
  { provider: "freestyle", body: internet, secret: "api_key", credentials: () => ({ api_key: kept("freestyle", "api-key") }) },
  { provider: "prime", body: { ...internet, resources: { vcpu: 0.5, memory_mb: 500 } }, secret: "api_key", credentials: () => ({ api_key: kept("prime", "api-key") }) },
  { provider: "runloop", body: internet, secret: "api_key", credentials: () => ({ api_key: kept("runloop", "api-key") }) },
  {
    provider: "vercel",
    body: { network: { internet_access: false } },
    secret: "token",
    credentials: () => ({ token: kept("vercel", "api-key"), project_id: kept("vercel", "project-id"), team_id: kept("vercel", "team-id") })
  },
  // Modal's emulator fakes the SDK in-process: its token pair is `ak-emulator` and `as-` + its key.
  { provider: "modal", body: { network: { internet_access: false } }, secret: "token_secret", credentials: () => ({ token_id: "ak-emulator", token_secret: `as-${kept("modal", "api-key")}` }) }
]

/** Lifecycle-only providers (no processes): ready with byok, then destroyed; the same wrong-secret refusal. */
const LIFECYCLE: ReadonlyArray<Case> = [
  { provider: "codesandbox", body: internet, secret: "api_key", credentials: () => ({ api_key: kept("codesandbox", "api-key") }) },
  { provider: "northflank", body: internet, secret: "api_token", credentials: () => ({ api_token: kept("northflank", "api-key"), project_id: NORTHFLANK_PROJECT }) }
]

/** Every text the gateway keeps where clients or operators read: rows of the database, and its log. */
const everythingKept = () => {
  const db = new Database(path.join(server.dataDir, "gateway.sqlite"), { readonly: true })
  try {
    const tables = (db.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>).map((t) => t.name)
    return tables.flatMap((t) => db.query(`SELECT * FROM ${t}`).all().map((row) => JSON.stringify(row))).join("\n") + server.logs()
  } finally {
    db.close()
  }
}

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  own = await bootstrap(server.dataDir, "byok-own@example.com")
  wrong = await bootstrap(server.dataDir, "byok-wrong@example.com")
})
afterAll(() => server.stop())

describe("bring your own key, every plugin", () => {
  it("the emulator's own credentials: ready with billing_mode byok, `echo hi` runs, destroyed; the secrets kept nowhere readable", async () => {
    for (const c of CASES) expect((await store(own, c.provider, c.credentials())).status).toBe(201)
    const results = await Promise.all(CASES.map(async (c) => {
      const sandbox = await createReadySandbox(http, auth(own), minimalSandbox({ provider: c.provider, ...c.body }))
      const hi = await runProcess(http, auth(own), sandbox.id, ["echo", "hi"])
      const deleted = await http.delete(`/v1/sandboxes/${sandbox.id}`, auth(own))
      const destroyed = await waitOperation(http, auth(own), deleted.body.operation.id)
      return { provider: sandbox.provider, billing_mode: sandbox.billing_mode, state: sandbox.state, echo: [hi.process.state, hi.stdout], destroyed: destroyed.state }
    }))
    expect(results).toEqual(CASES.map((c) => ({ provider: c.provider, billing_mode: "byok", state: "ready", echo: ["succeeded", "hi\n"], destroyed: "succeeded" })))
    const everything = everythingKept()
    for (const c of CASES) expect(everything).not.toContain(c.credentials()[c.secret])
  }, 90_000)

  it("a wrong secret: the create fails with provider_credentials_rejected naming the provider", async () => {
    for (const c of CASES) expect((await store(wrong, c.provider, { ...c.credentials(), [c.secret]: `not-the-${c.provider}-key` })).status).toBe(201)
    const results = await Promise.all(CASES.map(async (c) => {
      const created = await http.post("/v1/sandboxes", { ...auth(wrong), body: minimalSandbox({ provider: c.provider, ...c.body }), headers: { "idempotency-key": idempotencyKey(c.provider) } })
      expect(created.status).toBe(202)
      const op = await waitOperation(http, auth(wrong), created.body.operation.id)
      expect(JSON.stringify(op)).not.toContain(`not-the-${c.provider}-key`)
      return { state: op.state, code: op.error?.code, provider: op.error?.details?.provider, named: String(op.error?.message).includes(`${c.provider} refused the organization's stored credentials`) }
    }))
    expect(results).toEqual(CASES.map((c) => ({ state: "failed", code: "provider_credentials_rejected", provider: c.provider, named: true })))
  }, 60_000)

  it("lifecycle-only providers too: byok, ready, destroyed; a wrong secret is refused naming the provider", async () => {
    const results = await Promise.all(LIFECYCLE.map(async (c) => {
      expect((await store(own, c.provider, c.credentials())).status).toBe(201)
      expect((await store(wrong, c.provider, { ...c.credentials(), [c.secret]: `not-the-${c.provider}-key` })).status).toBe(201)
      const sandbox = await createReadySandbox(http, auth(own), minimalSandbox({ provider: c.provider, ...c.body }))
      const destroyed = await waitOperation(http, auth(own), (await http.delete(`/v1/sandboxes/${sandbox.id}`, auth(own))).body.operation.id)
      const refused = await http.post("/v1/sandboxes", { ...auth(wrong), body: minimalSandbox({ provider: c.provider, ...c.body }), headers: { "idempotency-key": idempotencyKey(c.provider) } })
      const op = await waitOperation(http, auth(wrong), refused.body.operation.id)
      return { provider: sandbox.provider, billing_mode: sandbox.billing_mode, destroyed: destroyed.state, refused: op.error?.code, named: op.error?.details?.provider }
    }))
    expect(results).toEqual(LIFECYCLE.map((c) => ({ provider: c.provider, billing_mode: "byok", destroyed: "succeeded", refused: "provider_credentials_rejected", named: c.provider })))
  }, 60_000)
})
