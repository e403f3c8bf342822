/**
 * `RUNTIME_DEFAULT_INTERNET=false` (issue 23 item 1): the operator keeps sandboxes on the local runtime offline unless
 * their request asks for the internet; a request that says nothing is still placed anywhere, and the sandbox's
 * `resolved_network` tells the truth. One gateway of its own (the variable is the process's).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, bootstrap, type RunningServer, startServer } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, runProcess, waitOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => {
  server = await startServer({ env: { RUNTIME_DEFAULT_INTERNET: "false", RUNTIME_WARM_POOL: "0" } })
  http = api(server.url)
  const owner = await bootstrap(server.dataDir, "offline@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
})
afterAll(() => server.stop())

describe("RUNTIME_DEFAULT_INTERNET=false", () => {
  it("emulated sandboxes whose request says nothing are offline and say so; one that asks gets the internet", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "blaxel" }))
    expect(sandbox.resolved_network).toEqual({ internet_access: false, source: "provider_default", allow_domains: null, deny_domains: null })
    expect((await runProcess(http, auth, sandbox.id, ["cat", "/proc/net/dev"])).stdout).not.toContain("tap0")
    const online = await createReadySandbox(http, auth, minimalSandbox({ provider: "e2b", network: { internet_access: true } }))
    expect(online.resolved_network).toEqual({ internet_access: true, source: "requested", allow_domains: null, deny_domains: null })
    expect((await runProcess(http, auth, online.id, ["cat", "/proc/net/dev"])).stdout).toContain("tap0")
    expect((await http.get("/ready")).body.local_runtime.default_internet).toBe(false)
    // Freestyle has no default (its firewall is required): the adapter sends the runtime's, a firewall with no rules.
    const firewalled = await createReadySandbox(http, auth, minimalSandbox({ provider: "freestyle" }))
    expect(firewalled.resolved_network).toEqual({ internet_access: false, source: "provider_default", allow_domains: null, deny_domains: null })
    expect((await runProcess(http, auth, firewalled.id, ["cat", "/proc/net/dev"])).stdout).not.toContain("tap0")
    // A provider without an off switch gives its default whatever is asked: here it keeps sandboxes off the
    // internet, and cannot give it.
    const kept = await createReadySandbox(http, auth, minimalSandbox({ provider: "blaxel", network: { internet_access: false } }))
    expect(kept.resolved_network).toMatchObject({ internet_access: false, source: "requested" })
    const refused = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider: "blaxel", network: { internet_access: true } }), headers: { "idempotency-key": idempotencyKey("c") } })
    const op = await waitOperation(http, auth, refused.body.operation.id)
    expect(op.error.code).toBe("no_eligible_provider")
    expect(op.error.details.attempts[0].message).toBe("blaxel cannot give a sandbox the internet")
  }, 120_000)
})
