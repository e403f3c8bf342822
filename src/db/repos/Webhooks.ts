/**
 * Webhook endpoints, `webhooks`: the signing secret is stored sealed (services/Crypto.ts) and dropped on delete.
 * Each endpoint keeps its last delivery's outcome and its current run of failed attempts (`consecutive_failures`
 * since `failing_since`), which is what disables it automatically (services/webhooks/Delivery.ts).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { IdColumn, IntBoolean, Json, rowsOf, run } from "../Rows.ts"
import type { OrganizationId } from "../../domain/Ids.ts"

export const WebhookRow = Schema.Struct({
  id: Schema.String,
  organization_id: IdColumn.organization,
  name: Schema.String,
  url: Schema.String,
  event_types: Json(Schema.Array(Schema.String)),
  enabled: IntBoolean,
  secret_ciphertext: Schema.String,
  secret_prefix: Schema.String,
  rotated_at: Schema.NullOr(Schema.String),
  last_delivery_at: Schema.NullOr(Schema.String),
  last_delivery_status: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String,
  disabled_at: Schema.NullOr(Schema.String),
  deleted_at: Schema.NullOr(Schema.String),
  disabled_reason: Schema.NullOr(Schema.String),
  consecutive_failures: Schema.Int,
  failing_since: Schema.NullOr(Schema.String)
})
export type WebhookRow = typeof WebhookRow.Type

/** An endpoint that receives an organization's events of some type (fan-out reads only these columns). */
export const SubscriberRow = Schema.Struct({ id: Schema.String, event_types: Json(Schema.Array(Schema.String)) })

/** The failure run after recording a failed attempt. */
export const FailureRunRow = Schema.Struct({
  consecutive_failures: Schema.Int,
  failing_since: Schema.NullOr(Schema.String),
  enabled: IntBoolean,
  deleted_at: Schema.NullOr(Schema.String)
})

const encodeRow = Schema.encodeSync(WebhookRow)

export class WebhooksRepo extends Effect.Service<WebhooksRepo>()("app/db/WebhooksRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const webhooks = rowsOf("webhooks", WebhookRow)
    const runs = rowsOf("webhooks", FailureRunRow)
    return {
      ofOrganization: (organizationId: OrganizationId) =>
        webhooks.all(sql`SELECT * FROM webhooks WHERE organization_id = ${organizationId} AND deleted_at IS NULL ORDER BY created_at, id`),
      find: (organizationId: OrganizationId, id: string) =>
        webhooks.first(sql`SELECT * FROM webhooks WHERE id = ${id} AND organization_id = ${organizationId} AND deleted_at IS NULL`),
      /** Any endpoint by id, deleted ones included (a delivery job reads its endpoint this way). */
      get: (id: string) => webhooks.first(sql`SELECT * FROM webhooks WHERE id = ${id}`),
      insert: (row: WebhookRow) => run(sql`INSERT INTO webhooks ${sql.insert({ ...encodeRow(row) })}`),
      update: (row: WebhookRow) =>
        run(sql`UPDATE webhooks SET name = ${row.name}, url = ${row.url}, event_types = ${JSON.stringify(row.event_types)},
          enabled = ${row.enabled ? 1 : 0}, disabled_at = ${row.disabled_at}, disabled_reason = ${row.disabled_reason},
          consecutive_failures = ${row.consecutive_failures}, failing_since = ${row.failing_since}, updated_at = ${row.updated_at}
          WHERE id = ${row.id}`),
      /** Deleted with its secret: a deleted webhook's secret cannot be recovered. */
      softDelete: (id: string, now: string) =>
        run(sql`UPDATE webhooks SET deleted_at = ${now}, disabled_at = COALESCE(disabled_at, ${now}), enabled = 0,
          secret_ciphertext = '', updated_at = ${now} WHERE id = ${id}`),
      rotateSecret: (id: string, sealed: { readonly ciphertext: string; readonly prefix: string }, now: string) =>
        run(sql`UPDATE webhooks SET secret_ciphertext = ${sealed.ciphertext}, secret_prefix = ${sealed.prefix}, rotated_at = ${now},
          updated_at = ${now} WHERE id = ${id}`),
      /** A delivered attempt: the failure run ends. */
      recordSuccess: (id: string, at: string, status: string) =>
        run(sql`UPDATE webhooks SET last_delivery_at = ${at}, last_delivery_status = ${status}, consecutive_failures = 0,
          failing_since = NULL WHERE id = ${id}`),
      /** A failed attempt: the failure run grows (it began at `startedAt` if this is its first); returns the run. */
      recordFailure: (id: string, at: string, status: string, startedAt: string) =>
        runs.first(sql`UPDATE webhooks SET last_delivery_at = ${at}, last_delivery_status = ${status},
          consecutive_failures = consecutive_failures + 1, failing_since = COALESCE(failing_since, ${startedAt})
          WHERE id = ${id} RETURNING consecutive_failures, failing_since, enabled, deleted_at`),
      /** Disabled by the gateway, with the reason shown on the endpoint; false if it was not enabled. */
      disable: (id: string, reason: string, now: string) =>
        Effect.map(
          sql`UPDATE webhooks SET enabled = 0, disabled_at = ${now}, disabled_reason = ${reason}, updated_at = ${now}
            WHERE id = ${id} AND enabled = 1 AND deleted_at IS NULL RETURNING id`.pipe(Effect.orDie),
          (rows) => rows.length > 0
        )
    }
  })
}) {}
