/** The user CLI's words: the argument parser, the usage it prints, and the usage mistakes it reports (exit 2). */

/** A mistake in the command line: printed with the usage, exit code 2. */
export class UsageError extends Error {}

export type Flags = Record<string, string | true>

/** Words and `--flag value` / `--flag=value` / `--switch`; everything after `--` is kept as is (a command). */
export const parse = (argv: ReadonlyArray<string>, switches: ReadonlySet<string>) => {
  const words: Array<string> = []
  const flags: Flags = {}
  let rest: Array<string> | undefined
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--") {
      rest = argv.slice(i + 1) as Array<string>
      break
    }
    if (arg.startsWith("--")) {
      const [name, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined]
      if (inline !== undefined) flags[name] = inline
      else if (switches.has(name)) flags[name] = true
      else if (argv[i + 1] === undefined) throw new UsageError(`--${name} needs a value`)
      else flags[name] = argv[++i]!
    } else words.push(arg)
  }
  return { words, flags, rest }
}

/** The flags that take no value. */
export const SWITCHES = new Set(["json", "no-wait", "help", "recursive", "pty", "key-stdin", "computer-use", "double"])

/** The user commands, one a line (also in the program's --help). */
export const USER_COMMANDS_USAGE = `  login --url <gateway url> --project <prj_…> [--key-stdin] [--profile <name>]   (asks for the key without showing it, or reads it from stdin)
  sandbox create [--provider <name>] [--environment <name> | --image <oci image>] [--vcpu <n>] [--memory-mb <n>] [--timeout-seconds <n>] [--pty] [--computer-use] [--no-wait]
  sandbox list
  sandbox environments   (what --environment can name: versions and providers of each)
  sandbox get <id>
  sandbox exec <id> [--cwd <dir>] -- <command> [args…]   (exits with the command's exit code; piped stdin is forwarded)
  sandbox shell <id> [--cwd <dir>] [-- <command> [args…]]   (an interactive terminal; exits with its exit code)
  sandbox cp <src> <dst>   (one side local, the other <id>:/path; any size)
  sandbox expose <id> <port> [--lease-seconds <n>]
  sandbox screenshot <id> [--out <file>] [--format png|jpeg]   (the desktop of a sandbox created with --computer-use)
  sandbox click <id> <x> <y> [--button left|right|middle] [--double]
  sandbox type <id> <text>
  sandbox key <id> <keys>   (ctrl+c, Return, alt+F4)
  sandbox live-view <id>   (a URL to watch and drive the desktop in a browser)
  sandbox pause|resume|rm <id>
Every command takes --profile <name> and --json.`

export const USAGE = `Usage:\n${USER_COMMANDS_USAGE}`

/** A flag's whole, non-negative number, if given. */
export const integer = (flags: Flags, name: string): number | undefined => {
  const value = flags[name]
  if (value === undefined) return undefined
  const n = Number(value)
  if (typeof value !== "string" || !Number.isSafeInteger(n) || n < 0) throw new UsageError(`--${name} must be a whole number`)
  return n
}
