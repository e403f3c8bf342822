/**
 * The database: one SQLite file under DATA_DIR, WAL, foreign keys on, migrations from a record (so they
 * survive `bun build --compile`). bun-sqlite has one connection behind a semaphore: keep transactions short.
 */
import { BunContext } from "@effect/platform-bun"
import { SqlClient } from "@effect/sql"
import { SqliteClient, SqliteMigrator } from "@effect/sql-sqlite-bun"
import { Effect, Layer } from "effect"
import * as path from "node:path"
import { AppConfig } from "../Config.ts"
import { migrations } from "./migrations/index.ts"

export const databaseFile = (dataDir: string) => path.join(dataDir, "gateway.sqlite")

const Pragmas = Layer.effectDiscard(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe("PRAGMA foreign_keys = ON")
  yield* sql.unsafe("PRAGMA busy_timeout = 5000")
  yield* sql.unsafe("PRAGMA synchronous = NORMAL")
}))

const MigratorLive = SqliteMigrator.layer({ loader: SqliteMigrator.fromRecord(migrations) }).pipe(
  Layer.provide(BunContext.layer)
)

const ClientLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => SqliteClient.layer({ filename: databaseFile(config.dataDir) }))
)

/**
 * SQLITE_BUSY, as a failure or as the cause of a defect (repositories turn SqlError into defects): another
 * process held the write lock past the busy timeout, or committed under a deferred transaction that then wrote.
 * The failed statement's transaction was rolled back, so the whole attempt can be made again.
 */
export const isDatabaseBusy = (u: unknown): boolean => {
  for (let e: unknown = u, depth = 0; e !== null && typeof e === "object" && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown }
    if (code === "SQLITE_BUSY" || (typeof message === "string" && message.includes("database is locked"))) return true
  }
  return false
}

/** SqlClient with pragmas applied and every migration run. */
export const SqlLive = Layer.mergeAll(MigratorLive, Pragmas).pipe(Layer.provideMerge(ClientLive))
