/**
 * Indexes the retention sweep reads by (services/Retention.ts): finished processes and runtime operations,
 * finished jobs, expired keys. And the bytes a file read returned, kept apart from the runtime operation's row
 * (raw, not base64, written once, removed with their operation).
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  const statements = [
    `CREATE TABLE runtime_operation_data (
      runtime_operation_id TEXT PRIMARY KEY REFERENCES runtime_operations(id) ON DELETE CASCADE,
      data BLOB NOT NULL
    )`,
    `CREATE INDEX processes_completed ON processes(completed_at) WHERE completed_at IS NOT NULL`,
    `CREATE INDEX runtime_operations_completed ON runtime_operations(completed_at) WHERE completed_at IS NOT NULL`,
    `CREATE INDEX jobs_finished ON jobs(updated_at) WHERE state IN ('succeeded', 'failed')`,
    `CREATE INDEX idempotency_keys_expires ON idempotency_keys(expires_at)`
  ]
  yield* ddl(statements)
})
