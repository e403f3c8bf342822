/**
 * Sandbox endpoints, `endpoints` (spec §2.9): provisioning → active → revoking → revoked, or expired / failed.
 * At most one live endpoint per sandbox port (a partial unique index); of the capability URL's token only the
 * SHA-256 is stored.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { ErrorObject } from "../../domain/Errors.ts"
import { nowIso } from "../../domain/Time.ts"
import { IdColumn, Json, rowsOf, run } from "../Rows.ts"
import type { EndpointId, ProjectId, SandboxId } from "../../domain/Ids.ts"

export const EndpointState = Schema.Literal("provisioning", "active", "revoking", "revoked", "expired", "failed")
export type EndpointState = typeof EndpointState.Type

export const EndpointRow = Schema.Struct({
  id: IdColumn.endpoint,
  project_id: IdColumn.project,
  sandbox_id: IdColumn.sandbox,
  port: Schema.Int,
  protocol: Schema.String,
  state: EndpointState,
  url: Schema.String,
  token_hash: Schema.String,
  provider_lease_id: Schema.NullOr(Schema.String),
  provider_url: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Json(ErrorObject)),
  lease_expires_at: Schema.String,
  revoked_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
})
export type EndpointRow = typeof EndpointRow.Type

/**
 * What the endpoint proxy reads on every request, and what its watchdog re-reads while connections are open:
 * the endpoint's lease and state together with its sandbox's state, in one statement.
 */
export const EndpointAccessRow = Schema.Struct({
  id: IdColumn.endpoint,
  sandbox_id: IdColumn.sandbox,
  state: EndpointState,
  token_hash: Schema.String,
  provider_url: Schema.NullOr(Schema.String),
  lease_expires_at: Schema.String,
  sandbox_state: Schema.String
})
export type EndpointAccessRow = typeof EndpointAccessRow.Type

export interface NewEndpoint {
  readonly id: EndpointId
  readonly projectId: ProjectId
  readonly sandboxId: SandboxId
  readonly port: number
  readonly protocol: string
  readonly url: string
  readonly tokenHash: string
  readonly leaseExpiresAt: string
  readonly now: string
}

export class EndpointsRepo extends Effect.Service<EndpointsRepo>()("app/db/EndpointsRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const endpoints = rowsOf("endpoints", EndpointRow)
    const ids = rowsOf("endpoints", Schema.Struct({ id: IdColumn.endpoint }))
    const access = rowsOf("endpoints", EndpointAccessRow)
    return {
      get: (id: EndpointId) => endpoints.first(sql`SELECT * FROM endpoints WHERE id = ${id}`),
      /** The proxy's check of one endpoint (see EndpointAccessRow). */
      access: (id: EndpointId) =>
        access.first(sql`SELECT e.id, e.sandbox_id, e.state, e.token_hash, e.provider_url, e.lease_expires_at, s.state AS sandbox_state
          FROM endpoints e JOIN sandboxes s ON s.id = e.sandbox_id WHERE e.id = ${id}`),
      /** The rows of these endpoints (an id with no row is simply absent). */
      accessOf: (ids: ReadonlyArray<EndpointId>) =>
        ids.length === 0
          ? Effect.succeed<ReadonlyArray<EndpointAccessRow>>([])
          : access.all(sql`SELECT e.id, e.sandbox_id, e.state, e.token_hash, e.provider_url, e.lease_expires_at, s.state AS sandbox_state
            FROM endpoints e JOIN sandboxes s ON s.id = e.sandbox_id WHERE e.id IN ${sql.in(ids)}`),
      /** The live endpoint on a sandbox's port, if any. */
      liveOnPort: (sandboxId: SandboxId, port: number) =>
        Effect.map(ids.first(sql`SELECT id FROM endpoints WHERE sandbox_id = ${sandboxId} AND port = ${port}
          AND state IN ('provisioning', 'active', 'revoking')`), (row) => row?.id),
      insert: (endpoint: NewEndpoint) =>
        run(sql`INSERT INTO endpoints (id, project_id, sandbox_id, port, protocol, state, url, token_hash, lease_expires_at, created_at, updated_at)
          VALUES (${endpoint.id}, ${endpoint.projectId}, ${endpoint.sandboxId}, ${endpoint.port}, ${endpoint.protocol}, 'provisioning', ${endpoint.url},
                  ${endpoint.tokenHash}, ${endpoint.leaseExpiresAt}, ${endpoint.now}, ${endpoint.now})`),
      /** A sandbox's endpoints, newest first, after the (created_at, id) position if given. */
      page: (sandboxId: SandboxId, after: readonly [string, string] | undefined, limit: number) =>
        endpoints.all(after === undefined
          ? sql`SELECT * FROM endpoints WHERE sandbox_id = ${sandboxId} ORDER BY created_at DESC, id DESC LIMIT ${limit}`
          : sql`SELECT * FROM endpoints WHERE sandbox_id = ${sandboxId}
              AND (created_at < ${after[0]} OR (created_at = ${after[0]} AND id < ${after[1]}))
              ORDER BY created_at DESC, id DESC LIMIT ${limit}`),
      /** Moves an endpoint from one of `from` to `to`, with what the provider said; false when it was elsewhere. */
      setState: (id: EndpointId, from: ReadonlyArray<EndpointState>, to: EndpointState, fields: { readonly providerLeaseId?: string; readonly providerUrl?: string; readonly error?: ErrorObject } = {}) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const updated = yield* ids.all(sql`UPDATE endpoints SET state = ${to}, updated_at = ${now},
              provider_lease_id = COALESCE(${fields.providerLeaseId ?? null}, provider_lease_id),
              provider_url = COALESCE(${fields.providerUrl ?? null}, provider_url),
              error = COALESCE(${fields.error ? JSON.stringify(fields.error) : null}, error),
              revoked_at = CASE WHEN ${to} = 'revoked' THEN ${now} ELSE revoked_at END
            WHERE id = ${id} AND state IN ${sql.in(from)} RETURNING id`)
          return updated.length > 0
        }),
      markRevoking: (id: EndpointId, now: string) => run(sql`UPDATE endpoints SET state = 'revoking', updated_at = ${now} WHERE id = ${id}`),
      /** Every live endpoint of a stopped sandbox is revoked. */
      revokeLiveOf: (sandboxId: SandboxId, now: string) =>
        run(sql`UPDATE endpoints SET state = 'revoked', revoked_at = ${now}, updated_at = ${now}
          WHERE sandbox_id = ${sandboxId} AND state IN ('provisioning', 'active', 'revoking')`)
    }
  })
}) {}
