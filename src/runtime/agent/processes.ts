/**
 * Running processes: argv, cwd, env, stdin, timeout, output cap, each in its own session and process group (a kill
 * reaches every descendant), its output recorded by events.ts; and the `/exec` routes of the agent's HTTP API.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type * as Protocol from "../AgentProtocol.ts"
import { AgentError, intParam, invalid, json, type Query, queryOf, RUN_DIR, shortPath } from "./common.ts"
import { byTag, EXECS_DIR, type Exec, execs, type ExitFields, finish, onOutput, procStart, readEvents, signalGroup, T_STDERR, T_STDOUT, track, waitForEvents } from "./events.ts"

/** Cgroup files a command joins before it runs (the runtime binds them in when cgroups are in use). */
const CGROUP_FILES = ["/run/cgroup/pids.procs", "/run/cgroup/memory.procs"].filter((f) => fs.existsSync(f))
/** The shell lines that move the shell itself into them (before it runs anything else). */
const JOIN_CGROUPS = CGROUP_FILES.map((f) => `echo $$ > ${f} || exit 125`)
const KILL_GRACE_MS = 2000
/**
 * The shell that starts commands: the jail's /bin/sh, or (in a jail on an OCI image, which may have no shell or
 * no glibc) the host's, run through the host's loader from the runtime's own read-only directory (AGENT_SHELL).
 */
const SHELL: ReadonlyArray<string> = (() => {
  try {
    const parsed = JSON.parse(process.env["AGENT_SHELL"] ?? "") as unknown
    if (Array.isArray(parsed) && parsed.length > 0 && parsed.every((a) => typeof a === "string")) return parsed as Array<string>
  } catch {}
  return ["/bin/sh"]
})()
/** After the command itself exited, how long its pipes may stay open (held by a background child). */
const PIPE_GRACE_MS = 200
/** What every command's environment starts from (the request's env adds to it and may replace it). */
const BASE_ENV: Readonly<Record<string, string>> = {
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: "/workspace",
  USER: "user",
  LANG: "C.UTF-8"
}

/** A word the shell reads back as exactly `s` (single quotes; a quote inside is closed, escaped and reopened). */
const shellWord = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`
const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * The next command's shell, started early. Joining a cgroup (writing its procs file) waits in the kernel for an
 * RCU grace period — about 10 ms here, most of a short command's start — so when a command starts, the shell for
 * the one after it is spawned and joins the command cgroups meanwhile, then waits for a line on its standard
 * input. A command that claims it writes its script (stdin, cwd, environment, exec of the argv) and that line; the
 * shell sources the script and execs the command: the same pid, session, pipes and cgroups as a shell spawned for
 * it. Agents run commands in bursts; one not claimed within STANDBY_MS is killed, so an idle sandbox's command
 * cgroups empty. The script sits in the sandbox's own filesystem: a sandbox that edits it (or kills or stops the
 * shell) runs its own code in its own cgroups, or falls back to a shell spawned for the command.
 */
interface Standby {
  readonly proc: Bun.Subprocess<"pipe", "pipe", "pipe">
  readonly script: string
  readonly expiry: ReturnType<typeof setTimeout>
}
const STANDBY_DIR = path.join(RUN_DIR, "standby")
const STANDBY_MS = 2000
let standby: Standby | undefined

const spawnStandby = () => {
  if (CGROUP_FILES.length === 0 || standby !== undefined) return
  try {
    fs.mkdirSync(STANDBY_DIR, { recursive: true })
    const script = path.join(STANDBY_DIR, `${crypto.randomUUID()}.sh`)
    const proc = Bun.spawn({
      cmd: [...SHELL, "-c", [...JOIN_CGROUPS, "IFS= read -r go || exit 125", '. "$1"'].join("; "), "sh", script],
      cwd: "/",
      env: { ...BASE_ENV },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      detached: true
    })
    void proc.exited.then(() => fs.rmSync(script, { force: true }))
    const expiry = setTimeout(() => {
      if (standby?.proc !== proc) return
      standby = undefined
      proc.kill("SIGKILL")
    }, STANDBY_MS)
    standby = { proc, script, expiry }
  } catch {
    // None: the next command gets a shell spawned for it.
  }
}

/**
 * A program of the sandbox's own that the agent keeps (the desktop's display server, window manager, recorder):
 * started like a command — the cgroup join first, in a session of its own — so it counts against the sandbox's
 * limits as its commands do. Its output goes nowhere (stderr is kept for a short failure message).
 */
export const spawnInSandbox = (command: ReadonlyArray<string>, env: Readonly<Record<string, string>>, stdin: "ignore" | "pipe") =>
  Bun.spawn({
    cmd: [...SHELL, "-c", [...JOIN_CGROUPS, 'exec "$@"'].join("; "), "sh", ...command],
    cwd: "/workspace",
    env: { ...env },
    stdin,
    stdout: stdin === "pipe" ? "pipe" : "ignore",
    stderr: stdin === "pipe" ? "pipe" : "ignore",
    detached: true
  })

/** Whether `pid` waits as a standby does: not gone, not a zombie, not stopped or traced (it would never read its line). */
const isWaiting = (pid: number) => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return !"ZXxTt".includes(stat.charAt(stat.lastIndexOf(")") + 2))
  } catch {
    return false
  }
}

/** The waiting shell, if it still waits; it is no longer the standby either way. */
const claimStandby = (): Standby | undefined => {
  const claimed = standby
  standby = undefined
  if (claimed === undefined) return undefined
  clearTimeout(claimed.expiry)
  if (claimed.proc.exitCode === null && claimed.proc.signalCode === null && isWaiting(claimed.proc.pid)) return claimed
  claimed.proc.kill("SIGKILL")
  return undefined
}

/** What a claimed standby sources: standard input, working directory, environment, then the command itself. */
const standbyScript = (spec: ExecRequest, cwd: string, env: Readonly<Record<string, string>>) =>
  [
    ...(spec.stdin === false ? ["exec </dev/null"] : []),
    `cd -- ${shellWord(cwd)} || exit 125`,
    // The shell's own note of where it was (a shell spawned in `cwd` has none).
    "unset OLDPWD",
    ...Object.entries(env).map(([k, v]) => `export ${k}=${shellWord(v)}`),
    `exec ${spec.command.map(shellWord).join(" ")}`,
    ""
  ].join("\n")

/**
 * Gives a claimed standby its command: the script (a new file: whatever the sandbox put at its name first makes
 * this fail, and the command gets a shell of its own), then the line it waits for. Undefined when it cannot.
 */
const handOver = (claimed: Standby | undefined, spec: ExecRequest, cwd: string, env: Readonly<Record<string, string>>) => {
  if (claimed === undefined) return undefined
  try {
    fs.writeFileSync(claimed.script, standbyScript(spec, cwd, env), { flag: "wx" })
  } catch {
    claimed.proc.kill("SIGKILL")
    return undefined
  }
  // A shell gone meanwhile (the sandbox killed it) fails these writes: its exit is then the command's.
  const settle = (written: number | Promise<number>) => void Promise.resolve(written).catch(() => undefined)
  try {
    claimed.proc.stdin.write("\n")
    settle(spec.stdin === false ? claimed.proc.stdin.end() : claimed.proc.stdin.flush())
  } catch {}
  return claimed
}

/** SIGTERM (or the given signal) to the whole process group, then SIGKILL after a grace period. */
const killExec = (exec: Exec, signal: NodeJS.Signals) => {
  if (exec.exit !== null) return
  signalGroup(exec.meta.pid, signal)
  if (signal !== "SIGKILL") {
    const timer = setTimeout(() => {
      if (exec.exit === null) signalGroup(exec.meta.pid, "SIGKILL")
    }, KILL_GRACE_MS)
    exec.timers.push(timer)
  }
}

const SIGNALS = new Set(Object.keys(os.constants.signals))
const signalNameOf = (code: number | null): string | null => {
  if (code === null) return null
  for (const [name, number] of Object.entries(os.constants.signals)) if (number === code) return name
  return `SIG${code}`
}

type ExecRequest = Protocol.ExecRequest

const isInt = (v: unknown, min: number) => typeof v === "number" && Number.isInteger(v) && v >= min
const isTerminalSize = (v: unknown): v is { cols: number; rows: number } => {
  const size = v as { cols?: unknown; rows?: unknown } | null
  return typeof size === "object" && size !== null && isInt(size.cols, 1) && isInt(size.rows, 1) && (size.cols as number) <= 1000 && (size.rows as number) <= 1000
}

const parseExecRequest = (body: unknown): ExecRequest => {
  const b = body as Partial<ExecRequest> | null
  if (b === null || typeof b !== "object") throw invalid("the body must be a JSON object")
  if (!Array.isArray(b.command) || b.command.length === 0 || !b.command.every((a) => typeof a === "string")) {
    throw invalid("command must be a non-empty array of strings")
  }
  if (b.command.some((a) => a.includes("\0"))) throw invalid("command arguments cannot contain NUL")
  if (b.cwd !== undefined && (typeof b.cwd !== "string" || !b.cwd.startsWith("/"))) throw invalid("cwd must be an absolute path")
  if (b.env !== undefined && (typeof b.env !== "object" || b.env === null || Object.entries(b.env).some(([k, v]) => typeof v !== "string" || k === "" || k.includes("=") || k.includes("\0") || v.includes("\0")))) {
    throw invalid("env must map names to strings")
  }
  if (b.timeoutMs !== undefined && !isInt(b.timeoutMs, 1)) throw invalid("timeoutMs must be a positive integer")
  if (!isInt(b.maxOutputBytes, 0)) throw invalid("maxOutputBytes must be a non-negative integer")
  if (b.tag !== undefined && (typeof b.tag !== "string" || b.tag.length === 0 || b.tag.length > 200)) throw invalid("tag must be 1-200 characters")
  if (b.stdin !== undefined && typeof b.stdin !== "boolean") throw invalid("stdin must be a boolean")
  if (b.pty !== undefined && !isTerminalSize(b.pty)) throw invalid("pty must be {cols, rows}, each 1-1000")
  return b as ExecRequest
}

const newExecId = () => `exec_${Date.now().toString(36)}${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`

const startExec = (spec: ExecRequest): Exec => {
  if (spec.tag !== undefined) {
    const existing = byTag.get(spec.tag)
    if (existing !== undefined && execs.has(existing)) return execs.get(existing)!
  }
  const cwd = spec.cwd ?? "/workspace"
  let cwdStat: fs.Stats
  try {
    cwdStat = fs.statSync(cwd)
  } catch {
    throw new AgentError(400, "invalid", `cwd ${shortPath(cwd)} does not exist`)
  }
  if (!cwdStat.isDirectory()) throw invalid(`cwd ${shortPath(cwd)} is not a directory`)
  // A small shell puts the command into the sandbox's command cgroups (or under rlimits) before it runs, so
  // everything it forks is accounted from the start; then it execs the command (same pid).
  const prelude = [
    ...(spec.cgroup === true ? JOIN_CGROUPS : []),
    // dash calls the process limit -p, other shells -u.
    ...(spec.rlimits ? [`{ ulimit -p ${spec.rlimits.nproc} || ulimit -u ${spec.rlimits.nproc}; } 2>/dev/null || exit 125`, `ulimit -v ${spec.rlimits.asKb} || exit 125`] : [])
  ]
  // Where the sandbox has a desktop (desktop.ts), its programs open their windows there unless told otherwise.
  const env: Record<string, string> = { ...BASE_ENV, ...(fs.existsSync("/tmp/.X11-unix/X1") ? { DISPLAY: ":1" } : {}), ...spec.env }
  const execId = newExecId()
  const dir = path.join(EXECS_DIR, execId)
  let fd: number | null = null
  try {
    fs.mkdirSync(dir, { recursive: true })
    fd = fs.openSync(path.join(dir, "events"), "w")
  } catch {
    // A full disk: the command runs all the same, its events held in memory (events.ts).
  }
  const exec = track({
    meta: { execId, tag: spec.tag ?? null, pid: -1, procStart: null, startedAt: new Date().toISOString(), maxOutputBytes: spec.maxOutputBytes },
    dir,
    offsets: [],
    size: 0,
    fd,
    outputBytes: 0
  })
  const cmd = [...SHELL, "-c", `${prelude.join("; ")}${prelude.length > 0 ? "; " : ""}exec "$@"`, "sh", ...spec.command]
  /** Resolves once the command's output is all read: its pipes (or its terminal) reached end-of-file. */
  let drained: Promise<unknown>
  let proc: Bun.Subprocess<"pipe" | "ignore", "pipe" | "ignore", "pipe" | "ignore">
  try {
    if (spec.pty !== undefined) {
      let closed = () => {}
      drained = new Promise<void>((resolve) => (closed = resolve))
      // A terminal of its own: it is the session leader with the terminal as its controlling terminal, so a
      // kill of its process group reaches every descendant, as with `detached` below.
      proc = Bun.spawn({
        cmd,
        cwd,
        env: { TERM: "xterm-256color", ...env },
        terminal: {
          cols: spec.pty.cols,
          rows: spec.pty.rows,
          data: (_terminal, chunk) => onOutput(exec, T_STDOUT, chunk),
          exit: () => closed()
        }
      })
      exec.terminal = proc.terminal ?? null
    } else {
      // Already in the command cgroups (cgroups in use, no rlimits to set, names the shell can export): the
      // waiting shell runs it. Else a shell of its own, spawned for it. Either way the next one starts waiting.
      const ready = spec.cgroup === true && spec.rlimits === undefined && Object.keys(env).every((k) => SHELL_NAME.test(k)) ? handOver(claimStandby(), spec, cwd, env) : undefined
      if (spec.cgroup === true) setImmediate(spawnStandby)
      const spawned = ready?.proc ?? Bun.spawn({
        cmd,
        cwd,
        env,
        stdin: spec.stdin === false ? "ignore" : "pipe",
        stdout: "pipe",
        stderr: "pipe",
        detached: true // its own session and process group: a kill reaches every descendant
      })
      const pump = async (stream: ReadableStream<Uint8Array>, type: number) => {
        try {
          for await (const chunk of stream) onOutput(exec, type, chunk)
        } catch {}
      }
      drained = Promise.all([pump(spawned.stdout, T_STDOUT), pump(spawned.stderr, T_STDERR)])
      proc = spawned
    }
  } catch (e) {
    exec.meta.pid = 0
    try {
      fs.writeFileSync(path.join(dir, "meta.json"), JSON.stringify(exec.meta))
    } catch {}
    onOutput(exec, T_STDERR, Buffer.from(`${(e as Error).message}\n`))
    finish(exec, { exitCode: 127, signal: null })
    return exec
  }
  exec.proc = proc
  exec.meta.pid = proc.pid
  exec.meta.procStart = procStart(proc.pid)
  // For a restarted agent to find it again; on a full disk it is only lost to that restart.
  try {
    fs.writeFileSync(path.join(dir, "meta.json"), JSON.stringify(exec.meta))
  } catch {}
  if (spec.timeoutMs !== undefined) {
    exec.timers.push(setTimeout(() => {
      if (exec.exit !== null) return
      exec.timedOut = true
      killExec(exec, "SIGTERM")
    }, spec.timeoutMs))
  }
  void proc.exited.then(() => {
    const signal = typeof proc.signalCode === "number" ? signalNameOf(proc.signalCode) : proc.signalCode
    const fields = { exitCode: signal === null ? proc.exitCode : null, signal }
    // Normally the pipes end right after the exit; a background child that inherited them could hold them
    // open forever, so after a short grace the execution finishes anyway (and finish() kills the group).
    const grace = setTimeout(() => finish(exec, fields), PIPE_GRACE_MS)
    void drained.then(() => {
      clearTimeout(grace)
      finish(exec, fields)
    })
  })
  return exec
}

const info = (exec: Exec): Protocol.ExecInfoAnswer => ({
  execId: exec.meta.execId,
  tag: exec.meta.tag,
  pid: exec.meta.pid,
  state: exec.exit === null ? "running" : "exited",
  startedAt: exec.meta.startedAt,
  exitCode: exec.exit?.exitCode ?? null
})

/** `/exec` (POST starts one) and `/exec/<id>[/events|/kill|/stdin|/resize]`. */
export const execRoute = async (
  request: Request,
  parts: ReadonlyArray<string>,
  q: URLSearchParams,
  server: { timeout: (request: Request, seconds: number) => void }
): Promise<Response> => {
  if (parts.length === 1 && request.method === "POST") {
    let body: unknown
    try {
      body = await request.json()
    } catch {
      throw invalid("the body must be JSON")
    }
    return json(info(startExec(parseExecRequest(body))))
  }
if (parts[1] !== undefined) {
    const exec = execs.get(parts[1])
    if (exec === undefined) throw new AgentError(404, "not_found", "no such execution")
    if (parts[2] === undefined && request.method === "GET") return json(info(exec))
    if (parts[2] === "events" && request.method === "GET") {
      const events: Query<Protocol.EventsQuery> = q
      const from = intParam(events, "from", 0)
      server.timeout(request, 0) // a long poll is not an idle connection
      await waitForEvents(exec, from, Math.min(intParam(events, "wait", 0), 60_000))
      return json({ events: readEvents(exec, from) } satisfies Protocol.ExecEventsAnswer)
    }
    if (parts[2] === "kill" && request.method === "POST") {
      const signal = queryOf<Protocol.KillQuery>(q).get("signal") ?? "SIGTERM"
      if (!SIGNALS.has(signal)) throw invalid(`unknown signal ${shortPath(signal)}`)
      if (exec.exit === null) {
        exec.cancelled = true
        killExec(exec, signal as NodeJS.Signals)
      }
      return json(info(exec))
    }
    if (parts[2] === "resize" && request.method === "POST") {
      const resize: Query<Protocol.ResizeQuery> = q
      const size = { cols: intParam(resize, "cols", 0), rows: intParam(resize, "rows", 0) }
      if (!isTerminalSize(size)) throw invalid("a terminal has 1-1000 columns and rows")
      if (exec.exit === null) {
        if (exec.terminal === null) throw invalid("the process has no terminal")
        exec.terminal.resize(size.cols, size.rows)
      }
      return json({ ok: true } satisfies Protocol.Acknowledged)
    }
    if (parts[2] === "stdin" && request.method === "POST" && exec.terminal !== null) {
      // Typed into the terminal; its end (close) is ^D, as at a keyboard.
      const data = new Uint8Array(await request.arrayBuffer())
      try {
        if (data.length > 0) exec.terminal.write(data)
        if (queryOf<Protocol.StdinQuery>(q).get("close") === "1") exec.terminal.write("\x04")
      } catch {}
      return json({ ok: true } satisfies Protocol.Acknowledged)
    }
    if (parts[2] === "stdin" && request.method === "POST") {
      const data = new Uint8Array(await request.arrayBuffer())
      const stdin = exec.proc?.stdin
      if (exec.exit === null && stdin !== undefined && stdin !== null && typeof stdin !== "number") {
        try {
          if (data.length > 0) {
            stdin.write(data)
            await stdin.flush()
          }
          if (queryOf<Protocol.StdinQuery>(q).get("close") === "1") await stdin.end()
        } catch {
          // the process closed its stdin: the bytes have nowhere to go, as with a pipe in a shell
        }
      }
      return json({ ok: true } satisfies Protocol.Acknowledged)
    }
  }
  throw new AgentError(404, "not_found", "no such route")
}
