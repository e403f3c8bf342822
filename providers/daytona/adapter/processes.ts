/**
 * Daytona processes: one session per process (`metal-<process id>`) with one async command in it; events are
 * the pieces of the daemon's multiplexed log, in order (a pure function of the log, so every call and every
 * restart numbers them the same); cancel deletes the session (the daemon signals the whole group).
 * Daytona's sessions have no timeout: the gateway cancels a process at its deadline, also after a restart.
 * A process started with `pty` is a terminal instead (terminals.ts), told apart by its execution id.
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import type { ProviderExecEvent, ProviderSandbox, SandboxProvider } from "../../core/Provider.ts"
import { unsupported } from "../../core/Provider.ts"
import { cwdMissing } from "../../core/cwd.ts"
import { makeTerminals } from "./terminals.ts"
import {
  type DaytonaContext,
  decodeExecutionId,
  decodeTerminalId,
  demuxLog,
  encodeExecutionId,
  eventsFromPieces,
  type ExecutionRef,
  NAME,
  sessionName,
  shellQuote,
  WireCommand,
  WireExec,
  WireFileInfo,
  WireLogs,
  WireSession
} from "./wire.ts"

const commandPath = (ref: ExecutionRef) => `/process/session/${encodeURIComponent(ref.sessionId)}/command/${encodeURIComponent(ref.commandId)}`

export const makeProcesses = (ctx: DaytonaContext) => {
  const { decode, fail, toolbox } = ctx
  const terminals = makeTerminals(ctx)
  const isTerminal = (executionId: string) => decodeTerminalId(executionId) !== undefined
  /** Last log read per running execution, to bound how often a busy poller downloads the log. */
  const logCache = new Map<string, { readonly at: number; readonly events: ReadonlyArray<ProviderExecEvent> }>()

  const readLog = (sandbox: ProviderSandbox, ref: ExecutionRef, exit: null | { readonly exitCode: number }) =>
    Effect.gen(function*() {
      const response = yield* toolbox(sandbox, "GET", `${commandPath(ref)}/logs`, "command logs", HttpClientRequest.setHeader("x-daytona-split-output", "true"))
      if ((response.headers["content-type"] ?? "").includes("application/json")) {
        // Separate stdout/stderr without their order: usable once the command is over.
        if (exit === null) return eventsFromPieces([], { maxOutputBytes: ref.maxOutputBytes, exit })
        const logs = yield* decode(WireLogs, "command logs")(response)
        const pieces = [
          { type: "stdout" as const, data: new TextEncoder().encode(logs.stdout) },
          { type: "stderr" as const, data: new TextEncoder().encode(logs.stderr) }
        ]
        return eventsFromPieces(pieces, { maxOutputBytes: ref.maxOutputBytes, exit })
      }
      const bytes = new Uint8Array(yield* Effect.mapError(response.arrayBuffer, (e) => fail("unavailable", `daytona command logs could not be read: ${e.message}`)))
      return eventsFromPieces(demuxLog(bytes), { maxOutputBytes: ref.maxOutputBytes, exit })
    })

  /** The command's status; null when its session is gone (cancelled, or ended with its sandbox's stop). */
  const commandOrNull = (sandbox: ProviderSandbox, ref: ExecutionRef) =>
    toolbox(sandbox, "GET", commandPath(ref), "command status").pipe(
      Effect.flatMap(decode(WireCommand, "command status")),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
    )

  const refOf = (executionId: string) => {
    const ref = decodeExecutionId(executionId)
    return ref === undefined ? Effect.fail(fail("invalid_request", `${executionId} is not a Daytona execution id`)) : Effect.succeed(ref)
  }

  const execEvents: SandboxProvider["execEvents"] = (sandbox, executionId, fromSeq) =>
    isTerminal(executionId) ? terminals.execEvents(sandbox, executionId, fromSeq) : Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const command = yield* commandOrNull(sandbox, ref)
      if (command === null) {
        // The session is gone: cancelled (or ended with its sandbox's stop). Its output went with it.
        logCache.delete(executionId)
        return [{ seq: fromSeq, type: "exit", exitCode: null, signal: "SIGTERM", cancelled: true, timedOut: false, outputTruncated: false }] satisfies Array<ProviderExecEvent>
      }
      const exitCode = command.exitCode ?? null
      let events: ReadonlyArray<ProviderExecEvent>
      if (exitCode === null) {
        const cached = logCache.get(executionId)
        if (cached !== undefined && Date.now() - cached.at < ctx.logPollMs) {
          events = cached.events
        } else {
          events = yield* readLog(sandbox, ref, null)
          logCache.set(executionId, { at: Date.now(), events })
          if (logCache.size > 512) logCache.delete(logCache.keys().next().value!)
        }
      } else {
        logCache.delete(executionId)
        events = yield* readLog(sandbox, ref, { exitCode })
      }
      return events.slice(fromSeq)
    })

  /** The shell line the session runs: env, cwd (made first remotely, where it may not exist yet), then the argv. */
  const commandLine = (input: Parameters<SandboxProvider["exec"]>[1]) => {
    const env = Object.entries(input.environment ?? {}).map(([k, v]) => shellQuote(`${k}=${v}`))
    const argv = input.command.map(shellQuote).join(" ")
    const run = `${env.length > 0 ? `env -- ${env.join(" ")} ` : ""}${argv}`
    const cwd = input.cwd ?? ctx.workspaceDir
    // A subshell: the session's own shell must survive (`exec` there would replace it).
    return [
      `(`,
      cwd === ctx.workspaceDir && !ctx.emulated ? `mkdir -p -- ${shellQuote(cwd)} 2>/dev/null;` : "",
      `cd -- ${shellQuote(cwd)} || exit 1;`,
      `exec ${run}`,
      `)`
    ].filter((s) => s !== "").join(" ")
  }

  const exec: SandboxProvider["exec"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process === null) return yield* unsupported(NAME, "processes")
      if (input.pty !== undefined) {
        if (ctx.capabilities.process.terminal !== true) return yield* unsupported(NAME, "terminals")
        return yield* terminals.exec(sandbox, { ...input, pty: input.pty })
      }
      // A working directory that is not there fails the start (core/cwd.ts): the session's `cd` would look like the
      // command's own failure, its output already streamed.
      if (input.cwd !== undefined && input.cwd !== ctx.workspaceDir) {
        const dir = yield* toolbox(sandbox, "GET", "/files/info", "file info", HttpClientRequest.setUrlParam("path", input.cwd)).pipe(
          Effect.flatMap(decode(WireFileInfo, "file info")),
          Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
        )
        if (dir === null || !dir.isDir) return yield* cwdMissing(NAME, input.cwd)
      }
      const sessionId = sessionName(input.processId)
      const sessionPath = `/process/session/${encodeURIComponent(sessionId)}`
      const maxOutputBytes = Math.min(input.maxOutputBytes, ctx.capabilities.process.maxOutputBytes)
      const existed = yield* toolbox(sandbox, "POST", "/process/session", "create session", HttpClientRequest.bodyUnsafeJson({ sessionId })).pipe(
        Effect.as(false),
        // It exists: a retry of this exec. Its command (if it got that far) is the one to follow.
        Effect.catchIf((e) => e.status === 409, () => Effect.succeed(true))
      )
      if (existed) {
        const session = yield* toolbox(sandbox, "GET", sessionPath, "get session").pipe(Effect.flatMap(decode(WireSession, "get session")))
        const started = session.commands?.[0]
        if (started !== undefined) return { executionId: encodeExecutionId({ sessionId, commandId: started.id, maxOutputBytes }) }
      }
      const { cmdId } = yield* toolbox(sandbox, "POST", `${sessionPath}/exec`, "exec", HttpClientRequest.bodyUnsafeJson({ command: commandLine(input), runAsync: true })).pipe(
        Effect.flatMap(decode(WireExec, "exec"))
      )
      return { executionId: encodeExecutionId({ sessionId, commandId: cmdId, maxOutputBytes }) }
    })

  const cancelExec: SandboxProvider["cancelExec"] = (sandbox, executionId) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process?.cancel !== true) return yield* unsupported(NAME, "cancelling processes")
      if (isTerminal(executionId)) return yield* terminals.cancelExec(sandbox, executionId)
      const ref = yield* refOf(executionId)
      const command = yield* commandOrNull(sandbox, ref)
      // Already over (or already cancelled): keep its real exit.
      if (command === null || (command.exitCode ?? null) !== null) return { cancelled: false }
      return yield* toolbox(sandbox, "DELETE", `/process/session/${encodeURIComponent(ref.sessionId)}`, "delete session").pipe(
        Effect.as({ cancelled: true }),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed({ cancelled: false }))
      )
    })

  /** Only a terminal takes input: Daytona's session commands read none. */
  const sendInput: NonNullable<SandboxProvider["sendInput"]> = (sandbox, executionId, data, eof) =>
    isTerminal(executionId) ? terminals.sendInput(sandbox, executionId, data, eof) : Effect.fail(unsupported(NAME, "standard input of a process without a terminal"))

  return {
    exec,
    execEvents,
    cancelExec,
    ...(ctx.capabilities.process?.terminal === true ? { sendInput, resizeTerminal: terminals.resizeTerminal } : {}),
    forgetTerminals: terminals.forget
  }
}
