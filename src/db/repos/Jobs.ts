/**
 * Durable jobs, `jobs` (ARCHITECTURE.md §3): one row per logical job (unique dedupe key), leased with a token so that
 * a crash or a second process cannot double-run it; completion is a compare-and-set on the token. Claims are the
 * dialect's (src/db/Dialect.ts §6): they are what keeps two jobs with one lock key from running at once.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AppConfig, nodeIdOf } from "../../Config.ts"
import { newUuid, type SandboxId } from "../../domain/Ids.ts"
import { CLAIMED_JOB_COLUMNS, type ClaimedJob, Dialect, type JobTypeFilter, orderFree } from "../Dialect.ts"
import { rowsOf, run } from "../Rows.ts"

/**
 * A claimed job. Its payload stays JSON text here: it is decoded (JSON and all) by its job type's Schema
 * (services/JobRegistry.ts), so a payload that does not decode fails that one job, not the claim.
 */
export const JobRow = Schema.Struct({
  id: Schema.String,
  type: Schema.String,
  dedupe_key: Schema.String,
  lock_key: Schema.NullOr(Schema.String),
  payload: Schema.String,
  attempts: Schema.Int,
  lease_owner: Schema.NullOr(Schema.String),
  /** The W3C traceparent of the span that enqueued it (migration 0014), or null. */
  trace_parent: Schema.NullOr(Schema.String)
})
export type JobRow = typeof JobRow.Type

/** A claimed job, its lease token, and whether it was taken over from another owner's expired lease. */
export interface ClaimedJobRow {
  readonly row: JobRow
  readonly token: string
  readonly recovered: boolean
}

export interface NewJobRow {
  readonly type: string
  readonly dedupeKey: string
  readonly lockKey: string | null
  /** The encoded payload (JSON-serialisable). */
  readonly payload: unknown
  readonly availableAt: string
  /** When a job with this key exists and is not running: re-arm it (new payload and due time, pending). */
  readonly replace: boolean
  readonly now: string
  /** The sandbox the job works on: the job is pinned to that sandbox's node, if it has one. */
  readonly sandboxId?: SandboxId | undefined
  /**
   * Takes the next place in the sandbox's order (`sandboxId` required; the lock key is then the order's, see
   * `orderKey`): the job starts only after every job that took an earlier place has finished or left the order.
   */
  readonly ordered?: boolean | undefined
  /** The W3C traceparent of the span enqueuing it: the job's run continues that trace. */
  readonly traceParent?: string | null | undefined
}

/** The lock key of a sandbox's order (src/db/Dialect.ts `orderFree`). */
export const orderKey = (sandboxId: SandboxId) => `order:${sandboxId}`

export interface Lease {
  readonly owner: string
  readonly now: string
  readonly leaseExpiresAt: string
}

export class JobsRepo extends Effect.Service<JobsRepo>()("app/db/JobsRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    const node = nodeIdOf(yield* AppConfig)
    const jobs = rowsOf("jobs", JobRow)
    const decodeClaimed = (claimed: ReadonlyArray<ClaimedJob>) =>
      Effect.map(jobs.all(Effect.succeed(claimed.map((c) => c.row))), (rows) =>
        rows.map((row, i): ClaimedJobRow => ({ row, token: claimed[i]!.token, recovered: claimed[i]!.recovered })))
    const leased = rowsOf("jobs", Schema.Struct({ id: Schema.String, lease_owner: Schema.NullOr(Schema.String) }))
    const due = rowsOf("jobs", Schema.Struct({ at: Schema.NullOr(Schema.String) }))
    const ids = rowsOf("jobs", Schema.Struct({ id: Schema.String }))
    const counts = rowsOf("jobs", Schema.Struct({ type: Schema.String, state: Schema.String, n: Schema.Int }))
    const seqs = rowsOf("jobs", Schema.Struct({ seq: Schema.Int }))
    const tails = rowsOf("jobs", Schema.Struct({ seq: Schema.NullOr(Schema.Int) }))

    /** The node a job of `sandboxId` is pinned to: its sandbox's, if it has one. */
    const nodeOf = (sandboxId: SandboxId | undefined) => (sandboxId === undefined ? sql`NULL` : sql`(SELECT node_id FROM sandboxes WHERE id = ${sandboxId})`)
    /** Inserts jobs (their places in their sandboxes' orders taken); an existing dedupe key is re-armed or kept. */
    const insert = (rows: ReadonlyArray<{ readonly job: Omit<NewJobRow, "replace">; readonly place: number | null }>, replace: boolean) => {
      const values = sql.csv(rows.map(({ job, place }) => {
        const lockKey = place !== null ? orderKey(job.sandboxId!) : job.lockKey
        return sql`(${newUuid()}, ${job.type}, ${job.dedupeKey}, ${lockKey}, ${place}, ${JSON.stringify(job.payload ?? null)}, 'pending', ${job.availableAt}, ${job.now}, ${job.now}, ${nodeOf(job.sandboxId)}, ${job.traceParent ?? null})`
      }))
      return run(sql`INSERT INTO jobs (id, type, dedupe_key, lock_key, lock_seq, payload, state, available_at, created_at, updated_at, node_id, trace_parent)
        VALUES ${values}
        ${replace
          ? sql`ON CONFLICT (dedupe_key) DO UPDATE SET payload = excluded.payload, available_at = excluded.available_at,
              state = 'pending', attempts = 0, last_error = NULL, updated_at = excluded.updated_at, node_id = excluded.node_id,
              trace_parent = excluded.trace_parent
            WHERE jobs.state <> 'leased'`
          : sql`ON CONFLICT (dedupe_key) DO NOTHING`}`)
    }
    return {
      /** How many jobs of each type are in each state (the operators' metrics). */
      countsByTypeAndState: counts.all(sql`SELECT type, state, COUNT(*) AS n FROM jobs GROUP BY type, state`),
      enqueue: (job: NewJobRow) =>
        Effect.gen(function*() {
          // Its place in the sandbox's order: taken in the accepting transaction (a rollback gives it back).
          const place = job.ordered === true && job.sandboxId !== undefined
            ? (yield* seqs.all(sql`UPDATE sandboxes SET order_seq = order_seq + 1 WHERE id = ${job.sandboxId} RETURNING order_seq AS seq`))[0]?.seq ?? null
            : null
          yield* insert([{ job, place }], job.replace)
        }),
      /** Jobs of no order, in one statement; each re-armed as `enqueue` with `replace` does. */
      enqueueReplacing: (jobs: ReadonlyArray<Omit<NewJobRow, "replace" | "ordered">>) =>
        jobs.length === 0 ? Effect.void : insert(jobs.map((job) => ({ job, place: null })), true),
      /**
       * Enqueues a job already leased to `lease.owner` (its first run, as a claim would lease it), to be started
       * by that runner at once without a claim. For the job of a resource created in the same transaction: nothing
       * else can enqueue under its lock key before the commit, so the check below needs no claim's lock. Only when
       * a claim would take it (due, no job with this dedupe key yet, no unfinished job with its lock key, not
       * pinned to another node); otherwise nothing is written and undefined is answered: enqueue it as usual.
       */
      enqueueLeased: (job: Omit<NewJobRow, "replace" | "ordered">, lease: Lease) =>
        Effect.gen(function*() {
          const token = newUuid()
          const pinned = nodeOf(job.sandboxId)
          const free = job.lockKey === null
            ? sql``
            : sql`AND NOT EXISTS (SELECT 1 FROM jobs WHERE lock_key = ${job.lockKey} AND state IN ('pending', 'leased'))`
          const rows = yield* jobs.all(sql`INSERT INTO jobs (id, type, dedupe_key, lock_key, lock_seq, payload, state, available_at, created_at, updated_at, node_id, trace_parent,
                lease_owner, lease_token, lease_expires_at, attempts)
              SELECT ${newUuid()}, ${job.type}, ${job.dedupeKey}, ${job.lockKey}, NULL, ${JSON.stringify(job.payload ?? null)}, 'leased', ${job.availableAt}, ${job.now}, ${job.now},
                ${pinned}, ${job.traceParent ?? null}, ${lease.owner}, ${token}, ${lease.leaseExpiresAt}, 1
              WHERE ${job.availableAt} <= ${job.now} AND (${pinned} IS NULL OR ${pinned} = ${node})
                AND NOT EXISTS (SELECT 1 FROM jobs WHERE dedupe_key = ${job.dedupeKey}) ${free}
              RETURNING ${sql.literal(CLAIMED_JOB_COLUMNS)}`)
          const row = rows[0]
          return row === undefined ? undefined : { row, token, recovered: false } satisfies ClaimedJobRow
        }),
      /**
       * A running job leaves its sandbox's order (a process once started: the next job of the order may start while
       * it runs). Only while the token holds the lease.
       */
      leaveOrder: (id: string, token: string) => run(sql`UPDATE jobs SET lock_key = NULL WHERE id = ${id} AND lease_token = ${token}`),
      /** The last place of a sandbox's order still unfinished (null when none is). */
      orderTail: (sandboxId: SandboxId) =>
        Effect.map(tails.all(sql`SELECT MAX(lock_seq) AS seq FROM jobs WHERE lock_key = ${orderKey(sandboxId)} AND state IN ('pending', 'leased')`),
          (rows) => rows[0]?.seq ?? null),
      /** Whether a job at or before place `upTo` of the sandbox's order is unfinished (and still in the order). */
      orderBusy: (sandboxId: SandboxId, upTo: number) =>
        Effect.map(ids.all(sql`SELECT id FROM jobs WHERE lock_key = ${orderKey(sandboxId)} AND state IN ('pending', 'leased')
          AND lock_seq <= ${upTo} LIMIT 1`), (rows) => rows.length > 0),
      /** Fails the unfinished jobs pinned to a lost node; returns how many. */
      failOfNode: (nodeId: string, now: string) =>
        Effect.map(
          sql`UPDATE jobs SET state = 'failed', last_error = 'node_lost', lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
              updated_at = ${now} WHERE node_id = ${nodeId} AND state IN ('pending', 'leased') RETURNING id`.pipe(Effect.orDie),
          (rows) => rows.length
        ),
      /** Cancels a pending job (e.g. a timeout that no longer applies). A running one is left to finish. */
      cancel: (dedupeKey: string, now: string) =>
        run(sql`UPDATE jobs SET state = 'succeeded', updated_at = ${now}, last_error = 'cancelled'
          WHERE dedupe_key = ${dedupeKey} AND state = 'pending'`),
      claim: (lease: Lease & { readonly limit: number; readonly running: ReadonlySet<string>; readonly types?: JobTypeFilter | undefined }) =>
        Effect.flatMap(Effect.orDie(dialect.claimJobs({ ...lease, node, newToken: newUuid })), decodeClaimed),
      claimByKey: (lease: Lease & { readonly dedupeKey: string }) =>
        Effect.flatMap(Effect.orDie(dialect.claimJobByKey({ ...lease, node, newToken: newUuid })), (claimed) =>
          claimed === undefined ? Effect.succeed(undefined) : Effect.map(decodeClaimed([claimed]), (rows) => rows[0])),
      finish: (id: string, token: string, state: "succeeded" | "failed", lastError: string | null, now: string) =>
        run(sql`UPDATE jobs SET state = ${state}, last_error = ${lastError}, lease_owner = NULL, lease_token = NULL,
          lease_expires_at = NULL, updated_at = ${now} WHERE id = ${id} AND lease_token = ${token}`),
      requeue: (id: string, token: string, retry: { readonly availableAt: string; readonly lastError: string | null; readonly resetAttempts: boolean; readonly now: string }) =>
        run(sql`UPDATE jobs SET state = 'pending', available_at = ${retry.availableAt}, last_error = ${retry.lastError},
          attempts = CASE WHEN ${retry.resetAttempts ? 1 : 0} = 1 THEN 0 ELSE attempts END,
          lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = ${retry.now}
          WHERE id = ${id} AND lease_token = ${token}`),
      /** Extends a lease; false when the token no longer holds it (another process took the job over). */
      renewLease: (id: string, token: string, until: string) =>
        Effect.map(ids.all(sql`UPDATE jobs SET lease_expires_at = ${until} WHERE id = ${id} AND lease_token = ${token} RETURNING id`), (rows) => rows.length > 0),
      leased: leased.all(sql`SELECT id, lease_owner FROM jobs WHERE state = 'leased'`),
      /** Makes a leased job claimable now (its owner is gone). */
      expireLease: (id: string, now: string) => run(sql`UPDATE jobs SET lease_expires_at = ${now} WHERE id = ${id} AND state = 'leased'`),
      /**
       * When the next job of these types could be claimed (a pending one's due time or a lease's expiry); null when
       * none waits. A pending job whose lock key a live lease holds, or with an earlier job of its order unfinished,
       * is not counted: it can start only when that job ends (and the runner looks again then), so counting it would
       * make the runner poll in a loop meanwhile.
       */
      nextDueAt: (now: string, types: JobTypeFilter = {}) => {
        const ofTypes = types.only !== undefined
          ? sql`AND ${sql.in("type", types.only.length > 0 ? types.only : [""])}`
          : types.except !== undefined && types.except.length > 0
          ? sql`AND type NOT IN ${sql.in(types.except)}`
          : sql``
        return Effect.map(due.first(sql`SELECT MIN(CASE WHEN state = 'pending' THEN available_at ELSE lease_expires_at END) AS at
          FROM jobs WHERE (state = 'leased' OR (state = 'pending' AND ${orderFree(sql)} AND (lock_key IS NULL OR lock_key NOT IN (
            SELECT lock_key FROM jobs WHERE state = 'leased' AND lease_expires_at > ${now} AND lock_key IS NOT NULL)))) ${ofTypes}`),
          (row) => row?.at ?? null)
      },
      /** Removes up to `limit` jobs that finished before `before`; returns how many went. */
      deleteFinishedBefore: (before: string, limit: number) =>
        Effect.map(
          sql`DELETE FROM jobs WHERE ${dialect.rowId} IN (
              SELECT ${dialect.rowId} FROM jobs WHERE state IN ('succeeded', 'failed') AND updated_at < ${before} LIMIT ${limit})
            RETURNING 1`.pipe(Effect.orDie),
          (rows) => rows.length
        )
    }
  })
}) {}
