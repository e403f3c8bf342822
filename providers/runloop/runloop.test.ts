/** The Runloop adapter against its emulator over the real local runtime: the shared conformance suite (wire checks: runloop-remote.test.ts). */
import { conformance, emulatedTarget } from "../core/conformance.ts"
import { makeRunloopProvider } from "./adapter/index.ts"
import { startRunloopEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("runloop", startRunloopEmulator, (emulator) =>
  makeRunloopProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }))

conformance("runloop (emulated)", setup)
