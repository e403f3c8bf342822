/**
 * An organization's own provider credentials (BYOK): listed by any member (never their values), put and removed
 * by its managers. A put merges the given fields over the stored ones, then checks the provider's required
 * fields; the value is sealed (Crypto.ts) and only ProviderAccounts.ts opens it, to call the provider.
 */
import { Effect, Schema } from "effect"
import { inTransaction } from "../db/Db.ts"
import { type ProviderCredentialRow, ProviderCredentialsRepo } from "../db/repos/ProviderCredentials.ts"
import { notFound, validationError } from "../domain/Errors.ts"
import { newUuid, type OrganizationId } from "../domain/Ids.ts"
import { ANY_ROLE, MANAGERS } from "../domain/Principals.ts"
import { CREDENTIAL_FIELDS, type CredentialProvider, type ProviderCredentialInput, StoredCredentialFields } from "../domain/ProviderCredentials.ts"
import { nowIso } from "../domain/Time.ts"
import { requireOrgRole } from "./Access.ts"
import { SecretBox } from "./Crypto.ts"
import { appendEvent } from "./Events.ts"

/** A stored credential: the provider's fields, as sealed (an unreadable one is a defect, never a cast). */
const decodeFields = Schema.decodeUnknownSync(StoredCredentialFields)

export const listProviderCredentials = (organizationId: OrganizationId) =>
  Effect.zipRight(requireOrgRole(organizationId, ANY_ROLE), ProviderCredentialsRepo.ofOrganization(organizationId))

/** The stored credential and whether it is new (configured) rather than replaced (rotated). */
export const putProviderCredential = (organizationId: OrganizationId, provider: CredentialProvider, input: typeof ProviderCredentialInput.Type) =>
  Effect.gen(function*() {
    const access = yield* requireOrgRole(organizationId, MANAGERS)
    if (input.provider !== provider) {
      return yield* validationError("The body's provider must match the path", [{ path: "provider", message: `must be "${provider}"` }])
    }
    const box = yield* SecretBox
    const existing = yield* ProviderCredentialsRepo.live(organizationId, provider)
    const stored = existing === undefined ? {} : decodeFields(box.open(existing.ciphertext))
    const { provider: _provider, ...fields } = input as Record<string, string>
    const merged: Record<string, string> = { ...stored }
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) merged[k] = v
    const missing = CREDENTIAL_FIELDS[provider].required.filter((f) => merged[f] === undefined)
    if (missing.length > 0) {
      return yield* validationError(`Missing required fields for ${provider}`, missing.map((f) => ({ path: f, message: "is required" })))
    }
    const now = yield* nowIso
    const ciphertext = box.seal(JSON.stringify(merged))
    const row: ProviderCredentialRow = existing === undefined
      ? { id: newUuid(), organization_id: organizationId, provider, ciphertext, created_at: now, updated_at: now }
      : { ...existing, ciphertext, updated_at: now }
    yield* inTransaction(Effect.gen(function*() {
      if (existing === undefined) yield* ProviderCredentialsRepo.insert(row)
      else yield* ProviderCredentialsRepo.replaceCiphertext(row.id, ciphertext, now)
      yield* appendEvent({
        type: existing === undefined ? "organization.provider_credentials.configured" : "organization.provider_credentials.rotated",
        organizationId: access.organizationId,
        data: { provider }
      })
    }))
    return { row, created: existing === undefined }
  }).pipe(Effect.withSpan("ProviderCredentials.putProviderCredential", { attributes: { "organization.id": organizationId } }))

export const removeProviderCredential = (organizationId: OrganizationId, provider: CredentialProvider) =>
  Effect.gen(function*() {
    const access = yield* requireOrgRole(organizationId, MANAGERS)
    const existing = yield* ProviderCredentialsRepo.live(organizationId, provider)
    if (existing === undefined) return yield* notFound("Provider credential")
    yield* inTransaction(Effect.gen(function*() {
      // The sealed value is dropped, not just hidden: a removed credential cannot be recovered.
      yield* ProviderCredentialsRepo.softDelete(existing.id, yield* nowIso)
      yield* appendEvent({ type: "organization.provider_credentials.removed", organizationId: access.organizationId, data: { provider } })
    }))
    return { provider, deleted: true as const }
  }).pipe(Effect.withSpan("ProviderCredentials.removeProviderCredential", { attributes: { "organization.id": organizationId } }))
