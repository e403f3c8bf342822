/**
 * Whether anything was committed to the database since a point: what lets the job runner sleep through a quiet
 * second without a round of claims (services/OperationRunner.ts).
 *
 * SQLite: `PRAGMA data_version` on a read connection of its own, which changes with every commit of any other
 * connection — this process's writer and other processes alike — and not with a transaction that wrote nothing
 * (a claim that found no job). About a microsecond, so it is read from plain JavaScript, not a fiber.
 * PostgreSQL: unknown (undefined): replicas enqueue jobs for each other, and the runner polls as it did.
 */
import type { Statement } from "bun:sqlite"
import { Effect, type Scope } from "effect"
import { AppConfig } from "../Config.ts"
import { databaseFile } from "./Sql.ts"
import { openSqliteReadConnection } from "./SqliteDialect.ts"

export interface WriteWatch {
  /** A number that differs after any commit; undefined when that cannot be known (PostgreSQL, or a failed read). */
  readonly version: () => number | undefined
}

const UNKNOWN: WriteWatch = { version: () => undefined }

export const writeWatch: Effect.Effect<WriteWatch, never, AppConfig | Scope.Scope> = Effect.gen(function*() {
  const config = yield* AppConfig
  if (config.databaseUrl !== undefined) return UNKNOWN
  const db = yield* Effect.acquireRelease(
    Effect.sync(() => openSqliteReadConnection(databaseFile(config.dataDir))),
    (db) => Effect.sync(() => db.close())
  )
  const query: Statement<{ data_version: number }, []> = db.query("PRAGMA data_version")
  return {
    version: () => {
      try {
        return query.get()?.data_version
      } catch {
        return undefined
      }
    }
  }
})
