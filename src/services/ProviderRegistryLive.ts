/** The provider registry of the running gateway: every plugin `providers/index.ts` names, its failures counted. */
import { Effect, Layer } from "effect"
import { ProviderRegistryLayer } from "../../providers/core/registry.ts"
import { PLUGINS } from "../../providers/index.ts"
import { Telemetry } from "./Telemetry.ts"

export const ProviderRegistryLive = Layer.unwrapEffect(
  Effect.map(Telemetry, (telemetry) => ProviderRegistryLayer(PLUGINS, (e) => telemetry.providerFailure(e.provider, e.kind)))
)
