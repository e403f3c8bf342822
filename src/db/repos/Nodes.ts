/**
 * Replicas, `nodes` (docs/operations/scaling-out.md): each gateway process's node id, the URL the others reach it at, and
 * its heartbeat. A node silent past the grace period is lost; `markLost` is a compare-and-set, so of the
 * replicas that notice at once exactly one handles the loss.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { rowsOf, run } from "../Rows.ts"

export const NodeRow = Schema.Struct({
  id: Schema.String,
  url: Schema.NullOr(Schema.String),
  endpoint_url: Schema.NullOr(Schema.String),
  started_at: Schema.String,
  heartbeat_at: Schema.String,
  lost_at: Schema.NullOr(Schema.String)
})
export type NodeRow = typeof NodeRow.Type

export class NodesRepo extends Effect.Service<NodesRepo>()("app/db/NodesRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const nodes = rowsOf("nodes", NodeRow)
    const ids = rowsOf("nodes", Schema.Struct({ id: Schema.String }))
    return {
      /** This node starts (or restarts): it is alive from now. */
      register: (id: string, url: string | null, now: string) =>
        run(sql`INSERT INTO nodes (id, url, started_at, heartbeat_at, lost_at) VALUES (${id}, ${url}, ${now}, ${now}, NULL)
          ON CONFLICT (id) DO UPDATE SET url = COALESCE(excluded.url, nodes.url), started_at = excluded.started_at,
            heartbeat_at = excluded.heartbeat_at, lost_at = NULL`),
      beat: (id: string, now: string) =>
        run(sql`INSERT INTO nodes (id, url, started_at, heartbeat_at, lost_at) VALUES (${id}, NULL, ${now}, ${now}, NULL)
          ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, lost_at = NULL`),
      /** Where the other replicas reach this node's API (NODE_URL, else its listening address once known). */
      setUrl: (id: string, url: string, now: string) =>
        run(sql`INSERT INTO nodes (id, url, started_at, heartbeat_at, lost_at) VALUES (${id}, ${url}, ${now}, ${now}, NULL)
          ON CONFLICT (id) DO UPDATE SET url = excluded.url`),
      /** Where this node's endpoint listener is reached (path addressing), once it listens. */
      setEndpointUrl: (id: string, endpointUrl: string, now: string) =>
        run(sql`INSERT INTO nodes (id, url, endpoint_url, started_at, heartbeat_at, lost_at) VALUES (${id}, NULL, ${endpointUrl}, ${now}, ${now}, NULL)
          ON CONFLICT (id) DO UPDATE SET endpoint_url = excluded.endpoint_url`),
      /** The node a sandbox lives on (none: any node serves it). */
      ownerOf: (sandboxId: string) =>
        nodes.first(sql`SELECT n.id, n.url, n.endpoint_url, n.started_at, n.heartbeat_at, n.lost_at
          FROM sandboxes s JOIN nodes n ON n.id = s.node_id WHERE s.id = ${sandboxId}`),
      all: nodes.all(sql`SELECT * FROM nodes ORDER BY id`),
      /** Nodes silent since before `before`, not yet handled as lost. */
      silentSince: (before: string) => ids.all(sql`SELECT id FROM nodes WHERE heartbeat_at < ${before} AND lost_at IS NULL`),
      /** Marks a silent node lost; false when another replica did first (or it beat again meanwhile). */
      markLost: (id: string, before: string, now: string) =>
        Effect.map(
          ids.all(sql`UPDATE nodes SET lost_at = ${now} WHERE id = ${id} AND heartbeat_at < ${before} AND lost_at IS NULL RETURNING id`),
          (rows) => rows.length > 0
        )
    }
  })
}) {}
