/**
 * The sandbox-facing calls of the runtime (exec and its events, stdin, files, ports), each one call to the jail's
 * agent over the adopted socket (AgentChannel.ts) with a time limit and a byte cap, its answer decoded by
 * AgentWire.ts before use. Arguments are checked here first: a path is absolute and not absurdly long, counts are
 * non-negative integers. A call ends when its fiber is interrupted (the signal `run` gives) or the runtime shuts down.
 */
import type { Effect } from "effect"
import { Option } from "effect"
import type * as net from "node:net"
import { type AgentAnswer, callAgent, streamAgent } from "./AgentChannel.ts"
import { connectBridge } from "./PortBridge.ts"
import * as Protocol from "./AgentProtocol.ts"
import * as Wire from "./AgentWire.ts"
import { PIDS_LIMIT } from "./Cgroups.ts"
import type { JailState } from "./Jail.ts"
import { type ExecEvent, type ExecInfo, type LocalRuntimeShape, type RuntimeError, runtimeError as err, type TerminalSize } from "./LocalRuntime.ts"

/** Agent calls: small answers, and long polls get their wait plus this margin. */
export const CALL_TIMEOUT_MS = 15_000
/** File transfers (up to tens of MiB through the agent's own disk). */
const TRANSFER_TIMEOUT_MS = 120_000
/** A streamed write (up to the gateway's raw write limit, 1 GiB by default) may take this long in all. */
const STREAM_TIMEOUT_MS = 30 * 60_000

const absolutePath = (p: string) => {
  if (typeof p !== "string" || !p.startsWith("/") || p.includes("\0")) throw err("invalid", "paths must be absolute")
  if (p.length > 8192) throw err("invalid", "the path is too long")
  return p
}

const nonNegativeInt = (name: string, value: number) => {
  if (!Number.isSafeInteger(value) || value < 0) throw err("invalid", `${name} must be a non-negative integer`)
  return value
}

const terminalSize = (size: TerminalSize): TerminalSize => {
  const ok = (n: number) => Number.isSafeInteger(n) && n >= 1 && n <= 1000
  if (typeof size !== "object" || size === null || !ok(size.cols) || !ok(size.rows)) throw err("invalid", "a terminal has 1-1000 columns and rows")
  return { cols: size.cols, rows: size.rows }
}

export interface AgentCallsOptions {
  /** The running, unpaused jail of a sandbox (a frozen agent would never answer), or a RuntimeError. */
  readonly requireRunning: (id: string) => JailState
  /** A call as an Effect failing with a RuntimeError in the user's terms; `signal` aborts when it is interrupted. */
  readonly run: <A>(f: (signal: AbortSignal) => Promise<A> | A) => Effect.Effect<A, RuntimeError>
  readonly callTimeoutMs: number
  readonly aborter: AbortController
  readonly isClosed: () => boolean
}

type Calls = Pick<
  LocalRuntimeShape,
  "exec" | "getExec" | "execEvents" | "kill" | "sendInput" | "resize" | "readFile" | "readFileStream" | "writeFile" | "writeFileStream" | "statFile" | "listFiles" | "deleteFile" | "makeDir" | "connectPort"
>

/** The runtime's shutdown or the caller's interruption, whichever comes first. */
const cutBy = (options: Pick<AgentCallsOptions, "aborter">, signal: AbortSignal) => AbortSignal.any([options.aborter.signal, signal])

/** Calls to a jail's agent: bounded answers, the runtime's call timeout, cut when the runtime shuts down or the caller is interrupted. */
export const agentCaller = (options: AgentCallsOptions) => (state: JailState, route: string, signal: AbortSignal, call: Partial<Parameters<typeof callAgent>[2]> = {}): Promise<AgentAnswer> => {
  if (options.isClosed()) throw err("unavailable", "the runtime is shut down")
  return callAgent(state, route, { timeoutMs: options.callTimeoutMs, maxBytes: Wire.MAX_JSON_ANSWER, ...call }, cutBy(options, signal))
}

export const makeAgentCalls = (options: AgentCallsOptions): Calls => {
  const { callTimeoutMs, requireRunning, run } = options
  const agent = agentCaller(options)

  return {
    exec: (id, spec) =>
      run(async (cut) => {
        const state = requireRunning(id)
        if (!Array.isArray(spec.command) || spec.command.length === 0) throw err("invalid", "command must not be empty")
        if (spec.cwd !== undefined) absolutePath(spec.cwd)
        nonNegativeInt("maxOutputBytes", spec.maxOutputBytes)
        if (spec.timeoutMs !== undefined && !(Number.isSafeInteger(spec.timeoutMs) && spec.timeoutMs > 0)) throw err("invalid", "timeoutMs must be a positive integer")
        if (spec.pty !== undefined) terminalSize(spec.pty)
        const body: Protocol.ExecRequest = {
          command: spec.command,
          // A sandbox on an image works in the image's WorkingDir unless told otherwise.
          cwd: spec.cwd ?? state.spec.image?.workingDir,
          env: { ...state.spec.env, ...spec.env },
          timeoutMs: spec.timeoutMs,
          maxOutputBytes: spec.maxOutputBytes,
          tag: spec.tag,
          stdin: spec.stdin,
          pty: spec.pty,
          cgroup: state.mechanism === "cgroup",
          // Where there is no cgroup, each command gets rlimits instead.
          rlimits: state.mechanism === "rlimit" ? { nproc: PIDS_LIMIT, asKb: state.spec.memoryMb * 1024 } : undefined
        }
        return Wire.execInfo(await agent(state, "/exec", cut, { method: "POST", body: JSON.stringify(body), contentType: "application/json" }))
      }),
    getExec: (id, execId) => run(async (cut): Promise<ExecInfo> => Wire.execInfo(await agent(requireRunning(id), `/exec/${encodeURIComponent(execId)}`, cut))),
    execEvents: (id, execId, fromSeq, wait) =>
      run(async (cut): Promise<ReadonlyArray<ExecEvent>> => {
        nonNegativeInt("fromSeq", fromSeq)
        const waitMs = Math.min(60_000, Math.max(0, Math.floor(wait ?? 0)))
        const answer = await agent(requireRunning(id), Protocol.withQuery(`/exec/${encodeURIComponent(execId)}/events`, Protocol.EventsQuery, { from: fromSeq, wait: waitMs }), cut, {
          timeoutMs: waitMs + callTimeoutMs,
          maxBytes: Wire.MAX_EVENTS_ANSWER
        })
        return Wire.execEvents(answer, fromSeq)
      }),
    kill: (id, execId, signal) =>
      run(async (cut) =>
        void Wire.execInfo(await agent(requireRunning(id), Protocol.withQuery(`/exec/${encodeURIComponent(execId)}/kill`, Protocol.KillQuery, { signal: signal ?? "SIGTERM" }), cut, { method: "POST" }))),
    sendInput: (id, execId, data, close) =>
      run(async (cut) =>
        Wire.acknowledged(
          await agent(requireRunning(id), Protocol.withQuery(`/exec/${encodeURIComponent(execId)}/stdin`, Protocol.StdinQuery, { close: close === true }), cut, { method: "POST", body: data.slice(), timeoutMs: TRANSFER_TIMEOUT_MS })
        )),
    resize: (id, execId, size) =>
      run(async (cut) => {
        const { cols, rows } = terminalSize(size)
        Wire.acknowledged(await agent(requireRunning(id), Protocol.withQuery(`/exec/${encodeURIComponent(execId)}/resize`, Protocol.ResizeQuery, { cols, rows }), cut, { method: "POST" }))
      }),
    readFile: (id, p, offset, limit) =>
      run(async (cut) => {
        const route = Protocol.withQuery("/files", Protocol.ReadQuery, { path: absolutePath(p), offset: nonNegativeInt("offset", offset), limit: nonNegativeInt("limit", limit) })
        const answer = await agent(requireRunning(id), route, cut, { timeoutMs: TRANSFER_TIMEOUT_MS, maxBytes: limit + Wire.MAX_READ_SLACK })
        return { ...Wire.readResult(answer, limit), offset }
      }),
    readFileStream: (id, p, offset, limit) =>
      run(async (cut) => {
        const route = Protocol.withQuery("/files", Protocol.ReadQuery, { path: absolutePath(p), offset: nonNegativeInt("offset", offset), limit: nonNegativeInt("limit", limit) })
        const state = requireRunning(id)
        if (options.isClosed()) throw err("unavailable", "the runtime is shut down")
        let size = 0
        // The file's size comes in the answer's head; the body must then be exactly what is left of it, up to the limit.
        const lengthOf = (headers: Headers) => {
          size = Wire.readSize(headers)
          return Math.max(0, Math.min(limit, size - offset))
        }
        const answer = await streamAgent(state, route, { timeoutMs: STREAM_TIMEOUT_MS, headTimeoutMs: callTimeoutMs, idleMs: callTimeoutMs, maxBytes: Wire.MAX_JSON_ANSWER, lengthOf }, cutBy(options, cut))
        if (answer._tag === "Refused") throw Wire.answerError(answer.answer)
        return { size, length: lengthOf(answer.headers), stream: answer.body }
      }),
    writeFile: (id, p, data, options) =>
      run(async (cut) =>
        Wire.writeResult(
          await agent(requireRunning(id), Protocol.withQuery("/files", Protocol.WriteQuery, { path: absolutePath(p), mode: options.mode, parents: options.createParents }), cut, {
            method: "PUT",
            body: data.slice(),
            timeoutMs: TRANSFER_TIMEOUT_MS
          }),
          data.length
        )),
    writeFileStream: (id, p, body, options) =>
      run(async (cut) => {
        const limit = nonNegativeInt("maxBytes", options.maxBytes)
        const state = requireRunning(id)
        // A body stream can be sent once: the agent's socket is adopted (and known to answer) first.
        Wire.healthy(await agent(state, "/health", cut))
        return Wire.writeResult(
          await agent(state, Protocol.withQuery("/files", Protocol.WriteQuery, { path: absolutePath(p), mode: options.mode, parents: options.createParents, limit }), cut, {
            method: "PUT",
            body,
            timeoutMs: STREAM_TIMEOUT_MS
          }),
          limit
        )
      }),
    statFile: (id, p) =>
      run(async (cut) => Option.fromNullable(Wire.statResult(await agent(requireRunning(id), Protocol.withQuery("/stat", Protocol.StatQuery, { path: absolutePath(p) }), cut)))),
    listFiles: (id, p, options) =>
      run(async (cut) => {
        const max = nonNegativeInt("maxEntries", options.maxEntries)
        const answer = await agent(requireRunning(id), Protocol.withQuery("/list", Protocol.ListQuery, { path: absolutePath(p), recursive: options.recursive, max }), cut, {
          timeoutMs: TRANSFER_TIMEOUT_MS,
          maxBytes: Wire.maxListAnswer(max)
        })
        return Wire.listResult(answer, max)
      }),
    deleteFile: (id, p, options) =>
      run(async (cut) =>
        Wire.deleteResult(
          await agent(requireRunning(id), Protocol.withQuery("/files", Protocol.DeleteQuery, { path: absolutePath(p), recursive: options.recursive }), cut, { method: "DELETE", timeoutMs: TRANSFER_TIMEOUT_MS })
        )),
    makeDir: (id, p, options) =>
      run(async (cut) => Wire.acknowledged(await agent(requireRunning(id), Protocol.withQuery("/mkdir", Protocol.MkdirQuery, { path: absolutePath(p), parents: options.parents }), cut, { method: "POST" }))),
    connectPort: (id, port) =>
      run(async (cut): Promise<net.Socket> => {
        if (!(Number.isInteger(port) && port >= 1 && port <= 65535)) throw err("invalid", "port must be 1-65535")
        return connectBridge(requireRunning(id), port, 5000, cutBy(options, cut))
      }),
  }
}
