/**
 * `GET /v1/sandboxes/{id}/metrics` through the real gateway (issue 14, item 3): emulated providers answer from
 * the local runtime (the sandbox's cgroups, disk and network namespace), so what a process does inside shows up;
 * a remote provider without a metrics API answers 404 `metrics_unavailable` naming it; wrong state, unknown
 * sandbox and another tenant's sandbox are refused in the envelope.
 */
import fs from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startDaytonaEmulator } from "../../providers/daytona/emulator/index.ts"
import { makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { api, type Bootstrap, bootstrap, destroyJails, expectEnvelope, type RunningServer, startServer, tempDataDir } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, poll, runProcess, waitOperation } from "../support/sandbox.ts"

const MiB = 1024 * 1024

let server: RunningServer
let http: ReturnType<typeof api>
let owner: Bootstrap
let auth: KeyAuth

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  owner = await bootstrap(server.dataDir, "metrics@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
})
afterAll(() => server.stop())

const metricsOf = async (id: string, a: KeyAuth = auth) => http.get(`/v1/sandboxes/${id}/metrics`, a)

describe("sandbox metrics from the local runtime", () => {
  it("report what a process inside does: disk written, CPU burnt, memory held; no network without internet", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona", network: { internet_access: false } }))
    const before = await metricsOf(sandbox.id)
    expect(before.status).toBe(200)
    expect(before.body).toMatchObject({
      type: "sandbox_metrics",
      sandbox_id: sandbox.id,
      provider: "daytona",
      source: "local_runtime",
      cpu_used_percent: null,
      memory_limit_bytes: sandbox.resolved_resources.memory_mb * MiB,
      network_rx_bytes: 0,
      network_tx_bytes: 0
    })
    for (const field of ["cpu_seconds", "memory_bytes", "memory_peak_bytes", "disk_bytes", "disk_limit_bytes", "process_count"]) {
      expect(typeof before.body[field], field).toBe("number")
    }
    expect(Date.parse(before.body.collected_at)).toBeGreaterThan(Date.now() - 60_000)

    // 40 MiB on disk, a busy loop, and 64 MiB held by a process that is still running when metrics are read.
    const work = await runProcess(http, auth, sandbox.id, ["sh", "-c", "head -c 41943040 /dev/urandom > /workspace/blob && i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done"])
    expect(work.stdout.trim()).toBe("done")
    const holder = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, {
      ...auth,
      body: { command: ["python3", "-c", "import time; a = bytearray(64 * 1024 * 1024); print('held', flush=True); time.sleep(30)"] },
      headers: { "idempotency-key": idempotencyKey("hold") }
    })
    expect(holder.status).toBe(202)
    const during = await poll(async () => (await metricsOf(sandbox.id)).body, (m) => m.process_count >= 1 && m.memory_bytes >= 64 * MiB, 20_000, 50)
    expect(during.disk_bytes - before.body.disk_bytes).toBeGreaterThanOrEqual(40 * MiB)
    expect(during.disk_bytes).toBeLessThanOrEqual(during.disk_limit_bytes)
    expect(during.cpu_seconds).toBeGreaterThan(before.body.cpu_seconds)
    expect(during.memory_peak_bytes).toBeGreaterThanOrEqual(during.memory_bytes)
    await http.post(`/v1/sandboxes/${sandbox.id}/processes/${holder.body.id}/cancel`, { ...auth, headers: { "idempotency-key": idempotencyKey("c") } })

    // Paused: still readable (the cgroups and the disk are there).
    const paused = await http.post(`/v1/sandboxes/${sandbox.id}/actions/pause`, { ...auth, headers: { "idempotency-key": idempotencyKey("p") } })
    expect((await waitOperation(http, auth, paused.body.operation.id)).state).toBe("succeeded")
    expect((await metricsOf(sandbox.id)).body).toMatchObject({ source: "local_runtime", sandbox_id: sandbox.id })

    // Stopped: nothing left to measure.
    const deleted = await http.delete(`/v1/sandboxes/${sandbox.id}`, { ...auth, headers: { "idempotency-key": idempotencyKey("d") } })
    await waitOperation(http, auth, deleted.body.operation.id)
    expectEnvelope(await metricsOf(sandbox.id), 409, "invalid_sandbox_state")
  }, 90_000)

  it("e2b's emulated sandboxes answer from the local runtime too", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "e2b" }))
    const m = await metricsOf(sandbox.id)
    expect(m.status).toBe(200)
    expect(m.body).toMatchObject({ provider: "e2b", source: "local_runtime" })
    expect(m.body.disk_limit_bytes).toBeGreaterThan(0)
  }, 60_000)

  it("unknown sandboxes and other tenants' sandboxes are 404; bad ids too", async () => {
    expectEnvelope(await metricsOf("sbx_00000000000000000000000000"), 404, "not_found")
    expectEnvelope(await metricsOf("not-an-id"), 422, "validation_error")
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
    const other = await bootstrap(server.dataDir, "other-metrics@example.com")
    expectEnvelope(await metricsOf(sandbox.id, { token: other.api_key, project: other.project_id }), 404, "not_found")
    const res = await http.get(`/v1/sandboxes/${sandbox.id}/metrics`, { token: "sk_live_wrong", project: auth.project })
    expectEnvelope(res, 401)
  }, 60_000)
})

describe("a remote provider without a metrics API", () => {
  it("answers 404 metrics_unavailable naming the provider (Daytona's real wire, served by its emulator)", async () => {
    // Daytona in remote mode, pointed at a Daytona emulator this test runs: the gateway speaks the real wire,
    // which has no metrics route, so the adapter has no metrics.
    const cloudDir = tempDataDir("daytona-cloud")
    const runtime = makeLocalRuntime(cloudDir)
    const cloud = startDaytonaEmulator(cloudDir, runtime)
    const remote = await startServer({ env: { DAYTONA_API_KEY: cloud.apiKey, DAYTONA_API_URL: cloud.baseUrl } })
    try {
      const r = api(remote.url)
      const o = await bootstrap(remote.dataDir, "remote-metrics@example.com")
      const a = { token: o.api_key, project: o.project_id }
      const sandbox = await createReadySandbox(r, a, minimalSandbox({ provider: "daytona" }))
      const error = expectEnvelope(await r.get(`/v1/sandboxes/${sandbox.id}/metrics`, a), 404, "metrics_unavailable")
      expect(error.details).toEqual({ provider: "daytona" })
      expect(error.message).toContain("daytona")
      expect(error.retryable).toBe(false)
    } finally {
      await remote.stop()
      cloud.stop()
      await destroyJails(cloudDir)
      fs.rmSync(cloudDir, { recursive: true, force: true })
    }
  }, 90_000)
})
