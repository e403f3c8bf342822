/**
 * The provider registry of the running gateway: the plugins its entry hands in (bin/: `providers/index.ts`'s, so
 * the services never import a plugin), their failures counted.
 */
import { Effect, Layer } from "effect"
import { type GatewayPlugin, ProviderRegistryLayer } from "../providers/registry.ts"
import { Telemetry } from "./Telemetry.ts"

export const ProviderRegistryLive = (plugins: ReadonlyArray<GatewayPlugin>) =>
  Layer.unwrapEffect(Effect.map(Telemetry, (telemetry) => ProviderRegistryLayer(plugins, (e) => telemetry.providerFailure(e.provider, e.kind))))
