/**
 * Durable jobs (ARCHITECTURE.md §3). Every accepted mutation writes its job row in the same transaction as the
 * resource; the runner claims due jobs with a lease and a fresh token (so a crash or a second process cannot
 * double-run them), runs each as a supervised fiber in its own scope, renews the lease while it runs, and
 * completes with a compare-and-set on the token. Timers (runtime/idle timeouts, lease expiry, process deadlines)
 * are jobs with a due time. On start, jobs leased by a process of this host that is gone are reclaimed at once;
 * others when their lease expires.
 */
import { Cause, Context, Duration, Effect, Either, Exit, Fiber, FiberSet, Layer, Option, ParseResult, Schema } from "effect"
import * as os from "node:os"
import { AppConfig } from "../Config.ts"
import { type ClaimedJobRow, JobsRepo, type JobRow, type Lease } from "../db/repos/Jobs.ts"
import { writeWatch } from "../db/WriteWatch.ts"
import type { ErrorObject } from "../domain/Errors.ts"
import { newUuid } from "../domain/Ids.ts"
import { isoAfter, nowIso } from "../domain/Time.ts"
import type { Job, JobError, JobHandler, JobOutcome, JobType } from "./JobRegistry.ts"
import { spanOfTraceParent } from "./Tracing.ts"


/** A claim's lease unless JOB_LEASE_SECONDS says otherwise; renewed every third of it while the job runs. */
export const LEASE_SECONDS = 15
/** How often an idle runner looks for jobs another process enqueued (on SQLite: only if anything was committed). */
const MAX_POLL_MS = 1000
/** The least wait between two rounds (a job due now that cannot be claimed must not spin the loop). */
const MIN_WAIT_MS = 5
const MAX_CONCURRENT = 64
/** Runs of a job whose failures are retryable, unless JOB_MAX_ATTEMPTS says otherwise. */
export const MAX_ATTEMPTS = 8

/** Exponential backoff with jitter: min(200 ms × 2^(n−1), 30 s) × [0.5, 1.5). */
export const backoffMs = (attempt: number) => Math.min(200 * 2 ** (attempt - 1), 30_000) * (0.5 + Math.random())

export interface RegisterOptions {
  /**
   * Run this type in its own lane of at most this many jobs at once, claimed apart from the others: its jobs
   * neither count against nor take the places of the rest (webhook deliveries, which may each wait seconds on a
   * receiver, never hold up sandbox work).
   */
  readonly concurrency?: number | undefined
}

export interface OperationRunnerShape {
  readonly register: <P, I>(type: JobType<P, I>, handler: JobHandler<P>, options?: RegisterOptions) => Effect.Effect<void>
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
  /**
   * A lease to enqueue a job under already claimed (JobRegistry `enqueueJob`'s `leasedTo`), when the runner is
   * started and has room for one more job; none otherwise (then enqueue as usual and `runNow`).
   */
  readonly lease: Effect.Effect<Option.Option<Lease>>
  /** Starts a job enqueued under `lease`, once its transaction has committed. */
  readonly runClaimed: (job: ClaimedJobRow) => Effect.Effect<void>
  /** This process's lease owner id. */
  readonly owner: string
  /**
   * Runs `listener` after each recovered job (one whose lease a dead or stalled process held) ends: the jail
   * reaper uses it to clean up at once after a crash rather than at its next period.
   */
  readonly onRecovered: (listener: Effect.Effect<void>) => Effect.Effect<void>
}

export class OperationRunner extends Context.Tag("app/OperationRunner")<OperationRunner, OperationRunnerShape>() {}

/** A claimed job with its payload decoded, ready to run; or why its payload does not decode. */
type Prepared = Either.Either<{
  readonly run: Effect.Effect<JobOutcome, JobError>
  readonly giveUp: (error: ErrorObject) => Effect.Effect<void>
}, ParseResult.ParseError>

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
    const jobs = yield* JobsRepo
    // How long a dead or stalled process keeps its jobs from the others (docs/operations/scaling-out.md).
    const config = yield* AppConfig
    const leaseSeconds = config.jobLeaseSeconds ?? LEASE_SECONDS
    const maxAttempts = config.jobMaxAttempts ?? MAX_ATTEMPTS
    const renewEvery = Duration.millis(leaseSeconds * 1000 / 3)
    const owner = `${os.hostname()}:${process.pid}:${newUuid().slice(0, 8)}`
    const handlers = new Map<string, (row: JobRow, token: string) => Prepared>()
    const recoveredListeners: Array<Effect.Effect<void>> = []
    const running = new Set<string>()
    /** Job types with a lane of their own, and the jobs running in each. */
    const lanes = new Map<string, { readonly max: number; readonly running: Set<string> }>()
    const lanedRunning = () => {
      let n = 0
      for (const lane of lanes.values()) n += lane.running.size
      return n
    }
    const fibers = yield* FiberSet.make<void, never>()
    const watch = yield* writeWatch
    const started = { value: false }
    /** A wake that came while no wait was under way: the next wait ends at once. */
    let wokenMeanwhile = false
    /** Ends the wait under way. */
    let endWait: (() => void) | undefined
    const wake = Effect.sync(() => {
      if (endWait !== undefined) endWait()
      else wokenMeanwhile = true
    })

    const finish = (row: JobRow, token: string, state: "succeeded" | "failed", lastError: string | null) =>
      Effect.flatMap(nowIso, (now) => jobs.finish(row.id, token, state, lastError, now))

    const requeue = (row: JobRow, token: string, availableAt: string, lastError: string | null, resetAttempts: boolean) =>
      Effect.flatMap(nowIso, (now) => jobs.requeue(row.id, token, { availableAt, lastError, resetAttempts, now }))

    /** Keeps the lease alive; if another process took the job over, the run is interrupted. */
    const renewLease = (row: JobRow, token: string, runFiber: Fiber.RuntimeFiber<unknown, unknown>) =>
      Effect.gen(function*() {
        const now = yield* nowIso
        if (!(yield* jobs.renewLease(row.id, token, isoAfter(now, leaseSeconds)))) {
          yield* Effect.logWarning("lost the lease of a job; stopping it", { job: row.id, type: row.type })
          yield* Fiber.interrupt(runFiber)
        }
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("lease renewal failed", cause)),
        // The claim just set the lease: the first renewal is due one period later.
        Effect.delay(renewEvery),
        Effect.forever
      )

    const runOne = ({ recovered, row, token }: ClaimedJobRow) =>
      Effect.gen(function*() {
        const prepare = handlers.get(row.type)
        if (prepare === undefined) {
          yield* Effect.logError("no handler for job type", { type: row.type })
          yield* finish(row, token, "failed", `no handler for ${row.type}`)
          return
        }
        const prepared = prepare(row, token)
        if (Either.isLeft(prepared)) {
          // Never retried: the same payload would not decode the next time either.
          yield* Effect.logError("job payload does not decode", { job: row.id, type: row.type, issue: prepared.left.message })
          yield* finish(row, token, "failed", `invalid_job_payload: ${prepared.left.message}`)
          return
        }
        const { run, giveUp } = prepared.right
        const runFiber = yield* Effect.fork(run)
        const renewFiber = yield* Effect.fork(Effect.withTracerEnabled(renewLease(row, token, runFiber), false))
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
        if (retryable && row.attempts < maxAttempts) {
          const now = yield* nowIso
          const at = new Date(Date.parse(now) + backoffMs(row.attempts)).toISOString()
          yield* requeue(row, token, at, `${error.code}: ${error.message}`, false)
        } else {
          yield* giveUp(error)
          yield* finish(row, token, "failed", `${error.code}: ${error.message}`)
        }
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logError("job bookkeeping failed", { job: row.id }, cause)),
        Effect.ensuring(Effect.sync(() => {
          running.delete(row.id)
          lanes.get(row.type)?.running.delete(row.id)
        })),
        // Its place, its lock key and maybe a sooner due time (a reschedule) are free now: look again at once.
        Effect.ensuring(wake),
        // Taken over from another owner's expired lease: this job was recovered after a crash (or a stall).
        Effect.ensuring(recovered ? Effect.forEach(recoveredListeners, Effect.ignore, { discard: true }) : Effect.void),
        // In the trace of whatever enqueued it (a request, usually), however long after and wherever it runs.
        Effect.withSpan(`job ${row.type}`, {
          kind: "consumer",
          parent: spanOfTraceParent(row.trace_parent),
          root: row.trace_parent === null,
          attributes: { "job.id": row.id, "job.attempt": row.attempts, "job.recovered": recovered }
        })
      )

    const lease = Effect.map(nowIso, (now) => ({ owner, now, leaseExpiresAt: isoAfter(now, leaseSeconds) }))

    /** Jobs leased by a dead process of this host are claimable at once. */
    const reclaimOrphans = Effect.gen(function*() {
      const now = yield* nowIso
      for (const row of yield* jobs.leased) {
        if (row.lease_owner !== null && row.lease_owner !== owner && !ownerAlive(row.lease_owner)) yield* jobs.expireLease(row.id, now)
      }
    })

    /**
     * How long the loop may sleep: until the next job it has room for falls due; null when none waits. Types whose
     * lane is full, or every other type while the runner is full, are not waited for: a job ending wakes the loop.
     */
    const nextDueInMs = Effect.gen(function*() {
      const fullLanes = [...lanes].filter(([, lane]) => lane.running.size >= lane.max).map(([type]) => type)
      const roomyLanes = [...lanes].filter(([, lane]) => lane.running.size < lane.max).map(([type]) => type)
      const generalRoom = running.size - lanedRunning() < MAX_CONCURRENT
      if (!generalRoom && roomyLanes.length === 0) return null
      const at = yield* jobs.nextDueAt(yield* nowIso, generalRoom ? { except: fullLanes } : { only: roomyLanes })
      return at === null ? null : Math.max(0, Date.parse(at) - Date.now())
    })

    /**
     * Until a wake, the next due time, or a commit since `version` (the database's at the round's start), looked
     * for every MAX_POLL_MS: another process may have enqueued a job. The look is plain JavaScript, not a round of
     * claims on a fiber: an idle server spent ~10 ms of CPU a second on those rounds. Where commits cannot be
     * seen (PostgreSQL), every look ends the wait, as a poll.
     */
    const waitForWork = (dueInMs: number | null, version: number | undefined) =>
      Effect.async<void>((resume) => {
        if (wokenMeanwhile) {
          wokenMeanwhile = false
          return resume(Effect.void)
        }
        const deadline = dueInMs === null ? Infinity : Date.now() + Math.max(dueInMs, MIN_WAIT_MS)
        let timer: ReturnType<typeof setTimeout> | undefined
        const done = () => {
          clearTimeout(timer)
          endWait = undefined
          resume(Effect.void)
        }
        const look = () => {
          const left = deadline - Date.now()
          const now = watch.version()
          if (left <= 0 || now === undefined || now !== version) return done()
          timer = setTimeout(look, Math.min(left, MAX_POLL_MS))
        }
        endWait = done
        timer = setTimeout(look, Math.min(deadline - Date.now(), MAX_POLL_MS))
        return Effect.sync(() => {
          clearTimeout(timer)
          endWait = undefined
        })
      })

    const start = (claimed: ReadonlyArray<ClaimedJobRow>) =>
      Effect.forEach(claimed, (job) => {
        running.add(job.row.id)
        lanes.get(job.row.type)?.running.add(job.row.id)
        // Interruptible whatever the caller is (a request starts its job in an uninterruptible region): its lease
        // renewal and a shutdown must be able to stop it.
        return FiberSet.run(fibers, Effect.interruptible(Effect.withTracerEnabled(runOne(job), true)))
      }, { discard: true })

    const loop = Effect.gen(function*() {
      yield* reclaimOrphans
      while (true) {
        // What this round's claims will see: wakes and commits from here on are for the next one.
        wokenMeanwhile = false
        const version = watch.version()
        const free = MAX_CONCURRENT - (running.size - lanedRunning())
        const laned = [...lanes.keys()]
        // At most one per lock key, skipping locks held by live leases (the dialect's claim).
        if (free > 0) yield* start(yield* jobs.claim({ ...(yield* lease), limit: free, running, types: { except: laned } }))
        for (const [type, lane] of lanes) {
          const room = lane.max - lane.running.size
          if (room > 0) yield* start(yield* jobs.claim({ ...(yield* lease), limit: room, running, types: { only: [type] } }))
        }
        yield* waitForWork(yield* nextDueInMs, version)
      }
    }).pipe(
      Effect.catchAllCause((cause) => Effect.zipRight(Effect.logError("job loop failed; restarting", cause), Effect.sleep("1 second"))),
      Effect.forever,
      // Polling is not traced (its statements would be a trace a second, each saying nothing); the jobs it starts are.
      Effect.withTracerEnabled(false)
    )

    return {
      owner,
      onRecovered: (listener) => Effect.sync(() => void recoveredListeners.push(listener)),
      register: <P, I>(type: JobType<P, I>, handler: JobHandler<P>, options?: RegisterOptions) =>
        Effect.sync(() => {
          if (options?.concurrency !== undefined) lanes.set(type.type, { max: options.concurrency, running: new Set() })
          const decode = Schema.decodeEither(Schema.parseJson(type.payload))
          handlers.set(type.type, (row, token): Prepared =>
            Either.map(decode(row.payload), (payload) => {
              // The next job of the order may be claimable now: look again at once.
              const leaveOrder = row.lock_key === null ? Effect.void : Effect.zipRight(jobs.leaveOrder(row.id, token), wake)
              const job: Job<P> = { id: row.id, type: row.type, dedupeKey: row.dedupe_key, payload, attempt: row.attempts, leaveOrder }
              return { run: handler.run(job), giveUp: (error: ErrorObject) => handler.giveUp(job, error) }
            }))
        }),
      start: Effect.suspend(() => {
        if (started.value) return Effect.void
        started.value = true
        return Effect.asVoid(FiberSet.run(fibers, loop))
      }),
      wake,
      lease: Effect.suspend(() =>
        started.value && running.size - lanedRunning() < MAX_CONCURRENT ? Effect.map(lease, Option.some) : Effect.succeed(Option.none())
      ),
      runClaimed: (job) => start([job]),
      runNow: (dedupeKey) =>
        Effect.gen(function*() {
          if (!started.value || running.size - lanedRunning() >= MAX_CONCURRENT) return yield* wake
          const claimed = yield* jobs.claimByKey({ ...(yield* lease), dedupeKey })
          if (claimed === undefined) return yield* wake
          yield* start([claimed])
        }).pipe(Effect.catchAllCause((cause) => Effect.zipRight(Effect.logWarning("could not start a job at once", cause), wake)))
    }
  })
)
