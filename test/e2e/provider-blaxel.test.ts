/**
 * Blaxel through the real gateway, on its emulator: a request for `provider: "blaxel"` becomes ready, runs a
 * command, round-trips a binary file, serves a port through a preview endpoint, reports its metrics, and is
 * destroyed; a request Blaxel cannot serve (no internet: Blaxel has no way to keep a sandbox offline) is routed
 * elsewhere or refused, never placed there.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type RunningServer, openGateway } from "../support/server.ts"
import { BINARY_BYTES, createReadySandbox, destroyAndExpectStopped, expectBinaryRoundTrip, expectNoEligibleProvider, idempotencyKey, type KeyAuth, minimalSandbox, poll, runProcess, waitRuntimeOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => void ({ server, http, auth } = await openGateway("blaxel@example.com")))
afterAll(() => server.stop())

describe("blaxel through the gateway", () => {
  it("ready → echo hi → binary file → preview endpoint → metrics → destroy → stopped", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "blaxel", network: { internet_access: true } }))
    expect(sandbox).toMatchObject({ provider: "blaxel", state: "ready", billing_mode: "emulated" })

    const echo = await runProcess(http, auth, sandbox.id, ["echo", "hi"])
    expect(echo.process).toMatchObject({ state: "succeeded", exit_code: 0 })
    expect(echo.stdout).toBe("hi\n")

    const bytes = BINARY_BYTES
    await expectBinaryRoundTrip(http, auth, sandbox.id, "/workspace/site/bin.dat", { createParents: true })

    const server8000 = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, {
      ...auth,
      body: { command: ["python3", "-m", "http.server", "8000", "--directory", "/workspace/site"] },
      headers: { "idempotency-key": idempotencyKey("s") }
    })
    expect(server8000.status).toBe(202)
    const created = await http.post(`/v1/sandboxes/${sandbox.id}/endpoints`, { ...auth, body: { port: 8000 }, headers: { "idempotency-key": idempotencyKey("e") } })
    expect(created.status).toBe(202)
    const endpoint = await poll(
      async () => (await http.get(`/v1/sandboxes/${sandbox.id}/endpoints`, auth)).body.endpoints.find((e: any) => e.id === created.body.id),
      (e) => e.state !== "provisioning",
      30_000,
      50
    )
    expect(endpoint.state).toBe("active")
    const served = await poll(async () => (await fetch(`${endpoint.url}bin.dat`).catch(() => undefined)), (r) => r?.status === 200, 20_000, 100)
    expect(Buffer.from(await served!.arrayBuffer()).equals(bytes)).toBe(true)

    const metrics = await http.get(`/v1/sandboxes/${sandbox.id}/metrics`, auth)
    expect(metrics.body).toMatchObject({ provider: "blaxel", source: "local_runtime" })

    await destroyAndExpectStopped(http, auth, sandbox.id)
  }, 90_000)

  it("a sandbox without internet is never placed on Blaxel", async () => {
    await expectNoEligibleProvider(http, auth, minimalSandbox({ provider: "blaxel", network: { internet_access: false } }))
  }, 30_000)
})
