/**
 * What the endpoint proxy reads on every request, and what its watchdog re-reads while connections are open:
 * the endpoint's lease and state together with its sandbox's state, in one statement.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export interface EndpointAccessRow {
  readonly id: string
  readonly sandbox_id: string
  readonly state: string
  readonly token_hash: string
  readonly provider_url: string | null
  readonly lease_expires_at: string
  readonly sandbox_state: string
}

export const findEndpointAccess = (endpointId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<EndpointAccessRow>`SELECT e.id, e.sandbox_id, e.state, e.token_hash, e.provider_url, e.lease_expires_at, s.state AS sandbox_state
      FROM endpoints e JOIN sandboxes s ON s.id = e.sandbox_id WHERE e.id = ${endpointId}`).pipe(
      Effect.map((rows) => rows[0]),
      Effect.orDie
    )

/** The rows of these endpoints (an id with no row is simply absent). */
export const listEndpointAccess = (endpointIds: ReadonlyArray<string>) =>
  endpointIds.length === 0
    ? Effect.succeed([] as ReadonlyArray<EndpointAccessRow>)
    : Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<EndpointAccessRow>`SELECT e.id, e.sandbox_id, e.state, e.token_hash, e.provider_url, e.lease_expires_at, s.state AS sandbox_state
        FROM endpoints e JOIN sandboxes s ON s.id = e.sandbox_id WHERE e.id IN ${sql.in(endpointIds)}`).pipe(Effect.orDie)
