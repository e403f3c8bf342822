/**
 * What the live event feed (services/EventFeed.ts) polls: the newest sequence number of the event log, and which
 * projects the events after a point belong to. Prepared statements on the dialect's synchronous read connection
 * (src/db/SqliteDialect.ts): a poll costs microseconds and never waits behind the writer.
 */
import type { Statement } from "bun:sqlite"
import { databaseFile } from "./Sql.ts"
import { openSqliteReadConnection } from "./SqliteDialect.ts"

export interface EventTail {
  /** The newest event's sequence number (0 when the log is empty). */
  readonly lastSeq: () => number
  /** The projects (null: organization-level events) of the events in (after, upTo]. */
  readonly projectsBetween: (after: number, upTo: number) => ReadonlySet<string | null>
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
    close: () => db.close()
  }
}
