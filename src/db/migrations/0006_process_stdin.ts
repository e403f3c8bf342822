/**
 * A process's standard input (issue 13, item 3): whether it was started with stdin kept open, and when its input
 * was closed (`eof`), after which nothing more may be written.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`ALTER TABLE processes ADD COLUMN stdin INTEGER NOT NULL DEFAULT 0`)
  yield* sql.unsafe(`ALTER TABLE processes ADD COLUMN stdin_closed_at TEXT`)
})
