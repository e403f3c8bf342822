/**
 * Building the `ProviderRegistry` from provider plugins. A plugin is an Effect that yields its
 * `SandboxProvider` (or null when it decides not to serve), usually scoped because emulated mode starts an
 * emulator that must stop with the gateway. The registry lists providers in the canonical order of the eleven
 * identifiers, whatever order the plugins are given in; two plugins for one provider are a wiring bug.
 *
 *   ProviderRegistryLayer([DaytonaPlugin, E2BPlugin, ...])  // Layer<ProviderRegistry, E, AppConfig | LocalRuntime>
 */
import { type ConfigError, Effect, Layer, type Scope } from "effect"
import type { AppConfig } from "../Config.ts"
import type { LocalRuntime } from "../runtime/LocalRuntime.ts"
import { createHash } from "node:crypto"
import { type ProviderCredentials, ProviderError, ProviderNames, ProviderRegistry, type SandboxProvider, unsupported, waitAsPoll } from "./Provider.ts"

export type ProviderPlugin<E = never, R = never> = Effect.Effect<SandboxProvider | null, E, R>

/**
 * A plugin as the gateway runs it: it may read the configuration, use the local runtime (its emulator's sandboxes)
 * and a scope (its emulator's server), and fail with a configuration error. The entry (bin/) hands the gateway its
 * plugins (providers/index.ts), so nothing under src imports a plugin.
 */
export type GatewayPlugin = ProviderPlugin<ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope>

/** Instances on organizations' own accounts kept at once (least recently used go first). */
const MAX_ACCOUNT_INSTANCES = 256

/**
 * A provider whose every call goes through `around`, which runs it (on this provider or another instance) and may
 * change its failure; `name` is the call's (`create`, `exec`, …). The one place that lists the calls of a provider.
 */
export const aroundCalls = (
  provider: SandboxProvider,
  around: <R>(name: string, call: (p: SandboxProvider) => Effect.Effect<R, ProviderError>) => Effect.Effect<R, ProviderError>
): SandboxProvider => ({
  ...provider,
  create: (input) => around("create", (p) => p.create(input)),
  reconcileCreate: (sandboxId) => around("reconcileCreate", (p) => p.reconcileCreate(sandboxId)),
  inspect: (sandbox) => around("inspect", (p) => p.inspect(sandbox)),
  destroy: (sandbox) => around("destroy", (p) => p.destroy(sandbox)),
  pause: (sandbox) => around("pause", (p) => p.pause(sandbox)),
  resume: (sandbox) => around("resume", (p) => p.resume(sandbox)),
  getCost: (sandbox, window) => around("getCost", (p) => p.getCost(sandbox, window)),
  extendLifetime: provider.extendLifetime === undefined ? undefined : (sandbox, seconds) => around("extendLifetime", (p) => p.extendLifetime?.(sandbox, seconds) ?? Effect.void),
  metrics: provider.metrics === undefined ? undefined : (sandbox) => around("metrics", (p) => p.metrics?.(sandbox) ?? Effect.fail(unsupported(p.name, "metrics"))),
  exec: (sandbox, input) => around("exec", (p) => p.exec(sandbox, input)),
  execEvents: (sandbox, executionId, fromSeq) => around("execEvents", (p) => p.execEvents(sandbox, executionId, fromSeq)),
  cancelExec: (sandbox, executionId) => around("cancelExec", (p) => p.cancelExec(sandbox, executionId)),
  // A wait that cannot fail, made where the other calls are (on an organization's own account: its instance, which
  // holds the execution); one that cannot be made there (no account) waits as a poll would.
  execNews: provider.execNews === undefined ? undefined : (sandbox, executionId, maxMs) =>
    Effect.catchAll(
      around("execNews", (p) => p.execNews?.(sandbox, executionId, maxMs) ?? waitAsPoll(maxMs)),
      () => waitAsPoll(maxMs)
    ),
  sendInput: provider.sendInput === undefined ? undefined : (sandbox, executionId, data, eof) =>
    around("sendInput", (p) => p.sendInput?.(sandbox, executionId, data, eof) ?? Effect.fail(unsupported(p.name, "standard input"))),
  resizeTerminal: provider.resizeTerminal === undefined ? undefined : (sandbox, executionId, size) =>
    around("resizeTerminal", (p) => p.resizeTerminal?.(sandbox, executionId, size) ?? Effect.fail(unsupported(p.name, "terminals"))),
  readFileStream: provider.readFileStream === undefined ? undefined : (sandbox, input) =>
    around("readFileStream", (p) => p.readFileStream?.(sandbox, input) ?? Effect.fail(unsupported(p.name, "streamed reads"))),
  readFile: (sandbox, input) => around("readFile", (p) => p.readFile(sandbox, input)),
  writeFile: (sandbox, input) => around("writeFile", (p) => p.writeFile(sandbox, input)),
  writeFileStream: provider.writeFileStream === undefined ? undefined : (sandbox, input) =>
    around("writeFileStream", (p) => p.writeFileStream?.(sandbox, input) ?? Effect.fail(unsupported(p.name, "streamed writes"))),
  listFiles: (sandbox, input) => around("listFiles", (p) => p.listFiles(sandbox, input)),
  deleteFile: (sandbox, input) => around("deleteFile", (p) => p.deleteFile(sandbox, input)),
  exposeHttpEndpoint: (sandbox, input) => around("exposeHttpEndpoint", (p) => p.exposeHttpEndpoint(sandbox, input)),
  revokeHttpEndpoint: (sandbox, leaseId) => around("revokeHttpEndpoint", (p) => p.revokeHttpEndpoint(sandbox, leaseId)),
  withCredentials: undefined
})

/** A failure of a call made on an organization's own account. */
export const onOrganizationAccount = (e: ProviderError): ProviderError =>
  e.account === "organization"
    ? e
    : new ProviderError({ provider: e.provider, kind: e.kind, message: e.message, retryable: e.retryable, status: e.status, account: "organization" })

/** Told of every failed provider call (the gateway counts them for its operators' metrics). */
export type OnProviderFailure = (e: ProviderError) => void

/** A provider call as a span of its own (`provider e2b.create`), under the job or request that made it. */
const traced = <R>(provider: string, name: string, call: Effect.Effect<R, ProviderError>) =>
  Effect.withSpan(call, `provider ${provider}.${name}`, { kind: "client", attributes: { provider } })

/** The provider with every call traced and every failed one reported to `onFailure`; its BYOK instances are built as before. */
const observed = (provider: SandboxProvider, onFailure: OnProviderFailure): SandboxProvider => ({
  ...aroundCalls(provider, (callName, call) => traced(provider.name, callName, Effect.tapError(call(provider), (e) => Effect.sync(() => onFailure(e))))),
  // Not a call to trace or count: a wait that cannot fail.
  execNews: provider.execNews,
  withCredentials: provider.withCredentials
})

/** The registry value over already-built providers (canonical order; `get` by plain name). */
export const makeProviderRegistry = (providers: ReadonlyArray<SandboxProvider>, onFailure?: OnProviderFailure): typeof ProviderRegistry.Service => {
  const seen = new Set<string>()
  for (const p of providers) {
    if (seen.has(p.name)) throw new Error(`two plugins provide ${p.name}`)
    seen.add(p.name)
  }
  const report = onFailure ?? (() => {})
  const all = [...providers].map((p) => (onFailure === undefined ? p : observed(p, onFailure))).sort((a, b) => ProviderNames.indexOf(a.name) - ProviderNames.indexOf(b.name))
  const byName = new Map<string, SandboxProvider>(all.map((p) => [p.name, p]))
  // Keyed by a hash of the credential set, never the secret itself.
  const accounts = new Map<string, SandboxProvider>()
  const withCredentials = (name: string, credentials: ProviderCredentials) => {
    const base = byName.get(name)
    if (base?.withCredentials === undefined) return undefined
    const fields = Object.keys(credentials).sort().map((k) => [k, credentials[k]])
    const key = createHash("sha256").update(JSON.stringify([name, fields])).digest("hex")
    let instance = accounts.get(key)
    if (instance === undefined) {
      const own = base.withCredentials(credentials)
      instance = {
        ...aroundCalls(own, (callName, call) =>
          traced(name, callName, Effect.tapError(Effect.mapError(call(own), onOrganizationAccount), (e) => Effect.sync(() => report(e))))),
        execNews: own.execNews
      }
      if (accounts.size >= MAX_ACCOUNT_INSTANCES) accounts.delete(accounts.keys().next().value!)
    } else {
      accounts.delete(key)
    }
    accounts.set(key, instance)
    return instance
  }
  return { all, get: (name) => byName.get(name), withCredentials }
}

/** Runs every plugin (one after the other, so emulators start in a stable order) and collects the providers. */
export const ProviderRegistryLayer = <const P extends ReadonlyArray<ProviderPlugin<unknown, unknown>>>(
  plugins: P,
  onFailure?: OnProviderFailure
): Layer.Layer<ProviderRegistry, Effect.Effect.Error<P[number]>, Exclude<Effect.Effect.Context<P[number]>, Scope.Scope>> =>
  Layer.scoped(
    ProviderRegistry,
    Effect.map(
      Effect.all(plugins as ReadonlyArray<ProviderPlugin<Effect.Effect.Error<P[number]>, Effect.Effect.Context<P[number]>>>),
      (providers) => makeProviderRegistry(providers.filter((p): p is SandboxProvider => p !== null), onFailure)
    )
  )
