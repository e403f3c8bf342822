/**
 * What the gateway keeps of a sandbox's resource at its provider (the adapter's `ProviderSandbox`, stored as
 * JSON with the sandbox): the provider's id for it, the resources it resolved to, and the adapter's own data.
 */
import { Schema } from "effect"

export const StoredResolvedResources = Schema.Struct({
  vcpu: Schema.Number,
  memoryMb: Schema.Number,
  diskMb: Schema.NullOr(Schema.Number),
  architecture: Schema.String,
  providerSize: Schema.NullOr(Schema.String)
})

export const ProviderResource = Schema.Struct({
  resourceId: Schema.String,
  resolvedResources: StoredResolvedResources,
  metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})
export type ProviderResource = typeof ProviderResource.Type
