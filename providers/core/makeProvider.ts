/**
 * Assembling an adapter: what every `make<Name>Provider` repeated around its calls — the provider's name, the mode
 * its config says, and BYOK (`withCredentials`: the same adapter, built again on the config with an organization's
 * own credential fields applied; the registry caches one instance per credential set).
 *
 *   export const makeFreestyleProvider = makeProvider({
 *     name: NAME,
 *     calls: (config: FreestyleProviderConfig) => {
 *       const ctx = makeContext(config)
 *       return { capabilities: ctx.capabilities, ...makeSandboxes(ctx), ...makeProcesses(ctx), ...makeFiles(ctx), ...makeEndpoints() }
 *     },
 *     // BYOK: the organization's key, against the same API.
 *     byok: (config) => (credentials) => ({ ...config, apiKey: credentials["api_key"] ?? "" })
 *   })
 */
import type { ProviderCredentials, ProviderName, SandboxProvider } from "./Provider.ts"

/** An adapter's calls and capabilities: everything of a provider but its name, its mode and BYOK. */
export type ProviderCalls = Omit<SandboxProvider, "name" | "mode" | "withCredentials">

export interface ProviderAssembly<C extends { readonly mode: SandboxProvider["mode"] }> {
  readonly name: ProviderName
  /** The adapter's calls for this config. */
  readonly calls: (config: C) => ProviderCalls
  /**
   * BYOK: for the operator's config, how an organization's stored credential fields (named per provider in
   * `src/domain/ProviderCredentials.ts`) make the config on its own account. Absent, or undefined for a config: the
   * provider cannot run on a customer's account.
   */
  readonly byok?: ((config: C) => ((credentials: ProviderCredentials) => C) | undefined) | undefined
}

/** The adapter's `make…Provider`: its calls for a config, with its name, mode and BYOK instances. */
export const makeProvider = <C extends { readonly mode: SandboxProvider["mode"] }>(assembly: ProviderAssembly<C>) => {
  const make = (config: C): SandboxProvider => {
    const onAccount = assembly.byok?.(config)
    return {
      ...assembly.calls(config),
      name: assembly.name,
      mode: config.mode,
      withCredentials: onAccount === undefined ? undefined : (credentials) => make(onAccount(credentials))
    }
  }
  return make
}
