/**
 * The CodeSandbox adapter in `remote` mode against a scripted HttpClient: the requests it sends (paths, bodies,
 * auth), the `{success, data, errors}` envelope, the running-VM preflight, find-by-tag or fork, start with tier and
 * hibernation timeout, a fork deleted when its start fails, hibernate/start as pause/resume, delete, reconcile, the
 * error kinds, the credit cost worked example, BYOK, and the runtime refused.
 */
import type { HttpClient } from "@effect/platform"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { conformanceInput } from "../testing/conformance.ts"
import type { ProviderError, ProviderSandbox } from "../../src/providers/Provider.ts"
import { bodyJson, type Call, json, scripted, type Step } from "../testing/scripted-client.ts"
import { hibernationTimeout, makeCodeSandboxProvider, sandboxTag, tierCost, tierFor } from "./adapter/index.ts"

const API = "https://api.codesandbox.test"
const provider = (client: HttpClient.HttpClient, apiKey = "csb_key") => makeCodeSandboxProvider({ apiUrl: API, apiKey, mode: "remote", httpClient: client })
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>) => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (result._tag === "Right") throw new Error("expected a failure")
  return result.left
}
const step = (method: string, path: string, reply: Step["reply"]): Step => ({ method, path, reply })
const authorized = (call: Call, key = "csb_key") => expect(call.headers["authorization"]).toBe(`Bearer ${key}`)
const ok = (data: unknown, status = 200) => json({ success: true, data, errors: null }, status)
const err = (status: number, ...errors: Array<string>) => json({ success: false, data: null, errors }, status)
const running = (ids: Array<string> = [], count = ids.length, limit = 10) => ok({ concurrent_vm_count: count, concurrent_vm_limit: limit, vms: ids.map((id) => ({ id })) })
const listed = (...sandboxes: Array<{ id: string; tags: Array<string> }>) => ok({ sandboxes, pagination: { current_page: 1, next_page: null, total_records: sandboxes.length } })
const TAG = sandboxTag("sbx_1")
const SANDBOX: ProviderSandbox = {
  resourceId: "abc123",
  resolvedResources: { vcpu: 2, memoryMb: 4096, diskMb: null, architecture: "x86_64", providerSize: "Nano" },
  metadata: { tier: "Nano", hibernationTimeoutSeconds: 600, templateId: "pcz35m" }
}

describe("codesandbox remote: create", () => {
  it("preflight, no tagged sandbox, fork the default template with our tags, start with tier, timeout and no wake-up", async () => {
    const s = scripted([
      step("GET", "/vm/running", (call) => (authorized(call), running())),
      step("GET", "/sandbox", (call) => {
        authorized(call)
        expect(call.url.searchParams.get("tags")).toBe(TAG)
        return listed({ id: "other", tags: ["metal-sandbox-sbx_10"] })
      }),
      step("POST", "/sandbox/pcz35m/fork", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({ title: "metal sbx_1", tags: [TAG, "metal-tier-nano"], privacy: 2 })
        return ok({ id: "abc123", alias: "abc123", title: "metal sbx_1" }, 201)
      }),
      step("POST", "/vm/abc123/start", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({ tier: "Nano", hibernation_timeout_seconds: 600, automatic_wakeup_config: { http: false, websocket: false } })
        return ok({ id: "abc123" })
      })
    ])
    expect(await run(provider(s.client).create(conformanceInput("sbx_1")))).toEqual(SANDBOX)
    expect(s.left()).toBe(0)
  })

  it("a tagged sandbox is started, not forked again; a template source and vm_tier are used", async () => {
    const s = scripted([
      step("GET", "/vm/running", () => running(["x"], 10, 10)),
      step("GET", "/sandbox", () => listed({ id: "abc123", tags: [TAG] })),
      step("POST", "/vm/abc123/start", (call) => {
        expect(bodyJson(call)).toMatchObject({ tier: "Large", hibernation_timeout_seconds: 60 })
        return ok({ id: "abc123" })
      })
    ])
    const input = conformanceInput("sbx_1")
    const created = await run(provider(s.client).create({
      ...input,
      source: { kind: "provider_template", provider: "codesandbox", template: "tpl9" },
      providerOptions: { vm_tier: "Large" },
      lifecycle: { ...input.lifecycle, idleTimeoutSeconds: 5 }
    }))
    expect(created.resolvedResources).toMatchObject({ vcpu: 32, memoryMb: 65_536, providerSize: "Large" })
    expect(created.metadata).toMatchObject({ templateId: "tpl9" })
    expect(s.left()).toBe(0)
  })

  it("a workspace at its VM limit is capacity before any fork; a failed start deletes the fork; a lost fork answer is found by tag", async () => {
    const full = scripted([step("GET", "/vm/running", () => running(["a", "b"], 2, 2)), step("GET", "/sandbox", () => listed())])
    expect((await failureOf(provider(full.client).create(conformanceInput("sbx_1")))).kind).toBe("capacity")
    expect(full.left()).toBe(0)

    const failing = scripted([
      step("GET", "/vm/running", () => running()),
      step("GET", "/sandbox", () => listed()),
      step("POST", "/sandbox/pcz35m/fork", () => ok({ id: "abc123" }, 201)),
      step("POST", "/vm/abc123/start", () => err(402, "Workspace is out of credits")),
      step("DELETE", "/vm/abc123", () => ok({}))
    ])
    const e = await failureOf(provider(failing.client).create(conformanceInput("sbx_1")))
    expect(e.kind).toBe("quota")
    expect(e.message).toContain("Workspace is out of credits")
    expect(failing.left()).toBe(0)

    const lost = scripted([
      step("GET", "/vm/running", () => running()),
      step("GET", "/sandbox", () => listed()),
      step("POST", "/sandbox/pcz35m/fork", () => "transport-error"),
      step("GET", "/sandbox", () => listed({ id: "abc123", tags: [TAG] })),
      step("POST", "/vm/abc123/start", () => ok({ id: "abc123" }))
    ])
    expect((await run(provider(lost.client).create(conformanceInput("sbx_1")))).resourceId).toBe("abc123")
    expect(lost.left()).toBe(0)
  })

  it("sizing: the first tier covering the request, never below the floor; nothing for too much; OCI and arm64 refused before any request", async () => {
    const resources = (vcpu: number, memoryMb: number) => ({ resources: { vcpu, memoryMb, architecture: "any" as const }, providerOptions: {} })
    expect(tierFor(resources(1, 512), "Pico")).toBe("Pico")
    expect(tierFor(resources(1, 512), "Nano")).toBe("Nano")
    expect(tierFor(resources(3, 1000), "Nano")).toBe("Micro")
    expect(tierFor(resources(65, 1000), "Nano")).toBeUndefined()
    expect(hibernationTimeout({ runtimeTimeoutSeconds: 10, onRuntimeTimeout: "destroy", onIdleTimeout: "destroy" })).toBe(60)
    expect(hibernationTimeout({ runtimeTimeoutSeconds: 172_800, onRuntimeTimeout: "destroy", onIdleTimeout: "destroy" })).toBe(86_400)
    const none = scripted([])
    const input = conformanceInput("sbx_1")
    expect((await failureOf(provider(none.client).create({ ...input, source: { kind: "oci_image", image: "alpine" } }))).kind).toBe("unsupported")
    expect((await failureOf(provider(none.client).create({ ...input, resources: { vcpu: 1, memoryMb: 512, architecture: "arm64" } }))).kind).toBe("unsupported")
    expect((await failureOf(provider(none.client).create({ ...input, resources: { vcpu: 100, memoryMb: 512, architecture: "any" } }))).kind).toBe("unsupported")
  })
})

describe("codesandbox remote: lifecycle", () => {
  it("inspect, reconcile by tag (tier from its tag), hibernate, start with the sandbox's tier, idempotent delete", async () => {
    const s = scripted([
      step("GET", "/sandbox/abc123", () => ok({ id: "abc123", tags: [TAG] })),
      step("GET", "/vm/running", () => running(["abc123"])),
      step("GET", "/sandbox/abc123", () => ok({ id: "abc123", tags: [TAG] })),
      step("GET", "/vm/running", () => running([])),
      step("GET", "/sandbox/gone", () => err(404, "Sandbox not found")),
      step("GET", "/sandbox", () => listed({ id: "abc123", tags: [TAG, "metal-tier-small"] })),
      step("GET", "/sandbox", () => listed()),
      step("POST", "/vm/abc123/hibernate", (call) => (expect(bodyJson(call)).toEqual({}), ok({}))),
      step("POST", "/vm/abc123/start", (call) => (expect(bodyJson(call)).toMatchObject({ tier: "Nano", hibernation_timeout_seconds: 600 }), ok({ id: "abc123" }))),
      step("DELETE", "/vm/abc123", () => ok({})),
      step("DELETE", "/vm/abc123", () => err(404, "VM not found"))
    ])
    const p = provider(s.client)
    expect(await run(p.inspect(SANDBOX))).toBe("running")
    expect(await run(p.inspect(SANDBOX))).toBe("paused")
    expect(await run(p.inspect({ ...SANDBOX, resourceId: "gone" }))).toBe("absent")
    expect((await run(p.reconcileCreate("sbx_1")))?.resolvedResources).toMatchObject({ vcpu: 8, memoryMb: 16_384, providerSize: "Small" })
    expect(await run(p.reconcileCreate("sbx_never"))).toBeNull()
    await run(p.pause(SANDBOX))
    await run(p.resume(SANDBOX))
    await run(p.destroy(SANDBOX))
    await run(p.destroy(SANDBOX))
    expect(s.left()).toBe(0)
  })

  it("error kinds: 401/403 auth, 402 quota, 429 capacity, 404 not_found, 422 invalid_request, 5xx unavailable, a lost create ambiguous", async () => {
    for (const [status, kind] of [[401, "auth"], [403, "auth"], [402, "quota"], [429, "capacity"], [422, "invalid_request"], [503, "unavailable"]] as const) {
      const s = scripted([step("POST", "/vm/abc123/hibernate", () => err(status, "nope"))])
      const e = await failureOf(provider(s.client).pause(SANDBOX))
      expect(e.kind, String(status)).toBe(kind)
      expect(e.message).toContain("nope")
    }
    const s = scripted([step("GET", "/vm/running", () => running()), step("GET", "/sandbox", () => listed()), step("POST", "/sandbox/pcz35m/fork", () => err(502, "bad gateway")), step("GET", "/sandbox", () => listed())])
    expect((await failureOf(provider(s.client).create(conformanceInput("sbx_1")))).kind).toBe("unknown_outcome")
  })

  it("runtime calls are unsupported, with the reason", async () => {
    const p = provider(scripted([]).client)
    const e = await failureOf(p.exec(SANDBOX, { command: ["true"], timeoutSeconds: 1, maxOutputBytes: 1, processId: "proc_x" }))
    expect(e.kind).toBe("unsupported")
    expect(e.message).toMatch(/websocket/)
    expect((await failureOf(p.readFile(SANDBOX, { path: "/x", offsetBytes: 0, maxBytes: 1 }))).kind).toBe("unsupported")
    expect(p.capabilities).toMatchObject({ process: null, files: null, httpEndpoints: null, pause: true, resume: true })
  })
})

describe("codesandbox remote: cost and BYOK", () => {
  it("worked example: Nano (10 credits/h) at $0.01486 a credit for 90 s counts 2 minutes: 10 × 14,860 × 2 / 60 = 4,953 µUSD; an hour is 148,600", async () => {
    expect(tierCost("Nano", 14_860, { from: "2026-01-01T00:00:00.000Z", to: "2026-01-01T00:01:30.000Z" }).amountMicrousd).toBe(4_953n)
    expect(tierCost("Nano", 14_860, { from: "2026-01-01T00:00:00.000Z", to: "2026-01-01T01:00:00.000Z" }).amountMicrousd).toBe(148_600n)
    const cost = await run(provider(scripted([]).client).getCost({ ...SANDBOX, metadata: { tier: "XLarge" } }, { from: "2026-01-01T00:00:00.000Z", to: "2026-01-01T01:00:00.000Z" }))
    expect(cost).toMatchObject({ amountMicrousd: 4_755_200n, provenance: "estimated_rate_card", confidence: "low" })
  })

  it("BYOK: the organization's key, tier floor and credit rate", async () => {
    const s = scripted([
      step("GET", "/vm/running", (call) => (authorized(call, "org_key"), running())),
      step("GET", "/sandbox", () => listed()),
      step("POST", "/sandbox/pcz35m/fork", () => ok({ id: "abc123" })),
      step("POST", "/vm/abc123/start", (call) => (expect(bodyJson(call)).toMatchObject({ tier: "Micro" }), ok({ id: "abc123" })))
    ])
    const byok = provider(s.client).withCredentials!({ api_key: "org_key", vm_tier: "Micro", credit_rate_usd: "0.02" })
    const created = await run(byok.create(conformanceInput("sbx_1")))
    const cost = await run(byok.getCost(created, { from: "2026-01-01T00:00:00.000Z", to: "2026-01-01T01:00:00.000Z" }))
    expect(cost?.amountMicrousd).toBe(400_000n)
    expect(s.left()).toBe(0)
  })
})
