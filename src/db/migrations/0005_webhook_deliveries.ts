/**
 * Webhook delivery (docs/guide/webhooks.md): one delivery per (endpoint, event), written in the transaction of the
 * event, with the exact body every attempt sends; the log of its attempts; and on each endpoint, why it was
 * disabled and its current run of failed attempts (what auto-disable reads).
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  const statements = [
    `ALTER TABLE webhooks ADD COLUMN disabled_reason TEXT`,
    `ALTER TABLE webhooks ADD COLUMN consecutive_failures INTEGER NOT NULL DEFAULT 0`,
    `ALTER TABLE webhooks ADD COLUMN failing_since TEXT`,
    `CREATE TABLE webhook_deliveries (
      id TEXT PRIMARY KEY,
      endpoint_id TEXT NOT NULL REFERENCES webhooks(id),
      organization_id TEXT NOT NULL,
      event_id TEXT NOT NULL,
      event_type TEXT NOT NULL,
      is_test INTEGER NOT NULL,
      body TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'delivering', 'succeeded', 'retrying', 'failed')),
      attempt_count INTEGER NOT NULL DEFAULT 0,
      next_attempt_at TEXT,
      last_http_status INTEGER,
      last_error TEXT,
      last_latency_ms INTEGER,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      delivered_at TEXT,
      UNIQUE (endpoint_id, event_id)
    )`,
    `CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries(endpoint_id, created_at DESC, id DESC)`,
    `CREATE INDEX webhook_deliveries_finished ON webhook_deliveries(updated_at) WHERE status IN ('succeeded', 'failed')`,
    `CREATE TABLE webhook_delivery_attempts (
      delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
      number INTEGER NOT NULL,
      started_at TEXT NOT NULL,
      http_status INTEGER,
      error TEXT,
      latency_ms INTEGER NOT NULL,
      response_snippet TEXT,
      PRIMARY KEY (delivery_id, number)
    )`
  ]
  yield* ddl(statements)
})
