/** The Freestyle adapter against its emulator over the real local runtime: the shared conformance suite (wire checks: freestyle-remote.test.ts). */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { conformance, conformanceInput, emulatedTarget } from "../core/conformance.ts"
import { makeFreestyleProvider, RATE_CARD } from "./adapter/index.ts"
import { startFreestyleEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("freestyle", startFreestyleEmulator, (emulator) =>
  makeFreestyleProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }))

conformance("freestyle (emulated)", setup)
