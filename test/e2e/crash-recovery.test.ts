/**
 * SIGKILL the gateway while 20 sandboxes are being created and a `sleep 5; echo done` process runs in a ready
 * sandbox; start it again on the same DATA_DIR. Within 60 s every operation is terminal, the ready sandbox is
 * still ready, the process finishes with its output kept, no provider resource is duplicated and no jail is
 * left without a record.
 */
import { afterAll, describe, expect, it } from "vitest"
import { Database } from "bun:sqlite"
import * as fs from "node:fs"
import * as path from "node:path"
import { api, bootstrap, type RunningServer, startServer, tempDataDir, openGatewayDatabase } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, minimalSandbox, poll, readProcessOutput, waitProcess } from "../support/sandbox.ts"

let server: RunningServer | undefined
/** With warm jails (test servers start none by default): a create taken from the pool must survive the kill too. */
const WARM = { RUNTIME_WARM_POOL: "2" }

afterAll(async () => {
  await server?.stop()
})

describe("crash recovery", () => {
  it("recovers every operation after SIGKILL and keeps running sandboxes and processes", async () => {
    const dataDir = tempDataDir("crash")
    server = await startServer({ dataDir, env: WARM })
    let http = api(server.url)
    const boot = await bootstrap(dataDir, "crash@example.com")
    const auth = { token: boot.api_key, project: boot.project_id }

    const ready = await createReadySandbox(http, auth)
    // A jail whose sandbox record says stopped (as if the destroy never reached it) is reaped at start.
    const orphan = await createReadySandbox(http, auth)
    const started = await http.post(`/v1/sandboxes/${ready.id}/processes`, {
      ...auth,
      body: { command: ["sh", "-c", "sleep 5; echo done"] },
      headers: { "idempotency-key": idempotencyKey("sleep") }
    })
    expect(started.status).toBe(202)
    await poll(async () => (await http.get(`/v1/sandboxes/${ready.id}/processes/${started.body.id}`, auth)).body, (p) => p.state === "running")

    const creates = await Promise.all(
      Array.from({ length: 20 }, () =>
        http.post("/v1/sandboxes", { ...auth, body: minimalSandbox(), headers: { "idempotency-key": idempotencyKey("burst") } }))
    )
    for (const c of creates) expect(c.status).toBe(202)
    await server.stop({ kill: true })
    const orphanJail = JSON.parse((new Database(path.join(dataDir, "gateway.sqlite"), { readonly: true }).query("SELECT provider_resource FROM sandboxes WHERE id = ?").get(orphan.id) as { provider_resource: string }).provider_resource).resourceId
    const writable = openGatewayDatabase(dataDir)
    writable.query("UPDATE sandboxes SET state = 'stopped' WHERE id = ?").run(orphan.id)
    writable.close()
    expect(fs.existsSync(path.join(dataDir, "sandboxes", orphanJail))).toBe(true)

    server = await startServer({ dataDir, env: WARM })
    http = api(server.url)
    const deadline = Date.now() + 60_000
    const operationIds = creates.map((c) => c.body.operation.id as string)
    const operations = await poll(
      async () => Promise.all(operationIds.map(async (id) => (await http.get(`/v1/operations/${id}`, auth)).body)),
      (ops) => ops.every((op) => ["succeeded", "failed", "cancelled"].includes(op.state)),
      Math.max(1, deadline - Date.now()),
      250
    )
    for (const op of operations) {
      if (op.state !== "succeeded") expect(typeof op.error?.code).toBe("string")
    }

    expect((await http.get(`/v1/sandboxes/${ready.id}`, auth)).body.state).toBe("ready")
    expect(fs.existsSync(path.join(dataDir, "sandboxes", orphanJail))).toBe(false)
    const process = await waitProcess(http, auth, ready.id, started.body.id, 30_000)
    expect(process.state, JSON.stringify(process)).toBe("succeeded")
    const output = await readProcessOutput(http, auth, ready.id, started.body.id)
    expect(output.stdout).toBe("done\n")

    // Every jail on disk belongs to a sandbox record that is live; no sandbox has two provider resources.
    const db = new Database(path.join(dataDir, "gateway.sqlite"), { readonly: true })
    const live = db.query("SELECT id, provider_resource FROM sandboxes WHERE state NOT IN ('stopped', 'failed')").all() as Array<{ id: string; provider_resource: string | null }>
    const resourceIds = live.map((s) => (s.provider_resource === null ? null : JSON.parse(s.provider_resource).resourceId)).filter((x) => x !== null)
    expect(new Set(resourceIds).size).toBe(resourceIds.length)
    db.close()
    // Warm jails (pool-*) are the runtime's own spares, not sandboxes.
    const jails = fs.existsSync(path.join(dataDir, "sandboxes")) ? fs.readdirSync(path.join(dataDir, "sandboxes")).filter((j) => !j.startsWith("pool-")) : []
    expect(jails.length).toBeLessThanOrEqual(live.length)
  }, 240_000)
})
