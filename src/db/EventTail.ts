/**
 * What the live event feed (services/EventFeed.ts) polls: the newest sequence number of the event log, and which
 * projects the events after a point belong to.
 *
 * SQLite: prepared statements on the dialect's synchronous read connection (src/db/SqliteDialect.ts): a poll
 * costs microseconds and never waits behind the writer.
 *
 * PostgreSQL: the same answers from memory, kept current by a background reader of the log's tail, which reads
 * at once when an event is announced (LISTEN on the channel every append NOTIFYs, at commit: events committed by
 * any replica) and every `PG_POLL_MS` in any case (should a notification be lost with a broken connection).
 */
import { PgClient } from "@effect/sql-pg"
import type { Statement } from "bun:sqlite"
import { SqlClient as SqlClientTag } from "@effect/sql"
import { Effect, Queue, Schedule, type Scope, Stream } from "effect"
import { AppConfig } from "../Config.ts"
import { EVENTS_CHANNEL, SIGNALS_CHANNEL } from "./PgDialect.ts"
import { databaseFile } from "./Sql.ts"
import { openSqliteReadConnection } from "./SqliteDialect.ts"

export interface EventTail {
  /** The newest event's sequence number (0 when the log is empty). */
  readonly lastSeq: () => number
  /** The projects (null: organization-level events) of the events in (after, upTo]. */
  readonly projectsBetween: (after: number, upTo: number) => ReadonlySet<string | null>
  /** Calls `handler` with each topic another process announced (Db.announce); SQLite: never. */
  readonly onSignal: (handler: (topic: string) => void) => void
  /** Calls `handler` whenever the tail learnt of newer events on its own (PostgreSQL's reader); SQLite: never. */
  readonly onAdvance: (handler: () => void) => void
  readonly close: () => void
}

export const openEventTail = (dataDir: string): EventTail => {
  const db = openSqliteReadConnection(databaseFile(dataDir))
  const last: Statement<{ seq: number }, []> = db.query("SELECT seq FROM domain_events ORDER BY seq DESC LIMIT 1")
  const projects: Statement<{ project_id: string | null }, [number, number]> = db.query(
    "SELECT DISTINCT project_id FROM domain_events WHERE seq > ? AND seq <= ?"
  )
  return {
    lastSeq: () => last.get()?.seq ?? 0,
    projectsBetween: (after, upTo) => new Set(projects.all(after, upTo).map((r) => r.project_id)),
    onSignal: () => undefined,
    onAdvance: () => undefined,
    close: () => db.close()
  }
}

const PG_POLL_MS = 250
/** Events remembered (seq → project) for `projectsBetween`; far more than arrive between two reads. */
const PG_KEPT = 20_000
const PG_BATCH = 5_000

const isPgClient = (sql: SqlClientTag.SqlClient): sql is PgClient.PgClient => PgClient.TypeId in sql

/** The PostgreSQL tail: answers from memory, refreshed in the background for as long as the scope is open. */
export const pgEventTail = (sql: SqlClientTag.SqlClient): Effect.Effect<EventTail, never, Scope.Scope> =>
  Effect.gen(function*() {
    const seqs: Array<number> = []
    const projects: Array<string | null> = []
    const first = yield* sql<{ seq: number | null }>`SELECT MAX(seq) AS seq FROM domain_events`.pipe(Effect.orDie)
    let last = first[0]?.seq ?? 0
    /** Every event after this one is remembered. */
    let coveredFrom = last
    let advanced: () => void = () => undefined
    const readAll = Effect.gen(function*() {
      for (;;) {
        const rows = yield* sql<{ seq: number; project_id: string | null }>`
          SELECT seq, project_id FROM domain_events WHERE seq > ${last} ORDER BY seq LIMIT ${PG_BATCH}`
        for (const row of rows) {
          seqs.push(row.seq)
          projects.push(row.project_id)
          last = row.seq
        }
        if (seqs.length > PG_KEPT) {
          coveredFrom = seqs[seqs.length - PG_KEPT - 1]!
          seqs.splice(0, seqs.length - PG_KEPT)
          projects.splice(0, projects.length - PG_KEPT)
        }
        if (rows.length < PG_BATCH) return
      }
    })
    const read = Effect.gen(function*() {
      const before = last
      yield* readAll
      if (last > before) advanced()
    }).pipe(Effect.catchAllCause((cause) => Effect.logDebug("event tail read failed", cause)))
    // Reads are coalesced: a burst of notifications causes one read after the one under way.
    const wake = yield* Queue.sliding<void>(1)
    yield* Queue.take(wake).pipe(Effect.zipRight(read), Effect.forever, Effect.forkScoped)
    yield* Queue.offer(wake, undefined).pipe(Effect.repeat(Schedule.spaced(`${PG_POLL_MS} millis`)), Effect.forkScoped)
    let signalHandler: (topic: string) => void = () => undefined
    if (isPgClient(sql)) {
      yield* sql.listen(EVENTS_CHANNEL).pipe(
        Stream.runForEach(() => Queue.offer(wake, undefined)),
        Effect.catchAllCause((cause) => Effect.logWarning("LISTEN on the event channel failed; polling only", cause)),
        Effect.forkScoped
      )
      yield* sql.listen(SIGNALS_CHANNEL).pipe(
        Stream.runForEach((topic) => Effect.sync(() => signalHandler(topic))),
        Effect.catchAllCause((cause) => Effect.logWarning("LISTEN on the signal channel failed; followers poll", cause)),
        Effect.forkScoped
      )
    }
    return {
      lastSeq: () => last,
      projectsBetween: (after, upTo) => {
        const out = new Set<string | null>()
        // An older range than is remembered (a long stall): every project may have news.
        if (after < coveredFrom) for (const p of projects) out.add(p)
        for (let i = seqs.length - 1; i >= 0 && seqs[i]! > after; i--) if (seqs[i]! <= upTo) out.add(projects[i]!)
        return out
      },
      onSignal: (handler) => {
        signalHandler = handler
      },
      onAdvance: (handler) => {
        advanced = handler
      },
      close: () => undefined
    }
  })

/** The tail of the configured engine, closed with the scope. */
export const eventTail: Effect.Effect<EventTail, never, AppConfig | SqlClientTag.SqlClient | Scope.Scope> = Effect.gen(function*() {
  const config = yield* AppConfig
  if (config.databaseUrl !== undefined) return yield* pgEventTail(yield* SqlClientTag.SqlClient)
  return yield* Effect.acquireRelease(Effect.sync(() => openEventTail(config.dataDir)), (t) => Effect.sync(() => t.close()))
})
