/**
 * The user CLI: `bun run cli login …` / `bun run cli sandbox …`, and the same words after the compiled binary
 * (`sandbox-gateway sandbox exec …`). Built on the typed client. A profile file (0600, in a 0700 directory:
 * `$SGW_CONFIG_DIR`, else `$XDG_CONFIG_HOME/sandbox-gateway`, else `~/.config/sandbox-gateway`) keeps the gateway
 * URL, key and project of each `--profile` (default `default`). Every command takes `--json`; failures print the
 * envelope's message and exit 1 (usage mistakes exit 2); `exec` exits with the process's own exit code.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { createClient, GatewayError, type GatewayClient } from "./index.ts"

interface Profile {
  readonly url: string
  readonly api_key: string
  readonly project_id: string
}

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

class UsageError extends Error {}

const configDir = (env: CliIo["env"]) =>
  env["SGW_CONFIG_DIR"] ?? path.join(env["XDG_CONFIG_HOME"] ?? path.join(env["HOME"] ?? os.homedir(), ".config"), "sandbox-gateway")
const profilesFile = (env: CliIo["env"]) => path.join(configDir(env), "profiles.json")

const readProfiles = (env: CliIo["env"]): Record<string, Profile> => {
  try {
    const parsed = JSON.parse(fs.readFileSync(profilesFile(env), "utf8")) as { profiles?: Record<string, Profile> }
    return parsed.profiles ?? {}
  } catch {
    return {}
  }
}

const writeProfiles = (env: CliIo["env"], profiles: Record<string, Profile>) => {
  const dir = configDir(env)
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  fs.chmodSync(dir, 0o700)
  const file = profilesFile(env)
  const tmp = `${file}.${process.pid}.tmp`
  fs.writeFileSync(tmp, `${JSON.stringify({ profiles }, null, 2)}\n`, { mode: 0o600 })
  fs.renameSync(tmp, file)
}

type Flags = Record<string, string | true>

/** Words and `--flag value` / `--flag=value` / `--switch`; everything after `--` is kept as is (a command). */
const parse = (argv: ReadonlyArray<string>, switches: ReadonlySet<string>) => {
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

const SWITCHES = new Set(["json", "no-wait", "help", "recursive", "pty", "key-stdin", "computer-use", "double"])

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

const USAGE = `Usage:\n${USER_COMMANDS_USAGE}`

const integer = (flags: Flags, name: string): number | undefined => {
  const value = flags[name]
  if (value === undefined) return undefined
  const n = Number(value)
  if (typeof value !== "string" || !Number.isSafeInteger(n) || n < 0) throw new UsageError(`--${name} must be a whole number`)
  return n
}

const sandboxPath = (arg: string) => {
  const m = /^(sbx_[A-Za-z0-9]+):(\/.*)$/.exec(arg)
  return m === null ? undefined : { id: m[1]!, path: m[2]! }
}

/** A progress bar on stderr when it is a terminal (redrawn at most ten times a second), nothing otherwise. */
const progressBar = (io: CliIo, label: string) => {
  let last = 0
  let total: number | undefined
  const mib = (n: number) => (n / 1048576).toFixed(1)
  const draw = (done: number, final: boolean) => {
    if (!io.errIsTty) return
    const now = Date.now()
    if (!final && now - last < 100) return
    last = now
    const width = 30
    const filled = total === undefined ? 0 : total === 0 ? width : Math.min(width, Math.round((done / total) * width))
    io.err(`\r${label} [${"#".repeat(filled)}${" ".repeat(width - filled)}] ${mib(done)}/${total === undefined ? "?" : mib(total)} MiB${final ? "\n" : ""}`)
  }
  return {
    update: (done: number, size?: number) => {
      if (size !== undefined) total = size
      draw(done, false)
    },
    finish: (done: number) => {
      total ??= done
      draw(done, true)
    }
  }
}

/** A key on the command line would stay in the shell's history and show in the process list. */
const KEY_IN_ARGV = "--key would leave the key in your shell's history and the process list: pipe it in with --key-stdin, or leave it out to be asked for it"
/** More than any key: what `--key-stdin` reads at most. */
const MAX_KEY_BYTES = 4096

/** The key piped to `login --key-stdin`: the first line of stdin. */
const keyFromStdin = async (io: CliIo) => {
  if (io.stdin === undefined) throw new UsageError("--key-stdin reads the key from standard input: pipe it in (for example: printenv METAL_KEY | … login --key-stdin …)")
  const chunks: Array<Uint8Array> = []
  let size = 0
  for await (const chunk of io.stdin) {
    chunks.push(chunk)
    size += chunk.length
    if (size > MAX_KEY_BYTES) throw new UsageError("--key-stdin: standard input is longer than a key")
  }
  return Buffer.concat(chunks).toString("utf8").split(/\r?\n/)[0]!.trim()
}

const run = async (argv: ReadonlyArray<string>, io: CliIo): Promise<number> => {
  if (argv[0] === "login" && argv.some((arg) => arg === "--key" || arg.startsWith("--key="))) throw new UsageError(KEY_IN_ARGV)
  const { words, flags, rest } = parse(argv, SWITCHES)
  const json = flags["json"] === true
  const print = (value: unknown, text: string) => io.out(`${json ? JSON.stringify(value) : text}\n`)
  const profileName = typeof flags["profile"] === "string" ? flags["profile"] : "default"
  if (flags["help"] === true || words.length === 0) {
    io.out(`${USAGE}\n`)
    return words.length === 0 && flags["help"] !== true ? 2 : 0
  }

  if (words[0] === "login") {
    const url = flags["url"]
    const project = flags["project"]
    if (typeof url !== "string" || typeof project !== "string") throw new UsageError("login needs --url and --project")
    // The key is read, never given in argv, and never printed.
    let key: string
    if (flags["key-stdin"] === true) key = await keyFromStdin(io)
    else if (io.readSecret !== undefined) key = (await io.readSecret("Project API key (metal_sk_…, not shown): ")).trim()
    else throw new UsageError("no terminal to ask for the key on: pipe it in with --key-stdin")
    if (key === "") throw new UsageError("no key given")
    const profile: Profile = { url: url.replace(/\/+$/, ""), api_key: key, project_id: project }
    // Checked before it is kept: a wrong URL or key fails here, not at the next command.
    await createClient({ baseUrl: profile.url, apiKey: key, projectId: project, attempts: 1 }).sandboxes.list({ limit: 1 })
    writeProfiles(io.env, { ...readProfiles(io.env), [profileName]: profile })
    print({ profile: profileName, url: profile.url, project_id: project }, `logged in to ${profile.url} (profile ${profileName})`)
    return 0
  }
  if (words[0] !== "sandbox" || words[1] === undefined) throw new UsageError(`unknown command: ${words.join(" ")}`)

  const profile = readProfiles(io.env)[profileName]
  if (profile === undefined) throw new UsageError(`no profile "${profileName}": run login first`)
  const gw: GatewayClient = createClient({ baseUrl: profile.url, apiKey: profile.api_key, projectId: profile.project_id })
  const [, verb, ...args] = words
  const needId = () => {
    const id = args[0]
    if (id === undefined || !/^sbx_[A-Za-z0-9]+$/.test(id)) throw new UsageError(`${verb} needs a sandbox id (sbx_…)`)
    return id
  }

  switch (verb) {
    case "create": {
      const image = flags["image"]
      const sandbox = await gw.sandboxes.create({
        source: typeof image === "string"
          ? { kind: "oci_image", image }
          : { kind: "environment", environment: typeof flags["environment"] === "string" ? flags["environment"] : "metal/base" },
        // The smallest common size (1 vCPU, 512 MB): every provider's smallest sandbox covers it (E2B's base template
        // has 512 MB, and a provider never gives less than asked).
        resources: { vcpu: integer(flags, "vcpu") ?? 1, memory_mb: integer(flags, "memory-mb") ?? 512 },
        lifecycle: { runtime_timeout_seconds: integer(flags, "timeout-seconds") ?? 3600 },
        ...(typeof flags["provider"] === "string" ? { provider: flags["provider"] as never } : {}),
        // On a provider with terminals (for `shell`), with a desktop (computer use).
        ...(flags["pty"] === true || flags["computer-use"] === true
          ? { features: { ...(flags["pty"] === true ? { pty: true } : {}), ...(flags["computer-use"] === true ? { computer_use: true } : {}) } }
          : {})
      }, { wait: flags["no-wait"] !== true })
      print(sandbox.record, `${sandbox.id} ${sandbox.record.state}${sandbox.record.provider === null ? "" : ` on ${sandbox.record.provider}`}`)
      return 0
    }
    case "environments": {
      const environments = await gw.environments.list()
      print({ environments }, environments.map((e) => `${e.name.padEnd(14)} ${e.versions.join(", ").padEnd(8)} ${e.providers.join(", ")}`).join("\n"))
      return 0
    }
    case "list": {
      const page = await gw.sandboxes.list({ limit: 100 })
      print(page, page.sandboxes.map((s) => `${s.id}  ${s.state.padEnd(9)} ${s.provider ?? "-"}`).join("\n"))
      return 0
    }
    case "get": {
      const sandbox = await gw.sandboxes.get(needId())
      print(sandbox.record, JSON.stringify(sandbox.record, null, 2))
      return 0
    }
    case "exec": {
      const id = needId()
      if (rest === undefined || rest.length === 0) throw new UsageError("exec needs a command after --")
      const sandbox = await gw.sandboxes.get(id)
      const result = await sandbox.exec(rest, {
        ...(typeof flags["cwd"] === "string" ? { cwd: flags["cwd"] } : {}),
        ...(io.stdin !== undefined ? { stdin: io.stdin } : {}),
        ...(json ? {} : { onOutput: (stream: "stdout" | "stderr", text: string) => (stream === "stdout" ? io.out(text) : io.err(text)) })
      })
      if (json) print(result, "")
      if (result.exitCode !== null) return result.exitCode
      return result.state === "succeeded" ? 0 : 1
    }
    case "shell": {
      const sandbox = await gw.sandboxes.get(needId())
      const term = io.terminal
      const size = term?.size() ?? { cols: 80, rows: 24 }
      const decoder = new TextDecoder()
      // With --json stdout carries the result alone; the terminal's output goes to stderr.
      const show = json ? (bytes: Uint8Array) => io.err(decoder.decode(bytes, { stream: true })) : io.outBytes ?? ((bytes: Uint8Array) => io.out(decoder.decode(bytes, { stream: true })))
      const options = {
        cols: size.cols,
        rows: size.rows,
        env: { TERM: io.env["TERM"] ?? "xterm-256color" },
        ...(typeof flags["cwd"] === "string" ? { cwd: flags["cwd"] } : {}),
        onOutput: (_text: string, bytes: Uint8Array) => show(bytes)
      }
      const session = rest !== undefined && rest.length > 0 ? await sandbox.terminal(rest, options) : await sandbox.shell(options)
      // Input may outlive the process by a moment (typed as it ended): that is dropped, not an error.
      const type = (data: string | Uint8Array) => {
        try {
          session.write(data)
        } catch {
          // the terminal is closed
        }
      }
      const stops: Array<() => void> = []
      if (term?.isTty === true) term.setRawMode(true)
      let exit: Awaited<typeof session.exit>
      try {
        if (term !== undefined) {
          // A pipe's end is ^D typed, as a terminal's user would end the input.
          stops.push(term.input(type, () => term.isTty || type("\x04")))
          stops.push(term.onResize(() => {
            const now = term.size()
            if (now !== undefined) {
              try {
                session.resize(now.cols, now.rows)
              } catch {
                // the terminal is closed
              }
            }
          }))
        }
        exit = await session.exit
      } finally {
        for (const stop of stops) stop()
        if (term?.isTty === true) term.setRawMode(false)
      }
      if (json) print({ process_id: session.processId, state: exit.state, exit_code: exit.exitCode }, "")
      if (exit.exitCode !== null) return exit.exitCode
      return exit.state === "succeeded" ? 0 : 1
    }
    case "cp": {
      const [from, to] = args
      if (from === undefined || to === undefined) throw new UsageError("cp needs a source and a destination")
      const remoteFrom = sandboxPath(from)
      const remoteTo = sandboxPath(to)
      if ((remoteFrom === undefined) === (remoteTo === undefined)) throw new UsageError("cp copies between this machine and a sandbox: one side is <id>:/path")
      if (remoteTo !== undefined) {
        const size = fs.statSync(from).size
        // A directory as the destination (a trailing /) takes the file's own name.
        const target = remoteTo.path.endsWith("/") ? `${remoteTo.path}${path.basename(from)}` : remoteTo.path
        const bar = progressBar(io, `→ ${remoteTo.id}:${target}`)
        bar.update(0, size)
        const written = await (await gw.sandboxes.get(remoteTo.id)).files.upload(target, fs.createReadStream(from, { highWaterMark: 1024 * 1024 }), {
          onProgress: (sent) => bar.update(sent)
        })
        bar.finish(written.sizeBytes)
        print({ from, to: `${remoteTo.id}:${target}`, size_bytes: written.sizeBytes, pieces: written.pieces }, `${written.sizeBytes} bytes → ${remoteTo.id}:${target}`)
      } else {
        const source = remoteFrom!
        // A local directory as the destination takes the file's own name.
        const target = fs.existsSync(to) && fs.statSync(to).isDirectory() ? path.join(to, path.posix.basename(source.path)) : to
        const sandbox = await gw.sandboxes.get(source.id)
        const bar = progressBar(io, `← ${from}`)
        // Written beside the target and renamed at the end: a broken copy leaves no half file under its name.
        const partial = `${target}.${process.pid}.part`
        const fd = fs.openSync(partial, "w", 0o644)
        let received = 0
        try {
          for await (const chunk of sandbox.files.download(source.path, { onProgress: (done, total) => bar.update(done, total) })) {
            for (let at = 0; at < chunk.length;) at += fs.writeSync(fd, chunk, at)
            received += chunk.length
          }
          fs.closeSync(fd)
          fs.renameSync(partial, target)
        } catch (e) {
          fs.closeSync(fd)
          fs.rmSync(partial, { force: true })
          throw e
        }
        bar.finish(received)
        print({ from, to: target, size_bytes: received }, `${received} bytes ← ${from}`)
      }
      return 0
    }
    case "expose": {
      const id = needId()
      const port = Number(args[1])
      if (!Number.isSafeInteger(port) || port < 1 || port > 65535) throw new UsageError("expose needs a port from 1 to 65535")
      const lease = integer(flags, "lease-seconds")
      const endpoint = await (await gw.sandboxes.get(id)).expose(port, lease === undefined ? {} : { leaseSeconds: lease })
      print(endpoint, endpoint.url)
      return 0
    }
    case "screenshot": {
      const format = flags["format"] ?? "png"
      if (format !== "png" && format !== "jpeg") throw new UsageError("--format is png or jpeg")
      const shot = await (await gw.sandboxes.get(needId())).computer.screenshot({ format })
      const out = typeof flags["out"] === "string" ? flags["out"] : `screenshot.${format === "png" ? "png" : "jpg"}`
      fs.writeFileSync(out, shot.data)
      print({ path: out, format: shot.format, size_bytes: shot.data.length, cursor_position: shot.cursor }, `${out} (${shot.data.length} bytes)`)
      return 0
    }
    case "click": {
      const id = needId()
      const [x, y] = [Number(args[1]), Number(args[2])]
      if (!Number.isSafeInteger(x) || !Number.isSafeInteger(y) || x < 0 || y < 0) throw new UsageError("click needs the x and y of a point on the screen")
      const button = flags["button"] ?? "left"
      if (button !== "left" && button !== "right" && button !== "middle") throw new UsageError("--button is left, right or middle")
      const done = await (await gw.sandboxes.get(id)).computer.click(x, y, { button, double: flags["double"] === true })
      print(done, `clicked ${button} at ${x},${y}`)
      return 0
    }
    case "type":
    case "key": {
      const id = needId()
      const text = args[1]
      if (text === undefined || args.length > 2) throw new UsageError(verb === "type" ? "type needs the text, as one argument" : "key needs the keys (ctrl+c, Return), as one argument")
      const computer = (await gw.sandboxes.get(id)).computer
      const done = verb === "type" ? await computer.type(text) : await computer.hotkey(text)
      print(done, verb === "type" ? `typed ${text.length} characters` : `pressed ${text}`)
      return 0
    }
    case "live-view": {
      const lease = integer(flags, "lease-seconds")
      const view = await (await gw.sandboxes.get(needId())).computer.liveView(lease === undefined ? {} : { leaseSeconds: lease })
      print({ url: view.url, endpoint: view.endpoint }, view.url)
      return 0
    }
    case "pause":
    case "resume":
    case "rm": {
      const sandbox = await gw.sandboxes.get(needId())
      const operation = await (verb === "rm" ? sandbox.destroy() : sandbox[verb]())
      print(operation, `${sandbox.id} ${verb === "rm" ? "destroyed" : verb === "pause" ? "paused" : "resumed"}`)
      return 0
    }
    default:
      throw new UsageError(`unknown command: sandbox ${verb}`)
  }
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

/** Whether this process's stdin carries data to forward: a pipe or a file, not a terminal or a device like /dev/null. */
const stdinIsData = () => {
  try {
    const stat = fs.fstatSync(0)
    return stat.isFIFO() || stat.isFile() || stat.isSocket()
  } catch {
    return false
  }
}

/** Reads a line from this process's terminal in raw mode, echoing nothing (a key typed or pasted). */
const readSecret = (prompt: string) =>
  new Promise<string>((resolve, reject) => {
    const stdin = process.stdin
    process.stderr.write(prompt)
    let value = ""
    const finish = (error?: Error) => {
      stdin.off("data", onData)
      stdin.setRawMode(false)
      stdin.pause()
      process.stderr.write("\n")
      if (error === undefined) resolve(value)
      else reject(error)
    }
    const onData = (chunk: Buffer) => {
      for (const ch of chunk.toString("utf8")) {
        if (ch === "\r" || ch === "\n" || ch === "\x04") return finish()
        if (ch === "\x03") return finish(new Error("cancelled"))
        if (ch === "\x7f" || ch === "\b") value = value.slice(0, -1)
        else if (ch >= " ") value += ch
      }
    }
    stdin.setRawMode(true)
    stdin.on("data", onData)
    stdin.resume()
  })

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

/** This process's terminal: stdin (raw mode when it is a TTY), stdout's size, SIGWINCH. */
const processTerminal = (): CliTerminal => ({
  isTty: process.stdin.isTTY === true,
  size: () => (process.stdout.isTTY === true && process.stdout.columns > 0 && process.stdout.rows > 0 ? { cols: process.stdout.columns, rows: process.stdout.rows } : undefined),
  setRawMode: (raw) => {
    if (process.stdin.isTTY === true) process.stdin.setRawMode(raw)
  },
  input: (onData, onEnd) => {
    const data = (chunk: Buffer) => onData(chunk)
    process.stdin.on("data", data)
    process.stdin.once("end", onEnd)
    process.stdin.resume()
    return () => {
      process.stdin.off("data", data)
      process.stdin.off("end", onEnd)
      process.stdin.pause()
    }
  },
  onResize: (listener) => {
    process.on("SIGWINCH", listener)
    return () => void process.off("SIGWINCH", listener)
  }
})
