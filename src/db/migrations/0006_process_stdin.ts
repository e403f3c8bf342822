/**
 * A process's standard input (issue 13, item 3): whether it was started with stdin kept open, and when its input
 * was closed (`eof`), after which nothing more may be written.
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  yield* ddl([
    `ALTER TABLE processes ADD COLUMN stdin INTEGER NOT NULL DEFAULT 0`,
    `ALTER TABLE processes ADD COLUMN stdin_closed_at TEXT`
  ])
})
