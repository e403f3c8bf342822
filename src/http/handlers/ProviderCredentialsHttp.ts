import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { notFound, validationError } from "../../domain/Errors.ts"
import { newUuid } from "../../domain/Ids.ts"
import { CREDENTIAL_FIELDS, ProviderCredential } from "../../domain/ProviderCredentials.ts"
import { nowIso } from "../../domain/Time.ts"
import { requireOrgRole } from "../../services/Access.ts"
import { ANY_ROLE, MANAGERS } from "../../domain/Principals.ts"
import { SecretBox } from "../../services/Crypto.ts"
import { appendEvent } from "../../services/Events.ts"
import { Api } from "../Api.ts"

interface CredentialRow {
  id: string
  organization_id: string
  provider: string
  ciphertext: string
  created_at: string
  updated_at: string
}

const toWire = (row: CredentialRow) => ({
  id: row.id,
  organization_id: row.organization_id,
  provider: row.provider,
  created_at: row.created_at,
  updated_at: row.updated_at
})

export const ProviderCredentialsLive = HttpApiBuilder.group(Api, "providerCredentials", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const box = yield* SecretBox
    const provide = Effect.provideService(SqlClient.SqlClient, sql)
    const live = (organizationId: string, provider: string) =>
      sql<CredentialRow>`SELECT * FROM provider_credentials WHERE organization_id = ${organizationId} AND provider = ${provider} AND deleted_at IS NULL`.pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, ANY_ROLE)
          const rows = yield* sql<CredentialRow>`SELECT * FROM provider_credentials WHERE organization_id = ${path.organization_id}
            AND deleted_at IS NULL ORDER BY provider`.pipe(Effect.orDie)
          return { provider_credentials: rows.map(toWire) }
        }).pipe(provide))
      .handle("put", ({ path, payload }) =>
        Effect.gen(function*() {
          const access = yield* requireOrgRole(path.organization_id, MANAGERS)
          if (payload.provider !== path.provider) {
            return yield* validationError("The body's provider must match the path", [{ path: "provider", message: `must be "${path.provider}"` }])
          }
          const existing = yield* live(path.organization_id, path.provider)
          const stored = existing === undefined ? {} : (JSON.parse(box.open(existing.ciphertext)) as Record<string, string>)
          const { provider: _provider, ...fields } = payload as Record<string, string>
          const merged: Record<string, string> = { ...stored }
          for (const [k, v] of Object.entries(fields)) if (v !== undefined) merged[k] = v
          const missing = CREDENTIAL_FIELDS[path.provider].required.filter((f) => merged[f] === undefined)
          if (missing.length > 0) {
            return yield* validationError(`Missing required fields for ${path.provider}`, missing.map((f) => ({ path: f, message: "is required" })))
          }
          const now = yield* nowIso
          const ciphertext = box.seal(JSON.stringify(merged))
          const row: CredentialRow = existing === undefined
            ? { id: newUuid(), organization_id: path.organization_id, provider: path.provider, ciphertext, created_at: now, updated_at: now }
            : { ...existing, ciphertext, updated_at: now }
          yield* Effect.gen(function*() {
            if (existing === undefined) yield* sql`INSERT INTO provider_credentials ${sql.insert({ ...row })}`
            else yield* sql`UPDATE provider_credentials SET ciphertext = ${ciphertext}, updated_at = ${now} WHERE id = ${row.id}`
            yield* appendEvent({
              type: existing === undefined ? "organization.provider_credentials.configured" : "organization.provider_credentials.rotated",
              organizationId: access.organizationId,
              data: { provider: path.provider }
            })
          }).pipe(sql.withTransaction, Effect.orDie)
          return yield* HttpServerResponse.schemaJson(ProviderCredential)(toWire(row), { status: existing === undefined ? 201 : 200 }).pipe(Effect.orDie)
        }).pipe(provide))
      .handle("delete", ({ path }) =>
        Effect.gen(function*() {
          const access = yield* requireOrgRole(path.organization_id, MANAGERS)
          const existing = yield* live(path.organization_id, path.provider)
          if (existing === undefined) return yield* notFound("Provider credential")
          yield* Effect.gen(function*() {
            // The sealed value is dropped, not just hidden: a removed credential cannot be recovered.
            yield* sql`UPDATE provider_credentials SET deleted_at = ${yield* nowIso}, ciphertext = '' WHERE id = ${existing.id}`
            yield* appendEvent({ type: "organization.provider_credentials.removed", organizationId: access.organizationId, data: { provider: path.provider } })
          }).pipe(sql.withTransaction, Effect.orDie)
          return { provider: path.provider, deleted: true as const }
        }).pipe(provide))
  }))
