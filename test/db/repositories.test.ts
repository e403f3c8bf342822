/**
 * The db layer on a real SQLite file: rows that do not decode are MalformedRow defects (never casts), the
 * dialect's error predicates on real errors, and the dialect's two concurrency operations — the idempotency
 * reservation (concurrent same-key requests run once) and the job claim (one job per lock key, never one whose
 * lock is held by a live lease).
 */
import { SqlClient } from "@effect/sql"
import { Database } from "bun:sqlite"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Option, Ref, Schema } from "effect"
import { AppConfig } from "../../src/Config.ts"
import { DatabaseLive } from "../../src/db/Database.ts"
import { Dialect } from "../../src/db/Dialect.ts"
import { JobsRepo } from "../../src/db/repos/Jobs.ts"
import { SandboxesRepo } from "../../src/db/repos/Sandboxes.ts"
import { UsersRepo } from "../../src/db/repos/Users.ts"
import { MalformedRow } from "../../src/db/Rows.ts"
import { databaseFile } from "../../src/db/Sql.ts"
import { Db, inTransaction } from "../../src/db/Db.ts"
import { IdempotencyStore, IdempotencyStoreLive } from "../../src/services/IdempotencyStore.ts"
import { tempDataDir } from "../support/server.ts"
import { databaseUrlFor, onPostgres } from "../support/postgres.ts"
import { OrganizationId, ProjectId, SandboxId } from "../../src/domain/Ids.ts"

const layerFor = (dataDir = tempDataDir("repos")) =>
  IdempotencyStoreLive.pipe(
    Layer.provideMerge(DatabaseLive),
    Layer.provideMerge(Layer.succeed(AppConfig, { port: 0, host: "127.0.0.1", dataDir, databaseUrl: databaseUrlFor(dataDir), publicUrl: "http://x", publicUrlSet: true, logLevel: "info", maxBodyBytes: 1, rawWriteMaxBytes: 1 << 30, endpoints: { port: 0, host: "127.0.0.1", publicOrigin: undefined, base: undefined } }))
  )

const NOW = "2030-01-01T00:00:00.000Z"

/** A project row to hang sandboxes on (foreign keys are on). */
const seedProject = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`INSERT INTO organizations (id, name, slug, created_at, updated_at) VALUES (${ORG}, 'Org', 'org', ${NOW}, ${NOW})`
  yield* sql`INSERT INTO projects (id, organization_id, name, slug, created_at, updated_at) VALUES (${PROJECT}, ${ORG}, 'P', 'p', ${NOW}, ${NOW})`
  yield* sql`INSERT INTO billing_accounts (organization_id, balance_microusd, updated_at) VALUES (${ORG}, 1000000, ${NOW})`
})

const ORG = OrganizationId.make("00000000-0000-4000-8000-000000000001")
const PROJECT = ProjectId.make("prj_1")
const SANDBOX = SandboxId.make("sbx_good")
const defectOf = <A, E>(exit: Exit.Exit<A, E>) => (Exit.isFailure(exit) ? Option.getOrUndefined(Cause.dieOption(exit.cause)) : undefined)

describe("repositories", () => {
  it.live("a row that does not decode is a MalformedRow defect naming its table, for every way it is malformed", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* seedProject
      yield* SandboxesRepo.insertIfFunded({
        id: SANDBOX,
        projectId: PROJECT,
        organizationId: ORG,
        keyId: null,
        requested: { source: { kind: "environment", environment: "metal/base" }, resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 60 } },
        provider: null
      })
      const good = yield* SandboxesRepo.get(SANDBOX)
      expect(good?.requested.resources.memory_mb).toBe(512)
      expect(good?.metadata).toEqual({})
      const corruptions = [
        sql`UPDATE sandboxes SET requested = '{"source":' WHERE id = ${SANDBOX}`, // not JSON
        sql`UPDATE sandboxes SET requested = '{"source": {"kind": "elsewhere"}}' WHERE id = ${SANDBOX}`, // JSON, wrong shape
        sql`UPDATE sandboxes SET state = 'bogus' WHERE id = ${SANDBOX}`, // not a state
        sql`UPDATE sandboxes SET metadata = '{"a": 1}' WHERE id = ${SANDBOX}` // a number where strings go
      ]
      const original = (yield* sql<{ requested: string; state: string; metadata: string }>`SELECT requested, state, metadata FROM sandboxes WHERE id = ${SANDBOX}`)[0]!
      for (const corrupt of corruptions) {
        yield* sql`UPDATE sandboxes SET requested = ${original.requested}, state = ${original.state}, metadata = ${original.metadata} WHERE id = ${SANDBOX}`
        expect(yield* SandboxesRepo.get(SANDBOX)).toBeDefined()
        yield* corrupt
        const defect = defectOf(yield* Effect.exit(SandboxesRepo.get(SANDBOX)))
        expect(defect).toBeInstanceOf(MalformedRow)
        expect((defect as MalformedRow).table).toBe("sandboxes")
      }
    }).pipe(Effect.provide(layerFor())))

  it.live("unique violations and a busy database are recognised on real errors", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const dialect = yield* Dialect
      const { dataDir } = yield* AppConfig
      yield* UsersRepo.ensure("dup@example.com")
      const duplicate = yield* Effect.flip(sql`INSERT INTO users (id, email, created_at) VALUES ('u2', 'dup@example.com', ${NOW})`)
      expect(dialect.isUniqueViolation(duplicate)).toBe(true)
      expect(dialect.isBusy(duplicate)).toBe(false)
      if (onPostgres()) {
        // Another session holds the table; this one gives up after 50 ms (55P03 lock_not_available).
        const other = new Bun.SQL(databaseUrlFor(dataDir)!)
        const held = yield* Effect.promise(() => other.reserve())
        yield* Effect.promise(() => held`BEGIN`.then(() => held`LOCK TABLE users IN ACCESS EXCLUSIVE MODE`))
        try {
          yield* sql.unsafe("SET lock_timeout = '50ms'")
          const busy = yield* Effect.flip(sql`INSERT INTO users (id, email, created_at) VALUES ('u3', 'busy@example.com', ${NOW})`)
          expect(dialect.isBusy(busy)).toBe(true)
          expect(dialect.isUniqueViolation(busy)).toBe(false)
        } finally {
          yield* sql.unsafe("SET lock_timeout = 0").pipe(Effect.ignore)
          yield* Effect.promise(() => held`ROLLBACK`.then(() => held.release()).then(() => other.close()))
        }
        return
      }
      const other = new Database(databaseFile(dataDir))
      other.exec("BEGIN IMMEDIATE")
      try {
        yield* sql.unsafe("PRAGMA busy_timeout = 50")
        const busy = yield* Effect.flip(sql`INSERT INTO users (id, email, created_at) VALUES ('u3', 'busy@example.com', ${NOW})`)
        expect(dialect.isBusy(busy)).toBe(true)
        expect(dialect.isUniqueViolation(busy)).toBe(false)
      } finally {
        other.exec("ROLLBACK")
        other.close()
      }
    }).pipe(Effect.provide(layerFor())))

  it.live("10 concurrent requests with one Idempotency-Key run the work once; the others replay it", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore
      const runs = yield* Ref.make(0)
      const remember = (body: unknown) =>
        store.remember({
          principalId: "user-1",
          scope: "things.create",
          key: "same-key",
          required: true,
          request: body,
          schema: Schema.Struct({ n: Schema.Number }),
          run: Effect.gen(function*() {
            const n = yield* Ref.updateAndGet(runs, (x) => x + 1)
            yield* Effect.sleep("5 millis") // inside the transaction: the others must wait, not interleave
            return { n }
          })
        })
      const answers = yield* Effect.all(Array.from({ length: 10 }, () => remember({ a: 1 })), { concurrency: "unbounded" })
      expect(yield* Ref.get(runs)).toBe(1)
      expect(answers).toEqual(Array.from({ length: 10 }, () => ({ n: 1 })))
      const sql = yield* SqlClient.SqlClient
      expect((yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM idempotency_keys`)[0]!.n).toBe(1)
      const mismatch = yield* Effect.flip(remember({ a: 2 }))
      expect(mismatch).toMatchObject({ _tag: "Conflict", code: "idempotency_mismatch" })
      // Expired: the key is free again and the work runs anew.
      yield* sql`UPDATE idempotency_keys SET expires_at = '2000-01-01T00:00:00.000Z'`
      expect(yield* remember({ a: 2 })).toEqual({ n: 2 })
      expect((yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM idempotency_keys`)[0]!.n).toBe(1)
    }).pipe(Effect.provide(layerFor())))

  it.live("a job enqueued already leased is written leased only where a claim would take it", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const jobs = yield* JobsRepo
      const lease = { owner: "me", now: "2030-01-01T00:00:01.000Z", leaseExpiresAt: "2030-01-01T00:00:16.000Z" }
      const job = (dedupeKey: string, lockKey: string | null, availableAt = NOW) => ({ type: "t", dedupeKey, lockKey, payload: { k: dedupeKey }, availableAt, now: NOW })
      // Leased to the caller on its first attempt, under a token of its own, with nothing else to wait for.
      const leased = yield* jobs.enqueueLeased(job("new", "lock:new"), lease)
      expect(leased).toMatchObject({ recovered: false, row: { dedupe_key: "new", lock_key: "lock:new", attempts: 1, lease_owner: "me" } })
      expect(yield* sql`SELECT state, lease_token FROM jobs WHERE dedupe_key = 'new'`).toEqual([{ state: "leased", lease_token: leased!.token }])
      // Not where a claim would not take it: its key exists, its lock key has an unfinished job, it is not due.
      yield* jobs.enqueue({ ...job("held", "lock:held"), replace: false })
      expect(yield* jobs.enqueueLeased(job("held", "lock:other"), lease)).toBeUndefined()
      expect(yield* jobs.enqueueLeased(job("second", "lock:held"), lease)).toBeUndefined()
      expect(yield* jobs.enqueueLeased(job("later", null, "2030-01-01T00:10:00.000Z"), lease)).toBeUndefined()
      expect((yield* sql<{ dedupe_key: string; state: string }>`SELECT dedupe_key, state FROM jobs ORDER BY dedupe_key`)).toEqual([
        { dedupe_key: "held", state: "pending" },
        { dedupe_key: "new", state: "leased" }
      ])
    }).pipe(Effect.provide(layerFor())))

  it.live("a claim takes one due job per lock key, none whose lock a live lease holds, and none this process runs", () =>
    Effect.gen(function*() {
      const jobs = yield* JobsRepo
      const enqueue = (dedupeKey: string, lockKey: string | null, availableAt = NOW) =>
        jobs.enqueue({ type: "t", dedupeKey, lockKey, payload: { k: dedupeKey }, availableAt, replace: false, now: NOW })
      yield* enqueue("a1", "lock:a")
      yield* enqueue("a2", "lock:a")
      yield* enqueue("b1", "lock:b")
      yield* enqueue("free", null)
      yield* enqueue("later", null, "2030-01-01T00:10:00.000Z")
      const lease = { owner: "me", now: "2030-01-01T00:00:01.000Z", leaseExpiresAt: "2030-01-01T00:00:16.000Z" }
      // Two claims at once: between them, each lock key is leased once.
      const [first, second] = yield* Effect.all([
        jobs.claim({ ...lease, limit: 10, running: new Set() }),
        jobs.claim({ ...lease, limit: 10, running: new Set() })
      ], { concurrency: 2 })
      const keys = [...first, ...second].map(({ row }) => row.dedupe_key).sort()
      expect(keys).toEqual(["a1", "b1", "free"])
      expect([...first, ...second].every(({ recovered, row }) => row.attempts === 1 && JSON.parse(row.payload).k === row.dedupe_key && !recovered)).toBe(true)
      // a2's lock is held by a1's live lease; by key too.
      expect(yield* jobs.claimByKey({ ...lease, dedupeKey: "a2" })).toBeUndefined()
      expect(yield* jobs.claim({ ...lease, limit: 10, running: new Set() })).toEqual([])
      // Once a1's lease expires a2 or a1 (reclaimed) may go, one of them.
      const afterExpiry = { owner: "me", now: "2030-01-01T00:00:20.000Z", leaseExpiresAt: "2030-01-01T00:00:35.000Z" }
      const runningIds = new Set([...first, ...second].filter(({ row }) => row.dedupe_key !== "a1").map(({ row }) => row.id))
      const reclaimed = yield* jobs.claim({ ...afterExpiry, limit: 10, running: runningIds })
      expect(reclaimed.map(({ row }) => row.lock_key)).toEqual(["lock:a"])
      // Its own expired lease taken again is no recovery; another owner taking them over (this one crashed) is.
      expect(reclaimed.map(({ recovered }) => recovered)).toEqual([false])
      const takenOver = yield* jobs.claim({ owner: "other", now: "2030-01-01T00:00:40.000Z", leaseExpiresAt: "2030-01-01T00:00:55.000Z", limit: 10, running: new Set() })
      expect(takenOver.length).toBeGreaterThan(0)
      expect(takenOver.every(({ recovered }) => recovered)).toBe(true)
    }).pipe(Effect.provide(layerFor())))

  const lockDir = tempDataDir("write-lock")
  it.live("SQLite: a transaction holds the write lock from its start, so another process's commit in between cannot make its write fail", () =>
    Effect.gen(function*() {
      if (onPostgres()) return
      const sql = yield* SqlClient.SqlClient
      yield* seedProject
      // Another process on the same file (the operator's CLI beside a live server), which does not wait.
      const other = new Database(databaseFile(lockDir))
      other.run("PRAGMA busy_timeout = 0")
      const otherWrites = () => {
        try {
          other.run("UPDATE projects SET name = 'by the CLI' WHERE id = 'prj_1'")
          return "written"
        } catch (e) {
          return String(e)
        }
      }
      // Read, the other process tries to commit, then write: the read-then-write a service does.
      const seen = yield* inTransaction(Effect.gen(function*() {
        const before = yield* sql<{ name: string }>`SELECT name FROM projects WHERE id = ${PROJECT}`
        const attempt = otherWrites()
        yield* sql`UPDATE projects SET name = 'by the gateway' WHERE id = ${PROJECT}`
        return { before: before[0]?.name, attempt }
      }))
      // The other process was kept out (it would have got in between, and the gateway's write been refused).
      expect(seen).toEqual({ before: "P", attempt: "SQLiteError: database is locked" })
      expect(otherWrites()).toBe("written")
      other.close()
    }).pipe(Effect.provide(Layer.provideMerge(Db.Default, layerFor(lockDir)))))
})
