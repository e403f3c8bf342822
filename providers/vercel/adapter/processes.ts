/**
 * Vercel commands in the sandbox's session: `POST /v2/sandboxes/sessions/{session}/cmd {command, args, cwd, env,
 * sudo: false, timeout}` starts one (detached) and answers its id; `GET …/cmd/{cmdId}/logs` streams its output as
 * NDJSON lines (`{stream: "stdout" | "stderr", data}`, in the order written) and ends when the command does;
 * `GET …/cmd/{cmdId}?wait=true` answers once it has exited, with its exit code; `POST …/cmd/{cmdId}/kill
 * {signal}` cancels it.
 *
 * Events: each log line is one event, so reading the stream again from its start numbers them the same way. A
 * running command's stream is read for a short while (`logsWaitMs`) and cut there (only whole lines count); once
 * the stream ends on its own the exit code is asked for. The execution id carries the session, the command, the
 * output limit and the timeout, so `execEvents` works after a gateway restart. A cancel is remembered in memory (a
 * killed command's exit says `cancelled` through this instance; after a restart it reads as its exit code).
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect, Schema, Stream } from "effect"
import type { ProviderError, ProviderExecEvent, ProviderSandbox, SandboxProvider } from "../../core/Provider.ts"
import { unsupported } from "../../core/Provider.ts"
import {
  decodeExecutionId,
  encodeExecutionId,
  type ExecutionRef,
  MAX_TIMEOUT_MS,
  NAME,
  type VercelContext,
  WireCommandResponse,
  WireLogLine
} from "./wire.ts"

const SIGNALS: Readonly<Record<number, string>> = { 1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL", 15: "SIGTERM" }
const decodeLine = Schema.decodeUnknownEither(Schema.parseJson(WireLogLine))

/** Output events from log lines, in order, cut at the output limit; and whether anything was cut. */
export const outputEvents = (lines: ReadonlyArray<{ readonly stream: "stdout" | "stderr"; readonly data: string }>, maxOutputBytes: number) => {
  const events: Array<ProviderExecEvent> = []
  let budget = maxOutputBytes
  let truncated = false
  for (const line of lines) {
    const bytes = new TextEncoder().encode(line.data)
    if (bytes.length === 0) continue
    const data = bytes.subarray(0, Math.max(0, budget))
    if (data.length < bytes.length) truncated = true
    budget -= data.length
    if (data.length > 0) events.push({ seq: events.length, type: line.stream, data })
    if (truncated) break
  }
  return { events, truncated }
}

export const makeProcesses = (ctx: VercelContext, sessionOf: (sandbox: ProviderSandbox) => Effect.Effect<string, ProviderError>) => {
  const { api, decode, fail, send, sessionPath } = ctx
  /** Commands this instance cancelled (by command id). */
  const cancelled = new Set<string>()

  const commandPath = (ref: ExecutionRef) => `${sessionPath(ref.sessionId)}/cmd/${encodeURIComponent(ref.cmdId)}`
  const getCommand = (ref: ExecutionRef, wait: boolean) =>
    send(api("GET", commandPath(ref)).pipe(wait ? HttpClientRequest.setUrlParam("wait", "true") : (r) => r), wait ? "wait for command" : "get command", {
      mutating: false
    }).pipe(Effect.flatMap(decode(WireCommandResponse, "get command")), Effect.map((r) => r.command))

  const refOf = (executionId: string) => {
    const ref = decodeExecutionId(executionId)
    return ref === undefined ? Effect.fail(fail("invalid_request", `${executionId} is not a Vercel execution id`)) : Effect.succeed(ref)
  }

  const exec: SandboxProvider["exec"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process === null) return yield* unsupported(NAME, "processes")
      if (input.command.length === 0) return yield* fail("invalid_request", "the command is empty")
      if (input.stdin === true) return yield* unsupported(NAME, "standard input")
      const sessionId = yield* sessionOf(sandbox)
      const timeoutMs = Math.min(MAX_TIMEOUT_MS, input.timeoutSeconds * 1000)
      const body = {
        command: input.command[0],
        args: input.command.slice(1),
        ...(input.cwd === undefined ? {} : { cwd: input.cwd }),
        env: input.environment ?? {},
        sudo: false,
        timeout: timeoutMs
      }
      const { command } = yield* send(api("POST", `${sessionPath(sessionId)}/cmd`).pipe(HttpClientRequest.bodyUnsafeJson(body)), "run command").pipe(
        Effect.flatMap(decode(WireCommandResponse, "run command"))
      )
      const maxOutputBytes = Math.min(input.maxOutputBytes, ctx.capabilities.process.maxOutputBytes)
      return { executionId: encodeExecutionId({ sessionId, cmdId: command.id, maxOutputBytes, timeoutSeconds: Math.ceil(timeoutMs / 1000) }) }
    })

  /**
   * The command's log lines so far: read until the stream ends (`ended`), until `logsWaitMs` passes, or until more
   * output than the limit has come (`capped`: the rest would be cut anyway).
   */
  const readLogs = (ref: ExecutionRef) =>
    Effect.gen(function*() {
      const response = yield* send(api("GET", `${commandPath(ref)}/logs`), "command logs")
      const lines: Array<{ stream: "stdout" | "stderr"; data: string }> = []
      const decoder = new TextDecoder()
      let pending = ""
      let dataBytes = 0
      let error: string | undefined
      const take = (text: string) => {
        pending += text
        for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
          const raw = pending.slice(0, nl).trim()
          pending = pending.slice(nl + 1)
          if (raw === "") continue
          const line = decodeLine(raw)
          if (line._tag === "Left") {
            error = `an unreadable log line: ${raw.slice(0, 100)}`
            return
          }
          if (line.right.stream === "error") {
            error = `${line.right.data.code}: ${line.right.data.message}`
            return
          }
          lines.push({ stream: line.right.stream, data: line.right.data })
          dataBytes += line.right.data.length
        }
      }
      const stop = () => error !== undefined || dataBytes > ref.maxOutputBytes
      const ended = yield* response.stream.pipe(
        Stream.map((chunk) => take(decoder.decode(chunk, { stream: true }))),
        Stream.takeUntil(stop),
        Stream.runDrain,
        Effect.as(true),
        Effect.timeoutTo({ duration: `${ctx.logsWaitMs} millis`, onSuccess: (done: boolean) => done, onTimeout: () => false }),
        Effect.mapError((e) => fail("unavailable", `vercel command logs could not be read: ${e.message}`))
      )
      // The stream's end also ends its last line.
      if (ended && !stop()) take("\n")
      if (error !== undefined) return yield* fail("not_found", `vercel command ${ref.cmdId} logs ended with ${error}`)
      return { lines, ended: ended && !stop(), capped: dataBytes > ref.maxOutputBytes }
    })

  const execEvents: SandboxProvider["execEvents"] = (_sandbox, executionId, fromSeq) =>
    Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const logs = yield* readLogs(ref)
      const { events, truncated } = outputEvents(logs.lines, ref.maxOutputBytes)
      // Over: its stream ended (then `?wait=true` answers at once), or it is past the limit and has exited.
      const command = logs.ended ? yield* getCommand(ref, true) : logs.capped ? yield* getCommand(ref, false) : null
      if (command === null || command.exitCode === null) return events.slice(fromSeq)
      const code = command.exitCode
      const signal = code > 128 ? SIGNALS[code - 128] ?? null : null
      const timedOut = !cancelled.has(ref.cmdId) && signal === "SIGKILL" && (command.durationMs ?? 0) >= ref.timeoutSeconds * 1000 - 1000
      const exit: ProviderExecEvent = cancelled.has(ref.cmdId)
        ? { seq: events.length, type: "exit", exitCode: null, signal: signal ?? "SIGKILL", cancelled: true, timedOut: false, outputTruncated: truncated }
        : timedOut
        ? { seq: events.length, type: "exit", exitCode: null, signal, cancelled: false, timedOut: true, outputTruncated: truncated }
        : { seq: events.length, type: "exit", exitCode: code, signal: null, cancelled: false, timedOut: false, outputTruncated: truncated }
      return [...events, exit].slice(fromSeq)
    })

  const cancelExec: SandboxProvider["cancelExec"] = (_sandbox, executionId) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process?.cancel !== true) return yield* unsupported(NAME, "cancelling processes")
      const ref = yield* refOf(executionId)
      const command = yield* getCommand(ref, false).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))
      // Already over: its real exit is kept.
      if (command === null || command.exitCode !== null) return { cancelled: false }
      const before = cancelled.has(ref.cmdId)
      cancelled.add(ref.cmdId) // before the signal, so the exit that follows says so
      const killed = yield* send(api("POST", `${commandPath(ref)}/kill`).pipe(HttpClientRequest.bodyUnsafeJson({ signal: 9 })), "kill command").pipe(
        Effect.as(true),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(false)),
        Effect.tapError(() => Effect.sync(() => (before ? undefined : cancelled.delete(ref.cmdId))))
      )
      if (!killed && !before) cancelled.delete(ref.cmdId)
      return { cancelled: killed }
    })

  return { exec, execEvents, cancelExec }
}
