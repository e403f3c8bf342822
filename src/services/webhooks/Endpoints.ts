/**
 * An organization's webhook endpoints (reference §2 "Webhooks"): listed and read by any member; created, changed,
 * deleted and given a new signing secret by its managers. A URL is checked against the outbound policy
 * (Targets.ts `requireAllowedUrl`) outside any transaction; the secret is sealed (Crypto.ts) and shown once.
 */
import { Effect } from "effect"
import { type WebhookRow, WebhooksRepo } from "../../db/repos/Webhooks.ts"
import { notFound } from "../../domain/Errors.ts"
import { newUuid, type OrganizationId } from "../../domain/Ids.ts"
import { ANY_ROLE, MANAGERS } from "../../domain/Principals.ts"
import { nowIso } from "../../domain/Time.ts"
import { randomToken } from "../../domain/Tokens.ts"
import type { CreateWebhook, UpdateWebhook } from "../../domain/Webhooks.ts"
import { requireOrgRole } from "../Access.ts"
import { SecretBox } from "../Crypto.ts"
import { requireAllowedUrl } from "./Targets.ts"

/** `whsec_` + base64url of 32 random bytes; the first 14 characters are shown as `secret_prefix`. */
const newSecret = () => {
  const secret = randomToken("whsec_")
  return { secret, prefix: secret.slice(0, 14) }
}

/** The organization's endpoint, or 404. */
export const webhookOf = (organizationId: OrganizationId, webhookId: string) =>
  Effect.flatMap(WebhooksRepo.find(organizationId, webhookId), (row) => (row === undefined ? Effect.fail(notFound("Webhook")) : Effect.succeed(row)))

export const listWebhooks = (organizationId: OrganizationId) =>
  Effect.zipRight(requireOrgRole(organizationId, ANY_ROLE), WebhooksRepo.ofOrganization(organizationId))

export const getWebhook = (organizationId: OrganizationId, webhookId: string) =>
  Effect.zipRight(requireOrgRole(organizationId, ANY_ROLE), webhookOf(organizationId, webhookId))

/** A manager's check before a create: the role, then the URL (the caller then runs `newWebhook`, idempotently). */
export const checkNewWebhook = (organizationId: OrganizationId, url: string) =>
  Effect.tap(requireOrgRole(organizationId, MANAGERS), () => requireAllowedUrl(url))

/** The new endpoint and its secret (returned this once; only sealed in the row). */
export const newWebhook = (organizationId: OrganizationId, input: typeof CreateWebhook.Type) =>
  Effect.gen(function*() {
    const box = yield* SecretBox
    const now = yield* nowIso
    const { secret, prefix } = newSecret()
    const row: WebhookRow = {
      id: newUuid(),
      organization_id: organizationId,
      name: input.name.trim(),
      url: input.url,
      event_types: input.event_types,
      enabled: input.enabled,
      secret_ciphertext: box.seal(secret),
      secret_prefix: prefix,
      rotated_at: null,
      last_delivery_at: null,
      last_delivery_status: null,
      created_at: now,
      updated_at: now,
      disabled_at: input.enabled ? null : now,
      deleted_at: null,
      disabled_reason: null,
      consecutive_failures: 0,
      failing_since: null
    }
    yield* WebhooksRepo.insert(row)
    return { row, secret }
  }).pipe(Effect.withSpan("Webhooks.newWebhook", { attributes: { "organization.id": organizationId } }))

export const updateWebhook = (organizationId: OrganizationId, webhookId: string, input: typeof UpdateWebhook.Type) =>
  Effect.gen(function*() {
    yield* requireOrgRole(organizationId, MANAGERS)
    const row = yield* webhookOf(organizationId, webhookId)
    if (input.url !== undefined) yield* requireAllowedUrl(input.url)
    const now = yield* nowIso
    const enabled = input.enabled ?? row.enabled
    // Enabling it again, or pointing it elsewhere, starts its failure run afresh.
    const fresh = (enabled && !row.enabled) || (input.url !== undefined && input.url !== row.url)
    const next: WebhookRow = {
      ...row,
      name: input.name?.trim() ?? row.name,
      url: input.url ?? row.url,
      event_types: input.event_types ?? row.event_types,
      enabled,
      disabled_at: enabled ? null : (row.disabled_at ?? now),
      disabled_reason: enabled ? null : row.disabled_reason,
      consecutive_failures: fresh ? 0 : row.consecutive_failures,
      failing_since: fresh ? null : row.failing_since,
      updated_at: now
    }
    yield* WebhooksRepo.update(next)
    return next
  }).pipe(Effect.withSpan("Webhooks.updateWebhook", { attributes: { "organization.id": organizationId } }))

export const deleteWebhook = (organizationId: OrganizationId, webhookId: string) =>
  Effect.gen(function*() {
    yield* requireOrgRole(organizationId, MANAGERS)
    const row = yield* webhookOf(organizationId, webhookId)
    // The secret is destroyed with the endpoint.
    yield* WebhooksRepo.softDelete(row.id, yield* nowIso)
    return { id: row.id, deleted: true as const }
  }).pipe(Effect.withSpan("Webhooks.deleteWebhook", { attributes: { "organization.id": organizationId } }))

/** A new signing secret (returned this once), replacing the old one at once. */
export const rotateWebhookSecret = (organizationId: OrganizationId, webhookId: string) =>
  Effect.gen(function*() {
    yield* requireOrgRole(organizationId, MANAGERS)
    const row = yield* webhookOf(organizationId, webhookId)
    const box = yield* SecretBox
    const now = yield* nowIso
    const { secret, prefix } = newSecret()
    yield* WebhooksRepo.rotateSecret(row.id, { ciphertext: box.seal(secret), prefix }, now)
    return { row: { ...row, secret_prefix: prefix, rotated_at: now, updated_at: now }, secret }
  }).pipe(Effect.withSpan("Webhooks.rotateWebhookSecret", { attributes: { "organization.id": organizationId } }))
