/**
 * The sandbox plane's HTTP contract: key and project-header rules, cross-project isolation, validation (422 and
 * nothing written), idempotency, state conflicts, lifecycle timers and cancellation.
 */
import { Database } from "bun:sqlite"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Bootstrap, bootstrap, expectEnvelope, type RunningServer, startServer, openGatewayDatabase } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, poll, readProcessOutput, runProcess, waitOperation, waitProcess, waitRuntimeOperation } from "../support/sandbox.ts"
import { pointsAt, runtimeViolations, sandboxViolations } from "../property/violations.ts"
import { readState } from "../../src/runtime/Jail.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let a: Bootstrap
let b: Bootstrap
let authA: KeyAuth
let authB: KeyAuth
let sandboxA: any

const count = (table: string) => {
  const db = new Database(path.join(server.dataDir, "gateway.sqlite"), { readonly: true })
  try {
    return (db.query(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n
  } finally {
    db.close()
  }
}

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  a = await bootstrap(server.dataDir, "plane-a@example.com")
  b = await bootstrap(server.dataDir, "plane-b@example.com")
  authA = { token: a.api_key, project: a.project_id }
  authB = { token: b.api_key, project: b.project_id }
  // It serves ports below: asked for, so it is placed where endpoints work.
  sandboxA = await createReadySandbox(http, authA, minimalSandbox({ features: { public_ports: [9000] } }))
})
afterAll(() => server.stop())

describe("project keys", () => {
  it("401 without or with a wrong credential, 400 without the project header, 422 malformed, 403 another project", async () => {
    expectEnvelope(await http.get("/v1/sandboxes", { project: a.project_id }), 401, "unauthenticated")
    expectEnvelope(await http.get("/v1/sandboxes", { token: a.user_token, project: a.project_id }), 401, "unauthenticated")
    expectEnvelope(await http.get("/v1/sandboxes", { token: a.api_key }), 400, "project_header_required")
    expectEnvelope(await http.get("/v1/sandboxes", { token: a.api_key, project: "project-a" }), 422, "validation_error")
    expectEnvelope(await http.get("/v1/sandboxes", { token: a.api_key, project: b.project_id }), 403, "forbidden")
  })

  it("a revoked key is refused at once; an unrevoked key cannot be deleted", async () => {
    const created = (await http.post(`/v1/projects/${a.project_id}/api-keys`, { token: a.user_token, body: { name: "temp" } })).body
    const auth = { token: created.key, project: a.project_id }
    expect((await http.get("/v1/sandboxes", auth)).status).toBe(200)
    expectEnvelope(await http.delete(`/v1/projects/${a.project_id}/api-keys/${created.api_key.id}`, { token: a.user_token }), 409, "api_key_must_be_revoked")
    await http.post(`/v1/projects/${a.project_id}/api-keys/${created.api_key.id}/revoke`, { token: a.user_token })
    expectEnvelope(await http.get("/v1/sandboxes", auth), 401, "unauthenticated")
  })
})

describe("isolation between projects", () => {
  it("another project's key sees none of this project's sandboxes, operations, processes, files or endpoints", async () => {
    const run = await http.post(`/v1/sandboxes/${sandboxA.id}/processes`, { ...authA, body: { command: ["true"] }, headers: { "idempotency-key": idempotencyKey() } })
    const read = await http.post(`/v1/sandboxes/${sandboxA.id}/filesystem/read`, { ...authA, body: { path: "/etc/hostname" } })
    const ep = await http.post(`/v1/sandboxes/${sandboxA.id}/endpoints`, { ...authA, body: { port: 8080 }, headers: { "idempotency-key": idempotencyKey() } })
    const ops = (await http.get("/v1/sandboxes", authA)).body.sandboxes
    expect(ops.map((s: any) => s.id)).toContain(sandboxA.id)
    expect((await http.get("/v1/sandboxes", authB)).body.sandboxes).toEqual([])
    const routes: Array<[string, string, unknown?]> = [
      ["GET", `/v1/sandboxes/${sandboxA.id}`],
      ["DELETE", `/v1/sandboxes/${sandboxA.id}`],
      ["POST", `/v1/sandboxes/${sandboxA.id}/actions/pause`],
      ["GET", `/v1/sandboxes/${sandboxA.id}/capabilities`],
      ["GET", `/v1/operations/${sandboxA.id.replace("sbx_", "op_")}`],
      ["GET", `/v1/sandboxes/${sandboxA.id}/processes/${run.body.id}`],
      ["GET", `/v1/sandboxes/${sandboxA.id}/processes/${run.body.id}/events`],
      ["POST", `/v1/sandboxes/${sandboxA.id}/processes/${run.body.id}/actions/cancel`],
      ["GET", `/v1/sandboxes/${sandboxA.id}/runtime-operations/${read.body.id}`],
      ["POST", `/v1/sandboxes/${sandboxA.id}/filesystem/read`, { path: "/etc/hostname" }],
      ["GET", `/v1/sandboxes/${sandboxA.id}/endpoints`],
      ["DELETE", `/v1/sandboxes/${sandboxA.id}/endpoints/${ep.body.id}`],
      ["POST", `/v1/sandboxes/${sandboxA.id}/processes`, { command: ["id"] }]
    ]
    for (const [method, route, body] of routes) {
      const res = await http.call(method, route, { ...authB, ...(body ? { body } : {}), headers: { "idempotency-key": idempotencyKey() } })
      expectEnvelope(res, 404, "not_found")
    }
    const opA = (await http.get(`/v1/sandboxes/${sandboxA.id}`, authA)).body
    expect(opA.state).toBe("ready")
    expectEnvelope(await http.get(`/v1/projects/${a.project_id}/sandboxes`, { token: b.user_token }), 404, "not_found")
    // Operations are read with the key that caused them, even within the project.
    const other = (await http.post(`/v1/projects/${a.project_id}/api-keys`, { token: a.user_token, body: { name: "other" } })).body.key
    const resumed = await http.post(`/v1/sandboxes/${sandboxA.id}/actions/resume`, authA)
    expect((await http.get(`/v1/operations/${resumed.body.operation.id}`, authA)).status).toBe(200)
    expectEnvelope(await http.get(`/v1/operations/${resumed.body.operation.id}`, { token: other, project: a.project_id }), 404, "not_found")
    expect((await http.get(`/v1/projects/${a.project_id}/sandboxes`, { token: a.user_token })).body.sandboxes.length).toBeGreaterThan(0)
  })
})

describe("validation", () => {
  it("every single-rule violation of the sandbox request is 422 at its field and writes nothing", async () => {
    const before = [count("sandboxes"), count("operations"), count("jobs")]
    for (const v of sandboxViolations) {
      const res = await http.post("/v1/sandboxes", { ...authA, body: v.body, headers: { "idempotency-key": idempotencyKey("v") } })
      const envelope = expectEnvelope(res, 422, "validation_error")
      const paths = envelope.details.issues.map((i: any) => i.path)
      expect(pointsAt(paths, v.field), `${v.why}: issues at ${JSON.stringify(paths)}`).toBe(true)
    }
    expect([count("sandboxes"), count("operations"), count("jobs")]).toEqual(before)
  })

  it("runtime request violations are 422 and write nothing", async () => {
    const route: Record<string, string> = {
      StartProcess: "processes",
      ReadFile: "filesystem/read",
      WriteFile: "filesystem/write",
      ListFiles: "filesystem/list",
      DeleteFile: "filesystem/delete",
      CreateEndpoint: "endpoints"
    }
    const before = [count("processes"), count("runtime_operations"), count("endpoints")]
    for (const v of runtimeViolations) {
      const res = await http.post(`/v1/sandboxes/${sandboxA.id}/${route[v.schema]}`, { ...authA, body: v.body, headers: { "idempotency-key": idempotencyKey("v") } })
      const envelope = expectEnvelope(res, 422, "validation_error")
      expect(pointsAt(envelope.details.issues.map((i: any) => i.path), v.field), v.why).toBe(true)
    }
    expect([count("processes"), count("runtime_operations"), count("endpoints")]).toEqual(before)
  })

  it("the Idempotency-Key is required where the reference requires it, and replays", async () => {
    expectEnvelope(await http.post("/v1/sandboxes", { ...authA, body: minimalSandbox() }), 400, "idempotency_key_required")
    expectEnvelope(await http.post(`/v1/sandboxes/${sandboxA.id}/processes`, { ...authA, body: { command: ["id"] } }), 400, "idempotency_key_required")
    expectEnvelope(await http.post(`/v1/sandboxes/${sandboxA.id}/endpoints`, { ...authA, body: { port: 1 } }), 400, "idempotency_key_required")
    const key = idempotencyKey("same")
    const first = await http.post(`/v1/sandboxes/${sandboxA.id}/processes`, { ...authA, body: { command: ["echo", "x"] }, headers: { "idempotency-key": key } })
    const again = await http.post(`/v1/sandboxes/${sandboxA.id}/processes`, { ...authA, body: { command: ["echo", "x"] }, headers: { "idempotency-key": key } })
    expect(again.status).toBe(202)
    expect(again.body.id).toBe(first.body.id)
    expect(again.headers.get("location")).toBe(`/v1/sandboxes/${sandboxA.id}/processes/${first.body.id}`)
    expectEnvelope(await http.post(`/v1/sandboxes/${sandboxA.id}/processes`, { ...authA, body: { command: ["echo", "y"] }, headers: { "idempotency-key": key } }), 409, "idempotency_mismatch")
  })

  it("bad cursors and Last-Event-ID are 422; lists page", async () => {
    expectEnvelope(await http.get("/v1/sandboxes?cursor=nonsense", authA), 422, "validation_error")
    // A well-formed cursor for this list but with a forged position is refused too.
    const forged = Buffer.from(JSON.stringify({ v: 1, s: `sandboxes:${a.project_id}`, k: [1] })).toString("base64url")
    expectEnvelope(await http.get(`/v1/sandboxes?cursor=${forged}`, authA), 422, "validation_error")
    expectEnvelope(await http.get("/v1/sandboxes?limit=0", authA), 422, "validation_error")
    const page1 = (await http.get("/v1/sandboxes?limit=1", authA)).body
    expect(page1.sandboxes).toHaveLength(1)
    if (page1.next_cursor !== null) {
      expectEnvelope(await http.get(`/v1/sandboxes/${sandboxA.id}/endpoints?cursor=${page1.next_cursor}`, authA), 422, "validation_error")
    }
    const proc = await http.post(`/v1/sandboxes/${sandboxA.id}/processes`, { ...authA, body: { command: ["true"] }, headers: { "idempotency-key": idempotencyKey() } })
    expectEnvelope(await http.get(`/v1/sandboxes/${sandboxA.id}/processes/${proc.body.id}/events`, { ...authA, headers: { "last-event-id": "abc" } }), 422, "validation_error")
  })
})

describe("processes", () => {
  it("SSE batches hold at most 100 events; Last-Event-ID resumes", async () => {
    const started = await http.post(`/v1/sandboxes/${sandboxA.id}/processes`, {
      ...authA,
      body: { command: ["sh", "-c", "for i in $(seq 1 150); do echo line$i; sleep 0.002; done"] },
      headers: { "idempotency-key": idempotencyKey() }
    })
    await waitProcess(http, authA, sandboxA.id, started.body.id)
    const first = await http.get(`/v1/sandboxes/${sandboxA.id}/processes/${started.body.id}/events`, authA)
    expect(first.headers.get("content-type")).toContain("text/event-stream")
    const frames = first.text.split("\n\n").filter(Boolean)
    expect(frames.length).toBeLessThanOrEqual(100)
    const output = await readProcessOutput(http, authA, sandboxA.id, started.body.id)
    expect(output.stdout.split("\n").filter(Boolean)).toHaveLength(150)
    expect(output.types[0]).toBe("queued")
  })

  it("output in thousands of small pieces is kept whole and in order", async () => {
    const script = "import sys\nfor i in range(4000):\n    sys.stdout.write(f'{i}\\n'); sys.stdout.flush()\n    if i % 1000 == 0: sys.stderr.write(f'e{i}\\n'); sys.stderr.flush()\n"
    const { process, stdout, stderr } = await runProcess(http, authA, sandboxA.id, ["python3", "-c", script])
    expect(process.state).toBe("succeeded")
    expect(stdout).toBe(Array.from({ length: 4000 }, (_, i) => `${i}\n`).join(""))
    expect(stderr).toBe("e0\ne1000\ne2000\ne3000\n")
    expect(process.output_bytes).toBe(Buffer.byteLength(stdout) + Buffer.byteLength(stderr))
  })

  it("a timeout kills the process; cancel stops one; a finished one cannot be cancelled", async () => {
    const slow = await http.post(`/v1/sandboxes/${sandboxA.id}/processes`, { ...authA, body: { command: ["sleep", "30"], timeout_seconds: 1 }, headers: { "idempotency-key": idempotencyKey() } })
    expect((await waitProcess(http, authA, sandboxA.id, slow.body.id, 20_000)).state).toBe("timed_out")
    const long = await http.post(`/v1/sandboxes/${sandboxA.id}/processes`, { ...authA, body: { command: ["sleep", "30"] }, headers: { "idempotency-key": idempotencyKey() } })
    await poll(async () => (await http.get(`/v1/sandboxes/${sandboxA.id}/processes/${long.body.id}`, authA)).body, (p) => p.state === "running")
    const cancel = await http.post(`/v1/sandboxes/${sandboxA.id}/processes/${long.body.id}/actions/cancel`, authA)
    expect(cancel.status).toBe(202)
    expect(cancel.body.cancel_requested_at).not.toBeNull()
    const done = await waitProcess(http, authA, sandboxA.id, long.body.id)
    expect(done.state).toBe("cancelled")
    expectEnvelope(await http.post(`/v1/sandboxes/${sandboxA.id}/processes/${long.body.id}/actions/cancel`, authA), 409, "process_terminal")
  })
})

describe("WAL checkpoints", () => {
  it("run on the checkpoint worker: a write well under SQLite's own 1,000-page threshold reaches the database file", async () => {
    const file = path.join(server.dataDir, "gateway.sqlite")
    // Start from an empty WAL, so what follows stays far below the 1,000 pages at which SQLite would checkpoint.
    const db = new Database(file)
    db.run("PRAGMA busy_timeout = 5000")
    try {
      db.exec("PRAGMA busy_timeout = 5000")
      await poll(async () => (db.query("PRAGMA wal_checkpoint(TRUNCATE)").get() as { busy: number }).busy, (busy) => busy === 0, 5_000, 20)
    } finally {
      db.close()
    }
    const before = fs.statSync(file).size
    // A 400 KiB file write: its request (~550 KB of base64, written again with each state change) is committed
    // to the WAL, then a checkpoint copies it into the database file. SQLite alone would wait for 1,000 pages.
    const data = Buffer.alloc(400 * 1024, 1).toString("base64")
    const write = await http.post(`/v1/sandboxes/${sandboxA.id}/filesystem/write`, { ...authA, body: { path: "/workspace/wal.bin", data_base64: data }, headers: { "idempotency-key": idempotencyKey() } })
    expect((await waitRuntimeOperation(http, authA, sandboxA.id, write.body.id)).state).toBe("succeeded")
    const grown = await poll(async () => fs.statSync(file).size, (size) => size >= before + 500_000, 5_000, 50)
    expect(grown).toBeGreaterThanOrEqual(before + 500_000)
    // The finished write keeps its path and options, not its data.
    const stored = new Database(file, { readonly: true })
    try {
      const request = JSON.parse((stored.query("SELECT request FROM runtime_operations WHERE id = ?").get(write.body.id) as { request: string }).request)
      expect(request).toEqual({ path: "/workspace/wal.bin", mode: "overwrite", create_parents: false })
    } finally {
      stored.close()
    }
  })
})

describe("lifecycle", () => {
  it("state conflicts: resume a ready sandbox is a no-op; runtime calls on a paused one are 409", async () => {
    const s = await createReadySandbox(http, authA)
    const resumed = await http.post(`/v1/sandboxes/${s.id}/actions/resume`, authA)
    expect(resumed.body.operation.state).toBe("succeeded")
    const paused = await http.post(`/v1/sandboxes/${s.id}/actions/pause`, authA)
    await waitOperation(http, authA, paused.body.operation.id)
    expectEnvelope(await http.post(`/v1/sandboxes/${s.id}/processes`, { ...authA, body: { command: ["id"] }, headers: { "idempotency-key": idempotencyKey() } }), 409, "invalid_sandbox_state")
    expectEnvelope(await http.get(`/v1/sandboxes/${s.id}/capabilities`, authA), 409, "invalid_sandbox_state")
    const deleted = await http.delete(`/v1/sandboxes/${s.id}`, authA)
    expect(deleted.headers.get("location")).toBe(`/v1/operations/${deleted.body.operation.id}`)
    await waitOperation(http, authA, deleted.body.operation.id)
    expectEnvelope(await http.post(`/v1/sandboxes/${s.id}/actions/pause`, authA), 409, "invalid_sandbox_state")
    const again = await http.delete(`/v1/sandboxes/${s.id}`, authA)
    expect(again.body.operation.state).toBe("succeeded")
  })

  it("the runtime timeout destroys (or pauses) the sandbox; the idle timeout honours pause", async () => {
    const destroyed = await createReadySandbox(http, authA, minimalSandbox({ lifecycle: { runtime_timeout_seconds: 1 } }))
    const paused = await createReadySandbox(http, authA, minimalSandbox({ lifecycle: { runtime_timeout_seconds: 1, on_runtime_timeout: "pause" } }))
    const idle = await createReadySandbox(http, authA, minimalSandbox({ lifecycle: { runtime_timeout_seconds: 3600, idle_timeout_seconds: 1, on_idle_timeout: "pause" } }))
    const state = async (id: string) => (await http.get(`/v1/sandboxes/${id}`, authA)).body
    expect((await poll(() => state(destroyed.id), (s) => s.state === "stopped", 20_000, 100)).state_reason).toBe("runtime_timeout")
    expect((await poll(() => state(paused.id), (s) => s.state === "paused", 20_000, 100)).state_reason).toBe("runtime_timeout")
    expect((await poll(() => state(idle.id), (s) => s.state === "paused", 20_000, 100)).state_reason).toBe("idle_timeout")
  })

  it("an endpoint lease expires and stops serving; revoke is idempotent", async () => {
    await http.post(`/v1/sandboxes/${sandboxA.id}/processes`, { ...authA, body: { command: ["python3", "-m", "http.server", "9000"] }, headers: { "idempotency-key": idempotencyKey() } })
    const ep = await http.post(`/v1/sandboxes/${sandboxA.id}/endpoints`, { ...authA, body: { port: 9000, lease_seconds: 60 }, headers: { "idempotency-key": idempotencyKey() } })
    const active = await poll(async () => (await http.get(`/v1/sandboxes/${sandboxA.id}/endpoints`, authA)).body.endpoints.find((e: any) => e.id === ep.body.id), (e) => e?.state === "active")
    expect((await poll(async () => (await fetch(active.url)).status, (s) => s === 200, 20_000, 100))).toBe(200)
    expectEnvelope(await http.post(`/v1/sandboxes/${sandboxA.id}/endpoints`, { ...authA, body: { port: 9000 }, headers: { "idempotency-key": idempotencyKey() } }), 409, "endpoint_conflict")
    // Make the lease run out now (the proxy checks the lease on every request).
    const db = openGatewayDatabase(server.dataDir)
    db.exec("PRAGMA busy_timeout = 5000") // the gateway may be writing at that moment
    db.query("UPDATE endpoints SET lease_expires_at = ? WHERE id = ?").run(new Date(Date.now() - 1000).toISOString(), ep.body.id)
    db.close()
    expect((await fetch(active.url)).status).toBe(410)
    const revoked = await http.delete(`/v1/sandboxes/${sandboxA.id}/endpoints/${ep.body.id}`, authA)
    expect(revoked.status).toBe(202)
    expect((await http.delete(`/v1/sandboxes/${sandboxA.id}/endpoints/${ep.body.id}`, authA)).status).toBe(202)
    expect((await fetch(active.url.replace(/\/e\/(ep_[^/]+)\/[^/]+/, "/e/$1/wrongtokenwrongtoken"))).status).toBe(404)
  })

  it("cost sync meters a running sandbox into usage and the ledger, and a final sync follows destroy", async () => {
    const c = await bootstrap(server.dataDir, "metered@example.com")
    const auth = { token: c.api_key, project: c.project_id }
    const s = await createReadySandbox(http, auth)
    const metered = await poll(async () => (await http.get(`/v1/sandboxes/${s.id}`, auth)).body, (x) => x.cost_microusd !== null, 20_000, 200)
    expect(BigInt(metered.cost_microusd)).toBeGreaterThan(0n)
    const billing = (await http.get(`/v1/organizations/${c.organization_id}/billing`, { token: c.user_token })).body
    const charge = billing.ledger.find((l: any) => l.kind === "usage_charge")
    expect(BigInt(charge.amount_microusd)).toBeLessThan(0n)
    expect(BigInt(billing.balance_microusd)).toBeLessThan(500_000_000n)
    const usage = (await http.get(`/v1/organizations/${c.organization_id}/usage`, { token: c.user_token })).body
    expect(usage.top_sandboxes[0]).toMatchObject({ sandbox_id: s.id, billing_mode: "emulated" })
    expect(BigInt(usage.summary.emulated_cost.current.microusd)).toBeGreaterThan(0n)
    const deleted = await http.delete(`/v1/sandboxes/${s.id}`, auth)
    await waitOperation(http, auth, deleted.body.operation.id)
    const final = await poll(async () => (await http.get(`/v1/sandboxes/${s.id}`, auth)).body, (x) => x.cost_updated_at > x.stopped_at, 20_000, 200)
    expect(BigInt(final.cost_microusd)).toBeGreaterThanOrEqual(BigInt(metered.cost_microusd))
  }, 60_000)

  it("a sandbox whose machine dies is found lost at its next cost sync, destroyed with an operation (provider_stopped)", async () => {
    // Daytona's emulator names the jail by the resource id (killed below).
    const s = await createReadySandbox(http, authA, minimalSandbox({ provider: "daytona" }))
    const db = openGatewayDatabase(server.dataDir)
    db.exec("PRAGMA busy_timeout = 5000")
    let jailId = ""
    try {
      const resource = JSON.parse((db.query("SELECT provider_resource FROM sandboxes WHERE id = ?").get(s.id) as { provider_resource: string }).provider_resource) as { resourceId: string }
      // The jail dies behind the gateway's back (as a host reboot or an OOM kill would leave it).
      jailId = resource.resourceId
      const jail = readState(server.dataDir, jailId)!
      for (const pid of [jail.childPid, jail.bwrapPid]) {
        try {
          process.kill(pid, "SIGKILL")
        } catch {}
      }
      // The next cost sync (normally within a minute) is made due now.
      db.query("UPDATE jobs SET available_at = ? WHERE dedupe_key = ?").run("2000-01-01T00:00:00.000Z", `sandbox:cost_sync:${s.id}`)
      const stopped = await poll(async () => (await http.get(`/v1/sandboxes/${s.id}`, authA)).body, (b) => b.state === "stopped", 30_000, 50)
      expect(stopped.state_reason).toBe("provider_stopped")
      const operations = db.query("SELECT type, state FROM operations WHERE resource_id = ? ORDER BY created_at").all(s.id)
      expect(operations).toEqual([{ type: "sandbox_create", state: "succeeded" }, { type: "sandbox_destroy", state: "succeeded" }])
    } finally {
      db.close()
    }
    // Nothing of the jail is left.
    await poll(async () => fs.existsSync(path.join(server.dataDir, "sandboxes", jailId)), (present) => !present, 10_000, 50)
  })

  it("a charge that exhausts the balance destroys the organization's billed sandboxes (spend limit) and says so", async () => {
    const c = await bootstrap(server.dataDir, "spender@example.com")
    const auth = { token: c.api_key, project: c.project_id }
    const s = await createReadySandbox(http, auth)
    const db = openGatewayDatabase(server.dataDir)
    db.exec("PRAGMA busy_timeout = 5000")
    try {
      // Almost nothing left, then the next cost sync (normally 5 s after ready) charges more than that.
      db.query("UPDATE billing_accounts SET balance_microusd = 1 WHERE organization_id = ?").run(c.organization_id)
      await Bun.sleep(300)
      db.query("UPDATE jobs SET available_at = ? WHERE dedupe_key = ?").run("2000-01-01T00:00:00.000Z", `sandbox:cost_sync:${s.id}`)
      const stopped = await poll(async () => (await http.get(`/v1/sandboxes/${s.id}`, auth)).body, (b) => b.state === "stopped", 30_000, 50)
      expect(stopped.state_reason).toBe("spend_limit")
      const events = db.query("SELECT data FROM domain_events WHERE organization_id = ? AND type = 'billing.spend_limit_reached'").all(c.organization_id) as Array<{ data: string }>
      expect(events).toHaveLength(1)
      const data = JSON.parse(events[0]!.data) as { balance_microusd: string; terminated_count: number }
      expect(data.terminated_count).toBe(1)
      expect(BigInt(data.balance_microusd)).toBeLessThanOrEqual(0n)
    } finally {
      db.close()
    }
    // Another organization's sandbox is untouched.
    expect((await http.get(`/v1/sandboxes/${sandboxA.id}`, authA)).body.state).toBe("ready")
    // And the exhausted organization cannot create another one.
    expectEnvelope(await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox(), headers: { "idempotency-key": idempotencyKey() } }), 402, "insufficient_credits")
  })

  it("402 when the organization has no credit", async () => {
    const c = await bootstrap(server.dataDir, "broke@example.com")
    const db = openGatewayDatabase(server.dataDir)
    db.query("UPDATE billing_accounts SET balance_microusd = 0 WHERE organization_id = ?").run(c.organization_id)
    db.close()
    const refused = await http.post("/v1/sandboxes", { token: c.api_key, project: c.project_id, body: minimalSandbox(), headers: { "idempotency-key": idempotencyKey() } })
    expectEnvelope(refused, 402, "insufficient_credits")
    expect(refused.body.details).toEqual({ balance_microusd: "0" })
    // Nothing was written: no sandbox, no operation.
    expect((await http.get("/v1/sandboxes", { token: c.api_key, project: c.project_id })).body.sandboxes).toEqual([])
  })

  it("an explicit e2b sandbox runs processes (streamed output), files and pause/resume through the API", async () => {
    const s = await createReadySandbox(http, authA, minimalSandbox({ provider: "e2b" }))
    expect(s.provider).toBe("e2b")
    const started = await http.post(`/v1/sandboxes/${s.id}/processes`, { ...authA, body: { command: ["sh", "-c", "echo a; echo b >&2; exit 5"] }, headers: { "idempotency-key": idempotencyKey() } })
    const done = await waitProcess(http, authA, s.id, started.body.id)
    expect(done).toMatchObject({ state: "failed", exit_code: 5 })
    const out = await readProcessOutput(http, authA, s.id, started.body.id)
    expect([out.stdout, out.stderr]).toEqual(["a\n", "b\n"])
    const caps = (await http.get(`/v1/sandboxes/${s.id}/capabilities`, authA)).body
    expect(caps).toMatchObject({ provider: "e2b", process: { ordered_output: true }, http_endpoints: { create: false } })
    expectEnvelope(await http.post(`/v1/sandboxes/${s.id}/endpoints`, { ...authA, body: { port: 80 }, headers: { "idempotency-key": idempotencyKey() } }), 409, "capability_unsupported")
    const paused = await http.post(`/v1/sandboxes/${s.id}/actions/pause`, authA)
    expect((await waitOperation(http, authA, paused.body.operation.id)).state).toBe("succeeded")
    const resumed = await http.post(`/v1/sandboxes/${s.id}/actions/resume`, authA)
    expect((await waitOperation(http, authA, resumed.body.operation.id)).state).toBe("succeeded")
    const deleted = await http.delete(`/v1/sandboxes/${s.id}`, authA)
    expect((await waitOperation(http, authA, deleted.body.operation.id)).state).toBe("succeeded")
  })

  it("no eligible provider fails the operation with a clear code", async () => {
    // CodeSandbox is lifecycle only: it cannot keep a sandbox off the internet, nor run anything.
    const res = await http.post("/v1/sandboxes", { ...authA, body: minimalSandbox({ provider: "codesandbox", network: { internet_access: false } }), headers: { "idempotency-key": idempotencyKey() } })
    const op = await waitOperation(http, authA, res.body.operation.id)
    expect(op.state).toBe("failed")
    expect(op.error.code).toBe("no_eligible_provider")
    expect((await http.get(`/v1/sandboxes/${res.body.sandbox.id}`, authA)).body.state).toBe("failed")
    const events = await http.get(`/v1/operations/${res.body.operation.id}/events`, authA)
    expect(events.text).toContain("event: attempt_failed")
  })
})
