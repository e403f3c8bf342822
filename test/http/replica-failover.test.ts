/**
 * A replica killed mid-work on a remote provider (issue 9, docs/operations/scaling-out.md): two gateway processes on one
 * PostgreSQL database (pools of 4 connections), both with E2B in `remote` mode against an E2B cloud that runs in a
 * process of its own (test/support/remote-e2b.ts), and a short job lease (JOB_LEASE_SECONDS=3). Replica A takes a
 * running process and three creates whose answers the cloud holds back (the sandboxes exist at E2B, A does not
 * know yet), then is SIGKILLed. Replica B must take the jobs over once their leases expire and finish them right
 * and exactly once: each sandbox ready on the one E2B sandbox made for it (found again, never made twice), the
 * process ended with its output recorded once. PostgreSQL run only.
 */
import { afterAll, describe, expect, it } from "vitest"
import { querySql } from "../support/accounts.ts"
import { databaseUrlFor, onPostgres } from "../support/postgres.ts"
import { type RemoteE2B, startRemoteE2B } from "../support/remote-e2b.ts"
import { idempotencyKey, minimalSandbox, poll, readProcessOutput, waitOperation, waitProcess } from "../support/sandbox.ts"
import { api, bootstrap, type RunningServer, startServer, tempDataDir } from "../support/server.ts"

const servers: Array<RunningServer> = []
let cloud: RemoteE2B | undefined

afterAll(async () => {
  for (const server of servers) await server.stop()
  await cloud?.stop()
})

const LEASE_SECONDS = 3

describe.skipIf(!onPostgres())("a replica killed mid-work on a remote provider", () => {
  it("the other replica takes its jobs over after the lease and finishes them exactly once", async () => {
    cloud = await startRemoteE2B(tempDataDir("e2b-cloud"))
    const dataA = tempDataDir("failover-a")
    const dataB = tempDataDir("failover-b")
    const url = databaseUrlFor(dataA)!
    const env = (node: string) => ({
      DATABASE_URL: url, DATABASE_POOL_SIZE: "4", NODE_ID: node, CLUSTER_SECRET: "failover-test-cluster-secret", JOB_LEASE_SECONDS: String(LEASE_SECONDS),
      ...cloud!.env
    })
    const [a, b] = await Promise.all([startServer({ dataDir: dataA, env: env("node-a") }), startServer({ dataDir: dataB, env: env("node-b") })])
    servers.push(a, b)
    const boot = await bootstrap(dataA, "failover@example.com")
    const auth = { token: boot.api_key, project: boot.project_id }
    const http = { a: api(a.url), b: api(b.url) }
    const create = (through: typeof http.a) =>
      through.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider: "e2b" }), headers: { "idempotency-key": idempotencyKey("failover") } })

    // A ready sandbox on remote E2B: it lives on no node.
    const first = await create(http.a)
    expect(first.status).toBe(202)
    const ready = first.body.sandbox.id as string
    expect((await waitOperation(http.a, auth, first.body.operation.id)).state).toBe("succeeded")
    expect(querySql<{ node_id: string | null; billing_mode: string }>(dataA, "SELECT node_id, billing_mode FROM sandboxes WHERE id = ?", ready))
      .toEqual([{ node_id: null, billing_mode: "managed" }])

    // Work in flight on A: a process still running, and three creates whose answers the cloud holds back.
    const started = await http.a.post(`/v1/sandboxes/${ready}/processes`, {
      ...auth,
      body: { command: ["sh", "-c", "echo before; sleep 5; echo after"] },
      headers: { "idempotency-key": idempotencyKey("failover-proc") }
    })
    expect(started.status).toBe(202)
    const processId = started.body.id as string
    await poll(async () => (await http.a.get(`/v1/sandboxes/${ready}/processes/${processId}`, auth)).body, (p) => p.state === "running", 20_000, 50)
    // Long enough to kill A meanwhile; a create B claimed itself (it may win a claim) is only slowed down.
    await cloud.hold(10_000)
    const creates = await Promise.all([create(http.a), create(http.a), create(http.a)])
    expect(creates.map((c) => c.status)).toEqual([202, 202, 202])
    const held = creates.map((c) => c.body.sandbox.id as string)
    await poll(() => cloud!.created(), (ids) => held.every((id) => ids.includes(id)), 30_000, 50)

    // A holds these jobs' leases when it dies.
    const jobsOf = () =>
      querySql<{ type: string; state: string; lease_owner: string | null; attempts: number; payload: string }>(
        dataA, "SELECT type, state, lease_owner, attempts, payload FROM jobs WHERE type IN ('sandbox.provision', 'process.execute') ORDER BY created_at")
        .filter((j) => held.some((id) => j.payload.includes(id)) || j.payload.includes(processId))
    const ofA = (owner: string | null) => owner !== null && owner.split(":")[1] === String(a.pid)
    const beforeKill = jobsOf()
    expect(beforeKill).toHaveLength(4)
    expect(beforeKill.every((j) => j.state === "leased")).toBe(true)
    const takenByA = beforeKill.filter((j) => ofA(j.lease_owner))
    expect(takenByA.length).toBeGreaterThan(0)
    await a.stop({ kill: true })
    servers.splice(servers.indexOf(a), 1)

    // B finishes everything: every create on the E2B sandbox made for it, the process with its whole output.
    for (const c of creates) expect((await waitOperation(http.b, auth, c.body.operation.id, 30_000)).state).toBe("succeeded")
    const process = await waitProcess(http.b, auth, ready, processId, 30_000)
    expect(process).toMatchObject({ state: "succeeded", exit_code: 0 })
    const output = await readProcessOutput(http.b, auth, ready, processId)
    expect(output.stdout).toBe("before\nafter\n")
    expect(output.types.filter((t) => t === "started")).toHaveLength(1)
    for (const id of held) expect((await http.b.get(`/v1/sandboxes/${id}`, auth)).body).toMatchObject({ state: "ready", provider: "e2b" })

    // Exactly once: one E2B sandbox per gateway sandbox, ever; each of A's jobs claimed once more (by B), and done.
    const made = await cloud.created()
    expect(made.toSorted()).toEqual([ready, ...held].toSorted())
    for (const id of held) {
      expect(querySql<{ n: number }>(dataA, "SELECT COUNT(*) AS n FROM provider_attempts WHERE sandbox_id = ? AND outcome = 'created'", id)).toEqual([{ n: 1 }])
    }
    const afterKill = jobsOf()
    for (const job of afterKill.filter((j) => takenByA.some((t) => t.payload === j.payload))) expect(job).toMatchObject({ state: "succeeded", attempts: 2 })
    await cloud.hold(0)
  }, 150_000)
})
