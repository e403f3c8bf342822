/**
 * The local runtime pulls no OCI images yet (issue 14, item 1): an emulated provider must not take an `oci_image`
 * source and run the sandbox on the host's /usr instead. Such a request fails its operation with
 * `no_eligible_provider`, each attempt saying the provider does not take that source — never a ready sandbox on
 * another image.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, bootstrap, type RunningServer, startServer } from "../support/server.ts"
import { idempotencyKey, type KeyAuth, minimalSandbox, waitOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  const owner = await bootstrap(server.dataDir, "oci@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
})
afterAll(() => server.stop())

describe("oci_image sources on emulated providers", () => {
  for (const provider of [undefined, "daytona", "blaxel", "prime"]) {
    it(`${provider ?? "auto"}: the create fails with no_eligible_provider, naming the source; no sandbox runs`, async () => {
      const body = minimalSandbox({
        source: { kind: "oci_image", image: "docker.io/library/alpine:3.20" },
        network: { internet_access: true },
        ...(provider === undefined ? {} : { provider })
      })
      const created = await http.post("/v1/sandboxes", { ...auth, body, headers: { "idempotency-key": idempotencyKey("oci") } })
      expect(created.status).toBe(202)
      const op = await waitOperation(http, auth, created.body.operation.id)
      expect(op.state).toBe("failed")
      expect(op.error.code).toBe("no_eligible_provider")
      const attempts = op.error.details.attempts as Array<{ provider: string; outcome: string; unmet_requirements: Array<unknown> }>
      expect(attempts.length).toBeGreaterThan(0)
      for (const attempt of attempts) {
        expect(attempt.outcome).toBe("ineligible")
        expect(JSON.stringify(attempt.unmet_requirements)).toMatch(/oci_image/)
      }
      expect((await http.get(`/v1/sandboxes/${created.body.sandbox.id}`, auth)).body.state).toBe("failed")
    }, 30_000)
  }
})
