/**
 * The dialect seam: everything that depends on which SQL engine is underneath. Repositories write portable SQL
 * (standard SELECT/INSERT/UPDATE/DELETE, `INSERT … ON CONFLICT (…) DO NOTHING | DO UPDATE SET c = excluded.c`,
 * `RETURNING`, `COALESCE`, `CASE`, `substr`) and ask this module for the rest. SQLite is the one engine today
 * (src/db/SqliteDialect.ts); a second engine is a second implementation of `DialectShape` plus its migrations.
 *
 * What a second engine must provide:
 * 1. `isUniqueViolation` / `isBusy` over its errors (SQLite: SQLITE_CONSTRAINT*, SQLITE_BUSY; PostgreSQL:
 *    23505; 40001, 40P01, 55P03). Busy means "the attempt was rolled back and may be made again" (503).
 * 2. `rowId`: a column naming one physical row, for batched deletes (`DELETE … WHERE rowId IN (SELECT rowId …
 *    LIMIT n)`), and ordering ties by insertion (SQLite `rowid`; PostgreSQL: an identity column, not `ctid`).
 * 3. `jsonWithout(column, key)`: the JSON text of a column without one top-level key; `jsonEntryIs(column, key,
 *    value)`: a condition, true when the column's JSON object has `key` with exactly the string `value` (both bound,
 *    any characters).
 * 4. `insertOrReplace(table, row, key)`: insert, or replace the row with the same key.
 * 5. `reserveIdempotencyKey` / `completeIdempotencyKey`, run inside the transaction of the request's work.
 *    Contract: of concurrent requests with one key, exactly one gets `Reserved` and runs; the others wait until
 *    it commits and then see `Existing` with its stored response (or, had it rolled back, one of them reserves).
 *    SQLite holds one write transaction at a time (bun-sqlite: one connection behind a semaphore), so a
 *    SELECT is enough there; an engine with concurrent transactions must insert the reservation first
 *    (`INSERT … ON CONFLICT DO NOTHING RETURNING`, which blocks on the other's uncommitted row) and update it
 *    with the response on completion.
 * 6. `claimJobs` / `claimJobByKey`: lease due jobs to an owner with a fresh token each, at most one job per lock
 *    key, never a job whose lock key is held by a live lease — even when several processes claim at once.
 *    `claimJobs` may be limited to some job types or exclude some (the runner's lanes: webhook deliveries are
 *    claimed apart from sandbox work, so they never take its places).
 *    SQLite: one transaction, safe because transactions run one at a time; PostgreSQL: `FOR UPDATE SKIP LOCKED`
 *    plus an advisory lock (or a lock table) per lock key.
 * 7. `eventLogLocked` / `eventAppended` / `lockKey` / `forUpdate` / `positional` (see below).
 * 8. Connection set-up: the client and migrations (SQLite: src/db/Sql.ts), the session (SQLite: the pragmas,
 *    `sqliteSession`), WAL checkpoints if the engine needs them (SQLite: src/db/Checkpointer.ts, on a worker),
 *    and a read connection for the polled GETs (src/db/FastReadQueries.ts: on SQLite a synchronous one,
 *    `openSqliteReadConnection`; on PostgreSQL a small pool of its own).
 */
import type { SqlClient, SqlError, Statement } from "@effect/sql"
import { Context, type Effect } from "effect"

/** The stored answer to a request with an Idempotency-Key. */
export interface IdempotencyKeyRef {
  readonly principalId: string
  readonly scope: string
  readonly keyHash: string
}

export type IdempotencyReservation =
  | { readonly _tag: "Reserved" }
  | { readonly _tag: "Existing"; readonly fingerprint: string; readonly responseBody: string | null }

export interface ClaimRequest {
  /** This process's lease owner id. */
  readonly owner: string
  readonly now: string
  readonly leaseExpiresAt: string
  /** A fresh lease token per claimed job. */
  readonly newToken: () => string
  /** This process's node: jobs pinned to another node (`jobs.node_id`) are never claimed. */
  readonly node: string
}

/**
 * A claimed job row (undecoded: the jobs repository decodes it) and its lease token. `recovered`: the job was
 * taken over from another owner's expired lease (a crashed or stalled process), not claimed while pending.
 */
export interface ClaimedJob {
  readonly row: unknown
  readonly token: string
  readonly recovered: boolean
}

/** Which job types a claim may take. */
export interface JobTypeFilter {
  readonly only?: ReadonlyArray<string> | undefined
  readonly except?: ReadonlyArray<string> | undefined
}

/**
 * A job with a place in its sandbox's order (`lock_seq`, migration 0010) is claimable only when no earlier job of
 * that order is unfinished; its lock key names the order (`order:<sandbox id>`). A job leaves the order when it
 * finishes, or earlier by dropping its lock key (a process, once started: src/db/repos/Jobs.ts `leaveOrder`).
 * Both engines: the claims also take the lock key, so two claimers never start two jobs of one order at once.
 */
export const orderFree = (sql: SqlClient.SqlClient) =>
  sql`(lock_seq IS NULL OR NOT EXISTS (SELECT 1 FROM jobs earlier WHERE earlier.lock_key = jobs.lock_key
    AND earlier.lock_seq < jobs.lock_seq AND earlier.state IN ('pending', 'leased')))`

/** Columns a claim returns, as the jobs repository decodes them. */
export const CLAIMED_JOB_COLUMNS = "id, type, dedupe_key, lock_key, payload, attempts, lease_owner, trace_parent"

export interface DialectShape {
  readonly engine: string
  readonly isUniqueViolation: (error: unknown) => boolean
  readonly isBusy: (error: unknown) => boolean
  readonly rowId: Statement.Fragment
  readonly jsonWithout: (column: string, key: string) => Statement.Fragment
  readonly jsonEntryIs: (column: string, key: string, value: string) => Statement.Fragment
  readonly insertOrReplace: (table: string, row: Readonly<Record<string, unknown>>) => Effect.Effect<void, SqlError.SqlError>
  readonly reserveIdempotencyKey: (
    ref: IdempotencyKeyRef,
    at: { readonly now: string; readonly fingerprint: string; readonly expiresAt: string }
  ) => Effect.Effect<IdempotencyReservation, SqlError.SqlError>
  readonly completeIdempotencyKey: (
    ref: IdempotencyKeyRef,
    stored: { readonly fingerprint: string; readonly status: number; readonly body: string; readonly now: string; readonly expiresAt: string }
  ) => Effect.Effect<void, SqlError.SqlError>
  /**
   * Claims up to `limit` due jobs (skipping `running`, jobs this process already runs), in one transaction; only of
   * the types in `types.only` when given, and none of those in `types.except`.
   */
  readonly claimJobs: (
    request: ClaimRequest & { readonly limit: number; readonly running: ReadonlySet<string>; readonly types?: JobTypeFilter | undefined }
  ) => Effect.Effect<Array<ClaimedJob>, SqlError.SqlError>
  /** Claims the job with this dedupe key if it is pending, due and its lock key is free. */
  readonly claimJobByKey: (request: ClaimRequest & { readonly dedupeKey: string }) => Effect.Effect<ClaimedJob | undefined, SqlError.SqlError>
  /**
   * The FROM of a domain event's `INSERT … SELECT`: takes the event log's lock, held until the transaction ends,
   * before the row gets its `seq`. The log's order is then its commit order, so a reader that has seen `seq` n never
   * later finds a smaller one committed (PostgreSQL: an advisory lock in the same statement, not a round trip of its
   * own; SQLite: nothing, transactions run one at a time).
   */
  readonly eventLogLocked: Statement.Fragment
  /**
   * Added to the RETURNING of a domain event's INSERT (after `seq`): announces the event to other processes when the
   * transaction commits (PostgreSQL: a NOTIFY in the same statement; SQLite: nothing).
   */
  readonly eventAppended: Statement.Fragment
  /**
   * Added to a RETURNING list: Db.announce's news of `topic` (none when undefined) in that statement, not a round
   * trip of its own (PostgreSQL: a NOTIFY, delivered when the transaction commits; SQLite: nothing).
   */
  readonly announced: (topic: string | undefined) => Statement.Fragment
  /**
   * A lock on `key` held until the current transaction ends, for read-then-write units that must not interleave
   * across processes (a sandbox's cost sync). SQLite: nothing, transactions run one at a time.
   */
  readonly lockKey: (key: string) => Effect.Effect<void, SqlError.SqlError>
  /**
   * Appended to a SELECT of rows the transaction reads, then writes from what it read (a counter): locks them until
   * it ends (PostgreSQL: `FOR UPDATE`; SQLite: nothing, transactions run one at a time).
   */
  readonly forUpdate: Statement.Fragment
  /** A statement written with `?` placeholders, in the engine's own (PostgreSQL: `$1`, `$2`, …). */
  readonly positional: (statement: string) => string
}

export class Dialect extends Context.Tag("app/db/Dialect")<Dialect, DialectShape>() {}
