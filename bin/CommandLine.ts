/**
 * The one program's command line (ARCHITECTURE.md §2): the compiled binary (`sandbox-gateway <word> …`),
 * `bun bin/main.ts <word> …` and `bun run cli <word> …` take the same words — `serve`, `emulate` (the providers'
 * emulators on their own), the operator's commands (src/cli/Operator.ts, on the server's database) and the users'
 * (client/src/cli.ts, over HTTP) — and `--help`, `--version`. An unknown word is a usage error (exit 2), never a server.
 */
import * as path from "node:path"
import { shellWord } from "../src/domain/Shell.ts"
import { GATEWAY_VERSION } from "../src/domain/Version.ts"

/**
 * The first words of the operator's commands (src/cli/Operator.ts's table) and of the users' (client/src/cli.ts),
 * known here so that each kind loads only its own modules (a test keeps the lists equal).
 */
export const OPERATOR_WORDS: ReadonlyArray<string> = ["bootstrap", "users", "tokens", "login-link", "credits", "db"]
export const USER_WORDS: ReadonlyArray<string> = ["login", "sandbox"]
const operator = () => import("../src/cli/Operator.ts")
/** Starts the server with the provider plugins (providers/index.ts); it runs until it is stopped. */
const serve = async () => {
  const [{ runServer }, { PLUGINS }] = await Promise.all([import("../src/http/Http.ts"), import("../providers/index.ts")])
  return runServer(operatorInvocation(), PLUGINS)
}
const user = () => import("../client/src/cli.ts")

export interface Entry {
  /** How the program was called, for usage lines: "sandbox-gateway", "bun run cli", "bun bin/main.ts". */
  readonly prog: string
  /** What no word at all means: the server (main.ts, the binary) or the usage (bun run cli). */
  readonly whenEmpty: "serve" | "usage"
}

/** Whether this is the compiled binary (Bun runs its bundled entry from an in-memory file system). */
export const isCompiled = () => Bun.main.startsWith("/$bunfs/")

/** The checkout this source runs from (not meaningful in the compiled binary). */
const CHECKOUT = path.resolve(import.meta.dirname, "..")

/**
 * How a person runs the operator's commands on this machine, as the server tells them on start: the binary's
 * own path; in a checkout `bun run cli` from its root, else `bun <checkout>/bin/cli.ts`.
 */
export const operatorInvocation = (): string => {
  if (isCompiled()) return shellWord(process.execPath)
  return path.resolve(process.cwd()) === CHECKOUT ? "bun run cli" : `bun ${shellWord(path.join(CHECKOUT, "bin/cli.ts"))}`
}

const SERVE_SUMMARY = "Start the gateway (API, docs, endpoint listener); configured by environment variables (docs/operations/configuration.md)."
const EMULATE_USAGE = "emulate <provider…> [--port N] [--data-dir D] [--json] [--env-file F]"
const EMULATE_SUMMARY = "Serve providers' emulators on their own, for their official SDKs, offline (docs/guide/offline.md)."

const help = async (entry: Entry) => {
  const [{ OPERATOR_COMMANDS }, { USER_COMMANDS_USAGE }] = await Promise.all([operator(), user()])
  return [
    `Sandbox Gateway ${GATEWAY_VERSION}.`,
    "",
    `Usage: ${entry.prog} <command> [options]   (add --help after a command for its options)`,
    "",
    `  serve${entry.whenEmpty === "serve" ? "   (also with no command)" : ""}`,
    `      ${SERVE_SUMMARY}`,
    `  ${EMULATE_USAGE}`,
    `      ${EMULATE_SUMMARY}`,
    "",
    "Operator commands, on the server's database (DATA_DIR, default ./data, or DATABASE_URL); add --init to create one where there is none:",
    ...OPERATOR_COMMANDS.map((c) => `  ${c.usage}\n      ${c.summary}`),
    "",
    "User commands, over HTTP to a gateway (a profile made by login):",
    USER_COMMANDS_USAGE,
    "",
    "  --help, --version"
  ].join("\n")
}

const shortUsage = (prog: string) =>
  `Usage: ${prog} [serve | emulate | ${OPERATOR_WORDS.join(" | ")} | ${USER_WORDS.join(" | ")}] …   (${prog} --help lists them; --version)`

/** Runs the program's command line; the process's exit code is set (or the server runs). */
export const runCommandLine = async (argv: ReadonlyArray<string>, entry: Entry): Promise<void> => {
  const word = argv[0]
  const usageError = (message: string) => {
    process.stderr.write(`error: ${message}\n${shortUsage(entry.prog)}\n`)
    process.exitCode = 2
  }
  if (word === undefined) {
    if (entry.whenEmpty === "serve") return serve()
    process.stdout.write(`${await help(entry)}\n`)
    process.exitCode = 2
    return
  }
  if (word === "serve") {
    if (argv.length === 2 && (argv[1] === "--help" || argv[1] === "-h")) {
      process.stdout.write(`Usage: ${entry.prog} serve\n\n${SERVE_SUMMARY}\n`)
      return
    }
    if (argv.length > 1) return usageError(`serve takes no arguments (it is configured by environment variables): ${argv.slice(1).join(" ")}`)
    return serve()
  }
  if (word === "emulate") return (await import("../providers/emulate.ts")).emulateMain(argv.slice(1))
  if (word === "--help" || word === "-h" || word === "help") {
    process.stdout.write(`${await help(entry)}\n`)
    return
  }
  if (word === "--version" || word === "-V") {
    process.stdout.write(`sandbox-gateway ${GATEWAY_VERSION}\n`)
    return
  }
  if (OPERATOR_WORDS.includes(word)) return (await operator()).runOperatorCli(argv, entry.prog)
  if (USER_WORDS.includes(word)) return (await user()).userCliMain(argv)
  return usageError(`unknown command: ${word}`)
}
