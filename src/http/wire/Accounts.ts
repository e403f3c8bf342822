/** Account-plane rows in their wire form (src/domain/Accounts.ts, Webhooks.ts, ProviderCredentials.ts). */
import type { ApiKeyRow, ProjectRow } from "../../db/repos/Projects.ts"
import type { InvitationRow, OrganizationRow } from "../../db/repos/Organizations.ts"
import type { ProviderCredentialRow } from "../../db/repos/ProviderCredentials.ts"
import type { WebhookRow } from "../../db/repos/Webhooks.ts"
import type { EventRow } from "../../db/repos/Events.ts"

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
  disabled_at: row.disabled_at
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
