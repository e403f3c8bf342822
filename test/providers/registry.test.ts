/** The registry: canonical order, and providers on organizations' own accounts (BYOK), cached per credential set. */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { DECLARED } from "../../providers/core/declared.ts"
import { type ProviderCredentials, ProviderError, type ProviderName, type SandboxProvider, unsupported } from "../../src/providers/Provider.ts"
import { aroundCalls, makeProviderRegistry } from "../../src/providers/registry.ts"
import { failingCalls } from "../../providers/testing/failing-calls.ts"

/** A provider whose every call fails with `auth`, naming the key it was built with. */
const keyed = (name: ProviderName, key: string, built: Array<string>, waits: Array<string> = []): SandboxProvider => {
  const no = () => Effect.fail(new ProviderError({ provider: name, kind: "auth", message: `key ${key} refused`, retryable: false }))
  return {
    ...failingCalls(DECLARED[name], no),
    name,
    mode: "emulated",
    execNews: (_sandbox, executionId) => Effect.sync(() => void waits.push(`${key} ${executionId}`)),
    exposeHttpEndpoint: () => Effect.fail(unsupported(name, "endpoints")),
    withCredentials: (credentials: ProviderCredentials) => {
      built.push(credentials["api_key"] ?? "")
      return keyed(name, credentials["api_key"] ?? "", built, waits)
    }
  }
}

const failure = async (effect: Effect.Effect<unknown, ProviderError>) => Effect.runPromise(Effect.flip(effect))

describe("provider registry", () => {
  it("lists providers in the canonical order and refuses two plugins for one provider", () => {
    const built: Array<string> = []
    expect(makeProviderRegistry([keyed("e2b", "g", built), keyed("daytona", "g", built)]).all.map((p) => p.name)).toEqual(["daytona", "e2b"])
    expect(() => makeProviderRegistry([keyed("e2b", "g", built), keyed("e2b", "h", built)])).toThrow("two plugins provide e2b")
  })

  it("builds one instance per credential set (a rotated set is a new one), marks its failures as the organization's", async () => {
    const built: Array<string> = []
    const registry = makeProviderRegistry([keyed("daytona", "gateway", built)])
    const first = registry.withCredentials("daytona", { api_key: "k1", target: "eu" })!
    expect(registry.withCredentials("daytona", { target: "eu", api_key: "k1" })).toBe(first)
    const rotated = registry.withCredentials("daytona", { api_key: "k2", target: "eu" })!
    expect(rotated).not.toBe(first)
    expect(built).toEqual(["k1", "k2"])
    const e = await failure(rotated.exec({ resourceId: "r", resolvedResources: { vcpu: 1, memoryMb: 1, diskMb: null, architecture: "x86_64", providerSize: null }, metadata: {} }, { command: ["true"], timeoutSeconds: 1, maxOutputBytes: 1, processId: "p" }))
    expect([e.kind, e.account, e.message]).toEqual(["auth", "organization", "key k2 refused"])
    // The gateway's own instance is untouched.
    expect((await failure(registry.get("daytona")!.destroy({ resourceId: "r", resolvedResources: { vcpu: 1, memoryMb: 1, diskMb: null, architecture: "x86_64", providerSize: null }, metadata: {} }))).account).toBeUndefined()
    expect(registry.withCredentials("e2b", { api_key: "x" })).toBeUndefined()
  })

  it("a wait for news is made on the instance that holds the execution (an organization's own), and one that cannot be made there still ends", async () => {
    const built: Array<string> = []
    const waits: Array<string> = []
    const sandbox = { resourceId: "r", resolvedResources: { vcpu: 1, memoryMb: 1, diskMb: null, architecture: "x86_64" as const, providerSize: null }, metadata: {} }
    const registry = makeProviderRegistry([keyed("e2b", "gateway", built, waits)], () => {})
    await Effect.runPromise(registry.withCredentials("e2b", { api_key: "own" })!.execNews!(sandbox, "x1", 10))
    // As ProviderAccounts routes an organization's calls: every call, the wait too, to its instance.
    const own = registry.withCredentials("e2b", { api_key: "own" })!
    await Effect.runPromise(aroundCalls(registry.get("e2b")!, (_name, call) => call(own)).execNews!(sandbox, "x2", 10))
    await Effect.runPromise(registry.get("e2b")!.execNews!(sandbox, "x3", 10))
    expect(waits).toEqual(["own x1", "own x2", "gateway x3"])
    // No account to make it on: it waits as a poll would (not its whole minute: the test's own time is 5 s), and never fails.
    const refused = new ProviderError({ provider: "e2b", kind: "auth", message: "no account", retryable: false })
    await Effect.runPromise(aroundCalls(registry.get("e2b")!, () => Effect.fail(refused)).execNews!(sandbox, "x4", 60_000))
    expect(waits).toHaveLength(3)
  })
})
