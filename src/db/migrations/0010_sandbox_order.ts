/**
 * One order per sandbox (docs/guide/sandboxes.md, one order per sandbox): processes and runtime operations on one sandbox start in
 * the order they were accepted. Each such job takes its place from a counter on its sandbox
 * (`sandboxes.order_seq`, `UPDATE … SET order_seq = order_seq + 1 RETURNING`, in the transaction that accepts it:
 * the row lock orders the takers on PostgreSQL, as the counters of 0009 do) and is claimable only when no earlier
 * job of the same order is unfinished (`jobs.lock_seq`, see src/db/Dialect.ts `orderFree`). Timestamps could not
 * order them: two requests accepted in the same millisecond tie.
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  yield* ddl([
    `ALTER TABLE sandboxes ADD COLUMN order_seq INTEGER NOT NULL DEFAULT 0`,
    `ALTER TABLE jobs ADD COLUMN lock_seq INTEGER`
  ])
})
