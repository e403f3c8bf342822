/**
 * The provider catalogue the dashboard shows: each provider's declared capabilities and the fields its
 * credentials take — the server's own tables (providers/core/declared.ts, src/domain/ProviderCredentials.ts),
 * provided at build time as `virtual:catalog` by scripts/build-web.ts, so the page carries no server code.
 */
import type { DECLARED } from "../../providers/core/declared.ts"
import type { CREDENTIAL_FIELDS } from "../../src/domain/ProviderCredentials.ts"
import data from "virtual:catalog"

export interface Catalog {
  readonly providers: typeof DECLARED
  readonly credentialFields: typeof CREDENTIAL_FIELDS
}

/** The build serialized exactly these two tables, so their types hold. */
export const catalog = data as Catalog

export type ProviderName = keyof Catalog["providers"]
export const PROVIDERS = Object.keys(catalog.providers) as ReadonlyArray<ProviderName>
