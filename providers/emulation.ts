/**
 * Serving emulators on their own (`sandbox-gateway emulate`, and the tests that want a provider's cloud in another
 * process): checking the names asked for, putting each emulator on its port, and the local runtime they share on a
 * data dir of their own, stopped with every jail it made.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { secureDataDir } from "../src/DataDir.ts"
import { PROVIDERS } from "../src/domain/Sandbox.ts"
import type { LocalRuntimeShape } from "../src/runtime/LocalRuntime.ts"
import { makeLocalRuntime } from "../src/runtime/LocalRuntimeLive.ts"
import { emulatorHome } from "./core/emulator/state.ts"
import { EMULATORS, type ProviderName, type ServedEmulator } from "./emulatorCatalog.ts"

/** Why `names` cannot be served (unknown, repeated, Modal), or undefined. */
export const emulateProblem = (names: ReadonlyArray<string>): string | undefined => {
  if (names.length === 0) return "name at least one provider"
  for (const [i, name] of names.entries()) {
    if (!(PROVIDERS as ReadonlyArray<string>).includes(name)) return `unknown provider: ${name} (one of ${PROVIDERS.join(", ")})`
    if (names.indexOf(name) !== i) return `${name} is named twice`
    const entry = EMULATORS[name as ProviderName]
    if (typeof entry !== "function") return `${name} cannot be served: ${entry.unservable}`
  }
  return undefined
}

/**
 * Starts the emulators of `names` (check them with `emulateProblem` first) over `runtime`, the first on `basePort`
 * and so on when given; stops those already started and throws when a port is taken.
 */
export const serveEmulators = (dataDir: string, runtime: LocalRuntimeShape, names: ReadonlyArray<ProviderName>, basePort?: number): Array<ServedEmulator> => {
  const served: Array<ServedEmulator> = []
  try {
    for (const [i, name] of names.entries()) {
      const start = EMULATORS[name]
      if (typeof start !== "function") throw new Error(`${name} cannot be served: ${start.unservable}`)
      // Each emulator serves on the port kept in its home (servePersistent): the one asked for is put there first.
      if (basePort !== undefined) fs.writeFileSync(path.join(emulatorHome(dataDir, name), "port"), String(basePort + i))
      const emulator = start(dataDir, runtime)
      served.push(emulator)
      const port = Number(new URL(Object.values(emulator.urls)[0]!).port)
      if (basePort !== undefined && port !== basePort + i) throw new Error(`port ${basePort + i} (for ${name}) is taken`)
    }
  } catch (e) {
    for (const s of served) s.stop()
    throw e
  }
  return served
}

const envNumber = (name: string, fallback: number) => {
  const raw = process.env[name]
  return raw === undefined || raw.trim() === "" ? fallback : Number(raw)
}

/** Emulators being served over a local runtime of their own, and how to stop them and every sandbox they made. */
export interface Emulation {
  readonly dataDir: string
  readonly emulators: ReadonlyArray<ServedEmulator>
  readonly stop: () => Promise<void>
}

/**
 * Serves the emulators of `names` (checked by `emulateProblem`) over a local runtime on `dataDir`, the first on
 * `basePort` and so on when given. Throws with a sentence when it cannot (a gateway's DATA_DIR, a port taken).
 */
export const startEmulation = (dataDir: string, names: ReadonlyArray<string>, basePort?: number): Emulation => {
  const problem = emulateProblem(names)
  if (problem !== undefined) throw new Error(problem)
  // A gateway's DATA_DIR has its database: its reaper would take these jails, and stopping ends all of D's.
  if (fs.existsSync(path.join(dataDir, "gateway.sqlite"))) throw new Error(`${dataDir} is a gateway's DATA_DIR: give emulate a directory of its own`)
  secureDataDir(dataDir, undefined)
  const runtime = makeLocalRuntime(dataDir, {
    hostUid: envNumber("RUNTIME_HOST_UID", 1_000_000),
    allowPrivateEgress: process.env["RUNTIME_ALLOW_PRIVATE_EGRESS"] === "true",
    warmPool: envNumber("RUNTIME_WARM_POOL", 0)
  })
  const shutdown = () => (runtime.shutdown === undefined ? Promise.resolve() : Effect.runPromise(runtime.shutdown).catch(() => undefined))
  let emulators: Array<ServedEmulator>
  try {
    emulators = serveEmulators(dataDir, runtime, names as ReadonlyArray<ProviderName>, basePort)
  } catch (e) {
    void shutdown()
    throw e
  }
  let stopping: Promise<void> | undefined
  return {
    dataDir,
    emulators,
    stop: () =>
      (stopping ??= (async () => {
        for (const e of emulators) e.stop()
        // Every jail of the data dir was made by these emulators: none outlives them.
        if (runtime.reap !== undefined) await Effect.runPromise(runtime.reap(new Set())).catch(() => undefined)
        await shutdown()
      })())
  }
}
