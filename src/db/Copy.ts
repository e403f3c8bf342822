/**
 * `bun run cli db copy --from <sqlite file> --to <postgres url>` (docs/operations/scaling-out.md): moves a stopped
 * single-node gateway's data into an empty PostgreSQL database.
 *
 * The target is migrated (the same migrations, translated: src/db/migrations/Ddl.ts) and must hold no rows; the
 * source must be at the same migration as this build (start the old gateway once to migrate it). Tables are
 * copied in the order the migrations created them (so foreign keys are satisfied), rows in their SQLite `rowid`
 * order (so the PostgreSQL `rowid` identity keeps insertion order), all in one transaction; the event cursor's
 * identity continues after the highest copied `seq`. Then each table is verified: its row count, and a checksum
 * of its rows (SHA-256 over the sorted SHA-256s of each row's values as canonical JSON, bytes as hex) computed
 * the same way on both sides.
 */
import { SqlClient } from "@effect/sql"
import { Database } from "bun:sqlite"
import { Data, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { migrations } from "./migrations/index.ts"
import { PgLive } from "./Sql.ts"

export class CopyError extends Data.TaggedError("CopyError")<{ readonly message: string }> {}

export interface TableReport {
  readonly table: string
  readonly rows: number
  readonly checksum: string
  readonly ok: boolean
}

export interface CopyReport {
  readonly tables: ReadonlyArray<TableReport>
  readonly ok: boolean
}

type Row = Record<string, unknown>

const BATCH = 500
const LATEST_MIGRATION = Math.max(...Object.keys(migrations).map((k) => Number(k.split("_")[0])))

const canonical = (row: Row): string =>
  JSON.stringify(Object.keys(row).filter((k) => k !== "rowid").sort().map((k) => {
    const v = row[k]
    return [k, v instanceof Uint8Array ? { bytes: Buffer.from(v).toString("hex") } : v ?? null]
  }))

/** Order-independent: the same rows give the same checksum whichever order either engine returns them in. */
export const checksumRows = (rows: ReadonlyArray<Row>): string => {
  const hashes = rows.map((r) => createHash("sha256").update(canonical(r)).digest("hex")).sort()
  const all = createHash("sha256")
  for (const h of hashes) all.update(h)
  return all.digest("hex")
}

const fail = (message: string) => new CopyError({ message })

/** Copies and verifies; fails (nothing committed) when the source or target is not as required. */
export const copySqliteToPostgres = (from: string, to: string): Effect.Effect<CopyReport, CopyError> =>
  Effect.gen(function*() {
    if (!fs.existsSync(from)) return yield* fail(`no SQLite database at ${from}`)
    if (!/^postgres(ql)?:\/\//.test(to)) return yield* fail("--to must be a PostgreSQL URL such as postgres://user@host:5432/gateway")
    const source = yield* Effect.acquireRelease(
      Effect.try({ try: () => new Database(from, { readonly: true }), catch: (e) => fail(`cannot open ${from}: ${String(e)}`) }),
      (db) => Effect.sync(() => db.close())
    )
    const migrated = (() => {
      try {
        return source.query<{ id: number | null }, []>("SELECT MAX(migration_id) AS id FROM effect_sql_migrations").get()?.id ?? 0
      } catch {
        return 0
      }
    })()
    if (migrated !== LATEST_MIGRATION) {
      return yield* fail(`the SQLite database is at migration ${migrated}, this gateway at ${LATEST_MIGRATION}: start this version on it once (then stop it) before copying`)
    }
    // Creation order: a table is created after every table it references.
    const tables = source.query<{ name: string }, []>(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'effect_sql_migrations' ORDER BY rowid"
    ).all().map((t) => t.name)
    const sourceRows = (table: string): Array<Row> => source.query<Row, []>(`SELECT * FROM "${table}" ORDER BY rowid`).all()

    return yield* Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const counts = yield* Effect.forEach(tables, (table) =>
        Effect.map(sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(table)}`, (rows) => ({ table, n: rows[0]?.n ?? 0 })))
      const nonEmpty = counts.filter((c) => c.n > 0)
      if (nonEmpty.length > 0) {
        return yield* fail(`the PostgreSQL database is not empty (${nonEmpty.map((c) => `${c.table}: ${c.n}`).join(", ")})`)
      }
      yield* sql.withTransaction(Effect.forEach(tables, (table) =>
        Effect.gen(function*() {
          const rows = sourceRows(table)
          for (let i = 0; i < rows.length; i += BATCH) yield* sql`INSERT INTO ${sql(table)} ${sql.insert(rows.slice(i, i + BATCH))}`
          if (table === "domain_events" && rows.length > 0) {
            yield* sql`SELECT setval(pg_get_serial_sequence('domain_events', 'seq'), (SELECT MAX(seq) FROM domain_events))`
          }
        }), { discard: true }))
      const reports = yield* Effect.forEach(tables, (table) =>
        Effect.gen(function*() {
          const expected = sourceRows(table)
          const copied = yield* sql<Row>`SELECT * FROM ${sql(table)}`
          const checksum = checksumRows(expected)
          return { table, rows: expected.length, checksum, ok: copied.length === expected.length && checksumRows(copied) === checksum }
        }))
      return { tables: reports, ok: reports.every((r) => r.ok) }
    }).pipe(
      Effect.provide(Layer.fresh(PgLive(to, 1))),
      Effect.catchTags({
        SqlError: (e) => Effect.fail(fail(`PostgreSQL: ${e.message}${e.cause instanceof Error ? `: ${e.cause.message}` : ""}`)),
        MigrationError: (e) => Effect.fail(fail(`PostgreSQL migrations: ${e.message}`))
      })
    )
  }).pipe(Effect.scoped)
