/** The Freestyle adapter against its emulator over the real local runtime: the shared conformance suite (wire checks: freestyle-remote.test.ts). */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { conformance, conformanceInput, emulatedTarget } from "../core/conformance.ts"
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

  it("202 before readiness, one VM per name, upward-only resize, 408 past the exec timeout, sha256-checked writes, a wrong key is auth", async () => {
    const { provider } = target
    const early = await call("POST", "/vms", { name: "metal-early", ports: [], waitForReadySignal: false })
    expect(early.status).toBe(202)
    const { id } = (await early.json()) as { id: string }
    expect((await call("POST", "/vms", { name: "metal-early", ports: [] })).status).toBe(409)
    const sandbox = { resourceId: id, resolvedResources: { vcpu: 2, memoryMb: 4096, diskMb: 16384, architecture: "x86_64", providerSize: null }, metadata: {} }
    for (let i = 0; i < 500 && (await Effect.runPromise(provider.inspect(sandbox))) !== "running"; i++) await Bun.sleep(20)
    expect(await Effect.runPromise(provider.inspect(sandbox))).toBe("running")

    expect((await call("POST", `/vms/${id}/resize`, { vcpuCount: 1 })).status).toBe(400)
    expect((await call("POST", `/vms/${id}/resize`, { vcpuCount: 3, memSizeGb: 6 })).status).toBe(200)
    expect(await (await call("GET", `/vms/${id}`)).json()).toMatchObject({ vcpuCount: 3, memSizeGb: 6, rootfsSizeGb: 16 })

    const slow = await call("POST", `/vms/${id}/exec-await`, { command: "sleep 5", timeoutMs: 300 })
    expect(slow.status).toBe(408)
    expect(await slow.json()).toMatchObject({ error: "EXEC_TIMED_OUT" })

    const bad = await fetch(`${target.emulator.apiUrl}/v5/vms/${id}/fs/write?path=/workspace/x&sha256=${"0".repeat(64)}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${target.emulator.apiKey}` },
      body: new Uint8Array([1, 2, 3])
    })
    expect(bad.status).toBe(400)
    expect(await bad.json()).toMatchObject({ error: "CHECKSUM_MISMATCH" })

    const wrong = makeFreestyleProvider({ apiUrl: target.emulator.apiUrl, apiKey: "nope", mode: "emulated" })
    expect((await Effect.runPromise(Effect.flip(wrong.inspect(sandbox)))).kind).toBe("auth")
    await Effect.runPromise(provider.destroy(sandbox))
    expect(await Effect.runPromise(provider.inspect(sandbox))).toBe("absent")
  }, 60_000)

  it("the cost of a created VM is the rate card's estimate for its size", async () => {
    const sandbox = await Effect.runPromise(target.provider.create(conformanceInput(`sbx_cost${Date.now()}`)))
    const cost = await Effect.runPromise(target.provider.getCost(sandbox, { from: "2026-01-01T00:00:00.000Z", to: "2026-01-01T01:00:00.000Z" }))
    expect(cost).toMatchObject({ amountMicrousd: 133_616n, provenance: "estimated_rate_card", rateCardVersion: RATE_CARD.version })
    await Effect.runPromise(target.provider.destroy(sandbox))
  }, 60_000)
})
