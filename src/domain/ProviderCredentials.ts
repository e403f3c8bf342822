/**
 * Bring-your-own-key provider credentials (reference §2 BYOK table). Secrets are at most 16,384 characters,
 * other values at most 500. Stored sealed; never returned.
 */
import { Schema } from "effect"
import { strict, Timestamp } from "./Accounts.ts"
import { OrganizationId, Uuid } from "./Ids.ts"
import type { Provider } from "./Sandbox.ts"

const Secret = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(16_384))
const Value = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(500))

/** Field names per provider: [required, optional, which of them are secrets]. */
export const CREDENTIAL_FIELDS = {
  blaxel: { required: ["api_key", "workspace"], optional: ["account_id"], secrets: ["api_key"] },
  cloudflare: { required: ["api_url", "api_key"], optional: ["account_id", "analytics_token"], secrets: ["api_key", "analytics_token"] },
  codesandbox: { required: ["api_key"], optional: ["workspace_id", "vm_tier", "credit_rate_usd"], secrets: ["api_key"] },
  daytona: { required: ["api_key"], optional: ["organization_id", "target"], secrets: ["api_key"] },
  e2b: { required: ["api_key"], optional: [], secrets: ["api_key"] },
  freestyle: { required: ["api_key"], optional: [], secrets: ["api_key"] },
  modal: { required: ["token_id", "token_secret"], optional: ["environment"], secrets: ["token_secret"] },
  northflank: { required: ["api_token", "project_id"], optional: ["team_id"], secrets: ["api_token"] },
  prime: { required: ["api_key"], optional: ["team_id"], secrets: ["api_key"] },
  runloop: {
    required: ["api_key"],
    optional: ["resource_size", "vcpu_hour_rate_usd", "memory_gb_hour_rate_usd", "disk_gb_hour_rate_usd"],
    secrets: ["api_key"]
  },
  vercel: { required: ["token", "project_id"], optional: ["team_id"], secrets: ["token"] }
} as const satisfies Record<Provider, { required: ReadonlyArray<string>; optional: ReadonlyArray<string>; secrets: ReadonlyArray<string> }>

export type CredentialProvider = keyof typeof CREDENTIAL_FIELDS
export const CredentialProviderName = Schema.Literal(...(Object.keys(CREDENTIAL_FIELDS) as Array<CredentialProvider>))

/**
 * One input variant per provider: every field optional (a PUT is merged over the stored value, so partial
 * updates work); after the merge the handler checks the required ones.
 */
const variant = (provider: CredentialProvider) => {
  const spec = CREDENTIAL_FIELDS[provider]
  const fields: Record<string, Schema.optional<typeof Secret>> = {}
  for (const name of [...spec.required, ...spec.optional]) {
    fields[name] = Schema.optional((spec.secrets as ReadonlyArray<string>).includes(name) ? Secret : Value)
  }
  return Schema.Struct({ provider: Schema.Literal(provider), ...fields }).annotations({ identifier: `ProviderCredentialInput_${provider}`, ...strict })
}

export const ProviderCredentialInput = Schema.Union(
  ...(Object.keys(CREDENTIAL_FIELDS) as Array<CredentialProvider>).map(variant)
).annotations({ identifier: "ProviderCredentialInput" })

export const ProviderCredential = Schema.Struct({
  id: Uuid,
  organization_id: OrganizationId,
  provider: Schema.String,
  created_at: Timestamp,
  updated_at: Timestamp
}).annotations({ identifier: "ProviderCredential" })

export const ProviderCredentialList = Schema.Struct({ provider_credentials: Schema.Array(ProviderCredential) }).annotations({
  identifier: "ProviderCredentialList"
})
export const ProviderCredentialRemoved = Schema.Struct({ provider: Schema.String, deleted: Schema.Literal(true) })

/** The fields of a stored credential as sealed (JSON of field → value). */
export const StoredCredentialFields = Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.String }))
