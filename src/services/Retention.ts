/**
 * Retention: what grows with use and is only needed for a while is removed by a durable job that runs at start
 * and then every hour (the reference's worker does the same for process events).
 * - Output events of processes that ended more than 7 days ago (reference §8); a process that has not ended
 *   keeps all of its events. The process itself stays readable; its event stream is then empty.
 * - Runtime operations (file reads, writes, lists, deletes) that ended more than 7 days ago: a read's result holds
 *   the file's bytes, so these are what makes the database grow. Reading one afterwards is a 404.
 * - Idempotency records past their `expires_at` (24 h).
 * - Jobs that finished (succeeded or failed) more than 7 days ago.
 * Deletes go in batches of 1,000 rows, each its own short transaction, so the sweep never holds the database.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { isoAfter, nowIso } from "../domain/Time.ts"
import { enqueueJob, type JobHandler } from "./OperationRunner.ts"

export const RETENTION_JOB = "maintenance.retention"
const EVERY_SECONDS = 3600
const KEEP_SECONDS = 7 * 24 * 3600
const BATCH = 1000

export const scheduleRetention = enqueueJob({ type: RETENTION_JOB, dedupeKey: "maintenance:retention", payload: null, replace: true })

export const makeRetentionHandler = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  /** Runs a DELETE … LIMIT-style statement until it removes nothing; returns how many rows went. */
  const inBatches = (batch: Effect.Effect<ReadonlyArray<unknown>, unknown>) =>
    Effect.gen(function*() {
      let total = 0
      while (true) {
        const removed = (yield* batch.pipe(Effect.orDie)).length
        total += removed
        if (removed < BATCH) return total
        yield* Effect.yieldNow()
      }
    })

  const sweep = Effect.gen(function*() {
    const now = yield* nowIso
    const before = isoAfter(now, -KEEP_SECONDS)
    const events = yield* inBatches(sql`
      DELETE FROM process_events WHERE rowid IN (
        SELECT e.rowid FROM processes p JOIN process_events e ON e.process_id = p.id
        WHERE p.completed_at IS NOT NULL AND p.completed_at < ${before} LIMIT ${BATCH})
      RETURNING 1`)
    const operations = yield* inBatches(sql`
      DELETE FROM runtime_operations WHERE rowid IN (
        SELECT rowid FROM runtime_operations WHERE completed_at IS NOT NULL AND completed_at < ${before} LIMIT ${BATCH})
      RETURNING 1`)
    const keys = yield* inBatches(sql`
      DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE expires_at < ${now} LIMIT ${BATCH})
      RETURNING 1`)
    const jobs = yield* inBatches(sql`
      DELETE FROM jobs WHERE rowid IN (
        SELECT rowid FROM jobs WHERE state IN ('succeeded', 'failed') AND updated_at < ${before} LIMIT ${BATCH})
      RETURNING 1`)
    if (events + operations + keys + jobs > 0) {
      yield* Effect.logInfo("retention sweep", { process_events: events, runtime_operations: operations, idempotency_keys: keys, jobs })
    }
    return { rescheduleAt: isoAfter(now, EVERY_SECONDS) }
  })

  return {
    run: () => Effect.provideService(sweep, SqlClient.SqlClient, sql),
    // Nothing to record: the next start schedules it again.
    giveUp: () => Effect.void
  } satisfies JobHandler
})
