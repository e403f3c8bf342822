/**
 * What the delivery routes do (reference §2 "Webhooks"): a test send, a redelivery, and the delivery log of an
 * endpoint with each delivery's attempts. The caller wakes the runner after these return (they commit a job).
 */
import { Effect } from "effect"
import { inTransaction } from "../../db/Db.ts"
import { type AttemptRow, type DeliveryRow, WebhookDeliveriesRepo } from "../../db/repos/WebhookDeliveries.ts"
import type { WebhookRow } from "../../db/repos/Webhooks.ts"
import { conflict, notFound } from "../../domain/Errors.ts"
import { newUuid } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { enqueueDelivery } from "./FanOut.ts"

export interface DeliveryWithAttempts {
  readonly delivery: DeliveryRow
  readonly attempts: ReadonlyArray<AttemptRow>
}

const withAttempts = (rows: ReadonlyArray<DeliveryRow>) =>
  Effect.map(WebhookDeliveriesRepo.attemptsOf(rows.map((r) => r.id)), (attempts): Array<DeliveryWithAttempts> =>
    rows.map((delivery) => ({ delivery, attempts: attempts.filter((a) => a.delivery_id === delivery.id) })))

/** A `webhook.test` delivery to this endpoint alone (sent even when it is disabled); cursor `"test"`. */
export const sendTest = (endpoint: WebhookRow) =>
  inTransaction(Effect.gen(function*() {
    const now = yield* nowIso
    const id = newUuid()
    const eventId = newUuid()
    const body = JSON.stringify({
      cursor: "test",
      event_id: eventId,
      type: "webhook.test",
      organization_id: endpoint.organization_id,
      project_id: null,
      occurred_at: now,
      data: { webhook_id: endpoint.id, message: "A test delivery from Sandbox Gateway" }
    })
    yield* WebhookDeliveriesRepo.insert({ id, endpointId: endpoint.id, organizationId: endpoint.organization_id, eventId, eventType: "webhook.test", isTest: true, body, now })
    yield* enqueueDelivery(id, endpoint.id, `webhook:delivery:${id}`)
    const delivery = (yield* WebhookDeliveriesRepo.get(id))!
    return { delivery, attempts: [] } satisfies DeliveryWithAttempts
  })).pipe(Effect.withSpan("Webhooks.sendTest"))

/** A finished delivery, sent again from its first attempt (same id and body); 409 while it is still in flight. */
export const redeliver = (endpoint: WebhookRow, deliveryId: string) =>
  inTransaction(Effect.gen(function*() {
    const existing = yield* WebhookDeliveriesRepo.find(endpoint.id, deliveryId)
    if (existing === undefined) return yield* notFound("Delivery")
    const now = yield* nowIso
    if (!(yield* WebhookDeliveriesRepo.redeliver(deliveryId, now))) {
      return yield* conflict("delivery_in_flight", `The delivery is ${existing.status}; redeliver it once it has succeeded or failed`, { status: existing.status })
    }
    // A job of its own per redelivery: the earlier job of this delivery may not have finished its bookkeeping yet.
    yield* enqueueDelivery(deliveryId, endpoint.id, `webhook:delivery:${deliveryId}:${newUuid()}`)
    const delivery = (yield* WebhookDeliveriesRepo.get(deliveryId))!
    return (yield* withAttempts([delivery]))[0]!
  })).pipe(Effect.withSpan("Webhooks.redeliver"))

/** An endpoint's deliveries, newest first, `limit + 1` of them after the position (for paging), with their attempts. */
export const deliveryPage = (endpointId: string, after: readonly [string, string] | undefined, limit: number) =>
  Effect.flatMap(WebhookDeliveriesRepo.page(endpointId, after, limit), withAttempts)
