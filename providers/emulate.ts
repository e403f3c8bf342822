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
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { secureDataDir } from "../src/DataDir.ts"
import { PROVIDERS } from "../src/domain/Sandbox.ts"
import type { LocalRuntimeShape } from "../src/runtime/LocalRuntime.ts"
import { makeLocalRuntime } from "../src/runtime/LocalRuntimeLive.ts"
import { emulatorHome } from "./core/emulator/state.ts"
import { startBlaxelEmulator } from "./blaxel/emulator/index.ts"
import { startCloudflareEmulator } from "./cloudflare/emulator/index.ts"
import { startCodeSandboxEmulator } from "./codesandbox/emulator/index.ts"
import { startDaytonaEmulator } from "./daytona/emulator/index.ts"
import { startE2BEmulator } from "./e2b/emulator/index.ts"
import { startFreestyleEmulator } from "./freestyle/emulator/index.ts"
import { startNorthflankEmulator } from "./northflank/emulator/index.ts"
import { startPrimeEmulator } from "./prime/emulator/index.ts"
import { startRunloopEmulator } from "./runloop/emulator/index.ts"
import { startVercelEmulator } from "./vercel/emulator/index.ts"

type ProviderName = (typeof PROVIDERS)[number]

/** One emulator being served, and how to point clients at it. */
export interface ServedEmulator {
  readonly provider: ProviderName
  /** Its base URLs on loopback, by what they serve (`api`, `sandbox` …). */
  readonly urls: Readonly<Record<string, string>>
  readonly apiKey: string
  /** The provider's official npm SDK, or null where there is none to point (Prime has none on npm). */
  readonly sdk: string | null
  /** Environment that points the official SDK at this emulator; empty where the SDK reads none (the notes say how). */
  readonly sdkEnv: Readonly<Record<string, string>>
  /** What else the SDK needs to know (options to pass, what it cannot do here). */
  readonly sdkNotes: ReadonlyArray<string>
  /** The gateway's variables that make a gateway use this emulator as the provider, in `remote` mode. */
  readonly gatewayEnv: Readonly<Record<string, string>>
  readonly stop: () => void
}

type Start = (dataDir: string, runtime: LocalRuntimeShape) => ServedEmulator

/** How each provider's emulator is served and described; Modal's is the reason it cannot be. */
const EMULATORS: Readonly<Record<ProviderName, Start | { readonly unservable: string }>> = {
  e2b: (dataDir, runtime) => {
    const e = startE2BEmulator(dataDir, runtime)
    const env = { E2B_API_URL: e.apiUrl, E2B_SANDBOX_URL: e.sandboxUrl, E2B_API_KEY: e.apiKey }
    return {
      provider: "e2b",
      urls: { api: e.apiUrl, sandbox: e.sandboxUrl },
      apiKey: e.apiKey,
      sdk: "e2b",
      // The SDK takes E2B_SANDBOX_URL as envd's base for every sandbox (routed by its E2b-Sandbox-Id header), plain
      // http included; E2B_DOMAIN is then not used for the API or envd.
      sdkEnv: env,
      sdkNotes: [
        "or as options: Sandbox.create({ apiUrl, sandboxUrl, apiKey })",
        "every command and file call runs as the default user `user`; `user: \"root\"` is refused (a local sandbox has no root)",
        "sandbox.getHost(port) names <port>-<id>.<E2B_DOMAIN>: ports of a sandbox are not served"
      ],
      gatewayEnv: env,
      stop: e.stop
    }
  },
  daytona: (dataDir, runtime) => {
    const e = startDaytonaEmulator(dataDir, runtime)
    return {
      provider: "daytona",
      urls: { api: e.baseUrl },
      apiKey: e.apiKey,
      sdk: "@daytonaio/sdk",
      // The SDK reads both from the process environment (the API URL never from a .env file); the toolbox is found
      // through each sandbox's toolboxProxyUrl, which points back at this emulator.
      sdkEnv: { DAYTONA_API_URL: e.baseUrl, DAYTONA_API_KEY: e.apiKey },
      sdkNotes: [
        "or as options: new Daytona({ apiUrl, apiKey })",
        "the SDK's event stream (socket.io) is not served: it polls a sandbox's state instead",
        "not served: process.codeRun, git, LSP, snapshots, volumes, archive, pause (stop and start are), metrics, getPreviewLink (getSignedPreviewUrl is)"
      ],
      gatewayEnv: { DAYTONA_API_URL: e.baseUrl, DAYTONA_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  runloop: (dataDir, runtime) => {
    const e = startRunloopEmulator(dataDir, runtime)
    return {
      provider: "runloop",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: "@runloop/api-client",
      // RunloopSDK and Runloop read both; the SDK keeps the base URL's http.
      sdkEnv: { RUNLOOP_BASE_URL: e.apiUrl, RUNLOOP_API_KEY: e.apiKey },
      sdkNotes: [
        "or as options: new RunloopSDK({ baseURL, bearerToken })",
        "on Node, also http2: false: the SDK speaks HTTP/2 there by default, and the emulator serves HTTP/1.1 (Bun's fetch is unaffected)",
        "stdin (attach_stdin), persistent shells (shell_name), tunnels, logs and snapshots are refused or not served"
      ],
      gatewayEnv: { RUNLOOP_API_URL: e.apiUrl, RUNLOOP_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  vercel: (dataDir, runtime) => {
    const e = startVercelEmulator(dataDir, runtime)
    return {
      provider: "vercel",
      urls: { api: e.apiUrl },
      apiKey: e.token,
      sdk: "@vercel/sandbox",
      // The names Vercel's docs read an access token's credentials from; the SDK takes them as options.
      sdkEnv: { VERCEL_TOKEN: e.token, VERCEL_TEAM_ID: e.teamId, VERCEL_PROJECT_ID: e.projectId },
      sdkNotes: [
        "Sandbox.create({ token: VERCEL_TOKEN, teamId: VERCEL_TEAM_ID, projectId: VERCEL_PROJECT_ID, fetch }) (and the same for get and list)",
        `the SDK has no base-URL option or variable: give it a fetch that sends https://vercel.com/api/… to ${e.apiUrl}/…`,
        "persistent sandboxes (and so resume), ports, sources, drives and interactive sessions are refused or not served"
      ],
      gatewayEnv: { VERCEL_API_URL: e.apiUrl, VERCEL_TOKEN: e.token, VERCEL_PROJECT_ID: e.projectId, VERCEL_TEAM_ID: e.teamId },
      stop: e.stop
    }
  },
  blaxel: (dataDir, runtime) => {
    const e = startBlaxelEmulator(dataDir, runtime)
    return {
      provider: "blaxel",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: "@blaxel/core",
      // BL_DISABLE_H2: the emulator serves HTTP/1.1 (the SDK would otherwise open HTTP/2 sessions to Blaxel's edge).
      sdkEnv: { BL_API_URL: e.apiUrl, BL_API_KEY: e.apiKey, BL_WORKSPACE: e.workspace, BL_DISABLE_H2: "true" },
      sdkNotes: [
        "each sandbox's runtime is at the metadata.url the emulator answers with (BL_RUN_URL is not used)",
        "no pause (Blaxel has none); volumes, lifecycle policies, network settings, sessions, snapshots, drives and schedules are refused or not served"
      ],
      gatewayEnv: { BLAXEL_API_URL: e.apiUrl, BL_API_KEY: e.apiKey, BL_WORKSPACE: e.workspace },
      stop: e.stop
    }
  },
  freestyle: (dataDir, runtime) => {
    const e = startFreestyleEmulator(dataDir, runtime)
    return {
      provider: "freestyle",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: "freestyle",
      // The SDK reads its key from the environment; the API's address only as an option.
      sdkEnv: { FREESTYLE_API_KEY: e.apiKey },
      sdkNotes: [
        `new Freestyle({ baseUrl: "${e.apiUrl}" }) (the SDK reads no variable for it)`,
        "a VM's network is its firewall: { rules: [] } (none) or all outbound traffic to { public: true }; other rules, TLS rules, networks and placement are refused",
        "commands run as the VM's one user, `user`; snapshots, domains, identities and the PTY are not served"
      ],
      gatewayEnv: { FREESTYLE_API_URL: e.apiUrl, FREESTYLE_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  codesandbox: (dataDir, runtime) => {
    const e = startCodeSandboxEmulator(dataDir, runtime)
    return {
      provider: "codesandbox",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: "@codesandbox/sdk",
      sdkEnv: { CSB_BASE_URL: e.apiUrl, CSB_API_KEY: e.apiKey },
      sdkNotes: [
        "or as options: new CodeSandbox(apiKey, { baseUrl })",
        "lifecycle only (create, get, list, hibernate, shutdown, resume, delete): a VM's commands and files go through the SDK's pitcher websocket, which is not emulated"
      ],
      gatewayEnv: { CODESANDBOX_API_URL: e.apiUrl, CODESANDBOX_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  northflank: (dataDir, runtime) => {
    const e = startNorthflankEmulator(dataDir, runtime)
    return {
      provider: "northflank",
      urls: { api: e.apiUrl },
      apiKey: e.apiToken,
      sdk: "@northflank/js-client",
      // The client reads no environment: its context is given the token and host.
      sdkEnv: {},
      sdkNotes: [
        `contextProvider.addContext({ name, token: "<API key>", host: "${e.apiUrl.replace(/\/v1$/, "")}" }); project ${e.projectId}`,
        "lifecycle only (create, get, list, pause, resume, scale, delete): a container's shell goes through the exec websocket, which is not emulated"
      ],
      gatewayEnv: { NORTHFLANK_API_URL: e.apiUrl, NORTHFLANK_API_TOKEN: e.apiToken, NORTHFLANK_PROJECT_ID: e.projectId },
      stop: e.stop
    }
  },
  prime: (dataDir, runtime) => {
    const e = startPrimeEmulator(dataDir, runtime)
    return {
      provider: "prime",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: null,
      sdkEnv: {},
      sdkNotes: ["Prime's SDK is Python only (prime-sandboxes): point its base URL at the API above"],
      gatewayEnv: { PRIME_API_URL: e.apiUrl, PRIME_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  cloudflare: (dataDir, runtime) => {
    const e = startCloudflareEmulator(dataDir, runtime)
    return {
      provider: "cloudflare",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: null,
      sdkEnv: {},
      sdkNotes: ["this is the gateway's bridge Worker's API (providers/cloudflare/bridge): @cloudflare/sandbox itself runs only inside Workers"],
      gatewayEnv: { CLOUDFLARE_SANDBOX_API_URL: e.apiUrl, CLOUDFLARE_SANDBOX_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  modal: {
    unservable:
      "Modal's SDK speaks gRPC with Modal's private protocol definitions, so its emulator is an in-process fake of the SDK's interface (providers/modal/emulator): there is no wire to point an SDK at"
  }
}

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
