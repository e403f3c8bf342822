/** Account-plane rows in their wire form (src/domain/Accounts.ts, Webhooks.ts, ProviderCredentials.ts). */
import type { ApiKeyRow, ProjectRow } from "../../db/repos/Projects.ts"
import type { InvitationRow, OrganizationRow } from "../../db/repos/Organizations.ts"
import type { ProviderCredentialRow } from "../../db/repos/ProviderCredentials.ts"
import type { WebhookRow } from "../../db/repos/Webhooks.ts"
import type { EventRow } from "../../db/repos/Events.ts"
import type { DeliveryWithAttempts } from "../../services/webhooks/Commands.ts"

export const organizationToWire = (row: OrganizationRow) => ({
  id: row.id,
  name: row.name,
  slug: row.slug,
  created_at: row.created_at,
  updated_at: row.updated_at
})

/** A pending invitation past its expiry reads as `expired`. */
export const invitationToWire = (row: InvitationRow, now: string) => ({
  id: row.id,
  organization_id: row.organization_id,
  email: row.email,
  role: row.role,
  invited_by: row.invited_by,
  created_at: row.created_at,
  expires_at: row.expires_at,
  status: row.expires_at <= now ? ("expired" as const) : ("pending" as const)
})

export const projectToWire = (row: ProjectRow) => ({
  id: row.id,
  organization_id: row.organization_id,
  name: row.name,
  slug: row.slug,
  created_at: row.created_at,
  updated_at: row.updated_at
})

export const apiKeyToWire = (row: ApiKeyRow) => ({
  id: row.id,
  project_id: row.project_id,
  name: row.name,
  prefix: row.prefix,
  created_at: row.created_at,
  last_used_at: row.last_used_at,
  expires_at: row.expires_at,
  revoked_at: row.revoked_at,
  deleted_at: row.deleted_at
})

/** Never the secret: only its prefix. */
export const webhookToWire = (row: WebhookRow) => ({
  id: row.id,
  organization_id: row.organization_id,
  name: row.name,
  url: row.url,
  event_types: row.event_types,
  enabled: row.enabled,
  secret_prefix: row.secret_prefix,
  rotated_at: row.rotated_at,
  last_delivery_at: row.last_delivery_at,
  last_delivery_status: row.last_delivery_status,
  created_at: row.created_at,
  updated_at: row.updated_at,
  disabled_at: row.disabled_at,
  disabled_reason: row.disabled_reason
})

/** Never the credential itself. */
export const providerCredentialToWire = (row: ProviderCredentialRow) => ({
  id: row.id,
  organization_id: row.organization_id,
  provider: row.provider,
  created_at: row.created_at,
  updated_at: row.updated_at
})

/** A durable event with its cursor (`/v1/events`). */
export const eventToWire = (row: EventRow, cursor: string) => ({
  cursor,
  event_id: row.id,
  type: row.type,
  organization_id: row.organization_id,
  project_id: row.project_id,
  occurred_at: row.occurred_at,
  data: row.data
})

/** A delivery with its attempts and the exact body every attempt sends (the dashboard's deliveries log shows it). */
export const deliveryToWire = ({ attempts, delivery }: DeliveryWithAttempts) => ({
  id: delivery.id,
  endpoint_id: delivery.endpoint_id,
  event_id: delivery.event_id,
  event_type: delivery.event_type,
  status: delivery.status,
  attempt_count: delivery.attempt_count,
  next_attempt_at: delivery.next_attempt_at,
  last_http_status: delivery.last_http_status,
  last_error: delivery.last_error,
  last_latency_ms: delivery.last_latency_ms,
  is_test: delivery.is_test,
  created_at: delivery.created_at,
  updated_at: delivery.updated_at,
  delivered_at: delivery.delivered_at,
  payload: delivery.body,
  attempts: attempts.map((a) => ({
    number: a.number,
    started_at: a.started_at,
    http_status: a.http_status,
    error: a.error,
    latency_ms: a.latency_ms,
    response_snippet: a.response_snippet
  }))
})
