/**
 * Vercel through the real gateway, on its emulator: a request for `provider: "vercel"` (kept off the internet,
 * which Vercel's deny-all policy can do) becomes ready sized as Vercel sizes it, runs a command, round-trips a
 * binary file, cancels a process, reports its metrics, refuses endpoints (Vercel has none to lease), and is
 * destroyed; a request for public ports is never placed there.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, expectEnvelope, type RunningServer, openGateway } from "../support/server.ts"
import { createReadySandbox, destroyAndExpectStopped, expectBinaryRoundTrip, idempotencyKey, type KeyAuth, minimalSandbox, poll, runProcess, waitOperation, waitProcess, waitRuntimeOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => void ({ server, http, auth } = await openGateway("vercel@example.com")))
afterAll(() => server.stop())

describe("vercel through the gateway", () => {
  it("ready (2048 MB per vCPU) → echo hi → binary file → cancel → metrics → no endpoints → destroy → stopped", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "vercel", network: { internet_access: false } }))
    expect(sandbox).toMatchObject({ provider: "vercel", state: "ready", billing_mode: "emulated" })
    expect(sandbox.resolved_resources).toMatchObject({ vcpu: 1, memory_mb: 2048 })

    const echo = await runProcess(http, auth, sandbox.id, ["echo", "hi"])
    expect(echo.process).toMatchObject({ state: "succeeded", exit_code: 0 })
    expect(echo.stdout).toBe("hi\n")

    await expectBinaryRoundTrip(http, auth, sandbox.id, "/workspace/data/bin.dat", { createParents: true })

    const long = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body: { command: ["sleep", "30"] }, headers: { "idempotency-key": idempotencyKey("p") } })
    expect(long.status).toBe(202)
    await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}/processes/${long.body.id}`, auth)).body, (p) => p.state === "running")
    expect((await http.post(`/v1/sandboxes/${sandbox.id}/processes/${long.body.id}/actions/cancel`, auth)).status).toBe(202)
    const cancelledProcess = await waitProcess(http, auth, sandbox.id, long.body.id)
    expect(cancelledProcess.state).toBe("cancelled")

    const metrics = await http.get(`/v1/sandboxes/${sandbox.id}/metrics`, auth)
    expect(metrics.body).toMatchObject({ provider: "vercel", source: "local_runtime" })

    expectEnvelope(await http.post(`/v1/sandboxes/${sandbox.id}/endpoints`, { ...auth, body: { port: 8000 }, headers: { "idempotency-key": idempotencyKey("e") } }), 409, "capability_unsupported")

    await destroyAndExpectStopped(http, auth, sandbox.id)
  }, 90_000)

  it("a sandbox asking for public ports is never placed on Vercel", async () => {
    const body = minimalSandbox({ provider: "vercel", features: { public_ports: [8000] } })
    const res = await http.post("/v1/sandboxes", { ...auth, body, headers: { "idempotency-key": idempotencyKey("n") } })
    if (res.status === 202) {
      const op = await waitOperation(http, auth, res.body.operation.id)
      expect(op.state).toBe("failed")
      expect(op.error.code).toBe("no_eligible_provider")
    } else {
      expectEnvelope(res, 422)
    }
  }, 30_000)
})
