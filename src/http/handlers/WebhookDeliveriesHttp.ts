import { HttpApiBuilder } from "@effect/platform"
import { Effect, Schema } from "effect"
import { ANY_ROLE, MANAGERS } from "../../domain/Principals.ts"
import { requireOrgRole } from "../../services/Access.ts"
import { OperationRunner } from "../../services/OperationRunner.ts"
import { provideServiceContext } from "../../services/ServiceContext.ts"
import { deliveryPage, redeliver, sendTest } from "../../services/webhooks/Commands.ts"
import { webhookOf } from "../../services/webhooks/Endpoints.ts"
import { Api } from "../Api.ts"
import { decodeCursor, page } from "../Pagination.ts"
import { deliveryToWire } from "../wire/Accounts.ts"

/** A delivery cursor: the (created_at, id) of the last delivery of the page. */
const DeliveryPosition = Schema.Tuple(Schema.String, Schema.String)

export const WebhookDeliveriesLive = HttpApiBuilder.group(Api, "webhookDeliveries", (handlers) =>
  Effect.gen(function*() {
    const runner = yield* OperationRunner
    const provide = yield* provideServiceContext

    return handlers
      .handle("test", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const endpoint = yield* webhookOf(path.organization_id, path.webhook_id)
          const sent = yield* sendTest(endpoint)
          yield* runner.wake
          return deliveryToWire(sent)
        }).pipe(provide))
      .handle("list", ({ path, urlParams }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, ANY_ROLE)
          const endpoint = yield* webhookOf(path.organization_id, path.webhook_id)
          const scope = `deliveries:${endpoint.id}`
          const after = urlParams.cursor === undefined ? undefined : yield* decodeCursor(scope, urlParams.cursor, DeliveryPosition)
          const rows = yield* deliveryPage(endpoint.id, after, urlParams.limit + 1)
          const { items, next } = page(rows, urlParams.limit, scope, (last) => [last.delivery.created_at, last.delivery.id])
          return { deliveries: items.map(deliveryToWire), next_cursor: next }
        }).pipe(provide))
      .handle("redeliver", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const endpoint = yield* webhookOf(path.organization_id, path.webhook_id)
          const again = yield* redeliver(endpoint, path.delivery_id)
          yield* runner.wake
          return deliveryToWire(again)
        }).pipe(provide))
  }))
