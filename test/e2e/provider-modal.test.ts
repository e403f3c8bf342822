/**
 * Modal through the real gateway, on its emulator: a request for `provider: "modal"` becomes ready sized as asked
 * (Modal sizes directly), runs a command, round-trips a binary file, reports its metrics, refuses endpoints (Modal
 * has none to lease) and is destroyed; an OCI image is never placed on emulated Modal (its emulator does not pull
 * images), and the refusal says why.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, expectEnvelope, type RunningServer, openGateway } from "../support/server.ts"
import { createReadySandbox, destroyAndExpectStopped, expectBinaryRoundTrip, idempotencyKey, type KeyAuth, minimalSandbox, runProcess, waitOperation, waitRuntimeOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => void ({ server, http, auth } = await openGateway("modal@example.com")))
afterAll(() => server.stop())

describe("modal through the gateway", () => {
  it("ready → echo hi → binary file → metrics → no endpoints → destroy → stopped; an OCI image is not placed there", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "modal" }))
    expect(sandbox).toMatchObject({ provider: "modal", state: "ready", billing_mode: "emulated" })

    const echo = await runProcess(http, auth, sandbox.id, ["sh", "-c", "echo hi; echo oops >&2"])
    expect(echo.process).toMatchObject({ state: "succeeded", exit_code: 0 })
    expect(echo.stdout).toBe("hi\n")

    await expectBinaryRoundTrip(http, auth, sandbox.id, "/workspace/data/bin.dat", { createParents: true })

    const metrics = await http.get(`/v1/sandboxes/${sandbox.id}/metrics`, auth)
    expect(metrics.body).toMatchObject({ provider: "modal", source: "local_runtime" })

    expectEnvelope(await http.post(`/v1/sandboxes/${sandbox.id}/endpoints`, { ...auth, body: { port: 8000 }, headers: { "idempotency-key": idempotencyKey("e") } }), 409, "capability_unsupported")

    await destroyAndExpectStopped(http, auth, sandbox.id)

    const oci = await http.post("/v1/sandboxes", {
      ...auth,
      body: minimalSandbox({ provider: "modal", source: { kind: "oci_image", image: "alpine:3.20" } }),
      headers: { "idempotency-key": idempotencyKey("o") }
    })
    if (oci.status === 202) {
      const op = await waitOperation(http, auth, oci.body.operation.id)
      expect(op.state).toBe("failed")
      expect(op.error.code).toBe("no_eligible_provider")
    } else {
      expectEnvelope(oci, 422)
    }
  }, 90_000)
})
