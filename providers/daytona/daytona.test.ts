/** The Daytona adapter against its emulator over the real local runtime: the shared conformance suite, plus wire checks. */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { tempDataDir } from "../../test/support/server.ts"
import { conformance } from "../core/conformance.ts"
import { makeDaytonaProvider } from "./adapter.ts"
import { startDaytonaEmulator } from "./emulator.ts"

const setup = async () => {
  const dataDir = tempDataDir("daytona")
  const runtime = makeLocalRuntime(dataDir)
  const emulator = startDaytonaEmulator(dataDir, runtime)
  const provider = makeDaytonaProvider({ baseUrl: emulator.baseUrl, apiKey: emulator.apiKey, mode: "emulated" })
  return {
    provider,
    emulator,
    teardown: async () => {
      emulator.stop()
      await Effect.runPromise(runtime.reap(new Set()))
    }
  }
}

conformance("daytona (emulated)", setup)

describe("daytona wire", () => {
  it("refuses a wrong API key with an auth error, and maps 404 to absent", async () => {
    const { emulator, teardown } = await setup()
    try {
      const wrong = makeDaytonaProvider({ baseUrl: emulator.baseUrl, apiKey: "wrong", mode: "emulated" })
      const result = await Effect.runPromise(Effect.either(wrong.reconcileCreate("sbx_x")))
      expect(result._tag === "Left" && result.left.kind).toBe("auth")
      const response = await fetch(`${emulator.baseUrl}/sandbox/nope`, { headers: { authorization: `Bearer ${emulator.apiKey}` } })
      expect(response.status).toBe(404)
      expect(await response.json()).toMatchObject({ statusCode: 404 })
    } finally {
      await teardown()
    }
  })
})
