/**
 * Terminals (issue 13, item 5): a process started on a pseudo-terminal keeps its current size (columns and
 * rows, changed by resizes through an attach); both null for a process without one.
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  yield* ddl([
    `ALTER TABLE processes ADD COLUMN pty_cols INTEGER`,
    `ALTER TABLE processes ADD COLUMN pty_rows INTEGER`
  ])
})
