/** The Blaxel adapter against its emulator over the real local runtime: the shared conformance suite, plus wire checks. */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { tempDataDir } from "../../test/support/server.ts"
import { conformance, conformanceInput } from "../core/conformance.ts"
import { makeBlaxelProvider } from "./adapter/index.ts"
import { startBlaxelEmulator } from "./emulator/index.ts"

const setup = async () => {
  const dataDir = tempDataDir("blaxel")
  const runtime = makeLocalRuntime(dataDir)
  const emulator = startBlaxelEmulator(dataDir, runtime)
  const provider = makeBlaxelProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, workspace: emulator.workspace, mode: "emulated" })
  return {
    provider,
    emulator,
    teardown: async () => {
      emulator.stop()
      await Effect.runPromise(runtime.reap(new Set()))
    }
  }
}

conformance("blaxel (emulated)", setup)
