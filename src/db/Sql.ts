/**
 * The connection: SQLite (one file under DATA_DIR, WAL, foreign keys on) unless DATABASE_URL names a PostgreSQL
 * database, then a pool of `@effect/sql-pg` connections (docs/operations/scaling-out.md). Migrations come from one record
 * (so they survive `bun build --compile`), written once for both engines (src/db/migrations/Ddl.ts); on
 * PostgreSQL they run under an advisory lock, so replicas starting together migrate once. What is
 * engine-specific beyond this is the dialect seam's (src/db/Dialect.ts).
 */
import { BunContext } from "@effect/platform-bun"
import { Migrator, SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient, SqliteMigrator } from "@effect/sql-sqlite-bun"
import { Database } from "bun:sqlite"
import { Effect, Layer, Redacted } from "effect"
import * as path from "node:path"
import { AppConfig, type AppConfigShape } from "../Config.ts"
import { migrations } from "./migrations/index.ts"
import { isPgBusy } from "./PgDialect.ts"
import { isSqliteBusy, sqliteSession } from "./SqliteDialect.ts"

export const databaseFile = (dataDir: string) => path.join(dataDir, "gateway.sqlite")

/** Which engine a configuration selects. */
export const databaseEngine = (config: Pick<AppConfigShape, "databaseUrl">): "sqlite" | "pg" => (config.databaseUrl === undefined ? "sqlite" : "pg")

/** Only the SqlClient leaves the engine's layer (not the engine-specific client tags). */
const onlySqlClient = Layer.effect(SqlClient.SqlClient, SqlClient.SqlClient)

/**
 * How many prepared statements a connection keeps (bun:sqlite's `db.query` cache, through which @effect/sql-sqlite-bun
 * runs every statement). Bun's default is 20, and the gateway's request paths run a few hundred distinct statements,
 * so nearly every statement was prepared anew and its old one left to the collector (measured: ~5 ms of CPU per
 * `echo hi`, and 2,000 statements awaiting collection under load). Above the number the gateway runs.
 */
export const STATEMENT_CACHE_SIZE = 1024

const SqliteLive = (dataDir: string) => {
  Database.MAX_QUERY_CACHE_SIZE = Math.max(Database.MAX_QUERY_CACHE_SIZE, STATEMENT_CACHE_SIZE)
  return Layer.mergeAll(
    SqliteMigrator.layer({ loader: SqliteMigrator.fromRecord(migrations) }).pipe(Layer.provide(BunContext.layer)),
    Layer.effectDiscard(Effect.flatMap(SqlClient.SqlClient, sqliteSession)),
    onlySqlClient
  ).pipe(Layer.provide(SqliteClient.layer({ filename: databaseFile(dataDir) })))
}

/**
 * PostgreSQL values as the repositories' row Schemas expect them, which are SQLite's: int8 and numeric (COUNT,
 * SUM, BIGINT columns: money stays far below 2^53 micro-USD) as numbers, bytea as a Uint8Array, booleans as
 * booleans; everything else as its text.
 */
const NUMERIC_OIDS = new Set([20, 21, 23, 26, 700, 701, 1700])
const parseBytea = (text: string): Uint8Array => {
  if (!text.startsWith("\\x")) return new TextEncoder().encode(text)
  return Uint8Array.from(Buffer.from(text.slice(2), "hex"))
}
export const pgTypes = {
  getTypeParser: (oid: number) => (text: string): unknown =>
    NUMERIC_OIDS.has(oid) ? Number(text) : oid === 16 ? text === "t" : oid === 17 ? parseBytea(text) : text
}

/** Migrations under a transaction-scoped advisory lock: replicas starting together run them once. */
const PgMigrations = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SELECT pg_advisory_xact_lock(hashtextextended('gateway:migrations', 0))`
      // Created here, under the lock (the migrator's own check-then-create would race between replicas).
      yield* sql`CREATE TABLE IF NOT EXISTS effect_sql_migrations (
        migration_id integer primary key, created_at timestamp with time zone not null default now(), name text not null)`
      yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations) })
    }))
  })
)

/**
 * A statement waiting on a lock gives up after 5 s (55P03 → 503 `database_busy`), as SQLite's busy timeout does,
 * unless the URL sets its own session `options`.
 */
export const withSessionDefaults = (url: string): string => {
  const parsed = new URL(url)
  if (!parsed.searchParams.has("options")) parsed.searchParams.set("options", "-c lock_timeout=5000")
  return parsed.toString()
}

export const PgLive = (url: string, poolSize: number) =>
  Layer.mergeAll(PgMigrations, onlySqlClient).pipe(
    Layer.provide(PgClient.layer({
      url: Redacted.make(withSessionDefaults(url)),
      maxConnections: poolSize,
      applicationName: "sandbox-gateway",
      types: pgTypes
    }))
  )

/** Whether a failure (or a defect's cause) says the database was busy: the attempt was rolled back (→ 503). */
export const isDatabaseBusy = (u: unknown): boolean => isSqliteBusy(u) || isPgBusy(u)

/** SqlClient with the session set up and every migration run. */
export const SqlLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    config.databaseUrl === undefined ? SqliteLive(config.dataDir) : PgLive(config.databaseUrl, config.databasePoolSize ?? 1))
)
