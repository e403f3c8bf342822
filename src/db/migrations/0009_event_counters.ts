/**
 * Numbering that holds under concurrency (docs/operations/scaling-out.md): an operation's events and a webhook delivery's
 * attempts were numbered `MAX(n) + 1`, which two concurrent transactions on PostgreSQL (two connections of one
 * pool, or two replicas) compute alike, so one of them failed on the primary key. Each parent gets a counter of
 * its last number, taken with `UPDATE … SET n = n + 1 RETURNING n` (the row lock orders the takers; a rollback
 * gives the number back), as processes always had (`processes.next_event_seq`). SQLite, one writer at a time,
 * keeps numbering operation events by `MAX + 1` in one statement (src/db/repos/Operations.ts).
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  yield* ddl([
    `ALTER TABLE operations ADD COLUMN last_event_seq INTEGER NOT NULL DEFAULT 0`,
    `UPDATE operations SET last_event_seq = (SELECT COALESCE(MAX(seq), 0) FROM operation_events WHERE operation_id = operations.id)`,
    `ALTER TABLE webhook_deliveries ADD COLUMN last_attempt_number INTEGER NOT NULL DEFAULT 0`,
    `UPDATE webhook_deliveries SET last_attempt_number =
      (SELECT COALESCE(MAX(number), 0) FROM webhook_delivery_attempts WHERE delivery_id = webhook_deliveries.id)`
  ])
})
