/**
 * Cloudflare through the real gateway, on its bridge emulator: a request for `provider: "cloudflare"` (with
 * internet: a Cloudflare container cannot be kept off it) becomes ready, runs a command that sees the sandbox's and
 * the process's environment (given through env(1): the bridge takes none), round-trips a binary file in
 * /workspace, ends a process at its timeout, reports its metrics, refuses endpoints, and is destroyed; requests
 * Cloudflare cannot serve (no internet, a file outside /workspace) are refused.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, expectEnvelope, type RunningServer, openGateway } from "../support/server.ts"
import { createReadySandbox, destroyAndExpectStopped, expectBinaryRoundTrip, expectNoEligibleProvider, idempotencyKey, type KeyAuth, minimalSandbox, runProcess, waitRuntimeOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => void ({ server, http, auth } = await openGateway("cloudflare@example.com")))
afterAll(() => server.stop())

describe("cloudflare through the gateway", () => {
  it("ready → env echo → binary file → timeout → metrics → no endpoints → destroy → stopped", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "cloudflare", network: { internet_access: true }, environment: { FROM_SANDBOX: "sbx" } }))
    expect(sandbox).toMatchObject({ provider: "cloudflare", state: "ready", billing_mode: "emulated" })

    const echo = await runProcess(http, auth, sandbox.id, ["sh", "-c", "echo \"$FROM_SANDBOX $FROM_PROCESS\"; pwd"], { environment: { FROM_PROCESS: "proc" } })
    expect(echo.process).toMatchObject({ state: "succeeded", exit_code: 0 })
    expect(echo.stdout).toBe("sbx proc\n/workspace\n")

    await expectBinaryRoundTrip(http, auth, sandbox.id, "/workspace/bin.dat")

    const outside = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/read`, { ...auth, body: { path: "/etc/hostname" } })
    if (outside.status === 202) expect((await waitRuntimeOperation(http, auth, sandbox.id, outside.body.id)).state).toBe("failed")
    else expect(outside.status).toBeGreaterThanOrEqual(400)

    const slow = await runProcess(http, auth, sandbox.id, ["sleep", "20"], { timeout_seconds: 1 })
    expect(slow.process.state).toBe("timed_out")

    const metrics = await http.get(`/v1/sandboxes/${sandbox.id}/metrics`, auth)
    expect(metrics.body).toMatchObject({ provider: "cloudflare", source: "local_runtime" })

    expectEnvelope(await http.post(`/v1/sandboxes/${sandbox.id}/endpoints`, { ...auth, body: { port: 8000 }, headers: { "idempotency-key": idempotencyKey("e") } }), 409, "capability_unsupported")

    await destroyAndExpectStopped(http, auth, sandbox.id)
  }, 90_000)

  it("a sandbox without internet is never placed on Cloudflare", async () => {
    await expectNoEligibleProvider(http, auth, minimalSandbox({ provider: "cloudflare", network: { internet_access: false } }))
  }, 30_000)
})
