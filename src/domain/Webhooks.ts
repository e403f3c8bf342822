/**
 * Webhook endpoints and their deliveries (spec §2.14, §4.9; reference §2 "Webhooks", §8 event catalog). The catalog
 * adds one type to the reference's: `webhook.endpoint_disabled`, sent to an organization's other endpoints when
 * one is disabled after failing for a day.
 */
import { Schema } from "effect"
import { Name, strict, Timestamp } from "./Accounts.ts"
import { OrganizationId, Uuid } from "./Ids.ts"

export const EVENT_TYPES = [
  "organization.created", "organization.updated", "organization.deleted",
  "organization.provider_credentials.configured", "organization.provider_credentials.rotated", "organization.provider_credentials.removed",
  "project.created", "project.deleted", "project.updated",
  "sandbox.requested", "sandbox.ready", "sandbox.paused", "sandbox.resumed", "sandbox.attempt_started", "sandbox.attempt_failed",
  "sandbox.cost_updated", "sandbox.failed", "sandbox.deleted",
  "process.queued", "process.started", "process.cancel_requested", "process.completed", "process.cancelled", "process.failed",
  "runtime_operation.completed", "runtime_operation.failed",
  "computer.action", "computer.screenshot", "recording.start", "recording.stop",
  "endpoint.created", "endpoint.revoked", "endpoint.expired", "endpoint.failed",
  "billing.credits_purchased", "billing.credits_granted", "billing.usage_charged", "billing.auto_topup_failed", "billing.spend_limit_reached",
  "webhook.test", "webhook.endpoint_disabled"
] as const
export const EventType = Schema.Literal(...EVENT_TYPES).annotations({ identifier: "EventType" })

/** http(s) only, no credentials in the URL, at most 2048 characters. */
export const WebhookUrl = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(2048),
  Schema.filter((s) => {
    let url: URL
    try {
      url = new URL(s)
    } catch {
      return "must be an absolute URL"
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return "must use http or https"
    if (url.username !== "" || url.password !== "") return "must not contain credentials"
    return true
  })
).annotations({
  identifier: "WebhookUrl",
  arbitrary: () => (fc) => fc.webUrl({ size: "small" }).filter((u) => u.length <= 2048 && !new URL(u).username)
})

const EventTypes = Schema.Array(EventType).pipe(
  Schema.maxItems(64),
  Schema.filter((types) => new Set(types).size === types.length || "must not repeat an event type")
)

export const WebhookEndpoint = Schema.Struct({
  id: Uuid,
  organization_id: OrganizationId,
  name: Schema.String,
  url: Schema.String,
  event_types: Schema.Array(Schema.String),
  enabled: Schema.Boolean,
  secret_prefix: Schema.String,
  rotated_at: Schema.NullOr(Timestamp),
  last_delivery_at: Schema.NullOr(Timestamp),
  last_delivery_status: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  updated_at: Timestamp,
  disabled_at: Schema.NullOr(Timestamp),
  disabled_reason: Schema.NullOr(Schema.String).annotations({
    description: "Why the gateway disabled the endpoint (every delivery failed for a day); null when enabled or disabled by a user"
  })
}).annotations({ identifier: "WebhookEndpoint" })

export const WebhookList = Schema.Struct({ webhooks: Schema.Array(WebhookEndpoint) }).annotations({ identifier: "WebhookList" })

export const WebhookWithSecret = Schema.Struct({
  ...WebhookEndpoint.fields,
  secret: Schema.String.annotations({ description: "The signing secret (`whsec_…`); shown only in this response" })
}).annotations({ identifier: "WebhookWithSecret" })

export const CreateWebhook = Schema.Struct({
  name: Name,
  url: WebhookUrl,
  event_types: Schema.optionalWith(EventTypes, { default: () => [] }),
  enabled: Schema.optionalWith(Schema.Boolean, { default: () => true })
}).annotations({ identifier: "CreateWebhook", ...strict })

export const UpdateWebhook = Schema.Struct({
  name: Schema.optional(Name),
  url: Schema.optional(WebhookUrl),
  event_types: Schema.optional(EventTypes),
  enabled: Schema.optional(Schema.Boolean)
}).pipe(
  Schema.filter((u) => Object.values(u).some((v) => v !== undefined) || "give at least one of name, url, event_types, enabled")
).annotations({ identifier: "UpdateWebhook", ...strict })

export const DELIVERY_STATUSES = ["pending", "delivering", "succeeded", "retrying", "failed"] as const
export const DeliveryStatus = Schema.Literal(...DELIVERY_STATUSES).annotations({ identifier: "WebhookDeliveryStatus" })
export type DeliveryStatus = typeof DeliveryStatus.Type

export const WebhookDeliveryAttempt = Schema.Struct({
  number: Schema.Int.pipe(Schema.positive()).annotations({ description: "1 for the first attempt; keeps counting across redeliveries" }),
  started_at: Timestamp,
  http_status: Schema.NullOr(Schema.Int).annotations({ description: "The receiver's status; null when no response came (network error, timeout, refused target)" }),
  error: Schema.NullOr(Schema.String),
  latency_ms: Schema.NonNegativeInt,
  response_snippet: Schema.NullOr(Schema.String).annotations({ description: "The first 4,096 bytes of the response body" })
}).annotations({ identifier: "WebhookDeliveryAttempt" })

export const WebhookDelivery = Schema.Struct({
  id: Uuid,
  endpoint_id: Uuid,
  event_id: Uuid,
  event_type: Schema.String,
  status: DeliveryStatus,
  attempt_count: Schema.NonNegativeInt,
  next_attempt_at: Schema.NullOr(Timestamp),
  last_http_status: Schema.NullOr(Schema.Int),
  last_error: Schema.NullOr(Schema.String),
  last_latency_ms: Schema.NullOr(Schema.NonNegativeInt),
  is_test: Schema.Boolean,
  created_at: Timestamp,
  updated_at: Timestamp,
  delivered_at: Schema.NullOr(Timestamp),
  payload: Schema.String.annotations({ description: "The exact request body every attempt sends (and signs): the event's JSON" }),
  attempts: Schema.Array(WebhookDeliveryAttempt).annotations({ description: "Every attempt, oldest first" })
}).annotations({ identifier: "WebhookDelivery" })

export const WebhookDeliveryList = Schema.Struct({
  deliveries: Schema.Array(WebhookDelivery),
  next_cursor: Schema.NullOr(Schema.String)
}).annotations({ identifier: "WebhookDeliveryList" })
