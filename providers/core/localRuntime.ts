/**
 * An emulated provider's sandboxes are local-runtime jails. Wraps an adapter (and the instances it builds for
 * BYOK) with what that means:
 * - metrics come straight from the runtime's view of their cgroups, disk and network, whatever the provider's own
 *   wire reports (the jail is named by the resource id unless the emulator says otherwise: `runtimeIdOf`);
 * - a request that leaves the internet unsaid gets the runtime's default (`internetByDefault`), which is what the
 *   emulators give where their provider's API leaves it at the provider's default;
 * - the largest sandbox is also what this host can give (`maxResources`, the runtime's limits when the gateway
 *   started; the runtime refuses a create above its limits at that moment).
 */
import { Effect } from "effect"
import { defaultInternetOf, type LocalRuntimeShape, type RuntimeMetrics } from "../../src/runtime/LocalRuntime.ts"
import { ProviderError, type ProviderCapabilities, type ProviderMetrics, type SandboxProvider, type SizeLimits } from "../../src/providers/Provider.ts"

const fromRuntime = (m: RuntimeMetrics): ProviderMetrics => ({ source: "local_runtime", cpuUsedPercent: null, ...m })

/** The smaller of two ceilings, per dimension (absent: none there). */
const lower = (a: number | undefined, b: number | undefined) => (a === undefined ? b : b === undefined ? a : Math.min(a, b))
export const withinLimits = (max: SizeLimits | undefined, host: SizeLimits | undefined): SizeLimits | undefined =>
  host === undefined ? max : { vcpu: lower(max?.vcpu, host.vcpu), memoryMb: lower(max?.memoryMb, host.memoryMb), diskMb: lower(max?.diskMb, host.diskMb) }

export const onLocalRuntime = (
  provider: SandboxProvider,
  runtime: Pick<LocalRuntimeShape, "metrics" | "defaultInternet" | "limits">,
  runtimeIdOf: (resourceId: string) => string | undefined = (id) => id
): SandboxProvider => {
  const capabilities: ProviderCapabilities = {
    ...provider.capabilities,
    internetByDefault: defaultInternetOf(runtime),
    maxResources: withinLimits(provider.capabilities.maxResources, runtime.limits?.())
  }
  return {
    ...provider,
    capabilities,
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
    withCredentials: provider.withCredentials === undefined ? undefined : (credentials) => onLocalRuntime(provider.withCredentials!(credentials), runtime, runtimeIdOf)
  }
}
