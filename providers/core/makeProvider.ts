/**
 * Assembling an adapter: what every `make<Name>Provider` repeated around its calls — the provider's name, the mode
 * its config says, and BYOK (`withCredentials`: the same adapter, built again on the config with an organization's
 * own credential fields applied; the registry caches one instance per credential set).
 *
 *   export const makeFreestyleProvider = makeProvider(NAME, {
 *     context: makeContext,  // what the adapter's parts share for a config: its wire, its capabilities, …
 *     calls: (ctx) => ({ capabilities: ctx.capabilities, ...makeSandboxes(ctx), ...makeProcesses(ctx), ...makeFiles(ctx), ...makeEndpoints() }),
 *     // BYOK: the organization's key, against the same API.
 *     byok: (config) => (credentials) => ({ ...config, apiKey: credentials["api_key"] ?? "" })
 *   })
 */
import type { ProviderCredentials, ProviderName, SandboxProvider } from "../../src/providers/Provider.ts"

/** An adapter's calls and capabilities: everything of a provider but its name, its mode and BYOK. */
export type ProviderCalls = Omit<SandboxProvider, "name" | "mode" | "withCredentials">

export interface ProviderAssembly<C extends { readonly mode: SandboxProvider["mode"] }, X> {
  /** What the adapter's parts share for a config (its wire, its capabilities, …). */
  readonly context: (config: C) => X
  /** The adapter's calls and capabilities, from that context (and the config). */
  readonly calls: (context: X, config: C) => ProviderCalls
  /**
   * BYOK: for the operator's config, how an organization's stored credential fields (named per provider in
   * `src/domain/ProviderCredentials.ts`) make the config on its own account. Absent, or undefined for a config: the
   * provider cannot run on a customer's account.
   */
  readonly byok?: ((config: C) => ((credentials: ProviderCredentials) => C) | undefined) | undefined
}

/** The adapter's `make…Provider`: its calls for a config, with the provider's name, the config's mode and BYOK instances. */
export const makeProvider = <C extends { readonly mode: SandboxProvider["mode"] }, X>(name: ProviderName, assembly: ProviderAssembly<C, X>) => {
  const make = (config: C): SandboxProvider => {
    const onAccount = assembly.byok?.(config)
    return {
      ...assembly.calls(assembly.context(config), config),
      name,
      mode: config.mode,
      withCredentials: onAccount === undefined ? undefined : (credentials) => make(onAccount(credentials))
    }
  }
  return make
}
