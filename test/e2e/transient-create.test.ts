/**
 * A create whose only provider failed for the moment (a cloud answering 503, or 500 and then no sandbox found by
 * the create's id) fails retryable, as `provider_unavailable`, never as `no_eligible_provider` (not retryable: no
 * provider can take the request at all); the same create sent again once the cloud is well succeeds. E2B is a cloud
 * of its own here (test/support/remote-e2b.ts), which the test makes fail.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type RemoteE2B, startRemoteE2B } from "../support/remote-e2b.ts"
import { idempotencyKey, minimalSandbox, waitOperation } from "../support/sandbox.ts"
import { api, bootstrap, type RunningServer, startServer, tempDataDir } from "../support/server.ts"

let cloud: RemoteE2B
let server: RunningServer
let http: ReturnType<typeof api>
let auth: { token: string; project: string }

beforeAll(async () => {
  cloud = await startRemoteE2B(tempDataDir("e2b-cloud"))
  server = await startServer({ env: cloud.env })
  http = api(server.url)
  const owner = await bootstrap(server.dataDir, "transient@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
}, 60_000)

afterAll(async () => {
  await server?.stop()
  await cloud?.stop()
})

const create = async () => {
  const res = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider: "e2b" }), headers: { "idempotency-key": idempotencyKey("transient") } })
  expect(res.status).toBe(202)
  return waitOperation(http, auth, res.body.operation.id)
}

describe("a create whose provider failed for the moment", () => {
  it("503 from the cloud: provider_unavailable, retryable, the attempt in its details; sent again, it succeeds", async () => {
    await cloud.failCreates(503, 1)
    const failed = await create()
    expect(failed.state).toBe("failed")
    expect(failed.error).toMatchObject({ code: "provider_unavailable", retryable: true, details: { attempts: [{ provider: "e2b", outcome: "failed", code: "provider_unavailable" }] } })
    expect(failed.error.message).toContain("try again")
    expect((await create()).state).toBe("succeeded")
  }, 60_000)

  it("500 (the outcome unknown) and no sandbox found by its id: provider_unavailable, retryable", async () => {
    await cloud.failCreates(500, 1)
    const failed = await create()
    expect(failed.state).toBe("failed")
    expect(failed.error).toMatchObject({ code: "provider_unavailable", retryable: true, details: { attempts: [{ provider: "e2b", outcome: "absent" }] } })
  }, 60_000)

  it("a request no provider can take stays no_eligible_provider, not retryable", async () => {
    const res = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider: "e2b", resources: { vcpu: 64, memory_mb: 1_048_576 } }), headers: { "idempotency-key": idempotencyKey("too-big") } })
    const op = res.status === 202 ? await waitOperation(http, auth, res.body.operation.id) : res.body
    const error = res.status === 202 ? op.error : op
    expect(error).toMatchObject({ code: "no_eligible_provider", retryable: false })
  }, 60_000)
})
