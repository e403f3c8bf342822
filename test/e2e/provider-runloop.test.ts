/**
 * Runloop through the real gateway, on its emulator: a request for `provider: "runloop"` becomes ready on the
 * preset covering it, runs a command, round-trips a binary file in /workspace (the devbox user's home), cancels a
 * process, pauses (suspend) and resumes, reports its metrics and a metered cost, and is destroyed (shutdown); a
 * request Runloop cannot serve (no internet: it has no way to keep a devbox offline) is never placed there.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type RunningServer, openGateway } from "../support/server.ts"
import { BINARY_BYTES, createReadySandbox, destroyAndExpectStopped, expectBinaryRoundTrip, expectNoEligibleProvider, idempotencyKey, type KeyAuth, minimalSandbox, poll, runProcess, waitOperation, waitProcess, waitRuntimeOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => void ({ server, http, auth } = await openGateway("runloop@example.com")))
afterAll(() => server.stop())

describe("runloop through the gateway", () => {
  it("ready → echo hi → binary file → cancel → pause/resume → metrics and cost → destroy → stopped", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "runloop", network: { internet_access: true } }))
    expect(sandbox).toMatchObject({ provider: "runloop", state: "ready", billing_mode: "emulated" })
    expect(sandbox.resolved_resources).toMatchObject({ vcpu: 1, memory_mb: 2048, disk_mb: 4096, provider_size: "SMALL" })

    const echo = await runProcess(http, auth, sandbox.id, ["sh", "-c", "echo hi; pwd"])
    expect(echo.process).toMatchObject({ state: "succeeded", exit_code: 0 })
    expect(echo.stdout).toBe("hi\n/workspace\n")

    const bytes = BINARY_BYTES
    await expectBinaryRoundTrip(http, auth, sandbox.id, "/workspace/bin.dat")
    const seen = await runProcess(http, auth, sandbox.id, ["od", "-An", "-tu1", "bin.dat"], { cwd: "/workspace" })
    expect(seen.stdout.trim().split(/\s+/).map(Number)).toEqual([...bytes])

    const long = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body: { command: ["sleep", "30"] }, headers: { "idempotency-key": idempotencyKey("l") } })
    await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}/processes/${long.body.id}`, auth)).body, (p) => p.state === "running")
    expect((await http.post(`/v1/sandboxes/${sandbox.id}/processes/${long.body.id}/actions/cancel`, auth)).status).toBe(202)
    expect((await waitProcess(http, auth, sandbox.id, long.body.id)).state).toBe("cancelled")

    const paused = await http.post(`/v1/sandboxes/${sandbox.id}/actions/pause`, { ...auth, headers: { "idempotency-key": idempotencyKey("p") } })
    expect((await waitOperation(http, auth, paused.body.operation.id)).state).toBe("succeeded")
    expect((await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body.state).toBe("paused")
    const resumed = await http.post(`/v1/sandboxes/${sandbox.id}/actions/resume`, { ...auth, headers: { "idempotency-key": idempotencyKey("r") } })
    expect((await waitOperation(http, auth, resumed.body.operation.id)).state).toBe("succeeded")
    expect((await runProcess(http, auth, sandbox.id, ["cat", "/workspace/bin.dat"])).process.state).toBe("succeeded")

    const metrics = await http.get(`/v1/sandboxes/${sandbox.id}/metrics`, auth)
    expect(metrics.body).toMatchObject({ provider: "runloop", source: "local_runtime" })
    // Active seconds at SMALL's 159,800 µUSD an hour: a few seconds cost some tens of µUSD.
    const metered = await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body, (x) => x.cost_microusd !== null, 20_000, 200)
    expect(BigInt(metered.cost_microusd)).toBeGreaterThan(0n)

    await destroyAndExpectStopped(http, auth, sandbox.id)
  }, 120_000)

  it("a sandbox without internet is never placed on Runloop", async () => {
    await expectNoEligibleProvider(http, auth, minimalSandbox({ provider: "runloop", network: { internet_access: false } }))
  }, 30_000)
})
