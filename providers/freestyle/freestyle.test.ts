/** The Freestyle adapter against its emulator over the real local runtime: the shared conformance suite (wire checks: freestyle-remote.test.ts). */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { conformance, conformanceInput, emulatedTarget } from "../testing/conformance.ts"
import { makeFreestyleProvider, RATE_CARD } from "./adapter/index.ts"
import { startFreestyleEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("freestyle", startFreestyleEmulator, (emulator) =>
  makeFreestyleProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }))

conformance("freestyle (emulated)", setup)

describe("freestyle (emulated): beyond conformance", () => {
  let target: Awaited<ReturnType<typeof setup>>
  beforeAll(async () => {
    target = await setup()
  }, 60_000)
  afterAll(() => target.teardown(), 60_000)

  const call = (method: string, path: string, body?: unknown, key = target.emulator.apiKey) =>
    fetch(`${target.emulator.apiUrl}/v5${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })

  it("one VM per slug (addressable by it), upward-only resize in MiB, a null status past the exec timeout, sha256-checked writes, firewall rules it cannot enforce refused, a wrong key is auth", async () => {
    const { provider } = target
    const closed = { rules: [] }
    const created = await call("POST", "/vms", { slug: "metal-early", firewall: closed, futureField: true })
    expect(created.status).toBe(200)
    const vm = (await created.json()) as { id: string; state: string; resources: unknown; firewallRules: unknown }
    expect(vm).toMatchObject({ state: "running", slug: "metal-early", resources: { cpu: 2, memory: 4096, storage: 16384 }, firewallRules: [] })
    expect((await call("POST", "/vms", { slug: "metal-early", firewall: closed })).status).toBe(409)
    expect(await (await call("GET", "/vms/metal-early")).json()).toMatchObject({ id: vm.id })
    // What it cannot enforce: a port, inbound traffic, TLS rules, private networks; and no firewall at all.
    const refused = async (body: unknown) => {
      const res = await call("POST", "/vms", body)
      return { status: res.status, body: await res.json() }
    }
    expect(await refused({ firewall: { rules: [{ action: "allow", source: {}, destination: { public: true, port: 443, protocol: "tcp" } }] } })).toMatchObject({ status: 400, body: { code: "INVALID_PARAMETERS" } })
    expect(await refused({ firewall: { rules: [{ action: "allow", source: { public: true }, destination: { port: 22 } }] } })).toMatchObject({ status: 400 })
    expect(await refused({ firewall: closed, tls: { rules: [{ action: "allow", domain: "a.example.com" }] } })).toMatchObject({ status: 400, body: { message: expect.stringMatching(/^tls: /) } })
    expect(await refused({ firewall: closed, vpcs: [{ vpcId: "v" }] })).toMatchObject({ status: 400, body: { message: expect.stringMatching(/^vpcs: /) } })
    expect(await refused({ slug: "no-firewall" })).toMatchObject({ status: 400 })
    const sandbox = { resourceId: vm.id, resolvedResources: { vcpu: 2, memoryMb: 4096, diskMb: 16384, architecture: "x86_64", providerSize: null }, metadata: {} }

    expect((await call("POST", `/vms/${vm.id}/resize`, { cpu: 1 })).status).toBe(400)
    expect(await (await call("POST", `/vms/${vm.id}/resize`, { cpu: 3, memory: 6144 })).json()).toMatchObject({ resources: { cpu: 3, memory: 6144, storage: 16384 } })

    const slow = await call("POST", `/vms/${vm.id}/exec-await`, { command: "echo started; sleep 5", timeoutMs: 300 })
    expect(slow.status).toBe(200)
    expect(await slow.json()).toMatchObject({ statusCode: null, stdout: "started\n" })
    expect(await (await call("POST", `/vms/${vm.id}/exec-await`, { command: "echo $A", env: { A: "from env" } })).json()).toMatchObject({ statusCode: 0, stdout: "from env\n" })
    expect(await (await call("POST", `/vms/${vm.id}/exec-await`, { command: "true", linuxUser: "root" })).json()).toMatchObject({ code: "INVALID_PARAMETERS" })

    const bad = await fetch(`${target.emulator.apiUrl}/v5/vms/${vm.id}/fs/write?path=/workspace/x&sha256=${"0".repeat(64)}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${target.emulator.apiKey}` },
      body: new Uint8Array([1, 2, 3])
    })
    expect(bad.status).toBe(400)
    expect(await bad.json()).toMatchObject({ code: "CHECKSUM_MISMATCH" })

    const wrong = makeFreestyleProvider({ apiUrl: target.emulator.apiUrl, apiKey: "nope", mode: "emulated" })
    expect((await Effect.runPromise(Effect.flip(wrong.inspect(sandbox)))).kind).toBe("auth")
    await Effect.runPromise(provider.destroy(sandbox))
    expect(await Effect.runPromise(provider.inspect(sandbox))).toBe("absent")
  }, 60_000)

  it("a later deadline moves the VM's TTL (PATCH ttlSeconds, counted from its creation)", async () => {
    const sandbox = await Effect.runPromise(target.provider.create(conformanceInput(`sbx_ttl${Date.now()}`)))
    const before = (await (await call("GET", `/vms/${sandbox.resourceId}`)).json()) as { ttlSeconds: number }
    await Effect.runPromise(target.provider.extendLifetime!(sandbox, 7200))
    const after = (await (await call("GET", `/vms/${sandbox.resourceId}`)).json()) as { ttlSeconds: number }
    expect(after.ttlSeconds).toBeGreaterThanOrEqual(7200 + 300)
    expect(after.ttlSeconds).toBeGreaterThan(before.ttlSeconds)
    await Effect.runPromise(target.provider.destroy(sandbox))
  }, 60_000)

  it("the cost of a created VM is the rate card's estimate for its size", async () => {
    const sandbox = await Effect.runPromise(target.provider.create(conformanceInput(`sbx_cost${Date.now()}`)))
    const cost = await Effect.runPromise(target.provider.getCost(sandbox, { from: "2026-01-01T00:00:00.000Z", to: "2026-01-01T01:00:00.000Z" }))
    expect(cost).toMatchObject({ amountMicrousd: 133_616n, provenance: "estimated_rate_card", rateCardVersion: RATE_CARD.version })
    await Effect.runPromise(target.provider.destroy(sandbox))
  }, 60_000)
})
