/** The Vercel adapter against its emulator over the real local runtime: the shared conformance suite (wire checks: vercel-remote.test.ts). */
import { conformance, emulatedTarget } from "../core/conformance.ts"
import { makeVercelProvider } from "./adapter/index.ts"
import { startVercelEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("vercel", startVercelEmulator, (emulator) =>
  makeVercelProvider({ apiUrl: emulator.apiUrl, token: emulator.token, projectId: emulator.projectId, teamId: emulator.teamId, mode: "emulated" }))

conformance("vercel (emulated)", setup)
