/**
 * Routing and fallback with a small in-test fake provider whose create fails with injectable kinds, including an
 * unknown outcome that did create the resource (which must be reconciled, never created twice).
 */
import { Effect, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { SandboxRequest } from "../../src/domain/Sandbox.ts"
import { DECLARED } from "../../providers/core/declared.ts"
import { failingCalls } from "../../providers/testing/failing-calls.ts"
import {
  type CreateInput,
  ProviderError,
  type ProviderErrorKind,
  type ProviderName,
  type ProviderSandbox,
  type SandboxProvider,
  unsupported
} from "../../src/providers/Provider.ts"
import { apiBreadth, autoOrder } from "../../src/providers/placement.ts"
import { type Attempt, candidateOrder, provisionWithFallback } from "../../src/providers/routing.ts"

const request = (patch: Record<string, unknown> = {}) =>
  Schema.decodeUnknownSync(SandboxRequest)({
    source: { kind: "environment", environment: "metal/base" },
    resources: { vcpu: 1, memory_mb: 512 },
    lifecycle: { runtime_timeout_seconds: 60 },
    network: { internet_access: true },
    ...patch
  })

interface FakeOptions {
  /** Failure kinds of successive create calls; once used up, create succeeds. */
  readonly failures?: ReadonlyArray<ProviderErrorKind>
  /** An `unknown_outcome` failure still created the resource (the response was lost). */
  readonly unknownCreatesResource?: boolean
  readonly reconcileFails?: boolean
  readonly mode?: "remote" | "emulated"
  readonly cost?: boolean
  /** What create reports it gave (default 1 vCPU, 512 MB). */
  readonly gives?: { readonly vcpu: number; readonly memoryMb: number }
}

/** A fake provider: an in-memory resource table keyed by our sandbox id. */
const fake = (name: ProviderName, options: FakeOptions = {}) => {
  const resources = new Map<string, ProviderSandbox>()
  const calls = { create: 0, reconcile: 0, destroy: 0 }
  const failures = [...(options.failures ?? [])]
  const resourceOf = (id: string): ProviderSandbox => ({
    resourceId: `${name}-${id}-${resources.size}`,
    resolvedResources: { vcpu: options.gives?.vcpu ?? 1, memoryMb: options.gives?.memoryMb ?? 512, diskMb: null, architecture: "x86_64", providerSize: null },
    metadata: {}
  })
  const no = () => Effect.fail(unsupported(name, "this in the fake"))
  const provider: SandboxProvider = {
    ...failingCalls({ ...DECLARED[name], cost: options.cost ?? DECLARED[name].cost }, no),
    name,
    mode: options.mode ?? "emulated",
    create: (input: CreateInput) =>
      Effect.suspend(() => {
        calls.create++
        const kind = failures.shift()
        if (kind !== undefined) {
          if (kind === "unknown_outcome" && options.unknownCreatesResource === true && !resources.has(input.sandboxId)) {
            resources.set(input.sandboxId, resourceOf(input.sandboxId))
          }
          return Effect.fail(new ProviderError({ provider: name, kind, message: `${name}: ${kind}`, retryable: false }))
        }
        const existing = resources.get(input.sandboxId) ?? resourceOf(input.sandboxId)
        resources.set(input.sandboxId, existing)
        return Effect.succeed(existing)
      }),
    reconcileCreate: (id) =>
      Effect.suspend(() => {
        calls.reconcile++
        return options.reconcileFails === true
          ? Effect.fail(new ProviderError({ provider: name, kind: "unavailable", message: "reconcile is down", retryable: true }))
          : Effect.succeed(resources.get(id) ?? null)
      }),
    inspect: (s) => Effect.succeed([...resources.values()].some((r) => r.resourceId === s.resourceId) ? "running" : "absent"),
    destroy: (s) => Effect.sync(() => {
      calls.destroy++
      for (const [id, r] of resources) if (r.resourceId === s.resourceId) resources.delete(id)
    }),
    getCost: () => Effect.succeed(null)
  }
  return { provider, calls, resources }
}

const walk = (providers: ReadonlyArray<SandboxProvider>, req = request(), seen: Array<Attempt> = [], ownAccount?: (p: SandboxProvider) => boolean) =>
  Effect.runPromise(provisionWithFallback({
    request: req,
    providers,
    ownAccount,
    input: () => ({
      sandboxId: "sbx_1",
      organizationId: "o",
      projectId: "p",
      source: req.source,
      resources: { vcpu: 1, memoryMb: 512, architecture: "any" },
      lifecycle: { runtimeTimeoutSeconds: 60, onRuntimeTimeout: "destroy", onIdleTimeout: "destroy" },
      internetAccess: true,
      providerOptions: {},
      environment: {},
      metadata: {}
    }),
    onAttempt: (a) => Effect.sync(() => void seen.push(a))
  }))

const outcomes = (attempts: ReadonlyArray<Attempt>) => attempts.map((a) => [a.provider, a.outcome, a.code])

describe("candidateOrder", () => {
  it("explicit: the primary then the fallbacks, nothing else", () => {
    expect(candidateOrder(request({ provider: "e2b", fallback: { providers: ["daytona", "modal"] } }), ["daytona", "e2b", "modal", "vercel"])).toEqual(["e2b", "daytona", "modal"])
    expect(candidateOrder(request({ provider: "e2b" }), ["daytona", "e2b"])).toEqual(["e2b"])
  })

  it("auto: the fallbacks, then every other configured provider in the given order, without duplicates", () => {
    expect(candidateOrder(request({ fallback: { providers: ["modal", "e2b"] } }), ["daytona", "e2b", "modal"])).toEqual(["modal", "e2b", "daytona"])
    expect(candidateOrder(request({ provider: "auto" }), ["vercel", "daytona"])).toEqual(["vercel", "daytona"])
    expect(candidateOrder(request({ fallback: { providers: ["e2b", "daytona"] } }), ["daytona", "e2b", "vercel"])).toEqual(["e2b", "daytona", "vercel"])
  })
})

describe("provisionWithFallback", () => {
  it("creates on the first eligible candidate", async () => {
    const d = fake("daytona")
    const seen: Array<Attempt> = []
    const outcome = await walk([d.provider, fake("e2b").provider], request(), seen)
    expect(outcome._tag).toBe("Provisioned")
    expect(outcomes(outcome.attempts)).toEqual([["daytona", "created", null]])
    expect(seen).toEqual(outcome.attempts)
  })

  it("falls back after a capacity failure, in the caller's order", async () => {
    const e2b = fake("e2b", { failures: ["capacity"] })
    const daytona = fake("daytona")
    const outcome = await walk([daytona.provider, e2b.provider], request({ provider: "e2b", fallback: { providers: ["daytona"] } }))
    expect(outcome._tag === "Provisioned" && outcome.provider.name).toBe("daytona")
    expect(outcomes(outcome.attempts)).toEqual([["e2b", "failed", "provider_capacity_unavailable"], ["daytona", "created", null]])
    expect(outcome.attempts.map((a) => a.attempt_index)).toEqual([0, 1])
  })

  it("unavailable, timeout_absent and unsupported are fallback-safe too", async () => {
    for (const kind of ["unavailable", "timeout_absent", "unsupported"] as const) {
      const outcome = await walk([fake("daytona", { failures: [kind] }).provider, fake("e2b").provider])
      expect(outcome._tag === "Provisioned" && outcome.provider.name, kind).toBe("e2b")
    }
  })

  it("stops on a failure that is not fallback-safe, without touching the next candidate", async () => {
    for (const kind of ["auth", "quota", "invalid_request", "customer"] as const) {
      const e2b = fake("e2b", { failures: [kind] })
      const daytona = fake("daytona")
      const outcome = await walk([e2b.provider, daytona.provider], request({ provider: "e2b", fallback: { providers: ["daytona"] } }))
      expect(outcome._tag, kind).toBe("Failed")
      expect(outcome._tag === "Failed" && outcome.error.kind).toBe(kind)
      expect(daytona.calls.create).toBe(0)
    }
  })

  it("an unknown outcome that did create is reconciled: found, one resource, no second create anywhere", async () => {
    const daytona = fake("daytona", { failures: ["unknown_outcome"], unknownCreatesResource: true })
    const e2b = fake("e2b")
    const outcome = await walk([daytona.provider, e2b.provider])
    expect(outcome._tag === "Provisioned" && outcome.provider.name).toBe("daytona")
    expect(outcome._tag === "Provisioned" && outcome.sandbox).toEqual(daytona.resources.get("sbx_1"))
    expect(outcomes(outcome.attempts)).toEqual([["daytona", "found", null]])
    expect(daytona.calls).toEqual({ create: 1, reconcile: 1, destroy: 0 })
    expect(daytona.resources.size).toBe(1)
    expect(e2b.calls.create).toBe(0)
  })

  it("an unknown outcome that created nothing moves on (absent)", async () => {
    const daytona = fake("daytona", { failures: ["unknown_outcome"] })
    const e2b = fake("e2b")
    const outcome = await walk([daytona.provider, e2b.provider])
    expect(outcomes(outcome.attempts)).toEqual([["daytona", "absent", "provider_unknown_outcome"], ["e2b", "created", null]])
    expect(daytona.calls).toEqual({ create: 1, reconcile: 1, destroy: 0 })
  })

  it("an unknown outcome that cannot be reconciled stops the walk as ProvisionUnknown", async () => {
    const daytona = fake("daytona", { failures: ["unknown_outcome"], unknownCreatesResource: true, reconcileFails: true })
    const e2b = fake("e2b")
    const outcome = await walk([daytona.provider, e2b.provider])
    expect(outcome._tag).toBe("ProvisionUnknown")
    expect(outcome._tag === "ProvisionUnknown" && outcome.provider.name).toBe("daytona")
    expect(outcomes(outcome.attempts)).toEqual([["daytona", "unknown", "provider_unknown_outcome"]])
    expect(e2b.calls.create).toBe(0)
    expect(daytona.calls.create).toBe(1)
  })

  it("ineligible and unconfigured candidates are recorded and free; max_attempts caps real creates", async () => {
    const cs = fake("codesandbox")
    const a = fake("daytona", { failures: ["capacity"] })
    const b = fake("e2b", { failures: ["capacity"] })
    const c = fake("modal")
    const outcome = await walk(
      [cs.provider, a.provider, b.provider, c.provider],
      request({ fallback: { providers: ["vercel", "codesandbox"], max_attempts: 2 } })
    )
    expect(outcome._tag).toBe("NoEligibleProvider")
    expect(outcomes(outcome.attempts)).toEqual([
      ["vercel", "failed", "provider_auth_error"],
      ["codesandbox", "ineligible", "capability_unsupported"],
      ["daytona", "failed", "provider_capacity_unavailable"],
      ["e2b", "failed", "provider_capacity_unavailable"]
    ])
    expect(outcome.attempts[1]?.unmet_requirements.map((u) => u.requirement)).toEqual(["process.execute", "filesystem.read", "filesystem.write"])
    expect(cs.calls.create + c.calls.create).toBe(0)
  })

  it("every candidate failing safely ends as NoEligibleProvider with each attempt", async () => {
    const outcome = await walk([fake("daytona", { failures: ["capacity"] }).provider, fake("e2b", { failures: ["unavailable"] }).provider])
    expect(outcome._tag).toBe("NoEligibleProvider")
    expect(outcome.attempts).toHaveLength(2)
  })

  it("managed billing (remote providers by default) skips providers without cost", async () => {
    const cf = fake("cloudflare", { mode: "remote" })
    const d = fake("daytona", { mode: "remote" })
    const outcome = await walk([cf.provider, d.provider], request({ fallback: { providers: ["cloudflare"] } }))
    expect(outcomes(outcome.attempts)).toEqual([["cloudflare", "ineligible", "capability_unsupported"], ["daytona", "created", null]])
    expect(outcome.attempts[0]?.unmet_requirements.map((u) => u.requirement)).toEqual(["billing"])
    // Emulated (not billed from the provider's cost): eligible.
    const emulated = await walk([fake("cloudflare").provider], request({ fallback: { providers: ["cloudflare"] } }))
    expect(emulated._tag).toBe("Provisioned")
  })

  it("auto places where the most of the API works (ties in the canonical order); the organization's own providers first", async () => {
    // Modal (no cancel, no endpoints, no append) comes before Blaxel in the canonical order, yet Blaxel's API is broader.
    const modal = fake("modal")
    const blaxel = fake("blaxel")
    const outcome = await walk([modal.provider, blaxel.provider])
    expect(outcome._tag === "Provisioned" && outcome.provider.name).toBe("blaxel")
    expect(apiBreadth(blaxel.provider)).toBeGreaterThan(apiBreadth(modal.provider))
    // A provider that takes standard input and runs terminals outranks one that does not.
    const withInput = { ...fake("e2b").provider, sendInput: () => Effect.void, resizeTerminal: () => Effect.void, capabilities: { ...DECLARED.e2b, process: { ...DECLARED.e2b.process!, terminal: true, cancel: true } } }
    expect(autoOrder([fake("daytona").provider, withInput]).map((p) => p.name)).toEqual(["e2b", "daytona"])
    // Equal breadth: the canonical order.
    expect(autoOrder([fake("vercel").provider, fake("vercel").provider, fake("daytona").provider]).map((p) => p.name)[0]).toBe("daytona")
    // BYOK first, whatever its breadth; an explicit provider is never reordered.
    const own = await walk([modal.provider, blaxel.provider], request(), [], (p) => p.name === "modal")
    expect(own._tag === "Provisioned" && own.provider.name).toBe("modal")
    const explicit = await walk([modal.provider, blaxel.provider], request({ provider: "modal", fallback: { providers: ["blaxel"] } }))
    expect(outcomes(explicit.attempts)[0]).toEqual(["modal", "created", null])
  })

  it("a provider that gives less than asked is refused: its sandbox destroyed, the attempt ineligible (resources), the next tried", async () => {
    const small = fake("daytona", { gives: { vcpu: 1, memoryMb: 512 } })
    const large = fake("modal", { gives: { vcpu: 2, memoryMb: 2048 } })
    const outcome = await walk([small.provider, large.provider], request({ provider: "daytona", fallback: { providers: ["modal"] }, resources: { vcpu: 1, memory_mb: 1024, disk_mb: 0 } }))
    expect(outcome._tag === "Provisioned" && outcome.provider.name).toBe("modal")
    expect(outcomes(outcome.attempts)).toEqual([["daytona", "ineligible", "capability_unsupported"], ["modal", "created", null]])
    expect(outcome.attempts[0]?.unmet_requirements).toEqual([{ requirement: "resources", message: "daytona gave 1 vCPU, 512 MB of memory, less than the requested 1 vCPU, 1024 MB of memory, 0 MB of disk" }])
    expect(small.calls.destroy).toBe(1)
    expect(small.resources.size).toBe(0)
  })

  it("create is idempotent per sandbox id at the fake (the walk relies on it after a restart)", async () => {
    const d = fake("daytona")
    const first = await walk([d.provider])
    const second = await walk([d.provider])
    expect(first._tag === "Provisioned" && second._tag === "Provisioned" && first.sandbox.resourceId === second.sandbox.resourceId).toBe(true)
    expect(d.resources.size).toBe(1)
  })
})
