/**
 * Daytona processes: one session per process (`metal-<process id>`) with one async command in it, and behind it an
 * `exit` (so the session's shell ends with the command and leaves no idle shell behind); events are the pieces of
 * the daemon's multiplexed log, in order (a pure function of the log, so every call and every restart numbers them
 * the same); cancel deletes the session (the daemon signals the whole group). Daytona's sessions have no timeout:
 * the gateway cancels a process at its deadline, also after a restart.
 *
 * Standard input: a process without it reads /dev/null. With it, its input comes through the session command's
 * input route (`POST …/command/{c}/input {data}`), which takes text and ends each call with a newline and offers no
 * end-of-file, so the command line puts a small decoder in front of the process: each call is one line of octal
 * escapes (`\101\012`, any byte exactly), written by `printf`; a line `E` is the end of input. The decoder writes to
 * the process through a FIFO and is killed when the process ends (a process need not read all its input).
 *
 * A quiet process is not polled: its log is followed over the daemon's WebSocket for news (logWatch.ts).
 *
 * A process started with `pty` is a terminal instead (terminals.ts), told apart by its execution id.
 */
import { type HttpClientResponse, HttpClientRequest } from "@effect/platform"
import { Effect, Stream } from "effect"
import type { ExecEvent } from "../../../src/runtime/LocalRuntime.ts"
import type { ProviderSandbox, SandboxProvider } from "../../../src/providers/Provider.ts"
import { unsupported, waitAsPoll } from "../../../src/providers/Provider.ts"
import { cwdMissing } from "../../../src/providers/cwd.ts"
import { makeLogWatches } from "./logWatch.ts"
import { makeTerminals } from "./terminals.ts"
import {
  type DaytonaContext,
  demuxLog,
  eventsFromPieces,
  executionIds,
  type ExecutionRef,
  NAME,
  sessionName,
  shellQuote,
  startIn,
  terminalIds,
  WireCommand,
  WireExec,
  WireFileInfo,
  WireLogs,
  WireSession
} from "./wire.ts"


const commandPath = (ref: ExecutionRef) => `/process/session/${encodeURIComponent(ref.sessionId)}/command/${encodeURIComponent(ref.commandId)}`

/** Input bytes per input call (each is four characters on the wire). */
export const INPUT_CHUNK_BYTES = 256 * 1024
/** Bytes as one line of 3-digit octal escapes, for `printf` (every byte escaped: no escape is followed by a digit). */
export const octalLine = (data: Uint8Array) => Array.from(data, (b) => `\\${b.toString(8).padStart(3, "0")}`).join("")
/** The decoder in front of a process that takes input: lines of escapes until a line `E`, written to the process through a FIFO it is killed with. */
const DECODER =
  // (The decoder runs in the background, whose stdin would be /dev/null but for the explicit `<&3`.)
  `d=$(mktemp -d) && mkfifo "$d/in" || exit 1; exec 3<&0; (while IFS= read -r l; do [ "$l" = E ] && exit 0; printf "$l"; done) <&3 > "$d/in" & k=$!; ` +
  `exec 3<&-; "$@" < "$d/in"; s=$?; kill "$k" 2>/dev/null; rm -rf "$d"; exit $s`

/**
 * The first bytes of a log: at most `cap` of them (the stream is left after that). A log of a process's output is
 * at most four bytes a byte of it (a label before every line), so a cap of four times its max output bytes loses
 * nothing of what the events may carry.
 */
const logPrefix = (response: HttpClientResponse.HttpClientResponse, cap: number) =>
  response.stream.pipe(
    Stream.runFoldWhile({ chunks: [] as Array<Uint8Array>, size: 0 }, (acc) => acc.size < cap, (acc, chunk) => {
      acc.chunks.push(chunk)
      acc.size += chunk.length
      return acc
    }),
    Effect.map(({ chunks }) => new Uint8Array(Buffer.concat(chunks)).subarray(0, cap))
  )

export const makeProcesses = (ctx: DaytonaContext) => {
  const { decode, fail, toolbox } = ctx
  const terminals = makeTerminals(ctx)
  const isTerminal = terminalIds.owns
  const watches = makeLogWatches(ctx)
  /** Last log read per running execution, to bound how often a busy poller downloads the log. */
  const logCache = new Map<string, { readonly at: number; readonly events: ReadonlyArray<ExecEvent> }>()

  /** What a log read takes of a log at most (see logPrefix). */
  const logLimit = (ref: ExecutionRef) => 4 * ref.maxOutputBytes + 64

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
      const bytes = yield* Effect.mapError(logPrefix(response, logLimit(ref)), (e) => fail("unavailable", `daytona command logs could not be read: ${e.message}`))
      return eventsFromPieces(demuxLog(bytes), { maxOutputBytes: ref.maxOutputBytes, exit })
    })

  /** The command's status; null when its session is gone (cancelled, or ended with its sandbox's stop). */
  const commandOrNull = (sandbox: ProviderSandbox, ref: ExecutionRef) =>
    toolbox(sandbox, "GET", commandPath(ref), "command status").pipe(
      Effect.flatMap(decode(WireCommand, "command status")),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
    )

  const refOf = executionIds.decode

  const execEvents: SandboxProvider["execEvents"] = (sandbox, executionId, fromSeq) =>
    isTerminal(executionId) ? terminals.execEvents(sandbox, executionId, fromSeq) : Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const command = yield* commandOrNull(sandbox, ref)
      if (command === null) {
        // The session is gone: cancelled (or ended with its sandbox's stop). Its output went with it.
        logCache.delete(executionId)
        watches.forget(executionId)
        return [{ seq: fromSeq, type: "exit", exitCode: null, signal: "SIGTERM", cancelled: true, timedOut: false, outputTruncated: false }] satisfies Array<ExecEvent>
      }
      const exitCode = command.exitCode ?? null
      let events: ReadonlyArray<ExecEvent>
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
        watches.forget(executionId)
        events = yield* readLog(sandbox, ref, { exitCode })
      }
      // A log shorter than what was handed out already (gone with its sandbox's disk, or cut): the exit still comes.
      const last = events.at(-1)
      if (last?.type === "exit" && events.length <= fromSeq) return [{ ...last, seq: fromSeq }]
      return events.slice(fromSeq)
    })

  /**
   * The shell line the session runs: where it starts (startIn), env, the argv; its input /dev/null, or the decoder.
   * A subshell: the session's own shell must survive (`exec` there would replace it) until the `exit` behind it.
   */
  const commandLine = (sandbox: ProviderSandbox, input: Parameters<SandboxProvider["exec"]>[1]) => {
    const env = Object.entries(input.environment ?? {}).map(([k, v]) => shellQuote(`${k}=${v}`))
    const run = `${startIn(ctx, sandbox, input.cwd)}exec ${env.length > 0 ? `env -- ${env.join(" ")} ` : ""}${input.command.map(shellQuote).join(" ")}`
    return input.stdin === true ? `sh -c ${shellQuote(DECODER)} sh sh -c ${shellQuote(run)}` : `(${run}) < /dev/null`
  }

  const exec: SandboxProvider["exec"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process === null) return yield* unsupported(NAME, "processes")
      if (input.pty !== undefined) {
        if (ctx.capabilities.process.terminal !== true) return yield* unsupported(NAME, "terminals")
        return yield* terminals.exec(sandbox, { ...input, pty: input.pty })
      }
      // A working directory that is not there fails the start (src/providers/cwd.ts): the session's `cd` would look like the
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
      const post = (command: string) =>
        toolbox(sandbox, "POST", `${sessionPath}/exec`, "exec", HttpClientRequest.bodyUnsafeJson({ command, runAsync: true, suppressInputEcho: true })).pipe(
          Effect.flatMap(decode(WireExec, "exec"))
        )
      const commands = existed ? (yield* toolbox(sandbox, "GET", sessionPath, "get session").pipe(Effect.flatMap(decode(WireSession, "get session")))).commands ?? [] : []
      // A retry follows the command it started; the `exit` behind it ends the session's shell once it is done.
      const cmdId = commands[0]?.id ?? (yield* post(commandLine(sandbox, input))).cmdId
      if (commands.length < 2) yield* post("exit 0")
      return { executionId: executionIds.encode({ sessionId, commandId: cmdId, maxOutputBytes }) }
    })

  const execNews: NonNullable<SandboxProvider["execNews"]> = (sandbox, executionId, maxMs) =>
    isTerminal(executionId)
      ? waitAsPoll(maxMs)
      : Effect.flatMap(Effect.either(refOf(executionId)), (ref) =>
        ref._tag === "Left" ? waitAsPoll(maxMs) : watches.execNews(sandbox, executionId, commandPath(ref.right), logLimit(ref.right), maxMs))

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

  /**
   * A terminal's input is typed into it; a process's goes to its decoder, as lines of escapes (INPUT_CHUNK_BYTES
   * a call), `eof` as the line `E`. 410 from Daytona: the process ended (or its session did).
   */
  const sendInput: NonNullable<SandboxProvider["sendInput"]> = (sandbox, executionId, data, eof) =>
    isTerminal(executionId) ? terminals.sendInput(sandbox, executionId, data, eof) : Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const lines: Array<string> = []
      for (let at = 0; at < data.length; at += INPUT_CHUNK_BYTES) lines.push(octalLine(data.subarray(at, at + INPUT_CHUNK_BYTES)))
      if (eof) lines.push("E")
      for (const line of lines) {
        yield* toolbox(sandbox, "POST", `${commandPath(ref)}/input`, "send input", HttpClientRequest.bodyUnsafeJson({ data: `${line}\n` })).pipe(
          Effect.mapError((e) => (e.status === 410 || e.kind === "not_found" ? fail("not_found", "the process has ended: its input is closed") : e))
        )
      }
    })

  return {
    exec,
    execEvents,
    execNews,
    cancelExec,
    sendInput,
    ...(ctx.capabilities.process?.terminal === true ? { resizeTerminal: terminals.resizeTerminal } : {}),
    forgetTerminals: terminals.forget
  }
}
