/**
 * Running processes: argv, cwd, env, stdin, timeout, output cap, each in its own session and process group (a kill
 * reaches every descendant), started by a shell of shells.ts, its output recorded by events.ts; and the `/exec`
 * routes of the agent's HTTP API.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type * as Protocol from "../AgentProtocol.ts"
import { AgentError, intParam, invalid, json, type Query, queryOf, shortPath } from "./common.ts"
import { byTag, EXECS_DIR, type Exec, execs, type ExitFields, finish, onOutput, procStart, readEvents, signalGroup, T_STDERR, T_STDOUT, track, waitForEvents } from "./events.ts"
import { BASE_ENV, claimStandby, handOver, JOIN_CGROUPS, SHELL, SHELL_NAME, spawnStandby } from "./shells.ts"

const KILL_GRACE_MS = 2000
/** After the command itself exited, how long its pipes may stay open (held by a background child). */
const PIPE_GRACE_MS = 200

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
  q: URLSearchParams
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
