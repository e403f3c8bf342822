/**
 * Replicas (docs/operations/scaling-out.md): each gateway process is a node with an id (NODE_ID) and a heartbeat. A
 * sandbox on the local runtime (an emulated provider) lives on the node that provisioned it (`node_id`; null:
 * any node serves it), and its jobs carry that node (`jobs.node_id`), so only that node claims them.
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  yield* ddl([
    `CREATE TABLE nodes (
      id TEXT PRIMARY KEY,
      url TEXT,
      endpoint_url TEXT,
      started_at TEXT NOT NULL,
      heartbeat_at TEXT NOT NULL,
      lost_at TEXT
    )`,
    `ALTER TABLE sandboxes ADD COLUMN node_id TEXT`,
    `ALTER TABLE jobs ADD COLUMN node_id TEXT`,
    `CREATE INDEX sandboxes_node ON sandboxes(node_id) WHERE node_id IS NOT NULL`
  ])
})
