/** The Modal adapter against its emulator (an in-process fake of the SDK calls, over the real local runtime): the shared conformance suite. */
import { conformance, emulatedTarget } from "../testing/conformance.ts"
import { DEFAULT_APP_NAME, makeModalProvider } from "./adapter/index.ts"
import { startModalEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("modal", startModalEmulator, (emulator) =>
  makeModalProvider({ api: emulator.api(emulator.tokenId, emulator.tokenSecret), appName: DEFAULT_APP_NAME, mode: "emulated" }))

conformance("modal (emulated)", setup)
