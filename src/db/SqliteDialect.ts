/**
 * The SQLite implementation of the dialect seam (src/db/Dialect.ts, where the contract is written down). Its two
 * concurrency operations keep the behaviour the gateway has always had: they rely on SQLite running one write
 * transaction at a time (bun-sqlite: one connection behind a semaphore).
 */
import { SqlClient } from "@effect/sql"
import { Database } from "bun:sqlite"
import { Effect } from "effect"
import { CLAIMED_JOB_COLUMNS, type ClaimedJob, orderFree, type DialectShape } from "./Dialect.ts"

/** Walks an error and its causes (repositories turn SqlError into defects, so it may be wrapped). */
const someCause = (u: unknown, test: (code: unknown, message: unknown) => boolean): boolean => {
  for (let e: unknown = u, depth = 0; e !== null && typeof e === "object" && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown }
    if (test(code, message)) return true
  }
  return false
}

/**
 * SQLITE_BUSY: another process held the write lock past the busy timeout, or committed under a deferred
 * transaction that then wrote. The failed statement's transaction was rolled back, so the whole attempt can be
 * made again.
 */
/**
 * Takes SQLite's write lock now, as BEGIN IMMEDIATE would (a statement that writes no row still takes it), so a
 * transaction that reads and then writes waits for the lock (busy_timeout) instead of being refused at its write
 * because another process committed in between (Db.ts `transaction`, the job claim).
 */
export const takeSqliteWriteLock = (sql: SqlClient.SqlClient) => Effect.asVoid(sql`UPDATE effect_sql_migrations SET name = name WHERE 0`)

export const isSqliteBusy = (u: unknown): boolean =>
  someCause(u, (code, message) => code === "SQLITE_BUSY" || (typeof message === "string" && message.includes("database is locked")))

/** SQLITE_CONSTRAINT_UNIQUE / _PRIMARYKEY (and any other constraint: the callers only insert into unique keys). */
export const isSqliteUniqueViolation = (u: unknown): boolean =>
  someCause(u, (code) => typeof code === "string" && code.startsWith("SQLITE_CONSTRAINT"))

/** The server connection's session: foreign keys on, a 5 s busy timeout, WAL-safe `synchronous = NORMAL`. */
export const sqliteSession = (sql: SqlClient.SqlClient) =>
  Effect.forEach(["PRAGMA foreign_keys = ON", "PRAGMA busy_timeout = 5000", "PRAGMA synchronous = NORMAL"], (pragma) => sql.unsafe(pragma), { discard: true })

export const makeSqliteDialect = (sql: SqlClient.SqlClient): DialectShape => {
  const due = (now: string) => sql`available_at <= ${now} AND (state = 'pending' OR (state = 'leased' AND lease_expires_at <= ${now}))`
  const ofNode = (node: string) => sql`(node_id IS NULL OR node_id = ${node})`
  /** Lock keys held by a live lease; read in the claim's own transaction, which no other claim can interleave. */
  const lockFree = (now: string) =>
    sql`(lock_key IS NULL OR lock_key NOT IN (
      SELECT lock_key FROM jobs WHERE state = 'leased' AND lease_expires_at > ${now} AND lock_key IS NOT NULL))`

  return {
    engine: "sqlite",
    isUniqueViolation: isSqliteUniqueViolation,
    isBusy: isSqliteBusy,
    rowId: sql.literal("rowid"),
    jsonWithout: (column, key) => sql`json_remove(${sql(column)}, ${`$.${key}`})`,
    jsonEntryIs: (column, key, value) => sql`EXISTS (SELECT 1 FROM json_each(${sql(column)}) WHERE key = ${key} AND value = ${value})`,
    insertOrReplace: (table, row) => Effect.asVoid(sql`INSERT OR REPLACE INTO ${sql(table)} ${sql.insert({ ...row })}`),

    reserveIdempotencyKey: (ref, at) =>
      Effect.map(
        sql<{ fingerprint: string; response_body: string | null; expires_at: string }>`
          SELECT fingerprint, response_body, expires_at FROM idempotency_keys
          WHERE principal_id = ${ref.principalId} AND scope = ${ref.scope} AND key_hash = ${ref.keyHash}`,
        (rows) => {
          const existing = rows[0]
          // An expired record is overwritten by the completion.
          return existing !== undefined && existing.expires_at > at.now
            ? { _tag: "Existing" as const, fingerprint: existing.fingerprint, responseBody: existing.response_body }
            : { _tag: "Reserved" as const }
        }
      ),

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
        // The write lock first (Db.ts `takeWriteLock`): the claim reads, then writes.
        yield* takeSqliteWriteLock(sql)
        const ofTypes = only !== undefined
          ? sql`AND ${sql.in("type", only)}`
          : except !== undefined && except.length > 0
          ? sql`AND type NOT IN ${sql.in(except)}`
          : sql``
        const candidates = yield* sql<{ id: string; lock_key: string | null; state: string; lease_owner: string | null }>`
          SELECT id, lock_key, state, lease_owner FROM jobs WHERE ${due(now)} AND ${lockFree(now)} AND ${orderFree(sql)} AND ${ofNode(request.node)} ${ofTypes}
          ORDER BY available_at, created_at LIMIT ${limit * 4}`
        const locks = new Set<string>()
        const claimed: Array<ClaimedJob> = []
        for (const candidate of candidates) {
          if (claimed.length >= limit || request.running.has(candidate.id)) continue
          if (candidate.lock_key !== null) {
            if (locks.has(candidate.lock_key)) continue
            locks.add(candidate.lock_key)
          }
          const token = request.newToken()
          const rows = yield* sql`UPDATE jobs SET state = 'leased', lease_owner = ${request.owner}, lease_token = ${token},
              lease_expires_at = ${request.leaseExpiresAt}, attempts = attempts + 1, updated_at = ${now}
            WHERE id = ${candidate.id} AND ${due(now)} RETURNING ${sql.literal(CLAIMED_JOB_COLUMNS)}`
          const recovered = candidate.state === "leased" && candidate.lease_owner !== null && candidate.lease_owner !== request.owner
          if (rows[0] !== undefined) claimed.push({ row: rows[0], token, recovered })
        }
        return claimed
      }).pipe(sql.withTransaction),

    claimJobByKey: (request) =>
      Effect.gen(function*() {
        const token = request.newToken()
        const rows = yield* sql`UPDATE jobs SET state = 'leased', lease_owner = ${request.owner}, lease_token = ${token},
            lease_expires_at = ${request.leaseExpiresAt}, attempts = attempts + 1, updated_at = ${request.now}
          WHERE dedupe_key = ${request.dedupeKey} AND state = 'pending' AND available_at <= ${request.now} AND ${ofNode(request.node)} AND ${lockFree(request.now)} AND ${orderFree(sql)}
          RETURNING ${sql.literal(CLAIMED_JOB_COLUMNS)}`
        // Only pending jobs: nothing is taken over from another owner here.
        return rows[0] === undefined ? undefined : { row: rows[0], token, recovered: false }
      }),

    eventLogLocked: sql.literal(""),
    eventAppended: sql.literal(""),
    announced: () => sql.literal(""),
    lockKey: () => Effect.void,
    forUpdate: sql.literal(""),
    positional: (statement) => statement
  }
}


/**
 * A second, synchronous connection to the same WAL file for the polled GETs (src/db/FastReadQueries.ts): reads
 * see every committed write and never block the writer; `query_only`, whatever a later change might try.
 */
export const openSqliteReadConnection = (file: string): Database => {
  const db = new Database(file)
  db.run("PRAGMA busy_timeout = 5000")
  db.run("PRAGMA query_only = ON")
  return db
}
