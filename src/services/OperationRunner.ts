/**
 * Durable jobs (DESIGN.md §3). Every accepted mutation writes its job row in the same transaction as the
 * resource; the runner claims due jobs with a lease and a fresh token (so a crash or a second process cannot
 * double-run them), runs each as a supervised fiber in its own scope, renews the lease while it runs, and
 * completes with a compare-and-set on the token. Timers (runtime/idle timeouts, lease expiry, process deadlines)
 * are jobs with a due time. On start, jobs leased by a process of this host that is gone are reclaimed at once;
 * others when their lease expires.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Context, Data, Duration, Effect, Exit, Fiber, FiberSet, Layer, Option, Queue } from "effect"
import * as os from "node:os"
import type { ErrorObject } from "../domain/Errors.ts"
import { newUuid } from "../domain/Ids.ts"
import { isoAfter, nowIso } from "../domain/Time.ts"

export const LEASE_SECONDS = 15
const RENEW_EVERY = Duration.seconds(5)
const MAX_POLL_MS = 1000
const MAX_CONCURRENT = 64
export const MAX_ATTEMPTS = 8

/** A job failure: retried with backoff while `retryable` and attempts remain, else given up. */
export class JobError extends Data.TaggedError("JobError")<{
  readonly error: ErrorObject
  readonly retryable: boolean
}> {}

export interface Job {
  readonly id: string
  readonly type: string
  readonly dedupeKey: string
  readonly payload: unknown
  /** 1 on the first run. */
  readonly attempt: number
}

/** What a handler may ask for: nothing (done), or to run again at a later time (same job row). */
export type JobOutcome = void | { readonly rescheduleAt: string }

export interface JobHandler {
  readonly run: (job: Job) => Effect.Effect<JobOutcome, JobError>
  /** Called once when the job fails for good (non-retryable, or out of attempts): record the terminal failure. */
  readonly giveUp: (job: Job, error: ErrorObject) => Effect.Effect<void>
}

export interface NewJob {
  readonly type: string
  /** Unique per logical job; enqueueing an existing key updates it (see `replace`). */
  readonly dedupeKey: string
  /** Jobs with the same lock key never run at the same time (lifecycle jobs use `sandbox:<id>`). */
  readonly lockKey?: string | undefined
  readonly payload: unknown
  /** Default: now. */
  readonly availableAt?: string | undefined
  /**
   * When a job with this key exists and is not running: `true` re-arms it (new payload and due time, pending);
   * `false` (default) leaves it alone.
   */
  readonly replace?: boolean | undefined
}

/** Writes a job row; call it inside the transaction that writes the resource. */
export const enqueueJob = (job: NewJob) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    const availableAt = job.availableAt ?? now
    const payload = JSON.stringify(job.payload ?? null)
    if (job.replace === true) {
      yield* sql`INSERT INTO jobs (id, type, dedupe_key, lock_key, payload, state, available_at, created_at, updated_at)
        VALUES (${newUuid()}, ${job.type}, ${job.dedupeKey}, ${job.lockKey ?? null}, ${payload}, 'pending', ${availableAt}, ${now}, ${now})
        ON CONFLICT (dedupe_key) DO UPDATE SET payload = excluded.payload, available_at = excluded.available_at,
          state = 'pending', attempts = 0, last_error = NULL, updated_at = excluded.updated_at
        WHERE jobs.state <> 'leased'`
    } else {
      yield* sql`INSERT INTO jobs (id, type, dedupe_key, lock_key, payload, state, available_at, created_at, updated_at)
        VALUES (${newUuid()}, ${job.type}, ${job.dedupeKey}, ${job.lockKey ?? null}, ${payload}, 'pending', ${availableAt}, ${now}, ${now})
        ON CONFLICT (dedupe_key) DO NOTHING`
    }
  }).pipe(Effect.orDie)

/** Cancels a pending job (e.g. a timeout that no longer applies). A running one is left to finish. */
export const cancelJob = (dedupeKey: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    yield* sql`UPDATE jobs SET state = 'succeeded', updated_at = ${now}, last_error = 'cancelled'
      WHERE dedupe_key = ${dedupeKey} AND state = 'pending'`
  }).pipe(Effect.orDie)

/** Exponential backoff with jitter: min(200 ms × 2^(n−1), 30 s) × [0.5, 1.5). */
export const backoffMs = (attempt: number) => Math.min(200 * 2 ** (attempt - 1), 30_000) * (0.5 + Math.random())

export interface OperationRunnerShape {
  readonly register: (type: string, handler: JobHandler) => Effect.Effect<void>
  /** Starts claiming jobs (after every handler is registered). */
  readonly start: Effect.Effect<void>
  /** Claim due jobs now rather than at the next poll; call after committing a transaction that enqueued one. */
  readonly wake: Effect.Effect<void>
  /**
   * Claims the job with this dedupe key and starts it at once, skipping the loop's poll and claim query (for
   * jobs a client waits on, like a process start). If it cannot be claimed now (not due, its lock is held, the
   * runner is full or not started) the loop is woken instead and takes it as usual.
   */
  readonly runNow: (dedupeKey: string) => Effect.Effect<void>
  /** This process's lease owner id. */
  readonly owner: string
  /**
   * Runs `listener` after each recovered job (one whose lease a dead or stalled process held) ends: the jail
   * reaper uses it to clean up at once after a crash rather than at its next period.
   */
  readonly onRecovered: (listener: Effect.Effect<void>) => Effect.Effect<void>
}

export class OperationRunner extends Context.Tag("app/OperationRunner")<OperationRunner, OperationRunnerShape>() {}

interface JobRow {
  id: string
  type: string
  dedupe_key: string
  lock_key: string | null
  payload: string
  attempts: number
  lease_owner: string | null
}

const ownerAlive = (owner: string): boolean => {
  const [host, pid] = owner.split(":")
  if (host !== os.hostname() || pid === undefined) return true // another host: trust its lease
  try {
    process.kill(Number(pid), 0)
    return true
  } catch {
    return false
  }
}

export const OperationRunnerLive = Layer.scoped(
  OperationRunner,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const owner = `${os.hostname()}:${process.pid}:${newUuid().slice(0, 8)}`
    const handlers = new Map<string, JobHandler>()
    const recoveredListeners: Array<Effect.Effect<void>> = []
    const running = new Set<string>()
    const fibers = yield* FiberSet.make<void, never>()
    const wakeQueue = yield* Queue.sliding<void>(1)
    const started = { value: false }

    const finish = (row: JobRow, token: string, state: "succeeded" | "failed", lastError: string | null) =>
      Effect.gen(function*() {
        const now = yield* nowIso
        yield* sql`UPDATE jobs SET state = ${state}, last_error = ${lastError}, lease_owner = NULL, lease_token = NULL,
          lease_expires_at = NULL, updated_at = ${now} WHERE id = ${row.id} AND lease_token = ${token}`
      })

    const requeue = (row: JobRow, token: string, availableAt: string, lastError: string | null, resetAttempts: boolean) =>
      Effect.gen(function*() {
        const now = yield* nowIso
        yield* sql`UPDATE jobs SET state = 'pending', available_at = ${availableAt}, last_error = ${lastError},
          attempts = CASE WHEN ${resetAttempts ? 1 : 0} = 1 THEN 0 ELSE attempts END,
          lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = ${now}
          WHERE id = ${row.id} AND lease_token = ${token}`
      })

    /** Keeps the lease alive; if another process took the job over, the run is interrupted. */
    const renewLease = (row: JobRow, token: string, runFiber: Fiber.RuntimeFiber<unknown, unknown>) =>
      Effect.gen(function*() {
        const now = yield* nowIso
        const renewed = yield* sql`UPDATE jobs SET lease_expires_at = ${isoAfter(now, LEASE_SECONDS)}
          WHERE id = ${row.id} AND lease_token = ${token} RETURNING id`
        if (renewed.length === 0) {
          yield* Effect.logWarning("lost the lease of a job; stopping it", { job: row.id, type: row.type })
          yield* Fiber.interrupt(runFiber)
        }
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("lease renewal failed", cause)),
        // The claim just set the lease: the first renewal is due one period later.
        Effect.delay(RENEW_EVERY),
        Effect.forever
      )

    const runOne = (row: JobRow, token: string) =>
      Effect.gen(function*() {
        const handler = handlers.get(row.type)
        const job: Job = { id: row.id, type: row.type, dedupeKey: row.dedupe_key, payload: JSON.parse(row.payload), attempt: row.attempts }
        if (handler === undefined) {
          yield* Effect.logError("no handler for job type", { type: row.type })
          yield* finish(row, token, "failed", `no handler for ${row.type}`)
          return
        }
        const runFiber = yield* Effect.fork(handler.run(job))
        const renewFiber = yield* Effect.fork(renewLease(row, token, runFiber))
        const exit = yield* Fiber.await(runFiber)
        yield* Fiber.interrupt(renewFiber)
        if (Exit.isSuccess(exit)) {
          const outcome = exit.value
          if (outcome !== undefined) yield* requeue(row, token, outcome.rescheduleAt, null, true)
          else yield* finish(row, token, "succeeded", null)
          return
        }
        if (Cause.isInterruptedOnly(exit.cause)) return // lost lease or shutdown: the lease expires, someone reclaims
        const failure = Cause.failureOption(exit.cause)
        const error: ErrorObject = Option.isSome(failure)
          ? failure.value.error
          : { code: "internal_error", message: "The job failed unexpectedly", retryable: true }
        const retryable = Option.isSome(failure) ? failure.value.retryable : true
        if (Option.isNone(failure)) yield* Effect.logError("job crashed", { job: row.id, type: row.type }, exit.cause)
        if (retryable && row.attempts < MAX_ATTEMPTS) {
          const now = yield* nowIso
          const at = new Date(Date.parse(now) + backoffMs(row.attempts)).toISOString()
          yield* requeue(row, token, at, `${error.code}: ${error.message}`, false)
        } else {
          yield* handler.giveUp(job, error)
          yield* finish(row, token, "failed", `${error.code}: ${error.message}`)
        }
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logError("job bookkeeping failed", { job: row.id }, cause)),
        Effect.ensuring(Effect.sync(() => running.delete(row.id))),
        // Claimed from another lease holder: this job was recovered after a crash (or a stall).
        Effect.ensuring(row.lease_owner !== null && row.lease_owner !== owner ? Effect.forEach(recoveredListeners, Effect.ignore, { discard: true }) : Effect.void)
      )

    /** Claims up to `limit` due jobs, at most one per lock key, skipping locks held by live leases. */
    const claim = (limit: number) =>
      Effect.gen(function*() {
        const now = yield* nowIso
        const candidates = yield* sql<JobRow>`
          SELECT id, type, dedupe_key, lock_key, payload, attempts, lease_owner FROM jobs
          WHERE available_at <= ${now} AND (state = 'pending' OR (state = 'leased' AND lease_expires_at <= ${now}))
            AND (lock_key IS NULL OR lock_key NOT IN (
              SELECT lock_key FROM jobs WHERE state = 'leased' AND lease_expires_at > ${now} AND lock_key IS NOT NULL))
          ORDER BY available_at, created_at LIMIT ${limit * 4}`
        const locks = new Set<string>()
        const claimed: Array<[JobRow, string]> = []
        for (const row of candidates) {
          if (claimed.length >= limit || running.has(row.id)) continue
          if (row.lock_key !== null) {
            if (locks.has(row.lock_key)) continue
            locks.add(row.lock_key)
          }
          const token = newUuid()
          const updated = yield* sql`UPDATE jobs SET state = 'leased', lease_owner = ${owner}, lease_token = ${token},
            lease_expires_at = ${isoAfter(now, LEASE_SECONDS)}, attempts = attempts + 1, updated_at = ${now}
            WHERE id = ${row.id} AND (state = 'pending' OR (state = 'leased' AND lease_expires_at <= ${now})) RETURNING id`
          if (updated.length > 0) claimed.push([{ ...row, attempts: row.attempts + 1 }, token])
        }
        return claimed
      }).pipe(sql.withTransaction)

    const claimByKey = (dedupeKey: string) =>
      Effect.gen(function*() {
        const now = yield* nowIso
        const token = newUuid()
        const rows = yield* sql<JobRow>`UPDATE jobs SET state = 'leased', lease_owner = ${owner}, lease_token = ${token},
            lease_expires_at = ${isoAfter(now, LEASE_SECONDS)}, attempts = attempts + 1, updated_at = ${now}
          WHERE dedupe_key = ${dedupeKey} AND state = 'pending' AND available_at <= ${now}
            AND (lock_key IS NULL OR lock_key NOT IN (
              SELECT lock_key FROM jobs WHERE state = 'leased' AND lease_expires_at > ${now} AND lock_key IS NOT NULL))
          RETURNING id, type, dedupe_key, lock_key, payload, attempts, lease_owner`
        return rows[0] === undefined ? undefined : ([rows[0], token] as const)
      })

    /** Jobs leased by a dead process of this host are claimable at once. */
    const reclaimOrphans = Effect.gen(function*() {
      const now = yield* nowIso
      const leased = yield* sql<{ id: string; lease_owner: string | null }>`SELECT id, lease_owner FROM jobs WHERE state = 'leased'`
      for (const row of leased) {
        if (row.lease_owner !== null && row.lease_owner !== owner && !ownerAlive(row.lease_owner)) {
          yield* sql`UPDATE jobs SET lease_expires_at = ${now} WHERE id = ${row.id} AND state = 'leased'`
        }
      }
    })

    const nextDueInMs = Effect.gen(function*() {
      const rows = yield* sql<{ at: string | null }>`
        SELECT MIN(CASE WHEN state = 'pending' THEN available_at ELSE lease_expires_at END) AS at
        FROM jobs WHERE state IN ('pending', 'leased')`
      const at = rows[0]?.at
      if (at === null || at === undefined) return MAX_POLL_MS
      return Math.max(0, Math.min(MAX_POLL_MS, Date.parse(at) - Date.now()))
    })

    const loop = Effect.gen(function*() {
      yield* reclaimOrphans
      while (true) {
        const free = MAX_CONCURRENT - running.size
        if (free > 0) {
          const claimed = yield* claim(free)
          for (const [row, token] of claimed) {
            running.add(row.id)
            yield* FiberSet.run(fibers, runOne(row, token))
          }
        }
        const waitMs = yield* nextDueInMs
        yield* Queue.take(wakeQueue).pipe(Effect.timeout(Duration.millis(Math.max(waitMs, 5))), Effect.ignore)
        yield* Queue.takeAll(wakeQueue)
      }
    }).pipe(
      Effect.catchAllCause((cause) => Effect.zipRight(Effect.logError("job loop failed; restarting", cause), Effect.sleep("1 second"))),
      Effect.forever
    )

    const wake = Effect.asVoid(Queue.offer(wakeQueue, undefined))

    return {
      owner,
      onRecovered: (listener) => Effect.sync(() => void recoveredListeners.push(listener)),
      register: (type, handler) => Effect.sync(() => void handlers.set(type, handler)),
      start: Effect.suspend(() => {
        if (started.value) return Effect.void
        started.value = true
        return Effect.asVoid(FiberSet.run(fibers, loop))
      }),
      wake,
      runNow: (dedupeKey) =>
        Effect.gen(function*() {
          if (!started.value || running.size >= MAX_CONCURRENT) return yield* wake
          const claimed = yield* claimByKey(dedupeKey)
          if (claimed === undefined) return yield* wake
          const [row, token] = claimed
          running.add(row.id)
          yield* FiberSet.run(fibers, runOne(row, token))
        }).pipe(Effect.catchAllCause((cause) => Effect.zipRight(Effect.logWarning("could not start a job at once", cause), wake)))
    }
  })
)
