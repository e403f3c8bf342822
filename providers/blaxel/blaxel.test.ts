/** The Blaxel adapter against its emulator over the real local runtime: the shared conformance suite (wire checks: blaxel-remote.test.ts). */
import { conformance, emulatedTarget } from "../core/conformance.ts"
import { makeBlaxelProvider } from "./adapter/index.ts"
import { startBlaxelEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("blaxel", startBlaxelEmulator, (emulator) =>
  makeBlaxelProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, workspace: emulator.workspace, mode: "emulated" }))

conformance("blaxel (emulated)", setup)
