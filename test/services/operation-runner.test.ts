import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Deferred, Effect, Layer, Option, Ref, Schema } from "effect"
import * as os from "node:os"
import { AppConfig, appConfig } from "../../src/Config.ts"
import { DatabaseLive } from "../../src/db/Database.ts"
import { JobsRepo } from "../../src/db/repos/Jobs.ts"
import { defineJob, enqueueJob, JobError } from "../../src/services/JobRegistry.ts"
import { OperationRunner, OperationRunnerLive } from "../../src/services/OperationRunner.ts"
import { tempDataDir } from "../support/server.ts"
import { databaseUrlFor } from "../support/postgres.ts"
import { SandboxId } from "../../src/domain/Ids.ts"

const config = (dataDir: string, jobLeaseSeconds?: number, jobMaxAttempts?: number) =>
  Layer.succeed(AppConfig, { port: 0, host: "127.0.0.1", dataDir, databaseUrl: databaseUrlFor(dataDir), publicUrl: "http://127.0.0.1", publicUrlSet: true, logLevel: "info", maxBodyBytes: 1 << 20, rawWriteMaxBytes: 1 << 30, endpoints: { port: 0, host: "127.0.0.1", publicOrigin: undefined, base: undefined }, jobLeaseSeconds, jobMaxAttempts })

const testLayer = (dataDir = tempDataDir("runner"), jobLeaseSeconds?: number, jobMaxAttempts?: number) =>
  OperationRunnerLive.pipe(Layer.provideMerge(DatabaseLive), Layer.provide(config(dataDir, jobLeaseSeconds, jobMaxAttempts)))

/** The runner's rounds of claims, counted. */
const countingClaims = (dataDir = tempDataDir("runner")) => {
  let claims = 0
  const counting = Layer.effect(JobsRepo, Effect.map(JobsRepo, (repo) => JobsRepo.make({ ...repo, claim: (lease) => Effect.suspend(() => (claims++, repo.claim(lease))) })))
  const layer = OperationRunnerLive.pipe(Layer.provide(counting), Layer.provideMerge(DatabaseLive), Layer.provide(config(dataDir)))
  return { layer, claims: () => claims, pg: databaseUrlFor(dataDir) !== undefined }
}

/** A job type for these tests: any payload. */
const jobType = (type: string) => defineJob(type, Schema.Unknown)

const jobState = (dedupeKey: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ state: string; attempts: number; last_error: string | null }>`SELECT state, attempts, last_error FROM jobs WHERE dedupe_key = ${dedupeKey}`
    return rows[0]
  })

const waitFor = <A>(check: Effect.Effect<A, unknown, SqlClient.SqlClient>, ok: (a: A) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      const value = yield* check
      if (ok(value)) return value
      yield* Effect.sleep("25 millis")
    }
    return yield* Effect.die(new Error("condition not reached"))
  })

describe("OperationRunner", () => {
  it.live("a job enqueued under the runner's lease runs with no claim; without room or a start there is no lease", () =>
    Effect.gen(function*() {
      const runner = yield* OperationRunner
      expect(yield* runner.lease).toEqual(Option.none()) // not started
      const ran = yield* Deferred.make<string>()
      yield* runner.register(jobType("test.leased"), { run: (job) => Effect.asVoid(Deferred.succeed(ran, job.dedupeKey)), giveUp: () => Effect.void })
      yield* runner.start
      yield* Effect.sleep("50 millis") // the loop's first claim is behind it
      const lease = Option.getOrThrow(yield* runner.lease)
      // Taken a moment before the enqueue, as a request takes it before its transaction.
      yield* Effect.sleep("5 millis")
      const claimed = yield* enqueueJob(jobType("test.leased"), { dedupeKey: "leased:a", lockKey: "lock:leased", payload: null }, lease)
      expect(claimed?.row.dedupe_key).toBe("leased:a")
      expect((yield* jobState("leased:a"))?.state).toBe("leased")
      yield* runner.runClaimed(claimed!)
      expect(yield* Deferred.await(ran).pipe(Effect.timeout("5 seconds"))).toBe("leased:a")
      expect((yield* waitFor(jobState("leased:a"), (row) => row?.state === "succeeded"))?.attempts).toBe(1)
      // Where a claim would not take it (its lock key has an unfinished job), it is enqueued as usual.
      yield* enqueueJob(jobType("test.leased"), { dedupeKey: "leased:held", lockKey: "lock:x", payload: null, availableAt: new Date(Date.now() + 60_000).toISOString() })
      expect(yield* enqueueJob(jobType("test.leased"), { dedupeKey: "leased:b", lockKey: "lock:x", payload: null }, lease)).toBeUndefined()
      expect((yield* jobState("leased:b"))?.state).toBe("pending")
    }).pipe(Effect.provide(testLayer())))

  it.live("runNow leases and starts a due job at once; a held lock or a future due time leaves it to the loop", () =>
    Effect.gen(function*() {
      const runner = yield* OperationRunner
      const release = yield* Deferred.make<void>()
      const ran = yield* Ref.make<Array<string>>([])
      yield* runner.register(jobType("test.now"), {
        run: (job) => Effect.zipRight(Ref.update(ran, (r) => [...r, job.dedupeKey]), Deferred.await(release)),
        giveUp: () => Effect.void
      })
      yield* runner.start
      yield* Effect.sleep("50 millis") // the loop's first claim is behind it: only a wake or its poll would see new jobs
      yield* enqueueJob(jobType("test.now"), { dedupeKey: "now:a", lockKey: "lock:1", payload: null })
      yield* runner.runNow("now:a")
      expect((yield* jobState("now:a"))?.state).toBe("leased") // no sleep: claimed by runNow itself
      yield* enqueueJob(jobType("test.now"), { dedupeKey: "now:b", lockKey: "lock:1", payload: null })
      yield* runner.runNow("now:b")
      expect((yield* jobState("now:b"))?.state).toBe("pending") // its lock is held by now:a
      yield* enqueueJob(jobType("test.now"), { dedupeKey: "now:later", payload: null, availableAt: new Date(Date.now() + 60_000).toISOString() })
      yield* runner.runNow("now:later")
      expect((yield* jobState("now:later"))?.state).toBe("pending")
      yield* runner.runNow("now:missing") // nothing to claim: a no-op
      yield* Deferred.succeed(release, undefined)
      yield* waitFor(jobState("now:b"), (row) => row?.state === "succeeded")
      expect((yield* jobState("now:a"))?.state).toBe("succeeded")
      expect(yield* Ref.get(ran)).toEqual(["now:a", "now:b"])
      expect((yield* jobState("now:later"))?.state).toBe("pending")
    }).pipe(Effect.provide(testLayer())))


  it.live("runs an enqueued job once and marks it succeeded", () =>
    Effect.gen(function*() {
      const runner = yield* OperationRunner
      const runs = yield* Ref.make(0)
      yield* runner.register(jobType("test.once"), { run: () => Ref.update(runs, (n) => n + 1), giveUp: () => Effect.void })
      yield* runner.start
      yield* enqueueJob(jobType("test.once"), { dedupeKey: "once:1", payload: { a: 1 } })
      yield* enqueueJob(jobType("test.once"), { dedupeKey: "once:1", payload: { a: 2 } }) // deduplicated
      yield* runner.wake
      yield* waitFor(jobState("once:1"), (row) => row?.state === "succeeded")
      expect(yield* Ref.get(runs)).toBe(1)
    }).pipe(Effect.provide(testLayer())))

  it.live("retries a retryable failure, then gives up on a non-retryable one", () =>
    Effect.gen(function*() {
      const runner = yield* OperationRunner
      const attempts = yield* Ref.make<Array<number>>([])
      const gaveUp = yield* Ref.make<string | null>(null)
      yield* runner.register(jobType("test.flaky"), {
        run: (job) =>
          Effect.gen(function*() {
            yield* Ref.update(attempts, (a) => [...a, job.attempt])
            return yield* new JobError({ error: { code: job.attempt < 2 ? "transient" : "fatal", message: "boom", retryable: false }, retryable: job.attempt < 2 })
          }),
        giveUp: (_job, error) => Ref.set(gaveUp, error.code)
      })
      yield* runner.start
      yield* enqueueJob(jobType("test.flaky"), { dedupeKey: "flaky:1", payload: null })
      yield* runner.wake
      const row = yield* waitFor(jobState("flaky:1"), (r) => r?.state === "failed")
      expect(yield* Ref.get(attempts)).toEqual([1, 2])
      expect(yield* Ref.get(gaveUp)).toBe("fatal")
      expect(row?.last_error).toContain("fatal")
    }).pipe(Effect.provide(testLayer())))

  it.live("a due time delays a job; rescheduling runs it again; lock keys never overlap", () =>
    Effect.gen(function*() {
      const runner = yield* OperationRunner
      const log = yield* Ref.make<Array<string>>([])
      const active = yield* Ref.make(0)
      const maxActive = yield* Ref.make(0)
      yield* runner.register(jobType("test.locked"), {
        run: (job) =>
          Effect.gen(function*() {
            const n = yield* Ref.updateAndGet(active, (x) => x + 1)
            yield* Ref.update(maxActive, (m) => Math.max(m, n))
            yield* Effect.sleep("50 millis")
            yield* Ref.update(active, (x) => x - 1)
            yield* Ref.update(log, (l) => [...l, job.dedupeKey])
          }),
        giveUp: () => Effect.void
      })
      let again = true
      yield* runner.register(jobType("test.again"), {
        run: () => Effect.sync(() => (again ? ((again = false), { rescheduleAt: new Date(Date.now() + 100).toISOString() }) : undefined)),
        giveUp: () => Effect.void
      })
      yield* runner.start
      const later = new Date(Date.now() + 400).toISOString()
      yield* enqueueJob(jobType("test.locked"), { dedupeKey: "l:later", lockKey: "sandbox:x", payload: null, availableAt: later })
      for (const k of ["l:1", "l:2", "l:3"]) yield* enqueueJob(jobType("test.locked"), { dedupeKey: k, lockKey: "sandbox:x", payload: null })
      yield* enqueueJob(jobType("test.again"), { dedupeKey: "again:1", payload: null })
      yield* runner.wake
      yield* waitFor(jobState("l:later"), (r) => r?.state === "succeeded")
      const order = yield* Ref.get(log)
      expect(order[order.length - 1]).toBe("l:later")
      expect(yield* Ref.get(maxActive)).toBe(1)
      const againRow = yield* waitFor(jobState("again:1"), (r) => r?.state === "succeeded")
      expect(againRow?.attempts).toBe(1) // a reschedule is not a failed attempt
    }).pipe(Effect.provide(testLayer())))

  it.live("ordered jobs of one sandbox start in the order they were accepted (a retry keeps its place); leaving the order lets the next start", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const now = new Date().toISOString()
      yield* sql`INSERT INTO organizations (id, name, slug, created_at, updated_at) VALUES ('org1', 'Org', 'org', ${now}, ${now})`
      yield* sql`INSERT INTO projects (id, organization_id, name, slug, created_at, updated_at) VALUES ('prj_1', 'org1', 'P', 'p', ${now}, ${now})`
      for (const id of ["sbx_a", "sbx_b"]) {
        yield* sql`INSERT INTO sandboxes (id, project_id, organization_id, state, requested, billing_mode, created_at, updated_at, metadata)
          VALUES (${id}, 'prj_1', 'org1', 'ready', '{}', 'managed', ${now}, ${now}, '{}')`
      }
      const runner = yield* OperationRunner
      const started = yield* Ref.make<Array<string>>([])
      const holdLong = yield* Deferred.make<void>()
      let failedOnce = false
      yield* runner.register(jobType("test.ordered"), {
        run: (job) =>
          Effect.gen(function*() {
            yield* Ref.update(started, (s) => [...s, job.dedupeKey])
            if (job.dedupeKey === "a:2" && !failedOnce) {
              failedOnce = true
              return yield* new JobError({ error: { code: "transient", message: "again", retryable: true }, retryable: true })
            }
            if (job.dedupeKey === "a:long") {
              yield* job.leaveOrder // started: what comes after it may start while it runs
              yield* Deferred.await(holdLong)
            }
            yield* Effect.sleep("5 millis")
          }),
        giveUp: () => Effect.void
      })
      const keys = ["a:1", "a:2", "a:3", "a:long", "a:4", "a:5"]
      // Accepted together, in one transaction, before the runner looks: their timestamps tie.
      yield* Effect.forEach(keys, (k) => enqueueJob(jobType("test.ordered"), { dedupeKey: k, payload: null, sandboxId: SandboxId.make("sbx_a"), ordered: true }))
        .pipe(sql.withTransaction)
      yield* enqueueJob(jobType("test.ordered"), { dedupeKey: "b:1", payload: null, sandboxId: SandboxId.make("sbx_b"), ordered: true })
      yield* runner.start
      yield* waitFor(jobState("a:5"), (r) => r?.state === "succeeded")
      const order = (yield* Ref.get(started)).filter((k) => k.startsWith("a:"))
      // a:2 failed once and was retried before a:3 started; a:4 and a:5 ran while a:long was still running.
      expect(order).toEqual(["a:1", "a:2", "a:2", "a:3", "a:long", "a:4", "a:5"])
      expect((yield* jobState("a:long"))?.state).toBe("leased")
      expect((yield* jobState("b:1"))?.state).toBe("succeeded") // another sandbox's order is its own
      yield* Deferred.succeed(holdLong, undefined)
      yield* waitFor(jobState("a:long"), (r) => r?.state === "succeeded")
    }).pipe(Effect.provide(testLayer())))

  it.live("decodes a payload by its job type's Schema: the handler gets the decoded value; one that does not decode fails the job unrun", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const runner = yield* OperationRunner
      const Typed = defineJob("test.typed", Schema.Struct({ n: Schema.NumberFromString }))
      const seen = yield* Ref.make<Array<unknown>>([])
      const gaveUp = yield* Ref.make(0)
      yield* runner.register(Typed, { run: (job) => Ref.update(seen, (s) => [...s, job.payload.n]), giveUp: () => Ref.update(gaveUp, (n) => n + 1) })
      yield* runner.start
      yield* enqueueJob(Typed, { dedupeKey: "typed:good", payload: { n: 42 } })
      // Stored encoded: the Schema's encoded side, a string.
      expect((yield* sql<{ payload: string }>`SELECT payload FROM jobs WHERE dedupe_key = 'typed:good'`)[0]?.payload).toBe('{"n":"42"}')
      yield* enqueueJob(Typed, { dedupeKey: "typed:bad", payload: { n: 7 } })
      yield* sql`UPDATE jobs SET payload = '{"n": "not a number"}' WHERE dedupe_key = 'typed:bad'`
      yield* enqueueJob(Typed, { dedupeKey: "typed:not-json", payload: { n: 8 } })
      yield* sql`UPDATE jobs SET payload = '{"n":' WHERE dedupe_key = 'typed:not-json'`
      yield* runner.wake
      yield* waitFor(jobState("typed:good"), (row) => row?.state === "succeeded")
      const bad = yield* waitFor(jobState("typed:bad"), (row) => row?.state === "failed")
      expect(bad?.last_error).toMatch(/^invalid_job_payload: /)
      expect(bad?.attempts).toBe(1) // never retried
      const notJson = yield* waitFor(jobState("typed:not-json"), (row) => row?.state === "failed")
      expect(notJson?.attempts).toBe(1)
      expect(yield* Ref.get(seen)).toEqual([42])
      expect(yield* Ref.get(gaveUp)).toBe(0)
    }).pipe(Effect.provide(testLayer())))

  it.live("an idle runner claims nothing while nothing is committed, and finds a job another process commits within a poll", () => {
    const counted = countingClaims()
    return Effect.gen(function*() {
      const runner = yield* OperationRunner
      const ran = yield* Deferred.make<void>()
      yield* runner.register(jobType("test.elsewhere"), { run: () => Effect.asVoid(Deferred.succeed(ran, undefined)), giveUp: () => Effect.void })
      yield* runner.start
      yield* Effect.sleep("300 millis") // the first rounds are behind it
      const before = counted.claims()
      yield* Effect.sleep("2200 millis")
      // SQLite: a commit would show (PRAGMA data_version), and there was none. PostgreSQL: it polls every second.
      if (counted.pg) expect(counted.claims() - before).toBeGreaterThan(0)
      else expect(counted.claims() - before).toBe(0)
      // Committed with no wake, as the CLI or another replica would: the runner's next look finds it.
      yield* enqueueJob(jobType("test.elsewhere"), { dedupeKey: "elsewhere:1", payload: null })
      yield* Deferred.await(ran).pipe(Effect.timeout("3 seconds"))
      yield* waitFor(jobState("elsewhere:1"), (r) => r?.state === "succeeded")
    }).pipe(Effect.provide(counted.layer))
  })

  it.live("reclaims at once a job leased by a dead process of this host", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* enqueueJob(jobType("test.orphan"), { dedupeKey: "orphan:1", payload: null })
      const future = new Date(Date.now() + 3_600_000).toISOString()
      // pid 2^22 + 1 is above the kernel's pid_max, so it cannot be alive.
      yield* sql`UPDATE jobs SET state = 'leased', lease_owner = ${`${os.hostname()}:4194305:dead`}, lease_token = 't', lease_expires_at = ${future}, attempts = 1`
      const runner = yield* OperationRunner
      const ran = yield* Ref.make(false)
      yield* runner.register(jobType("test.orphan"), { run: () => Ref.set(ran, true), giveUp: () => Effect.void })
      yield* runner.start
      yield* waitFor(jobState("orphan:1"), (r) => r?.state === "succeeded")
      expect(yield* Ref.get(ran)).toBe(true)
    }).pipe(Effect.provide(testLayer())))

  it.live("a type with its own lane runs at most its concurrency and never takes the places of other jobs", () =>
    Effect.gen(function*() {
      const runner = yield* OperationRunner
      const release = yield* Deferred.make<void>()
      const active = yield* Ref.make(0)
      const maxActive = yield* Ref.make(0)
      yield* runner.register(jobType("test.laned"), {
        run: () =>
          Effect.gen(function*() {
            const n = yield* Ref.updateAndGet(active, (x) => x + 1)
            yield* Ref.update(maxActive, (m) => Math.max(m, n))
            yield* Deferred.await(release) // a receiver that does not answer
            yield* Ref.update(active, (x) => x - 1)
          }),
        giveUp: () => Effect.void
      }, { concurrency: 2 })
      yield* runner.register(jobType("test.plain"), { run: () => Effect.void, giveUp: () => Effect.void })
      yield* runner.start
      // Far more hanging lane jobs than the runner has places (64), each with its own lock key, queued first.
      for (let i = 0; i < 80; i++) yield* enqueueJob(jobType("test.laned"), { dedupeKey: `laned:${i}`, lockKey: `webhook:${i}`, payload: null })
      yield* enqueueJob(jobType("test.plain"), { dedupeKey: "plain:1", payload: null })
      yield* runner.wake
      yield* waitFor(jobState("plain:1"), (r) => r?.state === "succeeded")
      yield* waitFor(Ref.get(active), (n) => n === 2)
      yield* Effect.sleep("100 millis") // more loop turns: still two
      expect(yield* Ref.get(maxActive)).toBe(2)
      yield* Deferred.succeed(release, undefined)
      yield* waitFor(jobState("laned:79"), (r) => r?.state === "succeeded")
      expect(yield* Ref.get(maxActive)).toBe(2)
    }).pipe(Effect.provide(testLayer())))

  it.live("JOB_LEASE_SECONDS sets the lease of a claim (and how soon a crashed process's jobs are taken over)", () =>
    Effect.gen(function*() {
      const runner = yield* OperationRunner
      const release = yield* Deferred.make<void>()
      yield* runner.register(jobType("test.lease"), { run: () => Deferred.await(release), giveUp: () => Effect.void })
      yield* runner.start
      yield* enqueueJob(jobType("test.lease"), { dedupeKey: "lease:1", payload: null })
      yield* runner.runNow("lease:1")
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ updated_at: string; lease_expires_at: string }>`SELECT updated_at, lease_expires_at FROM jobs WHERE dedupe_key = 'lease:1'`
      expect(Date.parse(row!.lease_expires_at) - Date.parse(row!.updated_at)).toBe(4000)
      yield* Deferred.succeed(release, undefined)
      yield* waitFor(jobState("lease:1"), (r) => r?.state === "succeeded")
    }).pipe(Effect.provide(testLayer(tempDataDir("runner-lease"), 4))))

  it.effect("JOB_LEASE_SECONDS defaults to 15 and refuses values outside 3..3600 with a message naming it", () =>
    Effect.gen(function*() {
      const load = (value?: string) =>
        Effect.either(appConfig.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([
          ["DATA_DIR", tempDataDir("lease-config")],
          ...(value === undefined ? [] : [["JOB_LEASE_SECONDS", value] as [string, string]])
        ])))))
      const fine = yield* load()
      expect(fine._tag === "Right" && fine.right.jobLeaseSeconds).toBe(15)
      const short = yield* load("5")
      expect(short._tag === "Right" && short.right.jobLeaseSeconds).toBe(5)
      for (const bad of ["2", "3601", "soon"]) {
        const refused = yield* load(bad)
        expect(refused._tag).toBe("Left")
        if (refused._tag === "Left") expect(String(refused.left)).toContain("JOB_LEASE_SECONDS")
      }
    }))

  it.live("JOB_MAX_ATTEMPTS bounds the runs of a job whose failures are all retryable", () =>
    Effect.gen(function*() {
      const runner = yield* OperationRunner
      const attempts = yield* Ref.make<Array<number>>([])
      yield* runner.register(jobType("test.unanswered"), {
        run: (job) =>
          Effect.gen(function*() {
            yield* Ref.update(attempts, (a) => [...a, job.attempt])
            return yield* new JobError({ error: { code: "provider_unavailable", message: "no answer", retryable: true }, retryable: true })
          }),
        giveUp: () => Effect.void
      })
      yield* runner.start
      yield* enqueueJob(jobType("test.unanswered"), { dedupeKey: "unanswered:1", payload: null })
      yield* runner.wake
      const row = yield* waitFor(jobState("unanswered:1"), (r) => r?.state === "failed")
      expect(yield* Ref.get(attempts)).toEqual([1, 2, 3])
      expect(row?.attempts).toBe(3)
    }).pipe(Effect.provide(testLayer(tempDataDir("runner-attempts"), undefined, 3))))

  it.effect("JOB_MAX_ATTEMPTS defaults to 8 and refuses values outside 1..50 with a message naming it", () =>
    Effect.gen(function*() {
      const load = (value?: string) =>
        Effect.either(appConfig.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([
          ["DATA_DIR", tempDataDir("attempts-config")],
          ...(value === undefined ? [] : [["JOB_MAX_ATTEMPTS", value] as [string, string]])
        ])))))
      const fine = yield* load()
      expect(fine._tag === "Right" && fine.right.jobMaxAttempts).toBe(8)
      for (const bad of ["0", "51", "many"]) {
        const refused = yield* load(bad)
        expect(refused._tag).toBe("Left")
        if (refused._tag === "Left") expect(String(refused.left)).toContain("JOB_MAX_ATTEMPTS")
      }
    }))
})
