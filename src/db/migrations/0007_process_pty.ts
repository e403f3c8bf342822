/**
 * Terminals (issue 13, item 5): a process started on a pseudo-terminal keeps its current size (columns and
 * rows, changed by resizes through an attach); both null for a process without one.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`ALTER TABLE processes ADD COLUMN pty_cols INTEGER`)
  yield* sql.unsafe(`ALTER TABLE processes ADD COLUMN pty_rows INTEGER`)
})
