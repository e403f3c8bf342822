/**
 * The SQLite engine's connection: one file under DATA_DIR, WAL, foreign keys on, migrations from a record (so
 * they survive `bun build --compile`). bun-sqlite has one connection behind a semaphore: keep transactions
 * short. What is engine-specific beyond this is the dialect seam's (src/db/Dialect.ts).
 */
import { BunContext } from "@effect/platform-bun"
import { SqlClient } from "@effect/sql"
import { SqliteClient, SqliteMigrator } from "@effect/sql-sqlite-bun"
import { Effect, Layer } from "effect"
import * as path from "node:path"
import { AppConfig } from "../Config.ts"
import { migrations } from "./migrations/index.ts"
import { isSqliteBusy, sqliteSession } from "./SqliteDialect.ts"

export const databaseFile = (dataDir: string) => path.join(dataDir, "gateway.sqlite")

const Pragmas = Layer.effectDiscard(Effect.flatMap(SqlClient.SqlClient, sqliteSession))

const MigratorLive = SqliteMigrator.layer({ loader: SqliteMigrator.fromRecord(migrations) }).pipe(
  Layer.provide(BunContext.layer)
)

const ClientLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => SqliteClient.layer({ filename: databaseFile(config.dataDir) }))
)

/** Whether a failure (or a defect's cause) says the database was busy: the attempt was rolled back (→ 503). */
export const isDatabaseBusy = isSqliteBusy

/** SqlClient with pragmas applied and every migration run. */
export const SqlLive = Layer.mergeAll(MigratorLive, Pragmas).pipe(Layer.provideMerge(ClientLive))
