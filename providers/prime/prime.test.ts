/**
 * The Prime adapter against its emulator over the real local runtime: the shared conformance suite. Wire checks
 * (request bodies, protobuf bytes, refusals, cost): prime-remote.test.ts.
 */
import { conformance, emulatedTarget } from "../core/conformance.ts"
import { makePrimeProvider } from "./adapter/index.ts"
import { startPrimeEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("prime", startPrimeEmulator, (emulator) =>
  makePrimeProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }))

conformance("prime (emulated)", setup)
