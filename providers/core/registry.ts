/**
 * Building the `ProviderRegistry` from provider plugins. A plugin is an Effect that yields its
 * `SandboxProvider` (or null when it decides not to serve), usually scoped because emulated mode starts an
 * emulator that must stop with the gateway. The registry lists providers in the canonical order of the eleven
 * identifiers, whatever order the plugins are given in; two plugins for one provider are a wiring bug.
 *
 *   ProviderRegistryLayer([DaytonaPlugin, E2BPlugin, ...])  // Layer<ProviderRegistry, E, AppConfig | LocalRuntime>
 */
import { Effect, Layer, type Scope } from "effect"
import { ProviderNames, ProviderRegistry, type SandboxProvider } from "./Provider.ts"

export type ProviderPlugin<E = never, R = never> = Effect.Effect<SandboxProvider | null, E, R>

/** The registry value over already-built providers (canonical order; `get` by plain name). */
export const makeProviderRegistry = (providers: ReadonlyArray<SandboxProvider>): typeof ProviderRegistry.Service => {
  const seen = new Set<string>()
  for (const p of providers) {
    if (seen.has(p.name)) throw new Error(`two plugins provide ${p.name}`)
    seen.add(p.name)
  }
  const all = [...providers].sort((a, b) => ProviderNames.indexOf(a.name) - ProviderNames.indexOf(b.name))
  const byName = new Map<string, SandboxProvider>(all.map((p) => [p.name, p]))
  return { all, get: (name) => byName.get(name) }
}

/** Runs every plugin (one after the other, so emulators start in a stable order) and collects the providers. */
export const ProviderRegistryLayer = <const P extends ReadonlyArray<ProviderPlugin<unknown, unknown>>>(
  plugins: P
): Layer.Layer<ProviderRegistry, Effect.Effect.Error<P[number]>, Exclude<Effect.Effect.Context<P[number]>, Scope.Scope>> =>
  Layer.scoped(
    ProviderRegistry,
    Effect.map(
      Effect.all(plugins as ReadonlyArray<ProviderPlugin<Effect.Effect.Error<P[number]>, Effect.Effect.Context<P[number]>>>),
      (providers) => makeProviderRegistry(providers.filter((p): p is SandboxProvider => p !== null))
    )
  )
