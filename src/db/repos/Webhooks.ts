/** Webhook endpoints, `webhooks`: the signing secret is stored sealed (services/Crypto.ts) and dropped on delete. */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { IntBoolean, Json, rowsOf, run } from "../Rows.ts"

export const WebhookRow = Schema.Struct({
  id: Schema.String,
  organization_id: Schema.String,
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
  deleted_at: Schema.NullOr(Schema.String)
})
export type WebhookRow = typeof WebhookRow.Type

const encodeRow = Schema.encodeSync(WebhookRow)

export class WebhooksRepo extends Effect.Service<WebhooksRepo>()("app/db/WebhooksRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const webhooks = rowsOf("webhooks", WebhookRow)
    return {
      ofOrganization: (organizationId: string) =>
        webhooks.all(sql`SELECT * FROM webhooks WHERE organization_id = ${organizationId} AND deleted_at IS NULL ORDER BY created_at, id`),
      find: (organizationId: string, id: string) =>
        webhooks.first(sql`SELECT * FROM webhooks WHERE id = ${id} AND organization_id = ${organizationId} AND deleted_at IS NULL`),
      insert: (row: WebhookRow) => run(sql`INSERT INTO webhooks ${sql.insert({ ...encodeRow(row) })}`),
      update: (row: WebhookRow) =>
        run(sql`UPDATE webhooks SET name = ${row.name}, url = ${row.url}, event_types = ${JSON.stringify(row.event_types)},
          enabled = ${row.enabled ? 1 : 0}, disabled_at = ${row.disabled_at}, updated_at = ${row.updated_at} WHERE id = ${row.id}`),
      /** Deleted with its secret: a deleted webhook's secret cannot be recovered. */
      softDelete: (id: string, now: string) =>
        run(sql`UPDATE webhooks SET deleted_at = ${now}, disabled_at = COALESCE(disabled_at, ${now}), enabled = 0,
          secret_ciphertext = '', updated_at = ${now} WHERE id = ${id}`),
      rotateSecret: (id: string, sealed: { readonly ciphertext: string; readonly prefix: string }, now: string) =>
        run(sql`UPDATE webhooks SET secret_ciphertext = ${sealed.ciphertext}, secret_prefix = ${sealed.prefix}, rotated_at = ${now},
          updated_at = ${now} WHERE id = ${id}`)
    }
  })
}) {}
