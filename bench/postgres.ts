/**
 * The PostgreSQL figures of `bun run bench` (issue 9): GET sandbox and create → ready with DATABASE_URL beside
 * the SQLite ones, and the create throughput of two replicas on one database. A throwaway cluster is started
 * the way the tests start theirs (test/support/postgres.ts). `bun run bench --pg` runs only this part.
 */
import { databaseUrlFor, startPgCluster } from "../test/support/postgres.ts"
import { createReadySandbox, idempotencyKey, minimalSandbox, poll } from "../test/support/sandbox.ts"
import { api, type Bootstrap, runCli, startServer, tempDataDir } from "../test/support/server.ts"
import { GATEWAY_POOL, stats, warmCreates } from "./measure.ts"

export interface Stats {
  readonly p50: number
  readonly p90: number
}

export interface PgFigures {
  readonly createReady: Stats
  /** One at a time, each finding a warm jail. */
  readonly createWarm: Stats
  /** GET sandbox as FastReads answers it, and through the full stack. */
  readonly get: Stats
  readonly getFullStack: Stats
  /** Creates per second (202 → operation succeeded) of `creates` creates spread over two replicas, and over one. */
  readonly throughput: { readonly creates: number; readonly oneReplica: number; readonly twoReplicas: number }
}

export const benchPostgres = async (rounds: number): Promise<PgFigures> => {
  const cluster = await startPgCluster()
  process.env["TEST_PG_URL"] = cluster.url
  const dataA = tempDataDir("bench-pg-a")
  const url = databaseUrlFor(dataA)!
  // The gateway's own warm pool, as the SQLite rows are measured (test servers start none): the same create on
  // either engine, not a cold start against a warm one.
  const env = (node: string) => ({ DATABASE_URL: url, NODE_ID: node, ...GATEWAY_POOL })
  const a = await startServer({ dataDir: dataA, env: env("bench-a") })
  const servers = [a]
  try {
    const booted = await runCli(dataA, ["bootstrap", "--email", "bench-pg@example.com", "--json"], { DATABASE_URL: url })
    if (booted.code !== 0) throw new Error(`bootstrap failed: ${booted.stderr}`)
    const boot = JSON.parse(booted.stdout) as Bootstrap
    const auth = { token: boot.api_key, project: boot.project_id }
    const http = api(a.url)
    const create = async (target: ReturnType<typeof api>) => {
      const res = await target.post("/v1/sandboxes", { ...auth, body: minimalSandbox(), headers: { "idempotency-key": idempotencyKey("pg") } })
      if (res.status !== 202) throw new Error(`create answered ${res.status}: ${res.text}`)
      await poll(async () => (await target.get(`/v1/operations/${res.body.operation.id}`, auth)).body, (op) => op.state === "succeeded", 60_000, 2)
      return res.body.sandbox.id as string
    }
    const created: Array<string> = []
    const destroyAll = async () => {
      await Promise.all(created.splice(0).map((id) => http.delete(`/v1/sandboxes/${id}`, auth)))
      await poll(async () => (await http.get("/v1/sandboxes?limit=100", auth)).body.sandboxes, (list) => list.every((s: any) => s.state === "stopped" || s.state === "failed"), 120_000, 50)
    }
    for (let i = 0; i < 2; i++) created.push(await create(http))
    const createSamples: Array<number> = []
    for (let i = 0; i < Math.min(rounds, 20); i++) {
      const t = performance.now()
      created.push(await create(http))
      createSamples.push(performance.now() - t)
    }
    await destroyAll()
    // One at a time, each alone, the pool refilled in between (bench/create.ts, its warm row).
    const createWarm = await warmCreates(() => create(http), (id) => http.delete(`/v1/sandboxes/${id}`, auth), rounds)

    const sandbox = await createReadySandbox(http, auth)
    created.push(sandbox.id)
    // FastReads answers the plain GET; a query string sends the same read through the full stack.
    const getSamples = async (suffix: string) => {
      const samples: Array<number> = []
      for (let i = 0; i < rounds * 3 + 3; i++) {
        const t = performance.now()
        const response = await fetch(`${a.url}/v1/sandboxes/${sandbox.id}${suffix}`, { headers: { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project } })
        if (response.status !== 200) throw new Error(`GET answered ${response.status}`)
        await response.text()
        if (i >= 3) samples.push(performance.now() - t)
      }
      return samples
    }
    const fastGets = await getSamples("")
    const fullGets = await getSamples("?full=1")
    await destroyAll()

    // Throughput: the same batch of creates, 8 at a time, through one replica and then spread over two.
    const creates = 24
    const batch = async (targets: ReadonlyArray<ReturnType<typeof api>>) => {
      const t = performance.now()
      let next = 0
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (next < creates) {
          const i = next++
          created.push(await create(targets[i % targets.length]!))
        }
      }))
      const perSecond = creates / ((performance.now() - t) / 1000)
      await destroyAll()
      return perSecond
    }
    const oneReplica = await batch([http])
    const b = await startServer({ dataDir: tempDataDir("bench-pg-b"), env: env("bench-b") })
    servers.push(b)
    const twoReplicas = await batch([http, api(b.url)])
    return { createReady: stats(createSamples), createWarm, get: stats(fastGets), getFullStack: stats(fullGets), throughput: { creates, oneReplica, twoReplicas } }
  } finally {
    for (const server of servers) await server.stop()
    cluster.stop()
    delete process.env["TEST_PG_URL"]
  }
}
