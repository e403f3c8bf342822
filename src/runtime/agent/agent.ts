/**
 * The in-jail agent (the way E2B's envd serves each VM). It runs inside a sandbox's bwrap jail as the sandbox
 * user, under a tiny shell loop that restarts it if it dies, and serves HTTP on a unix socket in /run/agent:
 * - runs processes (argv, cwd, env, stdin, timeout, output cap), each in its own process group, and keeps their
 *   ordered output and exit status ON DISK in /run/agent/execs/<id>/ (a host directory), so neither the
 *   gateway's absence nor a restart of this agent loses them; finished executions are kept within a budget;
 * - does file operations from inside the jail, so paths, `..` and symlinks resolve in the jail, never on the host;
 * - bridges TCP ports: a connection to /run/agent/bridge.sock that sends "PORT <n>\n" is piped to 127.0.0.1:n
 *   in the jail's own network namespace.
 * Self-contained on purpose (node builtins only): the gateway writes it into DATA_DIR and runs it with bun.
 *
 * Events file format (events): frames of [type u8][length u32 BE][payload]; type 1 stdout, 2 stderr, 3 exit
 * (payload: JSON). A frame's index is its `seq`; the exit frame is always last.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const RUN_DIR = process.env["AGENT_RUN_DIR"] ?? "/run/agent"
const EXECS_DIR = path.join(RUN_DIR, "execs")
/** Cgroup files a command joins before it runs (the runtime binds them in when cgroups are in use). */
const CGROUP_FILES = ["/run/cgroup/pids.procs", "/run/cgroup/memory.procs"].filter((f) => fs.existsSync(f))
const KILL_GRACE_MS = 2000
/** After the command itself exited, how long its pipes may stay open (held by a background child). */
const PIPE_GRACE_MS = 200
/** Retention of finished executions: an age, a byte budget over their event files, and a count. */
const KEEP_FINISHED_MS = 24 * 60 * 60 * 1000
const KEEP_FINISHED_BYTES = 256 * 1024 * 1024
const KEEP_FINISHED_COUNT = 2000
/** One events answer carries at most this many events / bytes (the caller asks again from the next seq). */
const MAX_EVENTS_PER_ANSWER = 1000
const MAX_BYTES_PER_ANSWER = 8 * 1024 * 1024
/** Consecutive output of one stream is written as one event up to this size. */
const MAX_EVENT_BYTES = 1024 * 1024
const HEADER = 5
const T_STDOUT = 1
const T_STDERR = 2
const T_EXIT = 3

interface ExitFields {
  exitCode: number | null
  signal: string | null
  cancelled: boolean
  timedOut: boolean
  outputTruncated: boolean
}

interface Meta {
  execId: string
  tag: string | null
  pid: number
  procStart: string | null
  startedAt: string
  maxOutputBytes: number
}

interface Exec {
  meta: Meta
  dir: string
  /** Byte offset of each frame in the events file; its index is the event's seq. */
  offsets: Array<number>
  size: number
  fd: number | null
  outputBytes: number
  truncated: boolean
  cancelled: boolean
  timedOut: boolean
  exit: ExitFields | null
  /** The exit frame could not be written (a full disk): readEvents answers it from memory. */
  exitLost: boolean
  finishedAt: number | null
  proc: ReturnType<typeof Bun.spawn> | null
  pending: { type: number; chunks: Array<Uint8Array>; bytes: number } | null
  flushScheduled: boolean
  waiters: Set<() => void>
  timers: Array<ReturnType<typeof setTimeout>>
}

const execs = new Map<string, Exec>()
const byTag = new Map<string, string>()

/** A new execution record, registered by id and tag: one just started, or one reloaded from disk. */
const track = (fields: Pick<Exec, "meta" | "dir" | "offsets" | "size" | "fd" | "outputBytes">): Exec => {
  const exec: Exec = {
    ...fields,
    truncated: false,
    cancelled: false,
    timedOut: false,
    exit: null,
    exitLost: false,
    finishedAt: null,
    proc: null,
    pending: null,
    flushScheduled: false,
    waiters: new Set(),
    timers: []
  }
  execs.set(exec.meta.execId, exec)
  if (exec.meta.tag !== null) byTag.set(exec.meta.tag, exec.meta.execId)
  return exec
}

class AgentError extends Error {
  constructor(readonly status: number, readonly kind: string, message: string) {
    super(message)
  }
}
const invalid = (message: string) => new AgentError(400, "invalid", message)

// --- processes -------------------------------------------------------------------------------------------------

/** Field 22 of /proc/<pid>/stat: tells a pid apart from a later process that reuses it. */
const procStart = (pid: number): string | null => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null
  } catch {
    return null
  }
}

const signalGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {}
}

const notify = (exec: Exec) => {
  for (const wake of exec.waiters) wake()
  exec.waiters.clear()
}

/**
 * Appends one frame; false when the sandbox's disk is full (or the file is otherwise unwritable): the frame is
 * dropped (output counts as truncated), and an exit that could not be written is kept in memory (`exitLost`) and
 * still answered, so a full disk never leaves a caller waiting for an exit.
 */
const appendFrame = (exec: Exec, type: number, payload: Uint8Array): boolean => {
  if (exec.fd === null) return false
  const header = Buffer.alloc(HEADER)
  header[0] = type
  header.writeUInt32BE(payload.length, 1)
  // At an explicit position: a file reopened after a restart ("r+") would otherwise be written from its start.
  const frame = Buffer.concat([header, payload])
  try {
    let written = 0
    while (written < frame.length) written += fs.writeSync(exec.fd, frame, written, frame.length - written, exec.size + written)
  } catch {
    if (type === T_EXIT) exec.exitLost = true
    else exec.truncated = true
    return false
  }
  exec.offsets.push(exec.size)
  exec.size += HEADER + payload.length
  return true
}

const flush = (exec: Exec) => {
  exec.flushScheduled = false
  const pending = exec.pending
  if (pending === null) return
  exec.pending = null
  appendFrame(exec, pending.type, pending.chunks.length === 1 ? pending.chunks[0]! : Buffer.concat(pending.chunks))
  notify(exec)
}

/** Output is cut at maxOutputBytes (the rest is read and dropped, so the process never blocks on a full pipe). */
const onOutput = (exec: Exec, type: number, chunk: Uint8Array) => {
  if (exec.exit !== null) return
  const room = exec.meta.maxOutputBytes - exec.outputBytes
  if (room <= 0) {
    if (chunk.length > 0) exec.truncated = true
    return
  }
  const kept = chunk.length > room ? chunk.subarray(0, room) : chunk
  if (kept.length < chunk.length) exec.truncated = true
  exec.outputBytes += kept.length
  if (exec.pending !== null && exec.pending.type !== type) flush(exec)
  exec.pending ??= { type, chunks: [], bytes: 0 }
  // Bun may reuse a stream's buffer: keep a copy.
  exec.pending.chunks.push(Buffer.from(kept))
  exec.pending.bytes += kept.length
  if (exec.pending.bytes >= MAX_EVENT_BYTES) flush(exec)
  else if (!exec.flushScheduled) {
    // Chunks read in the same turn of the loop become one event: fewer, larger events, no added latency.
    exec.flushScheduled = true
    setImmediate(() => flush(exec))
  }
}

const finish = (exec: Exec, fields: Omit<ExitFields, "cancelled" | "timedOut" | "outputTruncated">) => {
  if (exec.exit !== null) return
  flush(exec)
  exec.exit = { ...fields, cancelled: exec.cancelled, timedOut: exec.timedOut, outputTruncated: exec.truncated }
  for (const timer of exec.timers) clearTimeout(timer)
  // No orphans: whatever the command left in its process group goes with it.
  signalGroup(exec.meta.pid, "SIGKILL")
  appendFrame(exec, T_EXIT, Buffer.from(JSON.stringify(exec.exit)))
  if (exec.fd !== null) fs.closeSync(exec.fd)
  exec.fd = null
  exec.proc = null
  exec.finishedAt = Date.now()
  notify(exec)
  evictFinished()
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

interface ExecRequest {
  command: Array<string>
  cwd?: string
  env?: Record<string, string>
  timeoutMs?: number
  maxOutputBytes: number
  tag?: string
  /** The command joins the sandbox's command cgroups (bound at /run/cgroup/) before it runs. */
  cgroup?: boolean
  /** Where cgroups are not available: per-command rlimits (processes, address space in KiB). */
  rlimits?: { nproc: number; asKb: number }
}

const isInt = (v: unknown, min: number) => typeof v === "number" && Number.isInteger(v) && v >= min

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
    ...(spec.cgroup === true ? CGROUP_FILES : []).map((f) => `echo $$ > ${f} || exit 125`),
    // dash calls the process limit -p, other shells -u.
    ...(spec.rlimits ? [`{ ulimit -p ${spec.rlimits.nproc} || ulimit -u ${spec.rlimits.nproc}; } 2>/dev/null || exit 125`, `ulimit -v ${spec.rlimits.asKb} || exit 125`] : [])
  ]
  const env: Record<string, string> = {
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    HOME: "/workspace",
    USER: "user",
    LANG: "C.UTF-8",
    ...spec.env
  }
  const execId = newExecId()
  const dir = path.join(EXECS_DIR, execId)
  fs.mkdirSync(dir, { recursive: true })
  const fd = fs.openSync(path.join(dir, "events"), "w")
  const exec = track({
    meta: { execId, tag: spec.tag ?? null, pid: -1, procStart: null, startedAt: new Date().toISOString(), maxOutputBytes: spec.maxOutputBytes },
    dir,
    offsets: [],
    size: 0,
    fd,
    outputBytes: 0
  })
  let proc: ReturnType<typeof Bun.spawn<"pipe", "pipe", "pipe">>
  try {
    proc = Bun.spawn({
      cmd: ["/bin/sh", "-c", `${prelude.join("; ")}${prelude.length > 0 ? "; " : ""}exec "$@"`, "sh", ...spec.command],
      cwd,
      env,
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      detached: true // its own session and process group: a kill reaches every descendant
    })
  } catch (e) {
    exec.meta.pid = 0
    fs.writeFileSync(path.join(dir, "meta.json"), JSON.stringify(exec.meta))
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
  const pump = async (stream: ReadableStream<Uint8Array>, type: number) => {
    try {
      for await (const chunk of stream) onOutput(exec, type, chunk)
    } catch {}
  }
  const drained = Promise.all([pump(proc.stdout, T_STDOUT), pump(proc.stderr, T_STDERR)])
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

const info = (exec: Exec) => ({
  execId: exec.meta.execId,
  tag: exec.meta.tag,
  pid: exec.meta.pid,
  state: exec.exit === null ? "running" : "exited",
  startedAt: exec.meta.startedAt,
  exitCode: exec.exit?.exitCode ?? null
})

const waitForEvents = (exec: Exec, from: number, waitMs: number) =>
  new Promise<void>((resolve) => {
    if (exec.offsets.length > from || exec.exit !== null || waitMs <= 0) return resolve()
    const timer = setTimeout(() => {
      exec.waiters.delete(done)
      resolve()
    }, waitMs)
    const done = () => {
      clearTimeout(timer)
      resolve()
    }
    exec.waiters.add(done)
  })

type WireEvent = { seq: number; type: "stdout" | "stderr"; data: string } | ({ seq: number; type: "exit" } & ExitFields)

/** Reads events [from, ...) from the events file, within the per-answer budgets. */
const readEvents = (exec: Exec, from: number): Array<WireEvent> => {
  const count = exec.offsets.length
  // An exit that a full disk kept out of the file comes last, from memory.
  const lostExit: Array<WireEvent> = exec.exitLost && exec.exit !== null ? [{ seq: count, type: "exit", ...exec.exit }] : []
  if (from >= count) return from === count ? lostExit : []
  let last = Math.min(count, from + MAX_EVENTS_PER_ANSWER)
  const endOf = (i: number) => (i < count ? exec.offsets[i]! : exec.size)
  while (last > from + 1 && endOf(last) - exec.offsets[from]! > MAX_BYTES_PER_ANSWER) last--
  const start = exec.offsets[from]!
  const buffer = Buffer.alloc(endOf(last) - start)
  const fd = fs.openSync(path.join(exec.dir, "events"), "r")
  try {
    fs.readSync(fd, buffer, 0, buffer.length, start)
  } finally {
    fs.closeSync(fd)
  }
  const events: Array<WireEvent> = []
  let at = 0
  for (let seq = from; seq < last; seq++) {
    const type = buffer[at]!
    const length = buffer.readUInt32BE(at + 1)
    const payload = buffer.subarray(at + HEADER, at + HEADER + length)
    at += HEADER + length
    if (type === T_EXIT) events.push({ seq, type: "exit", ...(JSON.parse(payload.toString()) as ExitFields) })
    else events.push({ seq, type: type === T_STDOUT ? "stdout" : "stderr", data: payload.toString("base64") })
  }
  return last === count ? [...events, ...lostExit] : events
}

const removeExec = (exec: Exec) => {
  execs.delete(exec.meta.execId)
  if (exec.meta.tag !== null && byTag.get(exec.meta.tag) === exec.meta.execId) byTag.delete(exec.meta.tag)
  fs.rmSync(exec.dir, { recursive: true, force: true })
}

/** Finished executions older than a day, or beyond the byte or count budget (oldest first), are forgotten. */
const evictFinished = () => {
  const now = Date.now()
  const finished = [...execs.values()].filter((e) => e.finishedAt !== null).sort((a, b) => b.finishedAt! - a.finishedAt!)
  let bytes = 0
  finished.forEach((exec, index) => {
    bytes += exec.size
    if (now - exec.finishedAt! > KEEP_FINISHED_MS || bytes > KEEP_FINISHED_BYTES || index >= KEEP_FINISHED_COUNT) removeExec(exec)
  })
}

/**
 * At start: executions kept by an earlier agent come back from disk. One that never got its exit frame was
 * running when that agent died; its pipes are gone, so it is killed (no orphan) and marked finished.
 */
const loadExecs = () => {
  fs.mkdirSync(EXECS_DIR, { recursive: true })
  for (const name of fs.readdirSync(EXECS_DIR)) {
    const dir = path.join(EXECS_DIR, name)
    let meta: Meta
    try {
      meta = JSON.parse(fs.readFileSync(path.join(dir, "meta.json"), "utf8")) as Meta
    } catch {
      fs.rmSync(dir, { recursive: true, force: true })
      continue
    }
    const file = path.join(dir, "events")
    const offsets: Array<number> = []
    let size = 0
    let outputBytes = 0
    let exit: ExitFields | null = null
    const fd = fs.openSync(file, fs.existsSync(file) ? "r+" : "w+")
    const total = fs.fstatSync(fd).size
    const header = Buffer.alloc(HEADER)
    while (size + HEADER <= total) {
      fs.readSync(fd, header, 0, HEADER, size)
      const length = header.readUInt32BE(1)
      if (size + HEADER + length > total) break // a frame cut short by a crash
      if (header[0] === T_EXIT) {
        const payload = Buffer.alloc(length)
        fs.readSync(fd, payload, 0, length, size + HEADER)
        exit = JSON.parse(payload.toString()) as ExitFields
      } else outputBytes += length
      offsets.push(size)
      size += HEADER + length
      if (exit !== null) break
    }
    if (size < total) fs.ftruncateSync(fd, size)
    const exec = track({ meta, dir, offsets, size, fd, outputBytes })
    if (exit !== null) {
      exec.exit = exit
      exec.finishedAt = fs.statSync(file).mtimeMs
      fs.closeSync(fd)
      exec.fd = null
      continue
    }
    const orphan = meta.pid > 0 && meta.procStart !== null && procStart(meta.pid) === meta.procStart
    if (orphan) signalGroup(meta.pid, "SIGKILL")
    finish(exec, { exitCode: null, signal: orphan ? "SIGKILL" : null })
  }
  evictFinished()
}

// --- files -----------------------------------------------------------------------------------------------------

const entryType = (stat: fs.Stats) => (stat.isFile() ? "file" : stat.isDirectory() ? "directory" : stat.isSymbolicLink() ? "symlink" : "other")
const entry = (p: string, stat: fs.Stats) => ({ path: p, type: entryType(stat), sizeBytes: stat.size, modifiedAt: stat.mtime.toISOString(), mode: stat.mode & 0o7777 })

/** What an errno means, in the user's words. */
const ERRNO_TEXT: Record<string, readonly [number, string, string]> = {
  ENOENT: [404, "not_found", "no such file or directory"],
  EEXIST: [409, "conflict", "already exists"],
  ENOTEMPTY: [409, "conflict", "the directory is not empty"],
  ENOTDIR: [400, "invalid", "not a directory"],
  EISDIR: [400, "invalid", "is a directory"],
  EINVAL: [400, "invalid", "invalid argument"],
  ELOOP: [400, "invalid", "too many levels of symbolic links"],
  ENAMETOOLONG: [400, "invalid", "file name too long"],
  EACCES: [403, "invalid", "permission denied"],
  EPERM: [403, "invalid", "operation not permitted"],
  EROFS: [403, "invalid", "read-only file system"],
  ETXTBSY: [409, "conflict", "the file is busy"],
  EMFILE: [503, "unavailable", "too many open files in the sandbox"],
  ENOSPC: [507, "unavailable", "no space left on the sandbox's disk"],
  EDQUOT: [507, "unavailable", "no space left on the sandbox's disk"],
  EFBIG: [507, "unavailable", "the file is too large"]
}

/** A path for a message: the caller's own path, shortened when long. */
const shortPath = (p: string) => (p.length > 200 ? `${p.slice(0, 120)}…${p.slice(-60)}` : p)

const errnoError = (e: unknown, subject: string | undefined): AgentError => {
  if (e instanceof AgentError) return e
  const code = (e as NodeJS.ErrnoException | null)?.code
  const known = code === undefined ? undefined : ERRNO_TEXT[code]
  if (known !== undefined) return new AgentError(known[0], known[1], subject === undefined ? known[2] : `${known[2]}: ${shortPath(subject)}`)
  // Never a stack or an engine's message: the errno name is all a user could act on.
  return new AgentError(500, "internal", `the operation failed${code ? ` (${code})` : ""}${subject === undefined ? "" : `: ${shortPath(subject)}`}`)
}

const listDir = (root: string, recursive: boolean, max: number) => {
  const entries: Array<ReturnType<typeof entry>> = []
  let truncated = false
  const walk = (dir: string): void => {
    let names: Array<string>
    try {
      names = fs.readdirSync(dir).sort()
    } catch (e) {
      if (dir === root) throw e
      return // an unreadable subdirectory is listed, not entered
    }
    for (const name of names) {
      if (entries.length >= max) {
        truncated = true
        return
      }
      const p = dir === "/" ? `/${name}` : `${dir}/${name}`
      let stat: fs.Stats
      try {
        stat = fs.lstatSync(p)
      } catch {
        continue // vanished meanwhile
      }
      entries.push(entry(p, stat))
      if (recursive && stat.isDirectory()) walk(p)
      if (truncated) return
    }
  }
  walk(root)
  return { entries, truncated }
}

const existsNoFollow = (p: string) => {
  try {
    fs.lstatSync(p)
    return true
  } catch {
    return false
  }
}

const intParam = (q: URLSearchParams, name: string, fallback: number) => {
  const raw = q.get(name)
  if (raw === null) return fallback
  const value = Number(raw)
  if (!Number.isSafeInteger(value) || value < 0) throw invalid(`${name} must be a non-negative integer`)
  return value
}

const normalize = (p: string | null) => {
  if (p === null || !p.startsWith("/")) throw invalid("path must be absolute")
  if (p.includes("\0")) throw invalid("path cannot contain NUL")
  return path.posix.normalize(p).replace(/(.)\/$/, "$1")
}

// --- HTTP ------------------------------------------------------------------------------------------------------

const json = (body: unknown, status = 200) => Response.json(body, { status })

const handle = async (request: Request, server: { timeout: (request: Request, seconds: number) => void }): Promise<Response> => {
  const url = new URL(request.url)
  const q = url.searchParams
  const parts = url.pathname.split("/").filter(Boolean)
  /** The path the request names, for error messages. */
  let subject: string | undefined
  try {
    if (parts[0] === "health") return json({ ok: true, pid: process.pid, execs: execs.size })
    if (parts[0] === "exec" && parts.length === 1 && request.method === "POST") {
      let body: unknown
      try {
        body = await request.json()
      } catch {
        throw invalid("the body must be JSON")
      }
      return json(info(startExec(parseExecRequest(body))))
    }
    if (parts[0] === "exec" && parts[1] !== undefined) {
      const exec = execs.get(parts[1])
      if (exec === undefined) throw new AgentError(404, "not_found", "no such execution")
      if (parts[2] === undefined && request.method === "GET") return json(info(exec))
      if (parts[2] === "events" && request.method === "GET") {
        const from = intParam(q, "from", 0)
        server.timeout(request, 0) // a long poll is not an idle connection
        await waitForEvents(exec, from, Math.min(intParam(q, "wait", 0), 60_000))
        return json({ events: readEvents(exec, from) })
      }
      if (parts[2] === "kill" && request.method === "POST") {
        const signal = q.get("signal") ?? "SIGTERM"
        if (!SIGNALS.has(signal)) throw invalid(`unknown signal ${shortPath(signal)}`)
        if (exec.exit === null) {
          exec.cancelled = true
          killExec(exec, signal as NodeJS.Signals)
        }
        return json(info(exec))
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
            if (q.get("close") === "1") await stdin.end()
          } catch {
            // the process closed its stdin: the bytes have nowhere to go, as with a pipe in a shell
          }
        }
        return json({ ok: true })
      }
      throw new AgentError(404, "not_found", "no such route")
    }
    const p = normalize(q.get("path"))
    subject = p
    if (parts[0] === "files" && request.method === "GET") {
      const offset = intParam(q, "offset", 0)
      const limit = intParam(q, "limit", 1 << 20)
      const fd = fs.openSync(p, "r")
      try {
        const stat = fs.fstatSync(fd)
        if (!stat.isFile()) throw invalid(`not a regular file: ${shortPath(p)}`)
        const length = Math.max(0, Math.min(limit, stat.size - offset))
        const buffer = Buffer.alloc(length)
        let read = 0
        while (read < length) {
          const n = fs.readSync(fd, buffer, read, length - read, offset + read)
          if (n === 0) break
          read += n
        }
        return new Response(buffer.subarray(0, read), {
          headers: { "content-type": "application/octet-stream", "x-size": String(stat.size), "x-eof": String(offset + read >= stat.size) }
        })
      } finally {
        fs.closeSync(fd)
      }
    }
    if (parts[0] === "files" && request.method === "PUT") {
      const mode = q.get("mode") ?? "overwrite"
      if (mode !== "create" && mode !== "overwrite" && mode !== "append") throw invalid("mode must be create, overwrite or append")
      if (p === "/") throw invalid("/ is a directory")
      if (q.get("parents") === "1") fs.mkdirSync(path.dirname(p), { recursive: true })
      const data = new Uint8Array(await request.arrayBuffer())
      const existed = existsNoFollow(p)
      const fd = fs.openSync(p, mode === "create" ? "wx" : mode === "append" ? "a" : "w")
      try {
        let written = 0
        while (written < data.length) written += fs.writeSync(fd, data, written, data.length - written)
      } finally {
        fs.closeSync(fd)
      }
      return json({ bytesWritten: data.length, created: !existed })
    }
    if (parts[0] === "files" && request.method === "DELETE") {
      if (p === "/") throw invalid("/ cannot be deleted")
      let stat: fs.Stats
      try {
        stat = fs.lstatSync(p)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") return json({ deleted: false })
        throw e
      }
      if (stat.isDirectory()) {
        if (q.get("recursive") === "1") fs.rmSync(p, { recursive: true, force: true })
        else fs.rmdirSync(p)
      } else fs.unlinkSync(p)
      return json({ deleted: true })
    }
    if (parts[0] === "stat" && request.method === "GET") {
      try {
        return json({ entry: entry(p, fs.lstatSync(p)) })
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT" || (e as NodeJS.ErrnoException).code === "ENOTDIR") return json({ entry: null })
        throw e
      }
    }
    if (parts[0] === "list" && request.method === "GET") {
      if (!fs.statSync(p).isDirectory()) throw invalid(`not a directory: ${shortPath(p)}`)
      const max = intParam(q, "max", 1000)
      return json(listDir(p, q.get("recursive") === "1", max))
    }
    if (parts[0] === "mkdir" && request.method === "POST") {
      const parents = q.get("parents") === "1"
      if (parents && existsNoFollow(p) && !fs.statSync(p).isDirectory()) throw new AgentError(409, "conflict", `exists and is not a directory: ${shortPath(p)}`)
      fs.mkdirSync(p, { recursive: parents })
      return json({ ok: true })
    }
    throw new AgentError(404, "not_found", "no such route")
  } catch (e) {
    const error = errnoError(e, subject)
    return json({ kind: error.kind, message: error.message }, error.status)
  }
}

// --- start -----------------------------------------------------------------------------------------------------

/**
 * Only as the entry point (`bun agent.js` in the jail). The gateway imports this file as text, and a test runner
 * that ignores import attributes would evaluate it as a module: then nothing may start.
 */
const main = () => {
  fs.mkdirSync(RUN_DIR, { recursive: true })
  loadExecs()
  for (const name of ["agent.sock", "bridge.sock"]) fs.rmSync(path.join(RUN_DIR, name), { force: true })
  startBridge(path.join(RUN_DIR, "bridge.sock"))
  // The agent socket comes last: once it answers, everything is ready.
  Bun.serve({ unix: path.join(RUN_DIR, "agent.sock"), fetch: handle })
  setInterval(evictFinished, 10 * 60 * 1000).unref()
}

// --- port bridge -----------------------------------------------------------------------------------------------

/**
 * "PORT <n>\n" on /run/agent/bridge.sock, answered "OK\n", then raw bytes both ways to 127.0.0.1:<n> in this
 * network namespace. Bun's own sockets (node:net alone costs ~10 ms of start-up); reading from one side pauses
 * while the other side has unwritten bytes, so a slow peer never makes the agent buffer without bound.
 */
type BunSocket = import("bun").Socket<Link>
interface Link {
  head: Uint8Array
  peer: BunSocket | null
  /** Bytes this socket could not take yet (its peer is paused meanwhile). */
  pending: Array<Uint8Array>
  ending: boolean
  closed: boolean
}

const newLink = (): Link => ({ head: new Uint8Array(), peer: null, pending: [], ending: false, closed: false })

/** Writes to `to`; what does not fit waits for its drain, and `from` stops reading until then. */
const forward = (from: BunSocket, to: BunSocket, chunk: Uint8Array) => {
  if (to.data.pending.length > 0) {
    to.data.pending.push(chunk)
    return
  }
  const written = to.write(chunk)
  if (written < chunk.length) {
    to.data.pending.push(chunk.subarray(Math.max(0, written)))
    from.pause()
  }
}

const drain = (socket: BunSocket) => {
  while (socket.data.pending.length > 0) {
    const chunk = socket.data.pending[0]!
    const written = socket.write(chunk)
    if (written < chunk.length) {
      socket.data.pending[0] = chunk.subarray(Math.max(0, written))
      return
    }
    socket.data.pending.shift()
  }
  if (socket.data.ending) socket.end()
  else socket.data.peer?.resume()
}

/** Ends a socket once what it still has to send is out. */
const endAfterPending = (socket: BunSocket | null) => {
  if (socket === null || socket.data.closed) return
  if (socket.data.pending.length === 0) socket.end()
  else socket.data.ending = true
}

const startBridge = (file: string) => {
  const upstreamHandlers = {
    data: (upstream: BunSocket, chunk: Uint8Array) => {
      if (upstream.data.peer !== null) forward(upstream, upstream.data.peer, chunk)
    },
    drain,
    end: (upstream: BunSocket) => endAfterPending(upstream.data.peer),
    close: (upstream: BunSocket) => {
      upstream.data.closed = true
      endAfterPending(upstream.data.peer)
    },
    error: () => {}
  }
  Bun.listen<Link>({
    unix: file,
    socket: {
      open: (client) => {
        client.data = newLink()
      },
      data: (client, chunk) => {
        if (client.data.peer !== null) return forward(client, client.data.peer, chunk)
        const head = new Uint8Array(client.data.head.length + chunk.length)
        head.set(client.data.head)
        head.set(chunk, client.data.head.length)
        client.data.head = head
        const newline = head.indexOf(10)
        if (newline < 0) {
          if (head.length > 64) client.end()
          return
        }
        client.pause()
        const match = /^PORT (\d{1,5})$/.exec(Buffer.from(head.subarray(0, newline)).toString())
        const port = match ? Number(match[1]) : 0
        if (port < 1 || port > 65535) return void client.end("ERR bad port\n")
        const rest = head.subarray(newline + 1)
        client.data.head = new Uint8Array()
        Bun.connect<Link>({ hostname: "127.0.0.1", port, data: newLink(), socket: upstreamHandlers }).then(
          (upstream) => {
            if (client.data.closed) return void upstream.end()
            upstream.data.peer = client
            client.data.peer = upstream
            forward(upstream, client, new TextEncoder().encode("OK\n"))
            if (rest.length > 0) forward(client, upstream, rest)
            client.resume()
          },
          () => void client.end("ERR unreachable\n")
        )
      },
      drain,
      end: (client) => endAfterPending(client.data.peer),
      close: (client) => {
        client.data.closed = true
        endAfterPending(client.data.peer)
      },
      error: () => {}
    }
  })
}

if (import.meta.main) main()
