/**
 * The catalogue the dashboard shows: each provider's capabilities (as its adapter serves them), the fields its
 * credentials take, and the environments a sandbox can be created from — the server's own tables (providers/capabilities.ts,
 * src/domain/ProviderCredentials.ts, src/domain/Environments.ts), provided at build time as `virtual:catalog` by
 * scripts/build-web.ts, so the page carries no server code.
 */
import type { ProviderCapabilities } from "../../src/providers/Provider.ts"
import type { Provider } from "../../src/domain/Sandbox.ts"
import type { ENVIRONMENTS } from "../../src/domain/Environments.ts"
import type { CREDENTIAL_FIELDS } from "../../src/domain/ProviderCredentials.ts"
import data from "virtual:catalog"

export interface Catalog {
  readonly providers: Record<Provider, ProviderCapabilities>
  readonly credentialFields: typeof CREDENTIAL_FIELDS
  readonly environments: typeof ENVIRONMENTS
}

/** The build serialized exactly these tables, so their types hold. */
export const catalog = data as Catalog

export type ProviderName = keyof Catalog["providers"]
export const PROVIDERS = Object.keys(catalog.providers) as ReadonlyArray<ProviderName>
export const ENVIRONMENT_NAMES = catalog.environments.map((e) => e.name)
/** The versions of an environment (the first is what `latest` resolves to). */
export const versionsOf = (name: string): ReadonlyArray<string> => catalog.environments.find((e) => e.name === name)?.versions ?? ["latest"]
