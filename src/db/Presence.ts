/**
 * Whether a gateway database is already there: the operator CLI asks before it opens one, so that a CLI run on
 * the wrong DATA_DIR or DATABASE_URL (not the server's) does not quietly create an empty gateway beside the real
 * one (README "Operator CLI", `--init`). Nothing is created or migrated here.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import * as fs from "node:fs"
import { databaseFile, pgTypes, withSessionDefaults } from "./Sql.ts"

/** The database could not be asked (PostgreSQL unreachable, refused, no such database). */
export class DatabaseUnreachable {
  readonly _tag = "DatabaseUnreachable"
  constructor(readonly message: string) {}
}

/**
 * SQLite: DATA_DIR/gateway.sqlite exists and is not empty (the server creates it empty, 0600, just before SQLite
 * first writes it). PostgreSQL: the migrations table exists.
 */
export const gatewayDatabaseExists = (target: { readonly dataDir: string; readonly databaseUrl: string | undefined }): Effect.Effect<boolean, DatabaseUnreachable> => {
  if (target.databaseUrl === undefined) {
    const file = databaseFile(target.dataDir)
    return Effect.sync(() => {
      try {
        const stat = fs.statSync(file)
        return stat.isFile() && stat.size > 0
      } catch {
        return false
      }
    })
  }
  return Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ present: boolean }>`SELECT to_regclass('effect_sql_migrations') IS NOT NULL AS present`
    return rows[0]?.present === true
  }).pipe(
    Effect.provide(PgClient.layer({ url: Redacted.make(withSessionDefaults(target.databaseUrl)), maxConnections: 1, applicationName: "sandbox-gateway-cli", types: pgTypes })),
    Effect.mapError((e) => new DatabaseUnreachable(e.message))
  )
}
