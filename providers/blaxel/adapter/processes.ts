/**
 * Blaxel processes through the sandbox runtime: `POST /process {name: "metal-<process id>", command,
 * waitForCompletion: false}`, `GET /process/{name}` for the status, `GET /process/{name}/logs` for the whole
 * output once it is over, `DELETE /process/{name}/kill` to cancel. Output is buffered (stdout, then stderr, after
 * the exit), as Blaxel keeps the two streams apart without their order. The process name makes exec idempotent
 * and the execution id carries it, so `execEvents` works after a gateway restart.
 *
 * Standard input (`stdin: true`, as Blaxel's SDK starts a process whose input it writes): the process starts with
 * `stdin: true`; `sendInput` posts the raw bytes to `POST /process/{name}/stdin` (in pieces of at most 1 MiB, in
 * order) and end-of-file is `DELETE /process/{name}/stdin`.
 *
 * Timeouts: Blaxel applies a process `timeout` only to keep-alive processes (which also keep the sandbox from
 * standby and cost more), so none is sent; the gateway cancels a process at its deadline.
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect, Fiber, Stream } from "effect"
import type { ExecEvent } from "../../../src/runtime/LocalRuntime.ts"
import type { SandboxProvider } from "../../../src/providers/Provider.ts"
import { bufferedEvents, unsupported, waitAsPoll } from "../../../src/providers/Provider.ts"
import { makeFollows, type OpenFollow } from "../../core/follow.ts"
import {
  type BlaxelContext,
  executionIds,
  type ExecutionRef,
  isUserImage,
  NAME,
  processName,
  shellQuote,
  WireLogs,
  WireProcess
} from "./wire.ts"


/** The most one stdin write carries (the runtime takes a write's body whole). */
const STDIN_PIECE_BYTES = 1024 * 1024
/** The least a log stream followed for news may carry before it is left (its keep-alives count too). */
const MIN_FOLLOW_BYTES = 1024 * 1024

export const makeProcesses = (ctx: BlaxelContext) => {
  const { decode, fail, runtime } = ctx
  const processPath = (ref: ExecutionRef) => `/process/${encodeURIComponent(ref.name)}`

  const getProcess = (sandbox: Parameters<SandboxProvider["exec"]>[0], name: string) =>
    runtime(sandbox, "GET", `/process/${encodeURIComponent(name)}`, "get process").pipe(Effect.flatMap(decode(WireProcess, "get process")))

  const refOf = executionIds.decode
  /** The log streams followed for news (`execNews`). */
  const follows = makeFollows()

  /**
   * The shell line: the argv, without a directory into /workspace (made first) — but on an image of the user's
   * own, where it starts: the image's WorkingDir.
   */
  const commandLine = (sandbox: Parameters<SandboxProvider["exec"]>[0], input: Parameters<SandboxProvider["exec"]>[1]) => {
    const argv = input.command.map(shellQuote).join(" ")
    return input.cwd === undefined && !isUserImage(sandbox) ? `mkdir -p /workspace && cd /workspace && exec ${argv}` : `exec ${argv}`
  }

  const exec: SandboxProvider["exec"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process === null) return yield* unsupported(NAME, "processes")
      if (input.command.length === 0) return yield* fail("invalid_request", "the command is empty")
      const name = processName(input.processId)
      const maxOutputBytes = Math.min(input.maxOutputBytes, ctx.capabilities.process.maxOutputBytes)
      const executionId = executionIds.encode({ name, maxOutputBytes })
      // A retry of this exec finds its process by name instead of starting it twice (a first attempt has none).
      const existing = input.firstAttempt === true
        ? null
        : yield* getProcess(sandbox, name).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))
      if (existing !== null) return { executionId }
      const body = {
        name,
        command: commandLine(sandbox, input),
        ...(input.cwd === undefined ? {} : { workingDir: input.cwd }),
        ...(input.environment === undefined || Object.keys(input.environment).length === 0 ? {} : { env: input.environment }),
        ...(input.stdin === true ? { stdin: true } : {}),
        waitForCompletion: false
      }
      yield* runtime(sandbox, "POST", "/process", "start process", HttpClientRequest.bodyUnsafeJson(body)).pipe(
        Effect.flatMap(decode(WireProcess, "start process")),
        // "already exists and is running": a concurrent retry started it.
        Effect.catchIf((e) => e.status === 400 && /already exists/.test(e.message), () => getProcess(sandbox, name))
      )
      return { executionId }
    })

  const execEvents: SandboxProvider["execEvents"] = (sandbox, executionId, fromSeq) =>
    Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const process = yield* getProcess(sandbox, ref.name)
      if (process.status === "running") return []
      follows.forget(executionId)
      const logs = yield* runtime(sandbox, "GET", `${processPath(ref)}/logs`, "process logs").pipe(Effect.flatMap(decode(WireLogs, "process logs")))
      const cancelled = process.status === "killed" || process.status === "stopped"
      const exit = cancelled
        ? { exitCode: null, signal: process.status === "killed" ? "SIGKILL" : "SIGTERM", cancelled: true }
        : { exitCode: process.exitCode ?? (process.status === "completed" ? 0 : 1), signal: null, cancelled: false }
      return bufferedEvents(logs, exit, ref.maxOutputBytes).slice(fromSeq)
    })

  /**
   * Blaxel gives a process's output once it is over, so the news is its end: the process's log stream
   * (`…/logs/stream`, as the SDK's `streamLogs` reads it) ends with it. Its lines are counted, not kept, and
   * bounded (providers/core/follow.ts); they are no news, as `execEvents` reads nothing before the end.
   */
  const logStream = (sandbox: Parameters<SandboxProvider["exec"]>[0], ref: ExecutionRef): OpenFollow => (sink) => {
    const reading = Effect.runFork(
      runtime(sandbox, "GET", `${processPath(ref)}/logs/stream`, "process log stream", undefined, { mutating: false }).pipe(
        Effect.flatMap((response) => Stream.runForEach(response.stream, (chunk) => Effect.sync(() => sink.data(chunk.length, false)))),
        Effect.ignore,
        Effect.ensuring(Effect.sync(() => sink.closed()))
      )
    )
    return { close: () => void Effect.runFork(Fiber.interrupt(reading)) }
  }
  const execNews: NonNullable<SandboxProvider["execNews"]> = (sandbox, executionId, maxMs) =>
    refOf(executionId).pipe(
      Effect.matchEffect({
        onFailure: () => waitAsPoll(maxMs),
        onSuccess: (ref) => follows.execNews(executionId, Effect.sync(() => logStream(sandbox, ref)), Math.max(MIN_FOLLOW_BYTES, 4 * ref.maxOutputBytes + 64), maxMs)
      })
    )

  const cancelExec: SandboxProvider["cancelExec"] = (sandbox, executionId) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process?.cancel !== true) return yield* unsupported(NAME, "cancelling processes")
      const ref = yield* refOf(executionId)
      const process = yield* getProcess(sandbox, ref.name).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))
      // Already over: its real exit is kept.
      if (process === null || process.status !== "running") return { cancelled: false }
      return yield* runtime(sandbox, "DELETE", `${processPath(ref)}/kill`, "kill process").pipe(
        Effect.as({ cancelled: true }),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed({ cancelled: false }))
      )
    })

  const sendInput: NonNullable<SandboxProvider["sendInput"]> = (sandbox, executionId, data, eof) =>
    Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      for (let at = 0; at < data.length; at += STDIN_PIECE_BYTES) {
        const piece = data.subarray(at, Math.min(data.length, at + STDIN_PIECE_BYTES))
        yield* runtime(sandbox, "POST", `${processPath(ref)}/stdin`, "write stdin", HttpClientRequest.bodyUint8Array(piece, "application/octet-stream"))
      }
      if (eof) yield* runtime(sandbox, "DELETE", `${processPath(ref)}/stdin`, "close stdin")
    })

  return { exec, execEvents, execNews, cancelExec, sendInput }
}
