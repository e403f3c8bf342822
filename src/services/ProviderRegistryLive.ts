/** The provider registry of the running gateway: every plugin `providers/index.ts` names. */
import { ProviderRegistryLayer } from "../../providers/core/registry.ts"
import { PLUGINS } from "../../providers/index.ts"

export const ProviderRegistryLive = ProviderRegistryLayer(PLUGINS)
