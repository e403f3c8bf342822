/**
 * Fan-out (reference §8): in the transaction that appends an event, one delivery per enabled, undeleted endpoint
 * of its organization whose filter matches (an empty filter means every type), unique on (endpoint, event), each
 * with its durable `webhook.deliver` job. The body every attempt sends is fixed here, so a retried or recovered
 * delivery sends the same bytes under the same `metal-delivery-id`.
 */
import { Effect, Schema } from "effect"
import type { EventRow } from "../../db/repos/Events.ts"
import { WebhookDeliveriesRepo } from "../../db/repos/WebhookDeliveries.ts"
import { eventCursor } from "../../domain/Cursor.ts"
import { newUuid, Uuid } from "../../domain/Ids.ts"
import { defineJob, enqueueJob } from "../JobRegistry.ts"

export const WebhookDeliverJob = defineJob("webhook.deliver", Schema.Struct({ delivery_id: Uuid }))

/** One lock per endpoint: its deliveries go one at a time, in order, and one slow receiver holds up only itself. */
export const endpointLock = (endpointId: string) => `webhook:${endpointId}`

/** The body of a delivery: the durable event envelope, exactly as `/v1/events` shows it. */
export const envelopeOf = (event: EventRow) =>
  JSON.stringify({
    cursor: eventCursor(event),
    event_id: event.id,
    type: event.type,
    organization_id: event.organization_id,
    project_id: event.project_id,
    occurred_at: event.occurred_at,
    data: event.data
  })

/**
 * Set when this process enqueued a delivery; the event feed wakes the job runner after the commit only then (most
 * events have no webhook: waking the runner for each would make it claim, and write, for nothing).
 */
let deliveriesEnqueued = false
/** Whether a delivery was enqueued since the last call (and forgets it). */
export const takeDeliveriesHint = () => {
  const was = deliveriesEnqueued
  deliveriesEnqueued = false
  return was
}

/** Writes a delivery's job (call inside the transaction that writes the delivery). */
export const enqueueDelivery = (deliveryId: string, endpointId: string, dedupeKey: string) =>
  Effect.zipRight(
    enqueueJob(WebhookDeliverJob, { dedupeKey, lockKey: endpointLock(endpointId), payload: { delivery_id: deliveryId } }),
    Effect.sync(() => void (deliveriesEnqueued = true))
  )

/** Call inside the event's transaction (services/Events.ts does). */
export const fanOut = (event: EventRow, endpoints: ReadonlyArray<{ readonly id: string }>) =>
  Effect.gen(function*() {
    if (endpoints.length === 0) return
    const body = envelopeOf(event)
    for (const endpoint of endpoints) {
      const id = newUuid()
      const inserted = yield* WebhookDeliveriesRepo.insert({
        id,
        endpointId: endpoint.id,
        organizationId: event.organization_id,
        eventId: event.id,
        eventType: event.type,
        isTest: false,
        body,
        now: event.occurred_at
      })
      if (inserted) yield* enqueueDelivery(id, endpoint.id, `webhook:${endpoint.id}:${event.id}`)
    }
  })
