/**
 * `bun run cli db copy` (issue 9, "Moving up"): a populated SQLite gateway, stopped, copied into an empty
 * PostgreSQL database, then started again on the same DATA_DIR with DATABASE_URL — it serves the same answers.
 * PostgreSQL run only (it needs a PostgreSQL to copy to).
 */
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { databaseUrlFor, onPostgres, pgQuery } from "../support/postgres.ts"
import { createReadySandbox, minimalSandbox, runProcess } from "../support/sandbox.ts"
import { api, type Bootstrap, type RunningServer, runCli, startServer, tempDataDir } from "../support/server.ts"

const SQLITE = { DATABASE_URL: "" }
let server: RunningServer | undefined

afterAll(async () => {
  await server?.stop()
})

describe.skipIf(!onPostgres())("db copy", () => {
  it("copies a stopped SQLite gateway into PostgreSQL, verified, and the gateway serves the same answers from it", async () => {
    const dataDir = tempDataDir("copy")
    server = await startServer({ dataDir, env: SQLITE })
    const booted = await runCli(dataDir, ["bootstrap", "--email", "copy@example.com", "--json"], SQLITE)
    expect(booted.code).toBe(0)
    const boot = JSON.parse(booted.stdout) as Bootstrap
    let http = api(server.url)
    const auth = { token: boot.api_key, project: boot.project_id }
    const sandbox = await createReadySandbox(http, auth, { ...minimalSandbox(), metadata: { team: "red" } })
    const proc = await runProcess(http, auth, sandbox.id, ["sh", "-c", "echo copied"])
    const reads = async () => ({
      sandbox: (await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body,
      sandboxes: (await http.get(`/v1/sandboxes`, auth)).body.sandboxes.map((s: { id: string }) => s.id),
      // The metadata filter is the dialect's JSON condition.
      red: (await http.get(`/v1/sandboxes?metadata.team=red`, auth)).body.sandboxes.map((s: { id: string }) => s.id),
      blue: (await http.get(`/v1/sandboxes?metadata.team=blue`, auth)).body.sandboxes.map((s: { id: string }) => s.id),
      process: (await http.get(`/v1/sandboxes/${sandbox.id}/processes/${proc.process.id}`, auth)).body,
      events: (await http.get(`/v1/events?project_id=${boot.project_id}&limit=100`, { token: boot.user_token })).body,
      organization: (await http.get(`/v1/organizations/${boot.organization_id}`, { token: boot.user_token })).body,
      balance: (await http.get(`/v1/organizations/${boot.organization_id}/billing`, { token: boot.user_token })).body.balance
    })
    await server.stop({ keepJails: true })
    // Taken with the server stopped, so nothing moves between this and the copy.
    server = await startServer({ dataDir, env: SQLITE })
    http = api(server.url)
    const before = await reads()
    await server.stop({ keepJails: true })
    server = undefined

    const target = databaseUrlFor(tempDataDir("copy-target"))!
    const copy = await runCli(dataDir, ["db", "copy", "--from", path.join(dataDir, "gateway.sqlite"), "--to", target, "--json"])
    expect(copy.code, copy.stderr).toBe(0)
    const report = JSON.parse(copy.stdout) as { ok: boolean; tables: Array<{ table: string; rows: number; ok: boolean }> }
    expect(report.ok).toBe(true)
    expect(report.tables.find((t) => t.table === "sandboxes")?.rows).toBe(1)
    expect(report.tables.find((t) => t.table === "domain_events")!.rows).toBeGreaterThan(3)
    expect(report.tables.every((t) => t.ok)).toBe(true)

    // A second copy into the now populated database is refused, and nothing changes.
    const again = await runCli(dataDir, ["db", "copy", "--from", path.join(dataDir, "gateway.sqlite"), "--to", target])
    expect(again.code).toBe(1)
    expect(again.stderr).toContain("not empty")

    server = await startServer({ dataDir, env: { DATABASE_URL: target } })
    http = api(server.url)
    const after = await reads()
    expect(after.sandbox.id).toBe(before.sandbox.id)
    expect(after.sandbox.state).toBe(before.sandbox.state)
    expect(after.sandbox.created_at).toBe(before.sandbox.created_at)
    expect(after.sandboxes).toEqual(before.sandboxes)
    expect(before.red).toEqual([sandbox.id])
    expect(before.blue).toEqual([])
    expect(after.red).toEqual(before.red)
    expect(after.blue).toEqual([])
    expect(after.process).toEqual(before.process)
    expect(before.events.events.length).toBeGreaterThan(2)
    expect(after.events.events.slice(0, before.events.events.length)).toEqual(before.events.events)
    expect(after.organization).toEqual(before.organization)
    expect(after.balance).toEqual(before.balance)
    // New events continue the copied cursor.
    const seqs = pgQuery<{ seq: number }>(target, "SELECT seq FROM domain_events ORDER BY seq", []).map((r) => r.seq)
    expect(new Set(seqs).size).toBe(seqs.length)
    const destroyed = await http.delete(`/v1/sandboxes/${sandbox.id}`, auth)
    expect(destroyed.status).toBe(202)
  }, 120_000)
})
