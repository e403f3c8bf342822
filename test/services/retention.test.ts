/**
 * The retention sweep over a real server and its SQLite file: it runs at start (and hourly); old rows go, recent
 * ones and everything still in use stay.
 */
import { afterAll, describe, expect, it } from "vitest"
import { execSql, querySql } from "../support/accounts.ts"
import { api, bootstrap, type RunningServer, startServer, tempDataDir } from "../support/server.ts"
import { createReadySandbox, poll, readProcessOutput, runProcess, waitRuntimeOperation } from "../support/sandbox.ts"

const LONG_AGO = "2020-01-01T00:00:00.000Z"
let server: RunningServer | undefined

afterAll(async () => {
  await server?.stop()
})

describe("retention", () => {
  it("removes old process output, runtime operations, finished jobs and expired idempotency records at start; keeps the rest", async () => {
    const dataDir = tempDataDir("retention")
    server = await startServer({ dataDir })
    let http = api(server.url)
    const boot = await bootstrap(dataDir, "retention@example.com")
    const auth = { token: boot.api_key, project: boot.project_id }
    const sandbox = await createReadySandbox(http, auth)
    const old = (await runProcess(http, auth, sandbox.id, ["echo", "old"])).process
    const recent = (await runProcess(http, auth, sandbox.id, ["echo", "recent"])).process
    const readOf = async () => {
      const read = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/read`, { ...auth, body: { path: "/etc/hostname" } })
      return (await waitRuntimeOperation(http, auth, sandbox.id, read.body.id)).id as string
    }
    const oldRead = await readOf()
    const recentRead = await readOf()
    await server.stop({ keepJails: true })

    // Age one process, one finished job and one idempotency record past their retention.
    execSql(dataDir, "UPDATE processes SET completed_at = ? WHERE id = ?", LONG_AGO, old.id)
    execSql(dataDir, "UPDATE jobs SET updated_at = ? WHERE dedupe_key = ?", LONG_AGO, `process:execute:${old.id}`)
    execSql(dataDir, "UPDATE runtime_operations SET completed_at = ? WHERE id = ?", LONG_AGO, oldRead)
    const keys = querySql<{ key_hash: string }>(dataDir, "SELECT key_hash FROM idempotency_keys")
    expect(keys.length).toBeGreaterThan(1)
    execSql(dataDir, "UPDATE idempotency_keys SET expires_at = ? WHERE key_hash = ?", LONG_AGO, keys[0]!.key_hash)
    const eventsOf = (id: string) => querySql<{ n: number }>(dataDir, "SELECT COUNT(*) AS n FROM process_events WHERE process_id = ?", id)[0]!.n
    expect(eventsOf(old.id)).toBeGreaterThan(0)

    server = await startServer({ dataDir })
    http = api(server.url)
    // The sweep deletes table by table; it is over once it has re-armed itself for an hour later.
    const retentionJob = () => querySql<{ state: string; available_at: string }>(dataDir, "SELECT state, available_at FROM jobs WHERE dedupe_key = 'maintenance:retention'")[0]
    await poll(async () => retentionJob(), (job) => job?.state === "pending" && Date.parse(job.available_at) - Date.now() > 50 * 60 * 1000, 20_000, 50)
    expect(eventsOf(old.id)).toBe(0)
    expect(eventsOf(recent.id)).toBeGreaterThan(0)
    expect(querySql(dataDir, "SELECT id FROM jobs WHERE dedupe_key = ?", `process:execute:${old.id}`)).toEqual([])
    expect(querySql(dataDir, "SELECT id FROM jobs WHERE dedupe_key = ?", `process:execute:${recent.id}`)).toHaveLength(1)
    expect(querySql(dataDir, "SELECT key_hash FROM idempotency_keys WHERE key_hash = ?", keys[0]!.key_hash)).toEqual([])
    expect((await http.get(`/v1/sandboxes/${sandbox.id}/runtime-operations/${oldRead}`, auth)).status).toBe(404)
    expect(querySql(dataDir, "SELECT runtime_operation_id FROM runtime_operation_data WHERE runtime_operation_id = ?", oldRead)).toEqual([])
    expect(querySql(dataDir, "SELECT runtime_operation_id FROM runtime_operation_data WHERE runtime_operation_id = ?", recentRead)).toHaveLength(1)
    expect((await http.get(`/v1/sandboxes/${sandbox.id}/runtime-operations/${recentRead}`, auth)).body.state).toBe("succeeded")
    expect(querySql(dataDir, "SELECT key_hash FROM idempotency_keys")).toHaveLength(keys.length - 1)
    // The old process is still there, with its outcome; only its output is gone.
    const read = await http.get(`/v1/sandboxes/${sandbox.id}/processes/${old.id}`, auth)
    expect(read.body).toMatchObject({ id: old.id, state: "succeeded", exit_code: 0 })
    expect((await readProcessOutput(http, auth, sandbox.id, old.id)).types).toEqual([])
    expect((await readProcessOutput(http, auth, sandbox.id, recent.id)).stdout).toBe("recent\n")
  }, 90_000)
})
