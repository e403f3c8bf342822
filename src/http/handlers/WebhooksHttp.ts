import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { WebhookWithSecret } from "../../domain/Webhooks.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { provideServiceContext } from "../../services/ServiceContext.ts"
import { checkNewWebhook, deleteWebhook, getWebhook, listWebhooks, newWebhook, rotateWebhookSecret, updateWebhook } from "../../services/webhooks/Endpoints.ts"
import { Api } from "../Api.ts"
import { webhookToWire as toWire } from "../wire/Accounts.ts"

export const WebhooksLive = HttpApiBuilder.group(Api, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const idempotency = yield* IdempotencyStore
    const provide = yield* provideServiceContext
    const withSecret = ({ row, secret }: Effect.Effect.Success<ReturnType<typeof newWebhook>>) => ({ ...toWire(row), secret })

    return handlers
      .handle("list", ({ path }) => listWebhooks(path.organization_id).pipe(Effect.map((rows) => ({ webhooks: rows.map(toWire) })), provide))
      .handle("create", ({ headers, path, payload }) =>
        Effect.gen(function*() {
          const access = yield* checkNewWebhook(path.organization_id, payload.url)
          return yield* idempotency.remember({
            principalId: access.userId,
            scope: `webhooks.create:${path.organization_id}`,
            key: headers["idempotency-key"],
            required: false,
            request: payload,
            schema: WebhookWithSecret,
            run: Effect.map(newWebhook(path.organization_id, payload), withSecret)
          })
        }).pipe(provide))
      .handle("get", ({ path }) => getWebhook(path.organization_id, path.webhook_id).pipe(Effect.map(toWire), provide))
      .handle("update", ({ path, payload }) => updateWebhook(path.organization_id, path.webhook_id, payload).pipe(Effect.map(toWire), provide))
      .handle("delete", ({ path }) => deleteWebhook(path.organization_id, path.webhook_id).pipe(provide))
      .handle("rotate", ({ path }) => rotateWebhookSecret(path.organization_id, path.webhook_id).pipe(Effect.map(withSecret), provide))
  }))
