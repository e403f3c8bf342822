/** An organization's own provider accounts (BYOK), `provider_credentials`: sealed at rest, dropped on delete. */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { IdColumn, rowsOf, run } from "../Rows.ts"
import type { OrganizationId } from "../../domain/Ids.ts"

export const ProviderCredentialRow = Schema.Struct({
  id: Schema.String,
  organization_id: IdColumn.organization,
  provider: Schema.String,
  ciphertext: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String
})
export type ProviderCredentialRow = typeof ProviderCredentialRow.Type

export class ProviderCredentialsRepo extends Effect.Service<ProviderCredentialsRepo>()("app/db/ProviderCredentialsRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const credentials = rowsOf("provider_credentials", ProviderCredentialRow)
    return {
      ofOrganization: (organizationId: OrganizationId) =>
        credentials.all(sql`SELECT * FROM provider_credentials WHERE organization_id = ${organizationId} AND deleted_at IS NULL ORDER BY provider`),
      live: (organizationId: OrganizationId, provider: string) =>
        credentials.first(sql`SELECT * FROM provider_credentials
          WHERE organization_id = ${organizationId} AND provider = ${provider} AND deleted_at IS NULL`),
      insert: (row: ProviderCredentialRow) => run(sql`INSERT INTO provider_credentials ${sql.insert({ ...row })}`),
      replaceCiphertext: (id: string, ciphertext: string, now: string) =>
        run(sql`UPDATE provider_credentials SET ciphertext = ${ciphertext}, updated_at = ${now} WHERE id = ${id}`),
      /** The sealed value is dropped, not just hidden: a removed credential cannot be recovered. */
      softDelete: (id: string, now: string) => run(sql`UPDATE provider_credentials SET deleted_at = ${now}, ciphertext = '' WHERE id = ${id}`)
    }
  })
}) {}
