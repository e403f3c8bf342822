/**
 * The sandbox plane: sandboxes, operations and their events, provider attempts, processes and their output
 * events, runtime (file) operations, endpoints, and the durable job table the OperationRunner works from.
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  const statements = [
    `CREATE TABLE sandboxes (
      id TEXT PRIMARY KEY,
      project_id TEXT NOT NULL REFERENCES projects(id),
      organization_id TEXT NOT NULL REFERENCES organizations(id),
      created_by_key_id TEXT,
      state TEXT NOT NULL,
      state_reason TEXT,
      requested TEXT NOT NULL,
      provider TEXT,
      billing_mode TEXT NOT NULL,
      resolved_resources TEXT,
      provider_resource TEXT,
      capabilities TEXT,
      cost_microusd INTEGER,
      cost_updated_at TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      ready_at TEXT,
      paused_at TEXT,
      stopped_at TEXT,
      last_activity_at TEXT,
      metadata TEXT NOT NULL
    )`,
    `CREATE INDEX sandboxes_project ON sandboxes(project_id, created_at DESC, id DESC)`,
    `CREATE INDEX sandboxes_org_state ON sandboxes(organization_id, state)`,
    `CREATE TABLE operations (
      id TEXT PRIMARY KEY,
      project_id TEXT NOT NULL REFERENCES projects(id),
      organization_id TEXT NOT NULL,
      created_by_key_id TEXT,
      type TEXT NOT NULL,
      state TEXT NOT NULL,
      resource_type TEXT NOT NULL,
      resource_id TEXT NOT NULL,
      error TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      completed_at TEXT
    )`,
    `CREATE INDEX operations_resource ON operations(resource_id, created_at)`,
    `CREATE TABLE operation_events (
      operation_id TEXT NOT NULL REFERENCES operations(id),
      seq INTEGER NOT NULL,
      type TEXT NOT NULL,
      occurred_at TEXT NOT NULL,
      data TEXT NOT NULL,
      PRIMARY KEY (operation_id, seq)
    )`,
    `CREATE TABLE provider_attempts (
      id TEXT PRIMARY KEY,
      sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),
      operation_id TEXT NOT NULL,
      attempt_index INTEGER NOT NULL,
      provider TEXT NOT NULL,
      outcome TEXT NOT NULL,
      code TEXT,
      message TEXT,
      unmet_requirements TEXT,
      created_at TEXT NOT NULL
    )`,
    `CREATE INDEX provider_attempts_sandbox ON provider_attempts(sandbox_id, attempt_index)`,
    `CREATE TABLE processes (
      id TEXT PRIMARY KEY,
      project_id TEXT NOT NULL REFERENCES projects(id),
      sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),
      created_by_key_id TEXT,
      state TEXT NOT NULL,
      command TEXT NOT NULL,
      cwd TEXT,
      environment TEXT NOT NULL,
      timeout_seconds INTEGER NOT NULL,
      max_output_bytes INTEGER NOT NULL,
      output_bytes INTEGER NOT NULL DEFAULT 0,
      stdout_bytes INTEGER NOT NULL DEFAULT 0,
      stderr_bytes INTEGER NOT NULL DEFAULT 0,
      output_truncated INTEGER NOT NULL DEFAULT 0,
      exit_code INTEGER,
      termination_signal TEXT,
      error TEXT,
      execution_id TEXT,
      next_event_seq INTEGER NOT NULL DEFAULT 0,
      provider_seq INTEGER NOT NULL DEFAULT 0,
      cancel_requested_at TEXT,
      created_at TEXT NOT NULL,
      started_at TEXT,
      completed_at TEXT
    )`,
    `CREATE INDEX processes_sandbox ON processes(sandbox_id, created_at)`,
    `CREATE TABLE process_events (
      process_id TEXT NOT NULL REFERENCES processes(id),
      seq INTEGER NOT NULL,
      type TEXT NOT NULL,
      occurred_at TEXT NOT NULL,
      data TEXT NOT NULL,
      PRIMARY KEY (process_id, seq)
    )`,
    `CREATE TABLE runtime_operations (
      id TEXT PRIMARY KEY,
      project_id TEXT NOT NULL REFERENCES projects(id),
      sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),
      kind TEXT NOT NULL,
      state TEXT NOT NULL,
      request TEXT NOT NULL,
      result TEXT,
      error TEXT,
      created_at TEXT NOT NULL,
      started_at TEXT,
      completed_at TEXT
    )`,
    `CREATE INDEX runtime_operations_sandbox ON runtime_operations(sandbox_id, created_at)`,
    `CREATE TABLE endpoints (
      id TEXT PRIMARY KEY,
      project_id TEXT NOT NULL REFERENCES projects(id),
      sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),
      port INTEGER NOT NULL,
      protocol TEXT NOT NULL,
      state TEXT NOT NULL,
      url TEXT NOT NULL,
      token_hash TEXT NOT NULL,
      provider_lease_id TEXT,
      provider_url TEXT,
      error TEXT,
      lease_expires_at TEXT NOT NULL,
      revoked_at TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
    `CREATE INDEX endpoints_sandbox ON endpoints(sandbox_id, created_at DESC, id DESC)`,
    `CREATE UNIQUE INDEX endpoints_live_port ON endpoints(sandbox_id, port) WHERE state IN ('provisioning', 'active', 'revoking')`,
    `CREATE TABLE jobs (
      id TEXT PRIMARY KEY,
      type TEXT NOT NULL,
      dedupe_key TEXT NOT NULL UNIQUE,
      lock_key TEXT,
      payload TEXT NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('pending', 'leased', 'succeeded', 'failed')),
      available_at TEXT NOT NULL,
      lease_owner TEXT,
      lease_token TEXT,
      lease_expires_at TEXT,
      attempts INTEGER NOT NULL DEFAULT 0,
      last_error TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
    `CREATE INDEX jobs_due ON jobs(state, available_at)`,
    `CREATE INDEX jobs_lock ON jobs(lock_key, state)`
  ]
  yield* ddl(statements)
})
