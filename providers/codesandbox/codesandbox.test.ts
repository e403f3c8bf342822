/** The CodeSandbox adapter against its emulator over the real local runtime: the shared conformance suite (wire checks: codesandbox-remote.test.ts). */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { conformance, conformanceInput, emulatedTarget } from "../testing/conformance.ts"
import { makeCodeSandboxProvider } from "./adapter/index.ts"
import { startCodeSandboxEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("codesandbox", startCodeSandboxEmulator, (emulator) =>
  makeCodeSandboxProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }))

conformance("codesandbox (emulated)", setup)

describe("codesandbox (emulated): beyond conformance", () => {
  let target: Awaited<ReturnType<typeof setup>>
  beforeAll(async () => {
    target = await setup()
  }, 60_000)
  afterAll(() => target.teardown(), 60_000)

  const call = (method: string, path: string, body?: unknown, key = target.emulator.apiKey) =>
    fetch(`${target.emulator.apiUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })

  it("the envelope, an unknown template is 404, a fork does not run until started, hibernation freezes the jail, a wrong key is auth", async () => {
    expect(await (await call("POST", "/sandbox/nope/fork", {})).json()).toMatchObject({ success: false, errors: [expect.any(String)] })
    const forked = (await (await call("POST", "/sandbox/pcz35m/fork", { tags: ["t-x"] })).json()) as { success: boolean; data: { id: string } }
    expect(forked.success).toBe(true)
    const running = async () => ((await (await call("GET", "/vm/running")).json()) as { data: { vms: Array<{ id: string }> } }).data.vms.map((v) => v.id)
    expect(await running()).not.toContain(forked.data.id)
    expect((await call("POST", `/vm/${forked.data.id}/start`, { tier: "Pico", hibernation_timeout_seconds: 60 })).status).toBe(200)
    expect(await running()).toContain(forked.data.id)
    expect(target.emulator.runtimeIdOf(forked.data.id)).toBe(`csb-${forked.data.id}`)
    expect((await call("POST", `/vm/${forked.data.id}/hibernate`)).status).toBe(200)
    expect(await running()).not.toContain(forked.data.id)
    expect((await call("DELETE", `/vm/${forked.data.id}`)).status).toBe(200)
    expect((await call("GET", `/sandbox/${forked.data.id}`)).status).toBe(404)

    const wrong = makeCodeSandboxProvider({ apiUrl: target.emulator.apiUrl, apiKey: "nope", mode: "emulated" })
    expect((await Effect.runPromise(Effect.flip(wrong.create(conformanceInput("sbx_wrongkey"))))).kind).toBe("auth")
  }, 60_000)

  // The emulator's VMs are this host's jails, never larger than it (a 2-core machine runs Nano, not Small).
  it("a request above Pico's memory starts a Nano VM and reports its size and a cost at its credits", async () => {
    const sandbox = await Effect.runPromise(target.provider.create({ ...conformanceInput(`sbx_nano${Date.now()}`), resources: { vcpu: 2, memoryMb: 3000, architecture: "any" } }))
    expect(sandbox.resolvedResources).toEqual({ vcpu: 2, memoryMb: 4096, diskMb: null, architecture: "x86_64", providerSize: "Nano" })
    const cost = await Effect.runPromise(target.provider.getCost(sandbox, { from: "2026-01-01T00:00:00.000Z", to: "2026-01-01T01:00:00.000Z" }))
    expect(cost).toMatchObject({ amountMicrousd: 148_600n, provenance: "estimated_rate_card" })
    await Effect.runPromise(target.provider.destroy(sandbox))
  }, 60_000)
})
