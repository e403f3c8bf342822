/**
 * The PostgreSQL implementation of the dialect seam (src/db/Dialect.ts, where the contract is written down).
 * PostgreSQL runs transactions concurrently — across the connections of one process and across replicas — so
 * the two concurrency operations are real database operations here:
 *
 * - an idempotency reservation is an `INSERT … ON CONFLICT` of the key's row, which blocks on another request's
 *   uncommitted reservation of the same key until it commits (then: `Existing`) or rolls back (then: `Reserved`);
 * - a job claim locks its candidates `FOR UPDATE SKIP LOCKED` (two claimers never take one job) and takes a
 *   transaction-scoped advisory lock per lock key, then checks again that no live lease holds that key (two
 *   claimers never run two jobs of one sandbox at once).
 *
 * The event log's order is its commit order: `lockEventLog` serialises the transactions that append events
 * (an advisory lock held until commit), so a reader that has seen `seq` n never later finds a smaller one.
 */
import type { SqlClient, Statement } from "@effect/sql"
import { Effect } from "effect"
import { CLAIMED_JOB_COLUMNS, type ClaimedJob, orderFree, type DialectShape } from "./Dialect.ts"

/** Walks an error and its causes (repositories turn SqlError into defects, so it may be wrapped). */
const someCode = (u: unknown, test: (code: string) => boolean): boolean => {
  for (let e: unknown = u, depth = 0; e !== null && typeof e === "object" && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const { code } = e as { code?: unknown }
    if (typeof code === "string" && test(code)) return true
  }
  return false
}

/** 23505 unique_violation (the callers only insert into unique keys). */
export const isPgUniqueViolation = (u: unknown): boolean => someCode(u, (code) => code === "23505")

/** 40001 serialization_failure, 40P01 deadlock_detected, 55P03 lock_not_available: rolled back, may be retried. */
export const isPgBusy = (u: unknown): boolean => someCode(u, (code) => code === "40001" || code === "40P01" || code === "55P03")

/** The channel each committed event is announced on (its payload: the event's seq). */
export const EVENTS_CHANNEL = "gateway_events"
/** The channel Db.announce (and `announced`) notify on; its payload is the topic. */
export const SIGNALS_CHANNEL = "gateway_signals"

/** Advisory lock keys: one namespace per purpose, hashed to the bigint PostgreSQL locks on. */
export const advisoryKey = (purpose: string, key: string) => `${purpose}:${key}`

export const makePgDialect = (sql: SqlClient.SqlClient): DialectShape => {
  const due = (now: string) => sql`available_at <= ${now} AND (state = 'pending' OR (state = 'leased' AND lease_expires_at <= ${now}))`
  const ofNode = (node: string) => sql`(node_id IS NULL OR node_id = ${node})`
  const lockFree = (now: string) =>
    sql`(lock_key IS NULL OR lock_key NOT IN (
      SELECT lock_key FROM jobs WHERE state = 'leased' AND lease_expires_at > ${now} AND lock_key IS NOT NULL))`
  /**
   * Takes a job lock key for this transaction when no other transaction holds it (never waits): `key` is the
   * advisory key's text, `advisoryKey("job-lock", …)`, as a value or an expression.
   */
  const triedLockKey = (key: Statement.Fragment) => sql`pg_try_advisory_xact_lock(hashtextextended(${key}, 0))`
  const tryLockKey = (lockKey: string) =>
    Effect.map(sql<{ locked: boolean }>`SELECT ${triedLockKey(sql`${advisoryKey("job-lock", lockKey)}`)} AS locked`, (rows) => rows[0]?.locked === true)
  /**
   * Leases a due job; with `lockKey`, only while no live lease (committed by anyone, as this statement sees it)
   * holds that key. Run after the key's try-lock, in a statement of its own: its snapshot then includes every lease
   * committed before the lock was taken.
   */
  const lease = (id: string, token: string, request: { readonly owner: string; readonly leaseExpiresAt: string; readonly now: string }, lockKey: string | null) =>
    sql`UPDATE jobs SET state = 'leased', lease_owner = ${request.owner}, lease_token = ${token},
        lease_expires_at = ${request.leaseExpiresAt}, attempts = attempts + 1, updated_at = ${request.now}
      WHERE id = ${id} AND ${due(request.now)}
        ${lockKey === null ? sql`` : sql`AND NOT EXISTS (SELECT 1 FROM jobs held WHERE held.lock_key = ${lockKey} AND held.state = 'leased' AND held.lease_expires_at > ${request.now})`}
      RETURNING ${sql.literal(CLAIMED_JOB_COLUMNS)}`

  return {
    engine: "pg",
    isUniqueViolation: isPgUniqueViolation,
    isBusy: isPgBusy,
    // An identity column every table has on PostgreSQL (src/db/migrations/Ddl.ts): insertion order, unique.
    rowId: sql.literal("rowid"),
    jsonWithout: (column, key) => sql`(${sql(column)}::jsonb - ${key}::text)::text`,
    jsonEntryIs: (column, key, value) => sql`(${sql(column)}::jsonb ->> ${key}::text) = ${value}::text AND jsonb_typeof(${sql(column)}::jsonb -> ${key}::text) = 'string'`,
    insertOrReplace: (table, row) => {
      const columns = Object.keys(row)
      const key = columns[0]!
      const rest = columns.slice(1)
      return Effect.asVoid(
        rest.length === 0
          ? sql`INSERT INTO ${sql(table)} ${sql.insert({ ...row })} ON CONFLICT (${sql(key)}) DO NOTHING`
          : sql`INSERT INTO ${sql(table)} ${sql.insert({ ...row })} ON CONFLICT (${sql(key)}) DO UPDATE SET ${
            sql.csv(rest.map((c) => sql`${sql(c)} = excluded.${sql(c)}`))
          }`
      )
    },

    reserveIdempotencyKey: (ref, at) =>
      Effect.gen(function*() {
        // Blocks on a concurrent, uncommitted reservation of the same key until that transaction ends. An expired
        // record is taken over (its row is rewritten as a fresh reservation).
        const reserved = yield* sql`
          INSERT INTO idempotency_keys (principal_id, scope, key_hash, fingerprint, response_status, response_body, created_at, expires_at)
          VALUES (${ref.principalId}, ${ref.scope}, ${ref.keyHash}, ${at.fingerprint}, NULL, NULL, ${at.now}, ${at.expiresAt})
          ON CONFLICT (principal_id, scope, key_hash) DO UPDATE SET
            fingerprint = excluded.fingerprint, response_status = NULL, response_body = NULL,
            created_at = excluded.created_at, expires_at = excluded.expires_at
          WHERE idempotency_keys.expires_at <= ${at.now}
          RETURNING 1`
        if (reserved.length > 0) return { _tag: "Reserved" as const }
        const rows = yield* sql<{ fingerprint: string; response_body: string | null }>`
          SELECT fingerprint, response_body FROM idempotency_keys
          WHERE principal_id = ${ref.principalId} AND scope = ${ref.scope} AND key_hash = ${ref.keyHash}`
        const existing = rows[0]
        return existing === undefined
          ? { _tag: "Reserved" as const }
          : { _tag: "Existing" as const, fingerprint: existing.fingerprint, responseBody: existing.response_body }
      }),

    completeIdempotencyKey: (ref, stored) =>
      Effect.asVoid(sql`
        INSERT INTO idempotency_keys (principal_id, scope, key_hash, fingerprint, response_status, response_body, created_at, expires_at)
        VALUES (${ref.principalId}, ${ref.scope}, ${ref.keyHash}, ${stored.fingerprint}, ${stored.status}, ${stored.body}, ${stored.now}, ${stored.expiresAt})
        ON CONFLICT (principal_id, scope, key_hash) DO UPDATE SET
          fingerprint = excluded.fingerprint, response_status = excluded.response_status,
          response_body = excluded.response_body, created_at = excluded.created_at, expires_at = excluded.expires_at`),

    claimJobs: (request) =>
      Effect.gen(function*() {
        const { now, limit } = request
        const only = request.types?.only
        const except = request.types?.except
        if (only !== undefined && only.length === 0) return []
        const ofTypes = only !== undefined
          ? sql`AND ${sql.in("type", only)}`
          : except !== undefined && except.length > 0
          ? sql`AND type NOT IN ${sql.in(except)}`
          : sql``
        const candidates = yield* sql<{ id: string; lock_key: string | null; state: string; lease_owner: string | null }>`
          SELECT id, lock_key, state, lease_owner FROM jobs WHERE ${due(now)} AND ${lockFree(now)} AND ${orderFree(sql)} AND ${ofNode(request.node)} ${ofTypes}
          ORDER BY available_at, created_at LIMIT ${limit * 4} FOR UPDATE SKIP LOCKED`
        const locks = new Set<string>()
        const claimed: Array<ClaimedJob> = []
        for (const candidate of candidates) {
          if (claimed.length >= limit || request.running.has(candidate.id)) continue
          if (candidate.lock_key !== null) {
            if (locks.has(candidate.lock_key)) continue
            locks.add(candidate.lock_key)
            // Another claimer holds this key right now (or, checked by the lease, committed one since the
            // candidates were read).
            if (!(yield* tryLockKey(candidate.lock_key))) continue
          }
          const token = request.newToken()
          const rows = yield* lease(candidate.id, token, request, candidate.lock_key)
          const recovered = candidate.state === "leased" && candidate.lease_owner !== null && candidate.lease_owner !== request.owner
          if (rows[0] !== undefined) claimed.push({ row: rows[0], token, recovered })
        }
        return claimed
      }).pipe(sql.withTransaction),

    claimJobByKey: (request) =>
      Effect.gen(function*() {
        // The candidate with its lock key's try-lock in one statement; the lease then checks that no live lease
        // holds the key.
        const candidates = yield* sql<{ id: string; lock_key: string | null; locked: boolean }>`
          SELECT id, lock_key, CASE WHEN lock_key IS NULL THEN true ELSE ${triedLockKey(sql`${advisoryKey("job-lock", "")} || lock_key`)} END AS locked
          FROM jobs
          WHERE dedupe_key = ${request.dedupeKey} AND state = 'pending' AND available_at <= ${request.now} AND ${ofNode(request.node)} AND ${orderFree(sql)}
          FOR UPDATE SKIP LOCKED`
        const candidate = candidates[0]
        if (candidate === undefined || !candidate.locked) return undefined
        const token = request.newToken()
        const rows = yield* lease(candidate.id, token, request, candidate.lock_key)
        // Only pending jobs: nothing is taken over from another owner here.
        return rows[0] === undefined ? undefined : { row: rows[0], token, recovered: false }
      }).pipe(sql.withTransaction),

    // OFFSET 0 keeps the subquery whole (never flattened into the INSERT), so the lock is taken before the row is.
    eventLogLocked: sql` FROM (SELECT pg_advisory_xact_lock(hashtextextended(${advisoryKey("events", "log")}, 0)) OFFSET 0) AS event_log_locked`,
    eventAppended: sql.literal(`, pg_notify('${EVENTS_CHANNEL}', seq::text)`),
    announced: (topic) => (topic === undefined ? sql.literal("") : sql`, pg_notify(${SIGNALS_CHANNEL}, ${topic})`),
    lockKey: (key) => Effect.asVoid(sql`SELECT pg_advisory_xact_lock(hashtextextended(${advisoryKey("app", key)}, 0))`),
    forUpdate: sql.literal("FOR UPDATE"),
    positional: (statement) => {
      let n = 0
      return statement.replace(/\?/g, () => `$${++n}`)
    }
  }
}
