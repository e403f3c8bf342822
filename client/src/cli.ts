/**
 * The user CLI: `bun run cli login …` / `bun run cli sandbox …`, and the same words after the compiled binary
 * (`sandbox-gateway sandbox exec …`). Built on the typed client. A profile file (cli/profiles.ts) keeps the gateway
 * URL, key and project of each `--profile` (default `default`). Every command takes `--json`; failures print the
 * envelope's message and exit 1 (usage mistakes exit 2); `exec` exits with the process's own exit code.
 */
import { createClient, GatewayError } from "./index.ts"
import { parse, SWITCHES, USAGE, UsageError } from "./cli/args.ts"
import type { CliIo } from "./cli/io.ts"
import { login, refuseKeyInArgv } from "./cli/login.ts"
import { processTerminal, readSecret, stdinIsData } from "./cli/process-io.ts"
import { readProfiles } from "./cli/profiles.ts"
import { sandboxCommand } from "./cli/sandbox.ts"

export { USER_COMMANDS_USAGE } from "./cli/args.ts"
export type { CliIo, CliTerminal } from "./cli/io.ts"

const run = async (argv: ReadonlyArray<string>, io: CliIo): Promise<number> => {
  refuseKeyInArgv(argv)
  const { words, flags, rest } = parse(argv, SWITCHES)
  const json = flags["json"] === true
  const print = (value: unknown, text: string) => io.out(`${json ? JSON.stringify(value) : text}\n`)
  const profileName = typeof flags["profile"] === "string" ? flags["profile"] : "default"
  if (flags["help"] === true || words.length === 0) {
    io.out(`${USAGE}\n`)
    return words.length === 0 && flags["help"] !== true ? 2 : 0
  }

  if (words[0] === "login") return login(io, flags, profileName, print)
  if (words[0] !== "sandbox" || words[1] === undefined) throw new UsageError(`unknown command: ${words.join(" ")}`)

  const profile = readProfiles(io.env)[profileName]
  if (profile === undefined) throw new UsageError(`no profile "${profileName}": run login first`)
  const gw = createClient({ baseUrl: profile.url, apiKey: profile.api_key, projectId: profile.project_id })
  const [, verb, ...args] = words as [string, string, ...Array<string>]
  const needId = () => {
    const id = args[0]
    if (id === undefined || !/^sbx_[A-Za-z0-9]+$/.test(id)) throw new UsageError(`${verb} needs a sandbox id (sbx_…)`)
    return id
  }
  return sandboxCommand({ io, gw, verb, args, flags, rest, json, print, needId })
}

/** Runs the user CLI; resolves with the exit code. */
export const runUserCli = async (argv: ReadonlyArray<string>, io: CliIo): Promise<number> => {
  try {
    return await run(argv, io)
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`error: ${e.message}\n${USAGE}\n`)
      return 2
    }
    if (e instanceof GatewayError) {
      io.err(`error: ${e.message} (${e.code})\n`)
      return 1
    }
    io.err(`error: ${e instanceof Error ? e.message : String(e)}\n`)
    return 1
  }
}

/** The first words of the user CLI's commands. */
export const USER_CLI_WORDS: ReadonlySet<string> = new Set(["login", "sandbox"])

/** For an entry point: runs the user CLI on this process's arguments; the process ends with its code. */
export const userCliMain = async (argv: ReadonlyArray<string>) => {
  const shell = argv[0] === "sandbox" && argv[1] === "shell"
  process.exitCode = await runUserCli(argv, {
    readSecret: process.stdin.isTTY === true ? readSecret : undefined,
    out: (text) => process.stdout.write(text),
    outBytes: (bytes) => process.stdout.write(bytes),
    err: (text) => process.stderr.write(text),
    env: process.env,
    errIsTty: process.stderr.isTTY === true,
    stdin: !shell && stdinIsData() ? (process.stdin as AsyncIterable<Uint8Array>) : undefined,
    terminal: shell ? processTerminal() : undefined
  })
}
