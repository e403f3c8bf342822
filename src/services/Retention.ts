/**
 * Retention: what grows with use and is only needed for a while is removed by a durable job that runs at start
 * and then every hour (the reference's worker does the same for process events).
 * - Output events of processes that ended more than 7 days ago (reference §8); a process that has not ended
 *   keeps all of its events. The process itself stays readable; its event stream is then empty.
 * - Runtime operations (file reads, writes, lists, deletes) that ended more than 7 days ago: a read's result holds
 *   the file's bytes, so these are what makes the database grow. Reading one afterwards is a 404.
 * - Idempotency records past their `expires_at` (24 h).
 * - Jobs that finished (succeeded or failed) more than 7 days ago.
 * - Webhook deliveries that finished (succeeded or failed) more than 30 days ago, with their attempts.
 * - The dashboard's one-time sign-in links once expired (used or not: an expired one signs no one in).
 * Deletes go in batches of 1,000 rows, each its own short transaction, so the sweep never holds the database.
 */
import { Effect, Schema } from "effect"
import { repositories } from "../db/Database.ts"
import { UsersRepo } from "../db/repos/Users.ts"
import { IdempotencyRepo } from "../db/repos/Idempotency.ts"
import { JobsRepo } from "../db/repos/Jobs.ts"
import { ProcessesRepo } from "../db/repos/Processes.ts"
import { RuntimeOperationsRepo } from "../db/repos/RuntimeOperations.ts"
import { WebhookDeliveriesRepo } from "../db/repos/WebhookDeliveries.ts"
import { isoAfter, nowIso } from "../domain/Time.ts"
import { defineJob, enqueueJob, type JobHandler } from "./JobRegistry.ts"

export const RetentionJob = defineJob("maintenance.retention", Schema.Null)
const EVERY_SECONDS = 3600
const KEEP_SECONDS = 7 * 24 * 3600
const KEEP_DELIVERIES_SECONDS = 30 * 24 * 3600
const BATCH = 1000

export const scheduleRetention = enqueueJob(RetentionJob, { dedupeKey: "maintenance:retention", payload: null, replace: true })

export const makeRetentionHandler = Effect.gen(function*() {
  const context = yield* repositories

  /** Runs a batch delete until it removes less than a batch; returns how many rows went. */
  const inBatches = <R>(batch: Effect.Effect<number, never, R>) =>
    Effect.gen(function*() {
      let total = 0
      while (true) {
        const removed = yield* batch
        total += removed
        if (removed < BATCH) return total
        yield* Effect.yieldNow()
      }
    })

  const sweep = Effect.gen(function*() {
    const now = yield* nowIso
    const before = isoAfter(now, -KEEP_SECONDS)
    const events = yield* inBatches(ProcessesRepo.deleteEventsEndedBefore(before, BATCH))
    const operations = yield* inBatches(RuntimeOperationsRepo.deleteEndedBefore(before, BATCH))
    const keys = yield* inBatches(IdempotencyRepo.deleteExpired(now, BATCH))
    const jobs = yield* inBatches(JobsRepo.deleteFinishedBefore(before, BATCH))
    const deliveries = yield* inBatches(WebhookDeliveriesRepo.deleteFinishedBefore(isoAfter(now, -KEEP_DELIVERIES_SECONDS), BATCH))
    const loginLinks = yield* inBatches(UsersRepo.deleteLoginLinksExpiredBefore(now, BATCH))
    if (events + operations + keys + jobs + deliveries + loginLinks > 0) {
      yield* Effect.logInfo("retention sweep", { process_events: events, runtime_operations: operations, idempotency_keys: keys, jobs, webhook_deliveries: deliveries, login_links: loginLinks })
    }
    return { rescheduleAt: isoAfter(now, EVERY_SECONDS) }
  })

  return {
    run: () => Effect.provide(sweep, context),
    // Nothing to record: the next start schedules it again.
    giveUp: () => Effect.void
  } satisfies JobHandler<null>
})
