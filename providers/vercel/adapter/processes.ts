/**
 * Vercel commands in the sandbox's session: `POST /v2/sandboxes/sessions/{session}/cmd {command, args, cwd, env,
 * sudo: false, timeout}` starts one (detached) and answers its id; `GET …/cmd/{cmdId}/logs` streams its output as
 * NDJSON lines (`{stream: "stdout" | "stderr", data}`, in the order written) and ends when the command does;
 * `GET …/cmd/{cmdId}?wait=true` answers once it has exited, with its exit code; `POST …/cmd/{cmdId}/kill
 * {signal}` cancels it.
 *
 * Events: each log line is one event. The first `execEvents` of a command starts reading its whole log stream in
 * the background (as E2B's adapter reads envd's): Vercel replays a command's log from its first line, so reading
 * again (after a gateway restart, a broken stream, or once a finished tail was forgotten) numbers the events the
 * same way. Once the stream ends, `?wait=true` gives the exit code. `execEvents` waits a little (`logsWaitMs`) for
 * new output or the end. The execution id carries the session, the command, the output limit and the timeout, so
 * it needs nothing kept. A cancel is remembered in memory (a killed command's exit says `cancelled` through this
 * instance; after a restart it reads as its exit code).
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect, Schema, Stream } from "effect"
import type { ExecEvent } from "../../../src/runtime/LocalRuntime.ts"
import { News } from "../../core/news.ts"
import type { ProviderError, ProviderSandbox, SandboxProvider } from "../../../src/providers/Provider.ts"
import { unsupported, waitAsPoll } from "../../../src/providers/Provider.ts"
import {
  executionIds,
  type ExecutionRef,
  MAX_TIMEOUT_MS,
  NAME,
  type VercelContext,
  WireCommandResponse,
  WireLogLine
} from "./wire.ts"

const SIGNALS: Readonly<Record<number, string>> = { 1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL", 15: "SIGTERM" }
const decodeLine = Schema.decodeUnknownEither(Schema.parseJson(WireLogLine))
/** Finished log tails kept for reading again (a forgotten one is read again from the stream). */
const MAX_TAILS = 256

/** One command's log as read so far, and how it ended. */
interface Tail {
  readonly lines: Array<{ readonly stream: "stdout" | "stderr"; readonly data: string }>
  dataBytes: number
  exit: typeof WireCommandResponse.Type["command"] | null
  failure: ProviderError | null
  done: boolean
  /** Told when a line is kept, and at the end (`execNews`). */
  readonly news: News
}

/** Output events from log lines, in order, cut at the output limit; and whether anything was cut. */
export const outputEvents = (lines: ReadonlyArray<{ readonly stream: "stdout" | "stderr"; readonly data: string }>, maxOutputBytes: number) => {
  const events: Array<ExecEvent> = []
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

  const refOf = executionIds.decode

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
      return { executionId: executionIds.encode({ sessionId, cmdId: command.id, maxOutputBytes, timeoutSeconds: Math.ceil(timeoutMs / 1000) }) }
    })

  /** Log tails being read (or read) by this instance, by execution id; the oldest finished ones are forgotten. */
  const tails = new Map<string, Tail>()
  const forget = () => {
    if (tails.size <= MAX_TAILS) return
    for (const [key, tail] of tails) {
      if (tails.size <= MAX_TAILS) break
      if (tail.done) tails.delete(key)
    }
  }

  /**
   * Starts reading the command's whole log stream in the background (it replays from the first line and ends
   * when the command does), then asks for the exit code. Output past the limit is not kept.
   */
  const attach = (ref: ExecutionRef, key: string): Tail => {
    const tail: Tail = { lines: [], dataBytes: 0, exit: null, failure: null, done: false, news: new News() }
    tails.set(key, tail)
    forget()
    const decoder = new TextDecoder()
    let pending = ""
    const take = (text: string) => {
      pending += text
      for (let nl = pending.indexOf("\n"); nl >= 0 && tail.failure === null; nl = pending.indexOf("\n")) {
        const raw = pending.slice(0, nl).trim()
        pending = pending.slice(nl + 1)
        if (raw === "") continue
        const line = decodeLine(raw)
        if (line._tag === "Left") tail.failure = fail("unavailable", `vercel command ${ref.cmdId} sent an unreadable log line: ${raw.slice(0, 100)}`)
        else if (line.right.stream === "error") tail.failure = fail("not_found", `vercel command ${ref.cmdId} logs ended with ${line.right.data.code}: ${line.right.data.message}`)
        else if (tail.dataBytes <= ref.maxOutputBytes) {
          // Past the limit the rest would be cut anyway: one line more says it was.
          tail.lines.push({ stream: line.right.stream, data: line.right.data })
          tail.dataBytes += new TextEncoder().encode(line.right.data).length
          tail.news.tell()
        }
      }
    }
    const read = Effect.gen(function*() {
      const response = yield* send(api("GET", `${commandPath(ref)}/logs`), "command logs", { mutating: false })
      yield* response.stream.pipe(
        Stream.runForEach((chunk) => Effect.sync(() => take(decoder.decode(chunk, { stream: true })))),
        Effect.mapError((e) => fail("unavailable", `vercel command logs could not be read: ${e.message}`))
      )
      take(`${decoder.decode()}\n`)
      if (tail.failure !== null) return
      tail.exit = yield* getCommand(ref, true)
    })
    Effect.runFork(read.pipe(
      Effect.catchAll((e) => Effect.sync(() => void (tail.failure = e))),
      Effect.ensuring(Effect.sync(() => {
        tail.done = true
        tail.news.tell()
      }))
    ))
    return tail
  }

  const execEvents: SandboxProvider["execEvents"] = (_sandbox, executionId, fromSeq) =>
    Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const tail = tails.get(executionId) ?? attach(ref, executionId)
      // A short wait for what is on its way: the end of a finished command's replay, or new output.
      const deadline = Date.now() + ctx.logsWaitMs
      while (!tail.done && tail.lines.length <= fromSeq && Date.now() < deadline) yield* Effect.sleep("10 millis")
      if (tail.failure !== null) {
        // The next call reads the stream again from its start.
        tails.delete(executionId)
        return yield* tail.failure
      }
      const { events, truncated } = outputEvents(tail.lines, ref.maxOutputBytes)
      const command = tail.exit
      if (command === null || command.exitCode === null) return events.slice(fromSeq)
      const code = command.exitCode
      const signal = code > 128 ? SIGNALS[code - 128] ?? null : null
      const timedOut = !cancelled.has(ref.cmdId) && signal === "SIGKILL" && (command.durationMs ?? 0) >= ref.timeoutSeconds * 1000 - 1000
      const exit: ExecEvent = cancelled.has(ref.cmdId)
        ? { seq: events.length, type: "exit", exitCode: null, signal: signal ?? "SIGKILL", cancelled: true, timedOut: false, outputTruncated: truncated }
        : timedOut
        ? { seq: events.length, type: "exit", exitCode: null, signal, cancelled: false, timedOut: true, outputTruncated: truncated }
        : { seq: events.length, type: "exit", exitCode: code, signal: null, cancelled: false, timedOut: false, outputTruncated: truncated }
      return [...events, exit].slice(fromSeq)
    })

  /**
   * The log stream is read into the tail as it comes, so a quiet command's job waits on that (attaching it first,
   * as `execEvents` would). An execution id this instance cannot read waits as a poll would.
   */
  const execNews: NonNullable<SandboxProvider["execNews"]> = (_sandbox, executionId, maxMs) =>
    refOf(executionId).pipe(
      Effect.flatMap((ref) => {
        const tail = tails.get(executionId) ?? attach(ref, executionId)
        return tail.done ? Effect.void : tail.news.wait(maxMs)
      }),
      Effect.catchAll(() => waitAsPoll(maxMs))
    )

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

  return { exec, execEvents, execNews, execNewsAfterMs: 0, cancelExec }
}
