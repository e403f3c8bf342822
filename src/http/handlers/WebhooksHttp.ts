import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { notFound } from "../../domain/Errors.ts"
import { newUuid } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { WebhookWithSecret } from "../../domain/Webhooks.ts"
import { requireOrgRole } from "../../services/Access.ts"
import { ANY_ROLE, MANAGERS } from "../../domain/Principals.ts"
import { SecretBox } from "../../services/Crypto.ts"
import { randomToken } from "../../domain/Tokens.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { Api } from "../Api.ts"

interface WebhookRow {
  id: string
  organization_id: string
  name: string
  url: string
  event_types: string
  enabled: number
  secret_ciphertext: string
  secret_prefix: string
  rotated_at: string | null
  last_delivery_at: string | null
  last_delivery_status: string | null
  created_at: string
  updated_at: string
  disabled_at: string | null
  deleted_at: string | null
}

const toWire = (row: WebhookRow) => ({
  id: row.id,
  organization_id: row.organization_id,
  name: row.name,
  url: row.url,
  event_types: JSON.parse(row.event_types) as Array<string>,
  enabled: row.enabled === 1,
  secret_prefix: row.secret_prefix,
  rotated_at: row.rotated_at,
  last_delivery_at: row.last_delivery_at,
  last_delivery_status: row.last_delivery_status,
  created_at: row.created_at,
  updated_at: row.updated_at,
  disabled_at: row.disabled_at
})

/** `whsec_` + base64url of 32 random bytes; the first 14 characters are shown as `secret_prefix`. */
const newSecret = () => {
  const secret = randomToken("whsec_")
  return { secret, prefix: secret.slice(0, 14) }
}

export const WebhooksLive = HttpApiBuilder.group(Api, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const box = yield* SecretBox
    const idempotency = yield* IdempotencyStore
    const provide = Effect.provideService(SqlClient.SqlClient, sql)
    const find = (organizationId: string, id: string) =>
      sql<WebhookRow>`SELECT * FROM webhooks WHERE id = ${id} AND organization_id = ${organizationId} AND deleted_at IS NULL`.pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, ANY_ROLE)
          const rows = yield* sql<WebhookRow>`SELECT * FROM webhooks WHERE organization_id = ${path.organization_id} AND deleted_at IS NULL
            ORDER BY created_at, id`.pipe(Effect.orDie)
          return { webhooks: rows.map(toWire) }
        }).pipe(provide))
      .handle("create", ({ headers, path, payload }) =>
        Effect.gen(function*() {
          const access = yield* requireOrgRole(path.organization_id, MANAGERS)
          return yield* idempotency.remember({
            principalId: access.userId,
            scope: `webhooks.create:${path.organization_id}`,
            key: headers["idempotency-key"],
            required: false,
            request: payload,
            schema: WebhookWithSecret,
            run: Effect.gen(function*() {
              const now = yield* nowIso
              const { secret, prefix } = newSecret()
              const row: WebhookRow = {
                id: newUuid(),
                organization_id: path.organization_id,
                name: payload.name.trim(),
                url: payload.url,
                event_types: JSON.stringify(payload.event_types),
                enabled: payload.enabled ? 1 : 0,
                secret_ciphertext: box.seal(secret),
                secret_prefix: prefix,
                rotated_at: null,
                last_delivery_at: null,
                last_delivery_status: null,
                created_at: now,
                updated_at: now,
                disabled_at: payload.enabled ? null : now,
                deleted_at: null
              }
              yield* sql`INSERT INTO webhooks ${sql.insert({ ...row })}`.pipe(Effect.orDie)
              return { ...toWire(row), secret }
            })
          })
        }).pipe(provide))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, ANY_ROLE)
          const row = yield* find(path.organization_id, path.webhook_id)
          if (row === undefined) return yield* notFound("Webhook")
          return toWire(row)
        }).pipe(provide))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* find(path.organization_id, path.webhook_id)
          if (row === undefined) return yield* notFound("Webhook")
          const now = yield* nowIso
          const enabled = payload.enabled ?? row.enabled === 1
          const next: WebhookRow = {
            ...row,
            name: payload.name?.trim() ?? row.name,
            url: payload.url ?? row.url,
            event_types: payload.event_types === undefined ? row.event_types : JSON.stringify(payload.event_types),
            enabled: enabled ? 1 : 0,
            disabled_at: enabled ? null : (row.disabled_at ?? now),
            updated_at: now
          }
          yield* sql`UPDATE webhooks SET name = ${next.name}, url = ${next.url}, event_types = ${next.event_types}, enabled = ${next.enabled},
            disabled_at = ${next.disabled_at}, updated_at = ${now} WHERE id = ${row.id}`.pipe(Effect.orDie)
          return toWire(next)
        }).pipe(provide))
      .handle("delete", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* find(path.organization_id, path.webhook_id)
          if (row === undefined) return yield* notFound("Webhook")
          const now = yield* nowIso
          // The secret is destroyed with the endpoint.
          yield* sql`UPDATE webhooks SET deleted_at = ${now}, disabled_at = COALESCE(disabled_at, ${now}), enabled = 0,
            secret_ciphertext = '', updated_at = ${now} WHERE id = ${row.id}`.pipe(Effect.orDie)
          return { id: row.id, deleted: true as const }
        }).pipe(provide))
      .handle("rotate", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* find(path.organization_id, path.webhook_id)
          if (row === undefined) return yield* notFound("Webhook")
          const now = yield* nowIso
          const { secret, prefix } = newSecret()
          yield* sql`UPDATE webhooks SET secret_ciphertext = ${box.seal(secret)}, secret_prefix = ${prefix}, rotated_at = ${now},
            updated_at = ${now} WHERE id = ${row.id}`.pipe(Effect.orDie)
          return { ...toWire({ ...row, secret_prefix: prefix, rotated_at: now, updated_at: now }), secret }
        }).pipe(provide))
  }))
