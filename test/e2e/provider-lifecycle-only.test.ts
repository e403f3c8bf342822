/**
 * The lifecycle-only providers through the real gateway, each on its emulator:
 * - CodeSandbox: a request for `provider: "codesandbox"` becomes ready on a forked VM of the first tier covering it,
 *   never below CODESANDBOX_VM_TIER (Nano), hibernates and wakes as pause/resume, reports a credit-based cost;
 * - Northflank: a request for `provider: "northflank"` becomes ready as a deployment service on the default plan
 *   (nf-compute-200: 2 vCPU, 4 GiB) running the default image, pauses and resumes (instances 0 and 1) (its OCI
 *   images: test/e2e/oci-sources.test.ts);
 * and each is destroyed. A process or a file on either is refused as unsupported, and a request that needs
 * processes or files (or a sandbox kept off the internet) is never placed there, saying why.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, expectEnvelope, type RunningServer, openGateway } from "../support/server.ts"
import { createReadySandbox, destroyAndExpectStopped, expectNoEligibleProvider, idempotencyKey, type KeyAuth, minimalSandbox, poll, waitOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => void ({ server, http, auth } = await openGateway("lifecycle-only@example.com")))
afterAll(() => server.stop())

const refused = async (body: Record<string, unknown>) => JSON.stringify((await expectNoEligibleProvider(http, auth, body)).details)

describe.each([
  ["codesandbox", "on a Nano VM", { vcpu: 2, memory_mb: 4096, architecture: "x86_64", provider_size: "Nano" }],
  ["northflank", "on the default plan", { vcpu: 2, memory_mb: 4096, disk_mb: 2048, provider_size: "nf-compute-200" }]
] as const)("%s through the gateway", (provider, placed, resources) => {
  it(`ready ${placed} → no processes or files → pause/resume → cost → destroy → stopped`, async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider, network: { internet_access: true } }))
    expect(sandbox).toMatchObject({ provider, state: "ready", billing_mode: "emulated" })
    expect(sandbox.resolved_resources).toMatchObject(resources)

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

  it("a request that needs processes or files, or no internet, is never placed there, and says why; one that says nothing is", async () => {
    const base = { provider, network: { internet_access: true } }
    expect(await refused(minimalSandbox({ ...base, features: { process: { execute: true } } }))).toMatch(new RegExp(`${provider} cannot run processes`))
    expect(await refused(minimalSandbox({ ...base, features: { filesystem: { read: true, write: true } } }))).toMatch(new RegExp(`${provider} cannot read files`))
    expect(await refused(minimalSandbox({ provider, network: { internet_access: false } }))).toMatch(new RegExp(`${provider} cannot keep a sandbox off the internet`))
  }, 60_000)
})
