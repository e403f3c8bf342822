/**
 * CodeSandbox through the real gateway, on its emulator: a request for `provider: "codesandbox"` becomes ready on a
 * forked VM of the first tier covering it, never below CODESANDBOX_VM_TIER (Nano), hibernates and wakes as pause/resume, reports a
 * credit-based cost, and is destroyed. It is lifecycle-only: a process or a file on it is refused as unsupported,
 * and a request that needs processes or files (or a sandbox kept off the internet) is never placed there.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, expectEnvelope, type RunningServer, openGateway } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, poll, waitOperation, destroyAndExpectStopped } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => void ({ server, http, auth } = await openGateway("codesandbox@example.com")))
afterAll(() => server.stop())

const refused = async (body: Record<string, unknown>) => {
  const res = await http.post("/v1/sandboxes", { ...auth, body, headers: { "idempotency-key": idempotencyKey("n") } })
  expect(res.status).toBe(202)
  const op = await waitOperation(http, auth, res.body.operation.id)
  expect(op.state).toBe("failed")
  expect(op.error.code).toBe("no_eligible_provider")
  return JSON.stringify(op.error.details)
}

describe("codesandbox through the gateway", () => {
  it("ready on a Nano VM → no processes or files → pause/resume → cost → destroy → stopped", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "codesandbox", network: { internet_access: true } }))
    expect(sandbox).toMatchObject({ provider: "codesandbox", state: "ready", billing_mode: "emulated" })
    expect(sandbox.resolved_resources).toMatchObject({ vcpu: 2, memory_mb: 4096, architecture: "x86_64", provider_size: "Nano" })

    expectEnvelope(await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body: { command: ["true"] }, headers: { "idempotency-key": idempotencyKey("p") } }), 409, "capability_unsupported")
    expectEnvelope(await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/read`, { ...auth, body: { path: "/workspace/x" } }), 409, "capability_unsupported")

    const paused = await http.post(`/v1/sandboxes/${sandbox.id}/actions/pause`, { ...auth, headers: { "idempotency-key": idempotencyKey("pa") } })
    expect((await waitOperation(http, auth, paused.body.operation.id)).state).toBe("succeeded")
    expect((await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body.state).toBe("paused")
    const resumed = await http.post(`/v1/sandboxes/${sandbox.id}/actions/resume`, { ...auth, headers: { "idempotency-key": idempotencyKey("r") } })
    expect((await waitOperation(http, auth, resumed.body.operation.id)).state).toBe("succeeded")
    expect((await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body.state).toBe("ready")

    const metered = await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body, (x) => x.cost_microusd !== null, 20_000, 200)
    expect(BigInt(metered.cost_microusd)).toBeGreaterThanOrEqual(0n)

    await destroyAndExpectStopped(http, auth, sandbox.id)
  }, 120_000)

  it("a request that needs processes or files, or no internet, is never placed on CodeSandbox, and says why", async () => {
    const base = { provider: "codesandbox", network: { internet_access: true } }
    expect(await refused(minimalSandbox({ ...base, features: { process: { execute: true } } }))).toMatch(/codesandbox cannot run processes/)
    expect(await refused(minimalSandbox({ ...base, features: { filesystem: { read: true, write: true } } }))).toMatch(/codesandbox cannot read files/)
    expect(await refused(minimalSandbox({ provider: "codesandbox" }))).toMatch(/codesandbox cannot keep a sandbox off the internet/)
  }, 60_000)
})
