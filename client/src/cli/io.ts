/** What the user CLI is given (its io, this process's terminal) and what a `sandbox` command is given. */
import type { GatewayClient } from "../index.ts"
import type { Flags } from "./args.ts"

export interface CliIo {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
  readonly env: Readonly<Record<string, string | undefined>>
  /** Whether stderr is a terminal (progress is drawn only there). */
  readonly errIsTty: boolean
  /** Input to forward to `exec`: this process's stdin when it is a pipe or a file (never a terminal or /dev/null). */
  readonly stdin?: AsyncIterable<Uint8Array> | undefined
  /** Raw bytes to stdout (terminal output is not text to decode); default: decoded and given to `out`. */
  readonly outBytes?: (bytes: Uint8Array) => void
  /** This process's own terminal, for `shell` (without it: 80×24, no input). */
  readonly terminal?: CliTerminal | undefined
  /** Asks for a secret on the terminal without echoing it (`login`); absent when stdin is not a terminal. */
  readonly readSecret?: ((prompt: string) => Promise<string>) | undefined
}

/** What `shell` needs of the terminal it runs in. */
export interface CliTerminal {
  /** Whether stdin is a terminal (then it is put in raw mode: every key goes to the sandbox, ^C included). */
  readonly isTty: boolean
  /** The terminal's size, if stdout is one. */
  readonly size: () => { readonly cols: number; readonly rows: number } | undefined
  readonly setRawMode: (raw: boolean) => void
  /** Reads stdin: each piece as it comes, then `onEnd` (a pipe or file that ended). Returns a stop function. */
  readonly input: (onData: (bytes: Uint8Array) => void, onEnd: () => void) => () => void
  /** Calls `listener` when the terminal is resized (SIGWINCH). Returns a stop function. */
  readonly onResize: (listener: () => void) => () => void
}

/** A `sandbox <verb> …` command line, parsed, with the profile's client. */
export interface SandboxCommand {
  readonly io: CliIo
  readonly gw: GatewayClient
  readonly verb: string
  /** The words after the verb. */
  readonly args: ReadonlyArray<string>
  readonly flags: Flags
  /** The words after `--` (a command), if any. */
  readonly rest: ReadonlyArray<string> | undefined
  /** `--json`: stdout carries the result alone, as JSON. */
  readonly json: boolean
  /** Prints the result: `value` as JSON with --json, else `text`. */
  readonly print: (value: unknown, text: string) => void
  /** The first word after the verb as a sandbox id (a usage error otherwise). */
  readonly needId: () => string
}

/** The CLI's exit code for a process that ended: its own, else 0 for success and 1 for anything else. */
export const processExitCode = (state: string, exitCode: number | null) => (exitCode !== null ? exitCode : state === "succeeded" ? 0 : 1)
