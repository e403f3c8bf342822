/**
 * Northflank through the real gateway, on its emulator: a request for `provider: "northflank"` becomes ready as a
 * deployment service on the default plan (nf-compute-200: 2 vCPU, 4 GiB) running the default image, pauses and
 * resumes (instances 0 and 1), and is destroyed. It is lifecycle-only: a process or a file on it is refused as
 * unsupported, and a request that needs processes or files (or a sandbox kept off the internet) is never placed
 * there. (Its OCI images: test/e2e/oci-sources.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, expectEnvelope, type RunningServer, openGateway } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, poll, waitOperation, destroyAndExpectStopped } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => void ({ server, http, auth } = await openGateway("northflank@example.com")))
afterAll(() => server.stop())

const refused = async (body: Record<string, unknown>) => {
  const res = await http.post("/v1/sandboxes", { ...auth, body, headers: { "idempotency-key": idempotencyKey("n") } })
  expect(res.status).toBe(202)
  const op = await waitOperation(http, auth, res.body.operation.id)
  expect(op.state).toBe("failed")
  expect(op.error.code).toBe("no_eligible_provider")
  return JSON.stringify(op.error.details)
}

describe("northflank through the gateway", () => {
  it("ready on the default plan → no processes or files → pause/resume → cost → destroy → stopped", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "northflank", network: { internet_access: true } }))
    expect(sandbox).toMatchObject({ provider: "northflank", state: "ready", billing_mode: "emulated" })
    expect(sandbox.resolved_resources).toMatchObject({ vcpu: 2, memory_mb: 4096, disk_mb: 2048, provider_size: "nf-compute-200" })

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

  it("a request that needs processes or files, or no internet, is never placed on Northflank, and says why", async () => {
    const base = { provider: "northflank", network: { internet_access: true } }
    expect(await refused(minimalSandbox({ ...base, features: { process: { execute: true } } }))).toMatch(/northflank cannot run processes/)
    expect(await refused(minimalSandbox({ ...base, features: { filesystem: { read: true, write: true } } }))).toMatch(/northflank cannot read files/)
    expect(await refused(minimalSandbox({ provider: "northflank" }))).toMatch(/northflank cannot keep a sandbox off the internet/)
  }, 60_000)
})
