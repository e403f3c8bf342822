/**
 * `sandbox-gateway emulate <provider…> [--port N] [--data-dir D] [--json] [--env-file F]` (also `bun run emulate …`):
 * the providers' emulators on their own, on loopback, over a local runtime on D — for testing code written against
 * a provider's official SDK without its cloud (docs/guide/offline.md). For each provider it prints the base URL(s),
 * the API key, the environment (or SDK options) that point the official SDK at it, and the gateway's own variables
 * that make a gateway use it as that provider in `remote` mode. It runs until SIGINT or SIGTERM, then stops its
 * emulators and every sandbox they made (they are jails of D's runtime).
 *
 * - `--port N`: the first provider named is served on N, the next on N+1, …; without it each emulator keeps the port
 *   it had last time on D (a new one the first time).
 * - `--data-dir D` (default `./emulate-data`): the emulators' books and their sandboxes' disks. Never a gateway's
 *   DATA_DIR: its reaper would remove the jails made here, and this command stops every jail of D when it ends.
 * - `--json`: one line of JSON, `{"emulators": [ServedEmulator without stop, …]}`, instead of the text (for tools:
 *   test/support/offline.ts reads it).
 * - `--env-file F`: also writes F, once everything is served: `export NAME=value` lines of every SDK environment
 *   printed (for `. F` in a shell script).
 *
 * Every emulator with an HTTP wire can be served; Modal's cannot: Modal's SDK speaks gRPC with Modal's private
 * protocol definitions, so its emulator is an in-process fake of the SDK's interface (providers/modal/emulator),
 * with no wire an SDK could be pointed at.
 *
 * Runtime settings come from the environment as for the gateway: RUNTIME_HOST_UID, RUNTIME_ALLOW_PRIVATE_EGRESS,
 * RUNTIME_WARM_POOL (default 0 here: the first create makes its jail).
 *
 * This file is the command (its arguments, what it prints); what each provider's emulator is and tells its SDK is
 * emulatorCatalog.ts, and serving them over a runtime of their own is emulation.ts.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { PROVIDERS } from "../src/domain/Sandbox.ts"
import type { ServedEmulator } from "./emulatorCatalog.ts"
import { type Emulation, emulateProblem, startEmulation } from "./emulation.ts"

/** The text `emulate` prints for one emulator. */
export const describeEmulator = (e: ServedEmulator): string => {
  const lines = [`${e.provider}`, ...Object.entries(e.urls).map(([what, url]) => `  ${`${what} URL`.padEnd(14)}${url}`), `  ${"API key".padEnd(14)}${e.apiKey}`]
  if (e.sdk !== null) lines.push(`  For its SDK (npm ${e.sdk}):`)
  else lines.push("  For its clients:")
  for (const [name, value] of Object.entries(e.sdkEnv)) lines.push(`    export ${name}=${value}`)
  for (const note of e.sdkNotes) lines.push(`    ${note}`)
  lines.push(`  For a gateway using it as ${e.provider} (remote mode): ${Object.entries(e.gatewayEnv).map(([k, v]) => `${k}=${v}`).join(" ")}`)
  return lines.join("\n")
}

const USAGE = `Usage: sandbox-gateway emulate <provider…> [--port N] [--data-dir D] [--json] [--env-file F]
Serves the providers' emulators on loopback until SIGINT or SIGTERM (docs/guide/offline.md).
Providers: ${PROVIDERS.filter((p) => p !== "modal").join(", ")} (modal's emulator cannot be served: it is an in-process fake of its SDK).`

const parseArgs = (argv: ReadonlyArray<string>) => {
  const names: Array<string> = []
  const flags: Record<string, string | true> = {}
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith("--")) {
      names.push(arg)
      continue
    }
    const [name, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined]
    if (name === "json" || name === "help") flags[name] = true
    else if (inline !== undefined) flags[name] = inline
    else if (argv[i + 1] !== undefined && !argv[i + 1]!.startsWith("--")) flags[name] = argv[++i]!
    else flags[name] = true
  }
  return { names, flags }
}

/** The command: parses, serves, prints, waits for a signal, then stops the emulators and their sandboxes. */
export const emulateMain = async (argv: ReadonlyArray<string>): Promise<void> => {
  const { names, flags } = parseArgs(argv)
  const fail = (message: string) => {
    process.stderr.write(`error: ${message}\n${USAGE}\n`)
    process.exit(2)
  }
  if (flags["help"] === true) {
    process.stdout.write(`${USAGE}\n`)
    return
  }
  const unknown = Object.keys(flags).filter((f) => !["port", "data-dir", "json", "env-file"].includes(f))
  if (unknown.length > 0) return fail(`unknown option: --${unknown[0]}`)
  for (const f of ["port", "data-dir", "env-file"]) if (flags[f] === true) return fail(`--${f} needs a value`)
  const problem = emulateProblem(names)
  if (problem !== undefined) return fail(problem)
  const basePort = flags["port"] === undefined ? undefined : Number(flags["port"])
  if (basePort !== undefined && !(Number.isInteger(basePort) && basePort >= 1 && basePort + names.length - 1 <= 65535)) {
    return fail("--port must be a port number (1-65535), with room for one port per provider")
  }
  const dataDir = path.resolve(typeof flags["data-dir"] === "string" ? flags["data-dir"] : "emulate-data")
  let emulation: Emulation
  try {
    emulation = startEmulation(dataDir, names, basePort)
  } catch (e) {
    return fail((e as Error).message)
  }
  const stop = () => void emulation.stop().then(() => process.exit(0))
  process.on("SIGINT", stop)
  process.on("SIGTERM", stop)
  const served = emulation.emulators
  if (typeof flags["env-file"] === "string") {
    const lines = served.flatMap((e) => Object.entries(e.sdkEnv).map(([k, v]) => `export ${k}=${v}`))
    // Whole or not at all: a script waiting for the file never reads half of it.
    fs.writeFileSync(`${flags["env-file"]}.tmp`, `${lines.join("\n")}\n`, { mode: 0o600 })
    fs.renameSync(`${flags["env-file"]}.tmp`, flags["env-file"])
  }
  if (flags["json"] === true) {
    process.stdout.write(`${JSON.stringify({ emulators: served.map(({ stop: _, ...rest }) => rest) })}\n`)
  } else {
    process.stdout.write(`Serving ${served.length === 1 ? "1 emulator" : `${served.length} emulators`} on loopback over the local runtime in ${dataDir} (Ctrl-C stops them and their sandboxes):\n\n`)
    process.stdout.write(`${served.map(describeEmulator).join("\n\n")}\n`)
  }
}
