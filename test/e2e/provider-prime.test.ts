/**
 * Prime through the real gateway, on its emulator: a request for `provider: "prime"` (with internet access: Prime
 * cannot keep a sandbox off it) becomes ready sized as Prime sizes it (whole vCPUs, 128 MiB steps, 5 GiB of disk),
 * runs a command over the Connect + protobuf command session, round-trips a binary file in /workspace, refuses
 * cancel, pause and endpoints as unsupported, reports its metrics and an estimated cost, and is destroyed; requests
 * Prime cannot serve (no internet, public ports) are never placed there.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, expectEnvelope, type RunningServer, openGateway } from "../support/server.ts"
import { BINARY_BYTES, createReadySandbox, destroyAndExpectStopped, expectBinaryRoundTrip, idempotencyKey, type KeyAuth, minimalSandbox, poll, runProcess, waitOperation, waitRuntimeOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => void ({ server, http, auth } = await openGateway("prime@example.com")))
afterAll(() => server.stop())

describe("prime through the gateway", () => {
  it("ready (Prime's sizes) → echo hi → binary file → no cancel, pause or endpoints → metrics and cost → destroy → stopped", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "prime", resources: { vcpu: 0.5, memory_mb: 500 }, network: { internet_access: true } }))
    expect(sandbox).toMatchObject({ provider: "prime", state: "ready", billing_mode: "emulated" })
    expect(sandbox.resolved_resources).toMatchObject({ vcpu: 1, memory_mb: 512, disk_mb: 5120 })

    const echo = await runProcess(http, auth, sandbox.id, ["sh", "-c", "echo hi; echo oops >&2; exit 3"])
    expect(echo.process).toMatchObject({ state: "failed", exit_code: 3 })
    expect(echo.stdout).toBe("hi\n")

    const bytes = BINARY_BYTES
    await expectBinaryRoundTrip(http, auth, sandbox.id, "/workspace/bin.dat")
    const seen = await runProcess(http, auth, sandbox.id, ["od", "-An", "-tu1", "bin.dat"], { cwd: "/workspace" })
    expect(seen.stdout.trim().split(/\s+/).map(Number)).toEqual([...bytes])

    const pause = await http.post(`/v1/sandboxes/${sandbox.id}/actions/pause`, { ...auth, headers: { "idempotency-key": idempotencyKey("p") } })
    expect(pause.status).toBeGreaterThanOrEqual(400)
    expectEnvelope(await http.post(`/v1/sandboxes/${sandbox.id}/endpoints`, { ...auth, body: { port: 8000 }, headers: { "idempotency-key": idempotencyKey("e") } }), 409, "capability_unsupported")

    const metrics = await http.get(`/v1/sandboxes/${sandbox.id}/metrics`, auth)
    expect(metrics.body).toMatchObject({ provider: "prime", source: "local_runtime" })
    const costed = await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body, (x) => x.cost_microusd !== null, 20_000, 200)
    expect(BigInt(costed.cost_microusd)).toBeGreaterThanOrEqual(0n)

    await destroyAndExpectStopped(http, auth, sandbox.id)
  }, 120_000)

  for (const [label, extra] of [
    ["without internet", { network: { internet_access: false } }],
    ["asking for public ports", { network: { internet_access: true }, features: { public_ports: [8000] } }],
    ["asking to cancel processes", { network: { internet_access: true }, features: { process: { cancel: true } } }]
  ] as const) {
    it(`a sandbox ${label} is never placed on Prime`, async () => {
      const res = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider: "prime", ...extra }), headers: { "idempotency-key": idempotencyKey("n") } })
      if (res.status === 202) {
        const op = await waitOperation(http, auth, res.body.operation.id)
        expect(op.state).toBe("failed")
        expect(op.error.code).toBe("no_eligible_provider")
      } else {
        expectEnvelope(res, 422)
      }
    }, 30_000)
  }
})
