/**
 * Several replicas on one PostgreSQL database (issue 9): two complete db layers — separate connection pools,
 * separate runners with their own lease owners, as two gateway processes would have — share one database. The
 * idempotency reservation and the job claim must hold across them, not only inside one process. PostgreSQL only:
 * SQLite is the single-node engine.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Ref, Schema } from "effect"
import { AppConfig } from "../../src/Config.ts"
import { DatabaseLive } from "../../src/db/Database.ts"
import { type Db, inTransaction } from "../../src/db/Db.ts"
import { UsageRepo } from "../../src/db/repos/Usage.ts"
import { IdempotencyStore, IdempotencyStoreLive } from "../../src/services/IdempotencyStore.ts"
import { defineJob, enqueueJob } from "../../src/services/JobRegistry.ts"
import { OperationRunner, OperationRunnerLive } from "../../src/services/OperationRunner.ts"
import { databaseUrlFor, onPostgres } from "../support/postgres.ts"
import { tempDataDir } from "../support/server.ts"
import { OrganizationId, ProjectId, SandboxId } from "../../src/domain/Ids.ts"

const config = (dataDir: string, poolSize: number) =>
  Layer.succeed(AppConfig, {
    port: 0, host: "127.0.0.1", dataDir, databaseUrl: databaseUrlFor(dataDir), databasePoolSize: poolSize, publicUrl: "http://127.0.0.1",
    publicUrlSet: true, logLevel: "info", maxBodyBytes: 1 << 20, rawWriteMaxBytes: 1 << 30, endpoints: { port: 0, host: "127.0.0.1", publicOrigin: undefined, base: undefined }
  })

/** One replica: its own pool (of `poolSize` connections), migrations, repositories, idempotency store and runner. */
const replica = (dataDir: string, poolSize: number) =>
  Layer.mergeAll(OperationRunnerLive, IdempotencyStoreLive).pipe(Layer.provideMerge(DatabaseLive), Layer.provide(config(dataDir, poolSize)))

const bothReplicas = (dataDir: string) =>
  Effect.all([Layer.build(replica(dataDir, 1)), Layer.build(replica(dataDir, 3))], { concurrency: "unbounded" })

const ORG = OrganizationId.make("00000000-0000-4000-8000-000000000001")
const PROJECT = ProjectId.make("prj_1")
const SANDBOX = SandboxId.make("sbx_1")
const NOW = "2030-01-01T00:00:00.000Z"

const work = defineJob("test.replicated", Schema.Struct({ n: Schema.Number }))

describe.skipIf(!onPostgres())("two replicas on one PostgreSQL database", () => {
  it.live("20 parallel same-key requests spread across both run the work once; every answer is the first one's", () =>
    Effect.scoped(Effect.gen(function*() {
      const dataDir = tempDataDir("replicas-idem")
      const [a, b] = yield* bothReplicas(dataDir)
      const runs = yield* Ref.make(0)
      const remember = (context: Context.Context<IdempotencyStore | SqlClient.SqlClient>) =>
        Effect.flatMap(IdempotencyStore, (store) =>
          store.remember({
            principalId: "user-1",
            scope: "things.create",
            key: "same-key",
            required: true,
            request: { a: 1 },
            schema: Schema.Struct({ n: Schema.Number }),
            run: Effect.gen(function*() {
              const n = yield* Ref.updateAndGet(runs, (x) => x + 1)
              // The resource the work creates, in the request's transaction.
              const sql = yield* SqlClient.SqlClient
              yield* Effect.orDie(sql`INSERT INTO users (id, email, created_at) VALUES (${`u${n}`}, ${`u${n}@example.com`}, '2030-01-01T00:00:00.000Z')`)
              yield* Effect.sleep("20 millis") // inside the transaction: the others must wait, not interleave
              return { n }
            })
          })).pipe(Effect.provide(context))
      const answers = yield* Effect.all(Array.from({ length: 20 }, (_, i) => remember(i % 2 === 0 ? a : b)), { concurrency: "unbounded" })
      expect(yield* Ref.get(runs)).toBe(1)
      expect(answers).toEqual(Array.from({ length: 20 }, () => ({ n: 1 })))
      const sql = Context.get(a, SqlClient.SqlClient)
      expect((yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM users`)[0]!.n).toBe(1)
    })), 60_000)

  it.live("200 jobs claimed by both replicas: each runs exactly once, never two of one lock key at a time", () =>
    Effect.scoped(Effect.gen(function*() {
      const dataDir = tempDataDir("replicas-jobs")
      const [a, b] = yield* bothReplicas(dataDir)
      const ran = new Map<number, number>()
      const byReplica = { a: 0, b: 0 }
      const active = new Map<string, number>()
      let overlaps = 0
      for (const [name, context] of [["a", a], ["b", b]] as const) {
        const runner = Context.get(context, OperationRunner)
        yield* runner.register(work, {
          run: (job) =>
            Effect.gen(function*() {
              // Odd jobs have no lock key: only even ones are counted.
              const lock = job.payload.n % 2 === 0 ? `lock:${job.payload.n % 10}` : `free:${job.payload.n}`
              if ((active.get(lock) ?? 0) > 0) overlaps++
              active.set(lock, (active.get(lock) ?? 0) + 1)
              ran.set(job.payload.n, (ran.get(job.payload.n) ?? 0) + 1)
              byReplica[name]++
              yield* Effect.sleep(`${1 + (job.payload.n % 5)} millis`)
              active.set(lock, active.get(lock)! - 1)
            }),
          giveUp: () => Effect.void
        })
      }
      // Enqueued before either starts, so both find a full queue at once.
      yield* Effect.forEach(Array.from({ length: 200 }, (_, n) => n), (n) =>
        enqueueJob(work, { dedupeKey: `job:${n}`, ...(n % 2 === 0 ? { lockKey: `lock:${n % 10}` } : {}), payload: { n } }), { discard: true }).pipe(Effect.provide(a))
      yield* Effect.all([Context.get(a, OperationRunner).start, Context.get(b, OperationRunner).start], { concurrency: "unbounded" })
      const sql = Context.get(a, SqlClient.SqlClient)
      for (let i = 0; i < 600; i++) {
        const [row] = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM jobs WHERE state = 'succeeded'`
        if (row!.n === 200) break
        yield* Effect.sleep("50 millis")
      }
      expect(ran.size).toBe(200)
      expect([...ran.values()].every((count) => count === 1)).toBe(true)
      expect(overlaps).toBe(0)
      expect(byReplica.a).toBeGreaterThan(0)
      expect(byReplica.b).toBeGreaterThan(0)
    })), 60_000)

  it.live("a sandbox's cost synced by both replicas at once is recorded (and charged) once", () =>
    Effect.scoped(Effect.gen(function*() {
      const dataDir = tempDataDir("replicas-usage")
      const [a, b] = yield* bothReplicas(dataDir)
      const sql = Context.get(a, SqlClient.SqlClient)
      yield* sql`INSERT INTO organizations (id, name, slug, created_at, updated_at) VALUES (${ORG}, 'Org', 'org', ${NOW}, ${NOW})`
      // What CostSync does in its transaction: hold the sandbox's usage, read the last cumulative, record the difference.
      const sync = (context: Context.Context<Db | UsageRepo>, cumulative: bigint) =>
        Effect.gen(function*() {
          yield* UsageRepo.lockSandbox(SANDBOX)
          const delta = cumulative - (yield* UsageRepo.lastCumulative(SANDBOX))
          yield* Effect.sleep("10 millis")
          if (delta === 0n) return
          yield* UsageRepo.insert({
            organizationId: ORG, projectId: PROJECT, sandboxId: SANDBOX, provider: "e2b", billingMode: "emulated", deltaMicrousd: delta,
            cumulativeMicrousd: cumulative, provenance: "estimated_rate_card", confidence: "low", rateCardVersion: null, measuredThrough: NOW, now: NOW
          })
        }).pipe(inTransaction, Effect.provide(context))
      yield* Effect.all(Array.from({ length: 10 }, (_, i) => sync(i % 2 === 0 ? a : b, 1500n)), { concurrency: "unbounded" })
      const rows = yield* sql<{ n: number; total: number }>`SELECT COUNT(*) AS n, SUM(cost_delta_microusd) AS total FROM usage_records`
      expect(rows[0]).toEqual({ n: 1, total: 1500 })
    })), 60_000)
})

