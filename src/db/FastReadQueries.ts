/**
 * The reads behind FastReads (src/http/FastReads.ts): the API key check and the rows of the polled GETs, on a
 * connection of their own, with the repositories' SQL and row Schemas. A row that does not decode throws
 * `MalformedRow` (FastReads then hands the request to the full stack, which answers 500).
 *
 * - SQLite: prepared statements on the dialect's synchronous read connection (`openSqliteReadConnection`): each
 *   read returns its row at once.
 * - PostgreSQL: a small pool of its own (FAST_READ_CONNECTIONS), so a poll never waits behind the writers'
 *   transactions on the main pool; each read is a Promise. Values are parsed as on the main pool (`pgTypes`), so
 *   the rows decode to the same domain values and the bodies equal the full stack's.
 *
 * Rows read again unchanged (what polling does) are decoded once (`rowsOf`'s memo, shared with the repositories
 * for sandboxes and processes): on a busy server a row decode costs ~50–200 µs, the memo ~2 µs, on a path that
 * answers in ~100 µs. A process or file operation embeds only its sandbox's capability snapshot, read alone.
 */
import { PgClient } from "@effect/sql-pg"
import type { Statement } from "bun:sqlite"
import { Context, Effect, Layer, Redacted, type Scope } from "effect"
import { makePgDialect } from "./PgDialect.ts"
import { API_KEY_BY_HASH, ApiKeyCredentialRow } from "./repos/Projects.ts"
import { OPERATION_EVENTS_AFTER, OperationEventRow, OperationRow } from "./repos/Operations.ts"
import { PROCESS_EVENTS_AFTER, ProcessEventRow, type ProcessRow, processRows } from "./repos/Processes.ts"
import { RUNTIME_OPERATION_WITH_DATA, RuntimeOperationRow } from "./repos/RuntimeOperations.ts"
import { capabilitiesRows, type SandboxRow, sandboxRows } from "./repos/Sandboxes.ts"
import { rowsOf } from "./Rows.ts"
import { databaseFile, pgTypes, withSessionDefaults } from "./Sql.ts"
import { openSqliteReadConnection } from "./SqliteDialect.ts"

/** A value now (SQLite) or later (PostgreSQL). */
export type MaybePromise<A> = A | Promise<A>

export interface FastReadQueries {
  readonly liveApiKeyByHash: (keyHash: string) => MaybePromise<ApiKeyCredentialRow | undefined>
  readonly sandbox: (id: string) => MaybePromise<SandboxRow | undefined>
  /** A sandbox's capability snapshot, alone (null when none). */
  readonly capabilities: (sandboxId: string) => MaybePromise<SandboxRow["capabilities"]>
  readonly process: (id: string) => MaybePromise<ProcessRow | undefined>
  readonly operation: (id: string) => MaybePromise<OperationRow | undefined>
  readonly runtimeOperation: (id: string) => MaybePromise<RuntimeOperationRow | undefined>
  /** An operation's events after sequence number `afterSeq`, in order (what a follower of the operation reads next). */
  readonly operationEventsAfter: (operationId: string, afterSeq: number) => MaybePromise<ReadonlyArray<OperationEventRow>>
  /** A process's events after sequence number `afterSeq`, in order, at most `limit` of them. */
  readonly processEventsAfter: (processId: string, afterSeq: number, limit: number) => MaybePromise<ReadonlyArray<ProcessEventRow>>
}

/** Connections of the PostgreSQL fast-read pool (docs/operations/scaling-out.md). */
export const FAST_READ_CONNECTIONS = 4

/** A statement's rows for its parameters, now or later. */
type AllRows = (sql: string) => (...params: ReadonlyArray<string | number>) => MaybePromise<ReadonlyArray<unknown>>

/**
 * The queries over `prepare(sql)`, whose reads return the first row (or undefined or null), and `prepareAll(sql)`,
 * whose reads return every row, now or later.
 */
const queries = (prepare: (sql: string) => (param: string) => MaybePromise<unknown>, prepareAll: AllRows): FastReadQueries => {
  const reader = <A>(decode: (row: unknown) => A, sql: string) => {
    const read = prepare(sql)
    return (param: string): MaybePromise<A | undefined> => {
      const row = read(param)
      const decodeRow = (r: unknown) => (r === undefined || r === null ? undefined : decode(r))
      return row instanceof Promise ? row.then(decodeRow) : decodeRow(row)
    }
  }
  const capabilities = reader(capabilitiesRows.decodeSync, "SELECT capabilities FROM sandboxes WHERE id = ?")
  const operationEvents = rowsOf("operation_events", OperationEventRow).decodeSync
  const operationEventsAfter = prepareAll(OPERATION_EVENTS_AFTER)
  const processEvents = rowsOf("process_events", ProcessEventRow).decodeSync
  const processEventsAfter = prepareAll(PROCESS_EVENTS_AFTER)
  /** Every row, decoded, now or later. */
  const decoded = <A>(rows: MaybePromise<ReadonlyArray<unknown>>, decode: (row: unknown) => A): MaybePromise<ReadonlyArray<A>> =>
    rows instanceof Promise ? rows.then((r) => r.map(decode)) : rows.map(decode)
  return {
    liveApiKeyByHash: reader(rowsOf("api_keys", ApiKeyCredentialRow, { memo: 512 }).decodeSync, API_KEY_BY_HASH),
    sandbox: reader(sandboxRows.decodeSync, "SELECT * FROM sandboxes WHERE id = ?"),
    capabilities: (sandboxId) => {
      const row = capabilities(sandboxId)
      return row instanceof Promise ? row.then((r) => r?.capabilities ?? null) : row?.capabilities ?? null
    },
    process: reader(processRows.decodeSync, "SELECT * FROM processes WHERE id = ?"),
    operation: reader(rowsOf("operations", OperationRow, { memo: 512 }).decodeSync, "SELECT * FROM operations WHERE id = ?"),
    // Not remembered: a read's row carries the file's bytes.
    runtimeOperation: reader(rowsOf("runtime_operations", RuntimeOperationRow).decodeSync, RUNTIME_OPERATION_WITH_DATA),
    operationEventsAfter: (operationId, afterSeq) => decoded(operationEventsAfter(operationId, afterSeq), operationEvents),
    processEventsAfter: (processId, afterSeq, limit) => decoded(processEventsAfter(processId, afterSeq, limit), processEvents)
  }
}

/** SQLite: prepared statements on a synchronous read connection, closed with the scope. */
const sqliteFastReads = (dataDir: string): Effect.Effect<FastReadQueries, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(Effect.sync(() => openSqliteReadConnection(databaseFile(dataDir))), (db) => Effect.sync(() => db.close())),
    (db) =>
      queries(
        (sql) => {
          const statement: Statement<unknown, [string]> = db.query(sql)
          return (param) => statement.get(param)
        },
        (sql) => {
          const statement: Statement<unknown, Array<string | number>> = db.query(sql)
          return (...params) => statement.all(...params)
        }
      )
  )

/** PostgreSQL: a pool of its own, closed with the scope; each read runs as a Promise. */
const pgFastReads = (url: string): Effect.Effect<FastReadQueries, never, Scope.Scope> =>
  Effect.gen(function*() {
    const context = yield* Layer.build(PgClient.layer({
      url: Redacted.make(withSessionDefaults(url)),
      maxConnections: FAST_READ_CONNECTIONS,
      applicationName: "sandbox-gateway-fast-reads",
      types: pgTypes
    }))
    const sql = Context.get(context, PgClient.PgClient)
    const positional = makePgDialect(sql).positional
    return queries(
      (statement) => {
        const text = positional(statement)
        return (param) => Effect.runPromise(Effect.map(sql.unsafe(text, [param]), (rows) => rows[0]))
      },
      (statement) => {
        const text = positional(statement)
        return (...params) => Effect.runPromise(sql.unsafe(text, params))
      }
    )
  }).pipe(Effect.orDie)

/** The fast-read queries of the configured engine, closed with the scope. */
export const openFastReadQueries = (config: { readonly dataDir: string; readonly databaseUrl?: string | undefined }) =>
  config.databaseUrl === undefined ? sqliteFastReads(config.dataDir) : pgFastReads(config.databaseUrl)
