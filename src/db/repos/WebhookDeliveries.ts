/**
 * Webhook deliveries, `webhook_deliveries` and `webhook_delivery_attempts` (docs/guide/webhooks.md): one row per
 * (endpoint, event), unique, created in the transaction of its event with the exact body every attempt sends;
 * and one row per attempt, numbered on across redeliveries.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { DeliveryStatus } from "../../domain/Webhooks.ts"
import { Dialect } from "../Dialect.ts"
import { IdColumn, IntBoolean, rowsOf, run } from "../Rows.ts"
import type { OrganizationId } from "../../domain/Ids.ts"

export const DeliveryRow = Schema.Struct({
  id: Schema.String,
  endpoint_id: Schema.String,
  organization_id: IdColumn.organization,
  event_id: Schema.String,
  event_type: Schema.String,
  is_test: IntBoolean,
  body: Schema.String,
  status: DeliveryStatus,
  attempt_count: Schema.Int,
  next_attempt_at: Schema.NullOr(Schema.String),
  last_http_status: Schema.NullOr(Schema.Int),
  last_error: Schema.NullOr(Schema.String),
  last_latency_ms: Schema.NullOr(Schema.Int),
  created_at: Schema.String,
  updated_at: Schema.String,
  delivered_at: Schema.NullOr(Schema.String)
})
export type DeliveryRow = typeof DeliveryRow.Type

export const AttemptRow = Schema.Struct({
  delivery_id: Schema.String,
  number: Schema.Int,
  started_at: Schema.String,
  http_status: Schema.NullOr(Schema.Int),
  error: Schema.NullOr(Schema.String),
  latency_ms: Schema.Int,
  response_snippet: Schema.NullOr(Schema.String)
})
export type AttemptRow = typeof AttemptRow.Type

export interface NewDelivery {
  readonly id: string
  readonly endpointId: string
  readonly organizationId: OrganizationId
  readonly eventId: string
  readonly eventType: string
  readonly isTest: boolean
  readonly body: string
  readonly now: string
}

/** What one attempt came to, and where it leaves the delivery. */
export interface AttemptRecord {
  readonly deliveryId: string
  readonly startedAt: string
  readonly httpStatus: number | null
  readonly error: string | null
  readonly latencyMs: number
  readonly snippet: string | null
  readonly status: "succeeded" | "retrying" | "failed"
  readonly nextAttemptAt: string | null
  readonly now: string
}

export class WebhookDeliveriesRepo extends Effect.Service<WebhookDeliveriesRepo>()("app/db/WebhookDeliveriesRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    const deliveries = rowsOf("webhook_deliveries", DeliveryRow)
    const attempts = rowsOf("webhook_delivery_attempts", AttemptRow)
    const ids = rowsOf("webhook_deliveries", Schema.Struct({ id: Schema.String }))
    const counts = rowsOf("webhook_deliveries", Schema.Struct({ attempt_count: Schema.Int }))
    const numbers = rowsOf("webhook_deliveries", Schema.Struct({ last_attempt_number: Schema.Int }))
    const byStatus = rowsOf("webhook_deliveries", Schema.Struct({ status: Schema.String, n: Schema.Int }))
    return {
      /** How many deliveries are in each status (the operators' metrics; finished ones until retention removes them). */
      countsByStatus: byStatus.all(sql`SELECT status, COUNT(*) AS n FROM webhook_deliveries GROUP BY status`),
      /** Inserts a pending delivery; false when the endpoint already has one for this event. */
      insert: (d: NewDelivery) =>
        Effect.map(
          ids.all(sql`INSERT INTO webhook_deliveries (id, endpoint_id, organization_id, event_id, event_type, is_test, body, status,
              attempt_count, created_at, updated_at)
            VALUES (${d.id}, ${d.endpointId}, ${d.organizationId}, ${d.eventId}, ${d.eventType}, ${d.isTest ? 1 : 0}, ${d.body}, 'pending',
              0, ${d.now}, ${d.now})
            ON CONFLICT (endpoint_id, event_id) DO NOTHING RETURNING id`),
          (rows) => rows.length > 0
        ),
      get: (id: string) => deliveries.first(sql`SELECT * FROM webhook_deliveries WHERE id = ${id}`),
      /** A delivery of this endpoint, or undefined. */
      find: (endpointId: string, id: string) =>
        deliveries.first(sql`SELECT * FROM webhook_deliveries WHERE id = ${id} AND endpoint_id = ${endpointId}`),
      /** An endpoint's deliveries, newest first, after the (created_at, id) position if given. */
      page: (endpointId: string, after: readonly [string, string] | undefined, limit: number) =>
        deliveries.all(after === undefined
          ? sql`SELECT * FROM webhook_deliveries WHERE endpoint_id = ${endpointId} ORDER BY created_at DESC, id DESC LIMIT ${limit}`
          : sql`SELECT * FROM webhook_deliveries WHERE endpoint_id = ${endpointId}
              AND (created_at < ${after[0]} OR (created_at = ${after[0]} AND id < ${after[1]}))
              ORDER BY created_at DESC, id DESC LIMIT ${limit}`),
      /** The attempts of these deliveries, oldest first within each. */
      attemptsOf: (deliveryIds: ReadonlyArray<string>) =>
        deliveryIds.length === 0
          ? Effect.succeed([] as ReadonlyArray<AttemptRow>)
          : attempts.all(sql`SELECT * FROM webhook_delivery_attempts WHERE ${sql.in("delivery_id", deliveryIds)} ORDER BY delivery_id, number`),
      /**
       * An attempt begins: `delivering`, one more attempt counted. Undefined when the delivery is finished (a job
       * run again after its result was recorded) or gone.
       */
      startAttempt: (id: string, now: string) =>
        Effect.map(
          counts.all(sql`UPDATE webhook_deliveries SET status = 'delivering', attempt_count = attempt_count + 1, next_attempt_at = NULL,
              updated_at = ${now}
            WHERE id = ${id} AND status IN ('pending', 'retrying', 'delivering') RETURNING attempt_count`),
          (rows) => rows[0]?.attempt_count
        ),
      /**
       * Logs an attempt and moves the delivery to its outcome. The attempt's number is the delivery's counter taken
       * by the same UPDATE (migration 0009): unique and gap-free even when two runs of one delivery record at once
       * (the row lock orders them). Run in a transaction, so the number is given back if the insert fails.
       */
      recordAttempt: (a: AttemptRecord) =>
        Effect.gen(function*() {
          const [taken] = yield* numbers.all(sql`UPDATE webhook_deliveries SET status = ${a.status}, next_attempt_at = ${a.nextAttemptAt},
              last_http_status = ${a.httpStatus}, last_error = ${a.error}, last_latency_ms = ${a.latencyMs}, updated_at = ${a.now},
              delivered_at = CASE WHEN ${a.status} = 'succeeded' THEN ${a.now} ELSE delivered_at END,
              last_attempt_number = last_attempt_number + 1
            WHERE id = ${a.deliveryId} RETURNING last_attempt_number`)
          if (taken === undefined) return
          yield* run(sql`INSERT INTO webhook_delivery_attempts (delivery_id, number, started_at, http_status, error, latency_ms, response_snippet)
            VALUES (${a.deliveryId}, ${taken.last_attempt_number}, ${a.startedAt}, ${a.httpStatus}, ${a.error}, ${a.latencyMs}, ${a.snippet})`)
        }),
      /** Given up without an attempt (its endpoint was disabled or deleted meanwhile). */
      abandon: (id: string, error: string, now: string) =>
        run(sql`UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_error = ${error}, updated_at = ${now}
          WHERE id = ${id} AND status IN ('pending', 'retrying', 'delivering')`),
      /** A finished delivery goes again from the start (its attempt log stays); false while it is in flight. */
      redeliver: (id: string, now: string) =>
        Effect.map(
          ids.all(sql`UPDATE webhook_deliveries SET status = 'pending', attempt_count = 0, next_attempt_at = NULL, updated_at = ${now}
            WHERE id = ${id} AND status IN ('succeeded', 'failed') RETURNING id`),
          (rows) => rows.length > 0
        ),
      /** Removes up to `limit` deliveries (with their attempts) that finished before `before`; returns how many went. */
      deleteFinishedBefore: (before: string, limit: number) =>
        Effect.map(
          sql`DELETE FROM webhook_deliveries WHERE ${dialect.rowId} IN (
              SELECT ${dialect.rowId} FROM webhook_deliveries WHERE status IN ('succeeded', 'failed') AND updated_at < ${before} LIMIT ${limit})
            RETURNING 1`.pipe(Effect.orDie),
          (rows) => rows.length
        )
    }
  })
}) {}
