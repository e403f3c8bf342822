/**
 * The Runloop emulator's executions, as Runloop's SDK (`@runloop/api-client`) drives them:
 * - `POST /v1/devboxes/{id}/execute {command, command_id, optimistic_timeout}` (what `devbox.cmd.exec` sends): runs
 *   the shell line from the user's home (`/workspace` here) and holds the answer until it completes or
 *   `optimistic_timeout` (≤ 25 s) passes; the same `command_id` again answers the same execution, never a second run.
 * - `POST …/execute_async {command}`: answered at once, `running`.
 * - `POST …/execute_sync {command}` (deprecated by Runloop, still in its SDK): held until the command completes.
 * - `GET …/executions/{execution_id}` and `POST …/executions/{execution_id}/wait_for_status {statuses}` (held until
 *   one is reached, else 408 marked `x-should-retry` when the window passes, as the SDK's `awaitCompleted` expects).
 * - `POST …/executions/{execution_id}/kill` (SIGKILL, to the process group when asked; one already over is answered
 *   as it is).
 * - `GET …/executions/{execution_id}/stream_stdout_updates` and `…/stream_stderr_updates?offset=N`: server-sent
 *   events `{output, offset}` from byte N of that stream (offset: where the next chunk starts, so a reconnect
 *   resumes there), live while the command runs, ended by its exit; comment lines keep an idle stream open.
 *
 * Completed executions carry the exit status as a shell reports it (128 + the signal's number for a killed
 * command) and, as Runloop answers, the last `last_n` lines (default 100) of each output with `*_truncated` when
 * lines were left out (the SDK then reads the whole output from the streams). At suspend, running executions are
 * killed and how every execution ended is kept, so a suspended devbox's executions are still answered.
 *
 * Refused: persistent shells (`shell_name`) and stdin (`attach_stdin`, `send_std_in`): not emulated — Runloop's own
 * SDK leaves stdin out (its `Execution.sendStdIn` is disabled: the execution is killed when input is sent).
 * What is relayed from a sandbox is bounded: the runtime keeps at most 10 MiB of a command's output.
 */
import { Schema } from "effect"
import * as os from "node:os"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import { type Books, type Devbox, type Execution, newId } from "./books.ts"
import { HttpFailure, json, longPollTimeout, readBody } from "./http.ts"

/** What one execution keeps of its output. */
const MAX_OUTPUT_BYTES = 10 * 1024 * 1024
/** A status request waits this long for a running command to end, so a quick exit is seen at once. */
const STATUS_WAIT_MS = 50
/** Lines of each output an execution's answer carries unless `last_n` says otherwise (Runloop's default). */
const DEFAULT_LAST_N = 100
/** The longest `execute` holds its answer (Runloop: 25 s) and an execution's `wait_for_status` holds a request. */
const EXECUTE_HOLD_MS = 25_000
/** A stream with nothing to send says so this often (a comment line), so that idle connections stay open. */
const STREAM_KEEPALIVE_MS = 15_000

const ExecuteAsync = Schema.Struct({
  command: Schema.String.pipe(Schema.minLength(1)),
  shell_name: Schema.optional(Schema.NullOr(Schema.String)),
  attach_stdin: Schema.optional(Schema.NullOr(Schema.Boolean))
})
const Execute = Schema.Struct({
  command: Schema.String.pipe(Schema.minLength(1)),
  command_id: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128)))),
  optimistic_timeout: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.between(0, 25)))),
  shell_name: Schema.optional(Schema.NullOr(Schema.String))
})
const WaitForExecution = Schema.Struct({
  statuses: Schema.Array(Schema.Literal("queued", "running", "completed")).pipe(Schema.minItems(1)),
  timeout_seconds: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.between(1, 25))))
})
const Kill = Schema.Struct({ kill_process_group: Schema.optional(Schema.NullOr(Schema.Boolean)) })

export interface ExecutionsOptions {
  /** How long `execute` and an execution's `wait_for_status` hold a request at most (Runloop: 25 s). */
  readonly longPollMs: number
}

/** How a completed execution ended, with its whole output. */
interface Ended {
  readonly exitStatus: number | null
  readonly stdout: string
  readonly stderr: string
  readonly truncated: boolean
}

/** The last `n` lines of `text` (a last line without its newline counts), and whether any were left out. */
export const lastLines = (text: string, n: number): { readonly text: string; readonly cut: boolean } => {
  if (text === "") return { text, cut: false }
  const body = text.endsWith("\n") ? text.slice(0, -1) : text
  const lines = body.split("\n")
  if (lines.length <= n) return { text, cut: false }
  const kept = n === 0 ? "" : lines.slice(-n).join("\n") + (text.endsWith("\n") ? "\n" : "")
  return { text: kept, cut: true }
}

/** `last_n` of a query: a count of lines (Runloop's default when absent). */
const lastNOf = (url: URL) => {
  const raw = url.searchParams.get("last_n")
  if (raw === null || raw === "") return DEFAULT_LAST_N
  const n = Number(raw)
  if (!Number.isSafeInteger(n) || n < 0) throw new HttpFailure(400, "last_n must be a non-negative integer")
  return n
}

export const makeExecutions = (books: Books, runtime: LocalRuntimeShape, options: ExecutionsOptions) => {
  const { executions } = books

  const executionOr404 = (d: Devbox, executionId: string) => {
    const e = executions.get(executionId)
    if (e === undefined || e.devboxId !== d.id) throw new HttpFailure(404, `Execution ${executionId} not found`)
    return e
  }

  const requireRunning = (d: Devbox) => {
    if (d.status !== "running") throw new HttpFailure(400, `Devbox ${d.id} is ${d.status}, not running`)
  }

  /** Waits up to `waitMs` for the command to end (the runtime wakes on its events; the exit is one of them); true when it has. */
  const settle = async (d: Devbox, e: Execution, waitMs: number, signal?: AbortSignal) => {
    if (e.final != null) return true
    let info = await run(runtime.getExec(d.id, e.execId))
    const deadline = Date.now() + waitMs
    for (let seen = 0; info.state === "running" && Date.now() < deadline && signal?.aborted !== true;) {
      const events = await run(runtime.execEvents(d.id, e.execId, seen, Math.min(deadline - Date.now(), 5000)))
      seen += events.length
      if (events.at(-1)?.type === "exit") info = await run(runtime.getExec(d.id, e.execId))
    }
    return info.state !== "running"
  }

  /** How an execution that is over ended, with its whole output; null while it runs. */
  const endedOf = async (d: Devbox, e: Execution): Promise<Ended | null> => {
    if (e.final != null) return e.final
    const info = await run(runtime.getExec(d.id, e.execId))
    if (info.state === "running") return null
    const events = await run(runtime.execEvents(d.id, e.execId, 0))
    const text = (type: "stdout" | "stderr") => Buffer.concat(events.flatMap((ev) => (ev.type === type ? [ev.data] : []))).toString("utf8")
    const exit = events.findLast((ev) => ev.type === "exit")
    const signal = exit?.type === "exit" ? exit.signal : null
    const signo = signal === null ? undefined : os.constants.signals[signal as keyof typeof os.constants.signals]
    const exitStatus = info.exitCode ?? (signo === undefined ? (e.killed ? 137 : null) : 128 + signo)
    return { exitStatus, stdout: text("stdout"), stderr: text("stderr"), truncated: exit?.type === "exit" && exit.outputTruncated }
  }

  /** The execution as Runloop answers it (`DevboxAsyncExecutionDetailView`), each output its last `lastN` lines. */
  const describe = async (d: Devbox, e: Execution, lastN = DEFAULT_LAST_N) => {
    const base = { devbox_id: d.id, execution_id: e.executionId, shell_name: null }
    const ended = await endedOf(d, e)
    if (ended === null) return { ...base, status: "running", exit_status: null, stdout: null, stderr: null, stdout_truncated: null, stderr_truncated: null }
    const stdout = lastLines(ended.stdout, lastN)
    const stderr = lastLines(ended.stderr, lastN)
    return {
      ...base,
      status: "completed",
      exit_status: ended.exitStatus,
      stdout: stdout.text,
      stderr: stderr.text,
      stdout_truncated: stdout.cut || ended.truncated,
      stderr_truncated: stderr.cut || ended.truncated
    }
  }

  const start = async (d: Devbox, command: string, commandId: string | null) => {
    requireRunning(d)
    const started = await run(runtime.exec(d.id, {
      command: ["sh", "-c", command],
      cwd: "/workspace",
      env: d.environment,
      maxOutputBytes: MAX_OUTPUT_BYTES,
      stdin: false,
      // The runtime runs a tagged command once: a repeated command_id is the same process even in a race.
      ...(commandId === null ? {} : { tag: `runloop-command:${commandId}` })
    }))
    const existing = commandId === null ? undefined : [...executions.entries()].find(([, e]) => e.devboxId === d.id && e.execId === started.execId)?.[1]
    if (existing !== undefined) return existing
    const e: Execution = { devboxId: d.id, executionId: newId("exe"), execId: started.execId, command, commandId, killed: false, createdAt: new Date().toISOString() }
    executions.set(e.executionId, e)
    books.prune()
    return e
  }

  const executeAsync = async (d: Devbox, request: Request) => {
    const body = await readBody(request, ExecuteAsync)
    if (body.shell_name != null) throw new HttpFailure(400, "persistent shells are not emulated")
    if (body.attach_stdin === true) throw new HttpFailure(400, "stdin is not emulated")
    return json(await describe(d, await start(d, body.command, null)))
  }

  const execute = async (d: Devbox, request: Request, url: URL) => {
    const lastN = lastNOf(url)
    const body = await readBody(request, Execute)
    if (body.shell_name != null) throw new HttpFailure(400, "persistent shells are not emulated")
    const commandId = body.command_id ?? null
    const known = commandId === null ? undefined : [...executions.entries()].find(([, e]) => e.devboxId === d.id && e.commandId === commandId)?.[1]
    const e = known ?? (await start(d, body.command, commandId))
    await settle(d, e, Math.min(options.longPollMs, EXECUTE_HOLD_MS, (body.optimistic_timeout ?? 25) * 1000), request.signal)
    return json(await describe(d, e, lastN))
  }

  /** Deprecated upstream, still in the SDK: held until the command completes (its whole output, `DevboxExecutionDetailView`). */
  const executeSync = async (d: Devbox, request: Request) => {
    const body = await readBody(request, ExecuteAsync)
    if (body.shell_name != null) throw new HttpFailure(400, "persistent shells are not emulated")
    if (body.attach_stdin === true) throw new HttpFailure(400, "attach_stdin is not valid for execute_sync")
    const e = await start(d, body.command, null)
    while (!(await settle(d, e, 5000, request.signal)) && !request.signal.aborted);
    const ended = await endedOf(d, e)
    if (ended === null) throw new HttpFailure(408, "the command did not complete")
    return json({ devbox_id: d.id, execution_id: e.executionId, exit_status: ended.exitStatus, stdout: ended.stdout, stderr: ended.stderr, shell_name: null })
  }

  const waitForStatus = async (d: Devbox, executionId: string, request: Request, url: URL) => {
    const e = executionOr404(d, executionId)
    const lastN = lastNOf(url)
    const body = await readBody(request, WaitForExecution)
    // An execution runs from its start (never queued here): `running` or `queued` is reached at once.
    if (body.statuses.includes("running") || body.statuses.includes("queued")) return json(await describe(d, e, lastN))
    const hold = Math.min(options.longPollMs, EXECUTE_HOLD_MS, (body.timeout_seconds ?? 25) * 1000)
    if (!(await settle(d, e, hold, request.signal))) return longPollTimeout(`execution ${executionId} did not reach ${body.statuses.join(", ")} in time`)
    return json(await describe(d, e, lastN))
  }

  const kill = async (d: Devbox, executionId: string, request: Request) => {
    const e = executionOr404(d, executionId)
    await readBody(request, Kill)
    if (e.final == null) {
      const info = await run(runtime.getExec(d.id, e.execId))
      if (info.state === "running") {
        e.killed = true
        executions.set(e.executionId, e)
        // The runtime's kill ends the command's whole process group.
        await run(runtime.kill(d.id, e.execId, "SIGKILL"))
        await settle(d, e, 1000)
      }
    }
    return json(await describe(d, e))
  }

  /** One output of an execution as server-sent events from byte `offset`, ended by the command's exit. */
  const streamUpdates = (d: Devbox, executionId: string, which: "stdout" | "stderr", request: Request, url: URL) => {
    const e = executionOr404(d, executionId)
    const raw = url.searchParams.get("offset")
    const from = raw === null || raw === "" ? 0 : Number(raw)
    if (!Number.isSafeInteger(from) || from < 0) throw new HttpFailure(400, "offset must be a non-negative integer")
    const encoder = new TextEncoder()
    const decoder = new TextDecoder()
    /** Bytes of this output seen so far, and the runtime's events read so far. */
    let position = 0
    let seq = 0
    let done = false
    const chunk = (bytes: Uint8Array, end = false) => {
      const start = position
      position += bytes.length
      const unsent = bytes.subarray(Math.max(0, Math.min(bytes.length, from - start)))
      const output = decoder.decode(unsent, { stream: !end })
      return output === "" ? undefined : encoder.encode(`data: ${JSON.stringify({ output, offset: Math.max(from, position) })}\n\n`)
    }
    const stream = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        try {
          if (done || request.signal.aborted) return controller.close()
          if (e.final != null) {
            done = true
            const piece = chunk(Buffer.from(e.final[which]), true)
            if (piece !== undefined) controller.enqueue(piece)
            return controller.close()
          }
          for (let sent = false; !sent;) {
            const events = await run(runtime.execEvents(d.id, e.execId, seq, STREAM_KEEPALIVE_MS))
            if (request.signal.aborted) return controller.close()
            if (events.length === 0) {
              controller.enqueue(encoder.encode(": keep-alive\n\n"))
              return
            }
            seq = events.at(-1)!.seq + 1
            for (const event of events) {
              if (event.type === "exit") {
                done = true
                const rest = decoder.decode()
                if (rest !== "") controller.enqueue(encoder.encode(`data: ${JSON.stringify({ output: rest, offset: Math.max(from, position) })}\n\n`))
                return controller.close()
              }
              if (event.type !== which) continue
              const piece = chunk(event.data)
              if (piece !== undefined) {
                controller.enqueue(piece)
                sent = true
              }
            }
          }
        } catch {
          // The devbox went (shut down) or its jail stopped answering: the stream ends.
          done = true
          controller.close()
        }
      }
    })
    return new Response(stream, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } })
  }

  /**
   * Every execution still running in the devbox ends (Runloop's suspend keeps no processes), and how each one
   * ended is kept: the frozen jail will not say.
   */
  const endAll = async (d: Devbox) => {
    for (const [, e] of executions.entries()) {
      if (e.devboxId !== d.id || e.final != null) continue
      const info = await run(runtime.getExec(d.id, e.execId)).catch(() => undefined)
      if (info === undefined) continue
      if (info.state === "running") {
        e.killed = true
        await run(runtime.kill(d.id, e.execId, "SIGKILL")).catch(() => undefined)
      }
      await settle(d, e, 2000).catch(() => undefined)
      const ended = await endedOf(d, e).catch(() => null)
      if (ended !== null) e.final = { ...ended }
      executions.set(e.executionId, e)
    }
  }

  return {
    execute,
    executeAsync,
    executeSync,
    get: async (d: Devbox, executionId: string, url: URL) => {
      const e = executionOr404(d, executionId)
      const lastN = lastNOf(url)
      await settle(d, e, STATUS_WAIT_MS)
      return json(await describe(d, e, lastN))
    },
    waitForStatus,
    kill,
    streamUpdates,
    endAll,
    dropDevbox: (d: Devbox) => {
      for (const [key, e] of executions.entries()) if (e.devboxId === d.id) executions.delete(key)
    }
  }
}
