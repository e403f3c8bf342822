import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Schema } from "effect"
import { Db } from "../../db/Db.ts"
import { provideRepositories } from "../../db/Database.ts"
import { type ProviderCredentialRow, ProviderCredentialsRepo } from "../../db/repos/ProviderCredentials.ts"
import { notFound, validationError } from "../../domain/Errors.ts"
import { newUuid } from "../../domain/Ids.ts"
import { ANY_ROLE, MANAGERS } from "../../domain/Principals.ts"
import { CREDENTIAL_FIELDS, ProviderCredential } from "../../domain/ProviderCredentials.ts"
import { nowIso } from "../../domain/Time.ts"
import { requireOrgRole } from "../../services/Access.ts"
import { SecretBox } from "../../services/Crypto.ts"
import { appendEvent } from "../../services/Events.ts"
import { Api } from "../Api.ts"
import { providerCredentialToWire as toWire } from "../wire/Accounts.ts"

/** A stored credential: the provider's fields, as sealed (an unreadable one is a defect, never a cast). */
const decodeFields = Schema.decodeUnknownSync(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.String })))

export const ProviderCredentialsLive = HttpApiBuilder.group(Api, "providerCredentials", (handlers) =>
  Effect.gen(function*() {
    const box = yield* SecretBox
    const db = yield* Db
    const credentials = yield* ProviderCredentialsRepo
    const provide = yield* provideRepositories
    const live = credentials.live

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, ANY_ROLE)
          return { provider_credentials: (yield* credentials.ofOrganization(path.organization_id)).map(toWire) }
        }).pipe(provide))
      .handle("put", ({ path, payload }) =>
        Effect.gen(function*() {
          const access = yield* requireOrgRole(path.organization_id, MANAGERS)
          if (payload.provider !== path.provider) {
            return yield* validationError("The body's provider must match the path", [{ path: "provider", message: `must be "${path.provider}"` }])
          }
          const existing = yield* live(path.organization_id, path.provider)
          const stored = existing === undefined ? {} : decodeFields(box.open(existing.ciphertext))
          const { provider: _provider, ...fields } = payload as Record<string, string>
          const merged: Record<string, string> = { ...stored }
          for (const [k, v] of Object.entries(fields)) if (v !== undefined) merged[k] = v
          const missing = CREDENTIAL_FIELDS[path.provider].required.filter((f) => merged[f] === undefined)
          if (missing.length > 0) {
            return yield* validationError(`Missing required fields for ${path.provider}`, missing.map((f) => ({ path: f, message: "is required" })))
          }
          const now = yield* nowIso
          const ciphertext = box.seal(JSON.stringify(merged))
          const row: ProviderCredentialRow = existing === undefined
            ? { id: newUuid(), organization_id: path.organization_id, provider: path.provider, ciphertext, created_at: now, updated_at: now }
            : { ...existing, ciphertext, updated_at: now }
          yield* Effect.gen(function*() {
            if (existing === undefined) yield* credentials.insert(row)
            else yield* credentials.replaceCiphertext(row.id, ciphertext, now)
            yield* appendEvent({
              type: existing === undefined ? "organization.provider_credentials.configured" : "organization.provider_credentials.rotated",
              organizationId: access.organizationId,
              data: { provider: path.provider }
            })
          }).pipe(db.transaction)
          return yield* HttpServerResponse.schemaJson(ProviderCredential)(toWire(row), { status: existing === undefined ? 201 : 200 }).pipe(Effect.orDie)
        }).pipe(provide))
      .handle("delete", ({ path }) =>
        Effect.gen(function*() {
          const access = yield* requireOrgRole(path.organization_id, MANAGERS)
          const existing = yield* live(path.organization_id, path.provider)
          if (existing === undefined) return yield* notFound("Provider credential")
          yield* Effect.gen(function*() {
            // The sealed value is dropped, not just hidden: a removed credential cannot be recovered.
            yield* credentials.softDelete(existing.id, yield* nowIso)
            yield* appendEvent({ type: "organization.provider_credentials.removed", organizationId: access.organizationId, data: { provider: path.provider } })
          }).pipe(db.transaction)
          return { provider: path.provider, deleted: true as const }
        }).pipe(provide))
  }))
