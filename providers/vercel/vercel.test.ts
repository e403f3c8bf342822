/** The Vercel adapter against its emulator over the real local runtime: the shared conformance suite (wire checks: vercel-remote.test.ts). */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { conformance, conformanceInput, emulatedTarget } from "../core/conformance.ts"
import { makeVercelProvider, RATE_CARD } from "./adapter/index.ts"
import { startVercelEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("vercel", startVercelEmulator, (emulator) =>
  makeVercelProvider({ apiUrl: emulator.apiUrl, token: emulator.token, projectId: emulator.projectId, teamId: emulator.teamId, mode: "emulated" }))

conformance("vercel (emulated)", setup)

describe("vercel (emulated): beyond conformance", () => {
  let target: Awaited<ReturnType<typeof setup>>
  beforeAll(async () => {
    target = await setup()
  }, 60_000)
  afterAll(() => target.teardown(), 60_000)

  it("the lifetime is extended at the emulator; an offline sandbox has deny-all; cost is the metered usage at the rate card", async () => {
    const { emulator, provider } = target
    const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_extra${Date.now()}`)))
    const session = async () => {
      const res = await fetch(`${emulator.apiUrl}/v2/sandboxes/sessions/${String(sandbox.metadata["sessionId"])}?teamId=${emulator.teamId}`, { headers: { authorization: `Bearer ${emulator.token}` } })
      return ((await res.json()) as { session: { timeout: number; startedAt: number; networkPolicy: { mode: string } } }).session
    }
    const before = await session()
    expect(before.networkPolicy.mode).toBe("deny-all")
    await Effect.runPromise(provider.extendLifetime!(sandbox, 3600))
    const after = await session()
    expect(after.startedAt + after.timeout).toBeGreaterThanOrEqual(Date.now() + 3_600_000)
    const cost = await Effect.runPromise(provider.getCost(sandbox, { from: new Date(Date.now() - 60_000).toISOString(), to: new Date().toISOString() }))
    // At least 60 s of 2 GiB (706.67 µUSD) plus the create.
    expect(cost).toMatchObject({ provenance: "provider_metered", rateCardVersion: RATE_CARD.version })
    expect(cost!.amountMicrousd >= 707n).toBe(true)
    // A wrong token or team is refused as Vercel refuses it.
    const wrong = makeVercelProvider({ apiUrl: emulator.apiUrl, token: "nope", projectId: emulator.projectId, mode: "emulated" })
    expect((await Effect.runPromise(Effect.flip(wrong.inspect(sandbox)))).kind).toBe("auth")
    await Effect.runPromise(provider.destroy(sandbox))
  }, 60_000)
})
