import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { provideRepositories } from "../../db/Database.ts"
import { type WebhookRow, WebhooksRepo } from "../../db/repos/Webhooks.ts"
import { notFound } from "../../domain/Errors.ts"
import { newUuid } from "../../domain/Ids.ts"
import { ANY_ROLE, MANAGERS } from "../../domain/Principals.ts"
import { nowIso } from "../../domain/Time.ts"
import { randomToken } from "../../domain/Tokens.ts"
import { WebhookWithSecret } from "../../domain/Webhooks.ts"
import { requireOrgRole } from "../../services/Access.ts"
import { SecretBox } from "../../services/Crypto.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { requireAllowedUrl, WebhookResolver } from "../../services/webhooks/Targets.ts"
import { WebhookConfig } from "../../Config.ts"
import { Api } from "../Api.ts"
import { webhookToWire as toWire } from "../wire/Accounts.ts"

/** `whsec_` + base64url of 32 random bytes; the first 14 characters are shown as `secret_prefix`. */
const newSecret = () => {
  const secret = randomToken("whsec_")
  return { secret, prefix: secret.slice(0, 14) }
}

export const WebhooksLive = HttpApiBuilder.group(Api, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const box = yield* SecretBox
    const idempotency = yield* IdempotencyStore
    const webhooks = yield* WebhooksRepo
    const provide = yield* provideRepositories
    const find = webhooks.find
    const webhookConfig = yield* WebhookConfig
    const resolver = yield* WebhookResolver
    /** The URL policy (resolves the host; outside any transaction). */
    const allowedUrl = (url: string) =>
      requireAllowedUrl(url).pipe(Effect.provideService(WebhookConfig, webhookConfig), Effect.provideService(WebhookResolver, resolver))

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, ANY_ROLE)
          return { webhooks: (yield* webhooks.ofOrganization(path.organization_id)).map(toWire) }
        }).pipe(provide))
      .handle("create", ({ headers, path, payload }) =>
        Effect.gen(function*() {
          const access = yield* requireOrgRole(path.organization_id, MANAGERS)
          yield* allowedUrl(payload.url)
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
                event_types: payload.event_types,
                enabled: payload.enabled,
                secret_ciphertext: box.seal(secret),
                secret_prefix: prefix,
                rotated_at: null,
                last_delivery_at: null,
                last_delivery_status: null,
                created_at: now,
                updated_at: now,
                disabled_at: payload.enabled ? null : now,
                deleted_at: null,
                disabled_reason: null,
                consecutive_failures: 0,
                failing_since: null
              }
              yield* webhooks.insert(row)
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
          if (payload.url !== undefined) yield* allowedUrl(payload.url)
          const now = yield* nowIso
          const enabled = payload.enabled ?? row.enabled
          // Enabling it again, or pointing it elsewhere, starts its failure run afresh.
          const fresh = (enabled && !row.enabled) || (payload.url !== undefined && payload.url !== row.url)
          const next: WebhookRow = {
            ...row,
            name: payload.name?.trim() ?? row.name,
            url: payload.url ?? row.url,
            event_types: payload.event_types ?? row.event_types,
            enabled,
            disabled_at: enabled ? null : (row.disabled_at ?? now),
            disabled_reason: enabled ? null : row.disabled_reason,
            consecutive_failures: fresh ? 0 : row.consecutive_failures,
            failing_since: fresh ? null : row.failing_since,
            updated_at: now
          }
          yield* webhooks.update(next)
          return toWire(next)
        }).pipe(provide))
      .handle("delete", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* find(path.organization_id, path.webhook_id)
          if (row === undefined) return yield* notFound("Webhook")
          const now = yield* nowIso
          // The secret is destroyed with the endpoint.
          yield* webhooks.softDelete(row.id, now)
          return { id: row.id, deleted: true as const }
        }).pipe(provide))
      .handle("rotate", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* find(path.organization_id, path.webhook_id)
          if (row === undefined) return yield* notFound("Webhook")
          const now = yield* nowIso
          const { secret, prefix } = newSecret()
          yield* webhooks.rotateSecret(row.id, { ciphertext: box.seal(secret), prefix }, now)
          return { ...toWire({ ...row, secret_prefix: prefix, rotated_at: now, updated_at: now }), secret }
        }).pipe(provide))
  }))
