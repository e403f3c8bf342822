/** The adapter assembler (name, mode, BYOK instances) and the plugins' environment reading. */
import { ConfigProvider, Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { DECLARED } from "./declared.ts"
import { envValue } from "./env.ts"
import { makeProvider, type ProviderCalls } from "./makeProvider.ts"
import { failingCalls } from "../testing/failing-calls.ts"
import { ProviderError, type ProviderSandbox } from "../../src/providers/Provider.ts"
import { makeProviderRegistry } from "../../src/providers/registry.ts"

interface Config {
  readonly mode: "remote" | "emulated"
  readonly apiKey: string
  readonly region?: string | undefined
}

/** Calls that fail naming the config they were built with, so a test sees which config an instance has. */
const callsFor = (config: Config): ProviderCalls =>
  failingCalls(DECLARED.prime, () => Effect.fail(new ProviderError({ provider: "prime", kind: "auth", message: `key ${config.apiKey} in ${config.region ?? "no region"}`, retryable: false })))
const SANDBOX: ProviderSandbox = { resourceId: "r", resolvedResources: { vcpu: 1, memoryMb: 1, diskMb: null, architecture: "x86_64", providerSize: null }, metadata: {} }
const messageOf = async (provider: { readonly destroy: (s: ProviderSandbox) => Effect.Effect<void, ProviderError> }) =>
  (await Effect.runPromise(Effect.flip(provider.destroy(SANDBOX)))).message

const makeTest = makeProvider("prime", {
  context: (config: Config) => config,
  calls: callsFor,
  byok: (config: Config) => (credentials) => ({ ...config, apiKey: credentials["api_key"] ?? "", region: credentials["region"] ?? config.region })
})

describe("makeProvider", () => {
  it("gives the adapter's calls its name and the config's mode", async () => {
    const provider = makeTest({ mode: "emulated", apiKey: "gateway" })
    expect([provider.name, provider.mode, provider.capabilities]).toEqual(["prime", "emulated", DECLARED.prime])
    expect(await messageOf(provider)).toBe("key gateway in no region")
  })

  it("builds the context once per instance and hands it, with the config, to the calls", () => {
    const seen: Array<unknown> = []
    const make = makeProvider("prime", {
      context: (config: Config) => ({ wire: `wire for ${config.apiKey}` }),
      calls: (ctx, config) => (seen.push([ctx.wire, config.apiKey]), callsFor(config))
    })
    make({ mode: "remote", apiKey: "k" })
    expect(seen).toEqual([["wire for k", "k"]])
  })

  it("builds BYOK instances on the config with the organization's credentials, leaving the operator's instance as it was", async () => {
    const operator = makeTest({ mode: "remote", apiKey: "gateway", region: "eu" })
    const own = operator.withCredentials!({ api_key: "org-key" })
    expect([own.name, own.mode]).toEqual(["prime", "remote"])
    expect(await messageOf(own)).toBe("key org-key in eu")
    expect(await messageOf(own.withCredentials!({ api_key: "other", region: "us" }))).toBe("key other in us")
    expect(await messageOf(operator)).toBe("key gateway in eu")
    // Through the registry, as the gateway reaches it: one instance per credential set.
    const registry = makeProviderRegistry([operator])
    const cached = registry.withCredentials("prime", { api_key: "org-key" })!
    expect(registry.withCredentials("prime", { api_key: "org-key" })).toBe(cached)
    expect(await messageOf(cached)).toBe("key org-key in eu")
  })

  it("has no BYOK without `byok`, or when `byok` has none for this config", () => {
    expect(makeProvider("prime", { context: (config: Config) => config, calls: callsFor })({ mode: "remote", apiKey: "k" }).withCredentials).toBeUndefined()
    const onlyRemote = makeProvider("prime", {
      context: (config: Config) => config,
      calls: callsFor,
      byok: (config: Config) => (config.mode === "remote" ? (credentials) => ({ ...config, apiKey: credentials["api_key"] ?? "" }) : undefined)
    })
    expect(onlyRemote({ mode: "emulated", apiKey: "k" }).withCredentials).toBeUndefined()
    expect(onlyRemote({ mode: "remote", apiKey: "k" }).withCredentials).toBeDefined()
  })
})

describe("envValue", () => {
  const read = (env: Record<string, string>, ...names: Array<string>) =>
    Effect.runPromise(envValue(...names).pipe(Effect.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))))

  it("answers the first variable that is set and not blank, in the order named", async () => {
    expect(await read({ BL_API_KEY: "k1", BLAXEL_API_KEY: "k2" }, "BL_API_KEY", "BLAXEL_API_KEY")).toBe("k1")
    expect(await read({ BLAXEL_API_KEY: "k2" }, "BL_API_KEY", "BLAXEL_API_KEY")).toBe("k2")
    expect(await read({ BL_API_KEY: "  ", BLAXEL_API_KEY: "k2" }, "BL_API_KEY", "BLAXEL_API_KEY")).toBe("k2")
  })

  it("answers undefined when none is set, or each is blank", async () => {
    expect(await read({}, "PRIME_API_KEY")).toBeUndefined()
    expect(await read({ PRIME_API_KEY: "" }, "PRIME_API_KEY")).toBeUndefined()
    expect(await read({ BL_API_KEY: " \t", BLAXEL_API_KEY: "" }, "BL_API_KEY", "BLAXEL_API_KEY")).toBeUndefined()
  })
})
