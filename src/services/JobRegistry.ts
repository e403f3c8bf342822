/**
 * Job types (ARCHITECTURE.md §3): each declares its payload Schema, and its handler is registered with the runner
 * under it (services/sandboxes/Jobs.ts lists them all). Payloads are encoded by the Schema when enqueued and
 * decoded by it before the handler runs; one that does not decode fails the job (`invalid_job_payload`), never
 * reaches a handler as a cast.
 */
import { Data, Effect, Option, Schema } from "effect"
import { JobsRepo, type Lease } from "../db/repos/Jobs.ts"
import type { ErrorObject } from "../domain/Errors.ts"
import type { SandboxId } from "../domain/Ids.ts"
import { nowIso } from "../domain/Time.ts"
import { traceParentOf } from "./Tracing.ts"

export interface JobType<P, I = P> {
  readonly type: string
  readonly payload: Schema.Schema<P, I>
}

export const defineJob = <P, I>(type: string, payload: Schema.Schema<P, I>): JobType<P, I> => ({ type, payload })

/** A job failure: retried with backoff while `retryable` and attempts remain, else given up. */
export class JobError extends Data.TaggedError("JobError")<{
  readonly error: ErrorObject
  readonly retryable: boolean
}> {}

export interface Job<P> {
  readonly id: string
  readonly type: string
  readonly dedupeKey: string
  readonly payload: P
  /** 1 on the first run. */
  readonly attempt: number
  /**
   * An ordered job lets the next job of its sandbox's order start while it goes on (a process, once the provider
   * has started it). Nothing for a job without an order.
   */
  readonly leaveOrder: Effect.Effect<void>
}

/** What a handler may ask for: nothing (done), or to run again at a later time (same job row). */
export type JobOutcome = void | { readonly rescheduleAt: string }

export interface JobHandler<P> {
  readonly run: (job: Job<P>) => Effect.Effect<JobOutcome, JobError>
  /** Called once when the job fails for good (non-retryable, or out of attempts): record the terminal failure. */
  readonly giveUp: (job: Job<P>, error: ErrorObject) => Effect.Effect<void>
}

export interface NewJob<P> {
  /** Unique per logical job; enqueueing an existing key updates it (see `replace`). */
  readonly dedupeKey: string
  /** Jobs with the same lock key never run at the same time (lifecycle jobs use `sandbox:<id>`). */
  readonly lockKey?: string | undefined
  readonly payload: P
  /** Default: now. */
  readonly availableAt?: string | undefined
  /**
   * When a job with this key exists and is not running: `true` re-arms it (new payload and due time, pending);
   * `false` (default) leaves it alone.
   */
  readonly replace?: boolean | undefined
  /** The sandbox the job works on: pins the job to the node the sandbox lives on (docs/operations/scaling-out.md). */
  readonly sandboxId?: SandboxId | undefined
  /**
   * Takes the next place in the sandbox's order (docs/guide/sandboxes.md, one order per sandbox): the job starts only
   * after every job accepted before it on that sandbox has finished, or left the order (`Job.leaveOrder`).
   */
  readonly ordered?: boolean | undefined
}

/** The row `enqueueJob` writes for `job` of `type`: its payload encoded, due now unless it says, in this trace. */
export const jobRow = <P, I>(type: JobType<P, I>, job: NewJob<P>) =>
  Effect.gen(function*() {
    const now = yield* nowIso
    const payload = yield* Effect.orDie(Schema.encode(type.payload)(job.payload))
    const span = yield* Effect.currentSpan.pipe(Effect.option)
    return {
      type: type.type,
      dedupeKey: job.dedupeKey,
      lockKey: job.lockKey ?? null,
      payload,
      availableAt: job.availableAt ?? now,
      now,
      sandboxId: job.sandboxId,
      traceParent: Option.match(span, { onNone: () => null, onSome: traceParentOf })
    }
  })

/**
 * Writes a job row; call it inside the transaction that writes the resource. With `leasedTo` (OperationRunner
 * `lease`; for the job of a resource that transaction creates), the row is written leased when a claim would take
 * it, and answered: start it with the runner's `runClaimed` once the transaction has committed.
 */
export const enqueueJob = <P, I>(type: JobType<P, I>, job: NewJob<P>, leasedTo?: Lease) =>
  Effect.gen(function*() {
    const row = yield* jobRow(type, job)
    if (leasedTo !== undefined && job.replace !== true && job.ordered !== true) {
      const claimed = yield* JobsRepo.enqueueLeased(row, leasedTo)
      if (claimed !== undefined) return claimed
    }
    yield* JobsRepo.enqueue({ ...row, replace: job.replace === true, ordered: job.ordered === true })
    return undefined
  })

/** A job row as `jobRow` makes it. */
export type JobRowOf = Effect.Effect.Success<ReturnType<typeof jobRow>>

/** Several jobs (`jobRow`s) written, or re-armed, as `enqueueJob` with `replace` does, in one statement. */
export const rearmJobs = (rows: ReadonlyArray<Effect.Effect<JobRowOf>>) => Effect.flatMap(Effect.all(rows), (all) => JobsRepo.enqueueReplacing(all))

/** Cancels a pending job (e.g. a timeout that no longer applies). A running one is left to finish. */
export const cancelJob = (dedupeKey: string) => Effect.flatMap(nowIso, (now) => JobsRepo.cancel(dedupeKey, now))
