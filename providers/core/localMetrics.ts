/**
 * An emulated provider's sandboxes are local-runtime jails: their metrics come straight from the runtime's view of
 * their cgroups, disk and network, whatever the provider's own wire reports. Wraps an adapter (and the instances
 * it builds for BYOK) with that `metrics`. The jail is named by the resource id unless the emulator says
 * otherwise (`runtimeIdOf`; undefined: no such sandbox).
 */
import { Effect } from "effect"
import type { LocalRuntimeShape, RuntimeMetrics } from "../../src/runtime/LocalRuntime.ts"
import { ProviderError, type ProviderMetrics, type SandboxProvider } from "./Provider.ts"

const fromRuntime = (m: RuntimeMetrics): ProviderMetrics => ({ source: "local_runtime", cpuUsedPercent: null, ...m })

export const withLocalMetrics = (
  provider: SandboxProvider,
  runtime: Pick<LocalRuntimeShape, "metrics">,
  runtimeIdOf: (resourceId: string) => string | undefined = (id) => id
): SandboxProvider => ({
  ...provider,
  metrics: (sandbox) =>
    runtime.metrics(runtimeIdOf(sandbox.resourceId) ?? "").pipe(
      Effect.map(fromRuntime),
      Effect.mapError((e) =>
        new ProviderError({
          provider: provider.name,
          kind: e.kind === "not_found" ? "not_found" : "unavailable",
          message: e.message,
          retryable: e.kind === "unavailable" || e.kind === "internal"
        })
      )
    ),
  withCredentials: provider.withCredentials === undefined ? undefined : (credentials) => withLocalMetrics(provider.withCredentials!(credentials), runtime, runtimeIdOf)
})
