/**
 * Executions and their output, kept ON DISK in /run/agent/execs/<id>/ (the sandbox's own disk), so neither the
 * gateway's absence nor a restart of the agent loses them; finished executions are kept within a budget.
 *
 * Events file format (events): frames of [type u8][length u32 BE][payload]; type 1 stdout, 2 stderr, 3 exit
 * (payload: JSON). A frame's index is its `seq`; the exit frame is always last.
 *
 * A full disk (the sandbox filled it, or it is out of inodes) must not stop commands: from the first frame the disk
 * refuses — or from the start, when not even the execution's directory can be made — an execution's frames are
 * held in memory instead, within MEMORY_BUDGET bytes of output over all executions (past it output is dropped and
 * counts as truncated; an exit is always kept). Only an agent restart loses them.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Protocol from "../AgentProtocol.ts"
import { RUN_DIR } from "./common.ts"

export const EXECS_DIR = path.join(RUN_DIR, "execs")
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
/** Output held in memory over all executions, for frames a full disk refused. */
const MEMORY_BUDGET = 16 * 1024 * 1024
let heldInMemory = 0
export const T_STDOUT = 1
export const T_STDERR = 2
const T_EXIT = 3

export type ExitFields = Protocol.ExitFields

export interface Meta {
  execId: string
  tag: string | null
  pid: number
  procStart: string | null
  startedAt: string
  maxOutputBytes: number
}

interface Frame {
  readonly type: number
  readonly payload: Buffer
}

export interface Exec {
  meta: Meta
  dir: string
  /** Byte offset of each frame in the events file; its index is the event's seq. */
  offsets: Array<number>
  size: number
  fd: number | null
  /** Frames after the file's (seq offsets.length on), once the disk refused one: they never go back to the file. */
  memory: Array<Frame> | null
  memoryBytes: number
  outputBytes: number
  truncated: boolean
  cancelled: boolean
  timedOut: boolean
  exit: ExitFields | null
  finishedAt: number | null
  proc: ReturnType<typeof Bun.spawn> | null
  /** The pseudo-terminal of a command started with `pty` (its input and size go there). */
  terminal: Bun.Terminal | null
  pending: { type: number; chunks: Array<Buffer>; bytes: number } | null
  flushScheduled: boolean
  waiters: Set<() => void>
  timers: Array<ReturnType<typeof setTimeout>>
}

export const execs = new Map<string, Exec>()
export const byTag = new Map<string, string>()

/** A new execution record, registered by id and tag: one just started, or one reloaded from disk. */
export const track = (fields: Pick<Exec, "meta" | "dir" | "offsets" | "size" | "fd" | "outputBytes">): Exec => {
  const exec: Exec = {
    ...fields,
    truncated: false,
    cancelled: false,
    timedOut: false,
    exit: null,
    memory: null,
    memoryBytes: 0,
    finishedAt: null,
    proc: null,
    terminal: null,
    pending: null,
    flushScheduled: false,
    waiters: new Set(),
    timers: []
  }
  execs.set(exec.meta.execId, exec)
  if (exec.meta.tag !== null) byTag.set(exec.meta.tag, exec.meta.execId)
  return exec
}

/** Field 22 of /proc/<pid>/stat: tells a pid apart from a later process that reuses it. */
export const procStart = (pid: number): string | null => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null
  } catch {
    return null
  }
}

export const signalGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {}
}

const notify = (exec: Exec) => {
  for (const wake of exec.waiters) wake()
  exec.waiters.clear()
}

/** How many events the execution has: in its file, then in memory. */
export const eventCount = (exec: Exec) => exec.offsets.length + (exec.memory?.length ?? 0)

/**
 * Appends one frame to the events file; once the disk refuses one (full, or the file could not be made), to memory
 * within the budget (an exit always: a full disk never leaves a caller waiting for one).
 */
const appendFrame = (exec: Exec, type: number, payload: Buffer) => {
  if (exec.memory === null && exec.fd !== null) {
    const header = Buffer.alloc(HEADER)
    header[0] = type
    header.writeUInt32BE(payload.length, 1)
    // At an explicit position: a file reopened after a restart ("r+") would otherwise be written from its start.
    const frame = Buffer.concat([header, payload])
    try {
      let written = 0
      while (written < frame.length) written += fs.writeSync(exec.fd, frame, written, frame.length - written, exec.size + written)
      exec.offsets.push(exec.size)
      exec.size += HEADER + payload.length
      return
    } catch {
      // A part of the frame may be there: past `size`, never read (and cut off by a restarted agent).
    }
  }
  exec.memory ??= []
  if (type !== T_EXIT && heldInMemory + payload.length > MEMORY_BUDGET) {
    exec.truncated = true
    return
  }
  exec.memory.push({ type, payload })
  exec.memoryBytes += payload.length
  heldInMemory += payload.length
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
export const onOutput = (exec: Exec, type: number, chunk: Uint8Array) => {
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

export const finish = (exec: Exec, fields: Omit<ExitFields, "cancelled" | "timedOut" | "outputTruncated">) => {
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
  try {
    exec.terminal?.close()
  } catch {}
  exec.terminal = null
  exec.finishedAt = Date.now()
  notify(exec)
  evictFinished()
}

export const waitForEvents = (exec: Exec, from: number, waitMs: number) =>
  new Promise<void>((resolve) => {
    if (eventCount(exec) > from || exec.exit !== null || waitMs <= 0) return resolve()
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

type WireEvent = Protocol.ExecEventFrame

const wireEvent = (seq: number, type: number, payload: Buffer): WireEvent =>
  type === T_EXIT
    ? { seq, type: "exit", ...(JSON.parse(payload.toString()) as ExitFields) }
    : { seq, type: type === T_STDOUT ? "stdout" : "stderr", data: payload.toString("base64") }

/** Reads events [from, ...) from the events file, then from memory, within the per-answer budgets. */
export const readEvents = (exec: Exec, from: number): Array<WireEvent> => {
  const count = exec.offsets.length
  const events: Array<WireEvent> = []
  let bytes = 0
  if (from < count) {
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
    let at = 0
    for (let seq = from; seq < last; seq++) {
      const length = buffer.readUInt32BE(at + 1)
      events.push(wireEvent(seq, buffer[at]!, buffer.subarray(at + HEADER, at + HEADER + length)))
      at += HEADER + length
    }
    if (last < count) return events
    bytes = buffer.length
  }
  // Frames a full disk kept in memory come after the file's.
  const memory = exec.memory ?? []
  for (let i = Math.max(0, from - count); i < memory.length && events.length < MAX_EVENTS_PER_ANSWER; i++) {
    const frame = memory[i]!
    if (events.length > 0 && bytes + HEADER + frame.payload.length > MAX_BYTES_PER_ANSWER) break
    events.push(wireEvent(count + i, frame.type, frame.payload))
    bytes += HEADER + frame.payload.length
  }
  return events
}

const removeExec = (exec: Exec) => {
  heldInMemory -= exec.memoryBytes
  exec.memory = null
  exec.memoryBytes = 0
  execs.delete(exec.meta.execId)
  if (exec.meta.tag !== null && byTag.get(exec.meta.tag) === exec.meta.execId) byTag.delete(exec.meta.tag)
  fs.rmSync(exec.dir, { recursive: true, force: true })
}

/** Finished executions older than a day, or beyond the byte or count budget (oldest first), are forgotten. */
export const evictFinished = () => {
  const now = Date.now()
  const finished = [...execs.values()].filter((e) => e.finishedAt !== null).sort((a, b) => b.finishedAt! - a.finishedAt!)
  let bytes = 0
  finished.forEach((exec, index) => {
    bytes += exec.size + exec.memoryBytes
    if (now - exec.finishedAt! > KEEP_FINISHED_MS || bytes > KEEP_FINISHED_BYTES || index >= KEEP_FINISHED_COUNT) removeExec(exec)
  })
}

/**
 * At start: executions kept by an earlier agent come back from disk. One that never got its exit frame was
 * running when that agent died; its pipes are gone, so it is killed (no orphan) and marked finished.
 */
export const loadExecs = () => {
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
