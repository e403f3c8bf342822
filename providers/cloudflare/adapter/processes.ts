/**
 * Cloudflare commands through the bridge: `POST /v1/sandbox/{id}/exec {argv, timeout_ms, cwd?}` runs one and
 * answers its output as server-sent events while it runs — `stdout`/`stderr` frames (base64 bytes), then `exit`
 * `{exit_code}` or `error` `{error, code?}` — on that one response. The bridge keeps no record of a command, so the
 * stream is read in the background from the moment the command starts, and its events are kept here (numbered
 * from 0, cut at the output limit) for `execEvents`. A gateway restart loses a stream it was reading: such an
 * execution reads as `not_found`, saying its outcome is lost (as E2B's lost processes do).
 *
 * The bridge takes no environment and no standard input (reference §3.2): the sandbox's and the command's
 * environment are given as `env NAME=value … command`, and a command asking for stdin (or a terminal) is refused
 * (`sendInput` is absent). `timeout_ms` is the command's timeout capped at the bridge's request timeout (30 s);
 * the bridge ends a command there with an `error` frame (code `COMMAND_TIMEOUT`), read as a timed-out exit. Any
 * other `error` frame ends the command too: its message becomes stderr and the exit has no code. No cancel: the
 * bridge has no route for it (the capability says so).
 */
import { HttpClientRequest } from "@effect/platform"
import { Deferred, Effect, Either, Schema, Stream } from "effect"
import type { ExecEvent } from "../../../src/runtime/LocalRuntime.ts"
import type { ProviderError, SandboxProvider } from "../../../src/providers/Provider.ts"
import { unsupported } from "../../../src/providers/Provider.ts"
import { News } from "../../core/news.ts"
import { environmentOf } from "./sandboxes.ts"
import { type CloudflareContext, makeSseParser, NAME, type SseFrame, TIMEOUT_CODES, WireExecError, WireExit } from "./wire.ts"

/** Finished streams kept for reading again (the oldest go first). */
const MAX_FINISHED = 1024
const PREFIX = "cloudflare:"
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

type ExitEvent = Extract<ExecEvent, { type: "exit" }>

interface Tail {
  readonly events: Array<ExecEvent>
  exit: ExitEvent | null
  failure: ProviderError | null
  done: boolean
  budget: number
  truncated: boolean
  /** Told when an event is kept, and at the end (`execNews`). */
  readonly news: News
}

const decodeExit = Schema.decodeUnknownEither(Schema.parseJson(WireExit))
const decodeError = Schema.decodeUnknownEither(Schema.parseJson(WireExecError))

/** The argv the bridge runs: the command under `env` when there is an environment to give it. */
export const argvWithEnvironment = (command: ReadonlyArray<string>, env: Readonly<Record<string, string>>): Either.Either<ReadonlyArray<string>, string> => {
  const entries = Object.entries(env)
  if (entries.length === 0) return Either.right(command)
  const bad = entries.find(([k]) => !ENV_NAME.test(k))
  if (bad !== undefined) return Either.left(`${JSON.stringify(bad[0])} is not an environment variable name`)
  // `env` would take a first word with `=` in it for one more variable.
  if (command[0]!.includes("=")) return Either.left(`a command starting with ${JSON.stringify(command[0])} cannot be given an environment through the bridge`)
  return Either.right(["env", ...entries.map(([k, v]) => `${k}=${v}`), ...command])
}

/** Applies one frame to the tail; true once the command is over. */
export const applyFrame = (tail: Tail, frame: SseFrame, fail: CloudflareContext["fail"]): boolean => {
  const exit = (fields: Omit<ExitEvent, "seq" | "type" | "outputTruncated">) => {
    tail.exit = { seq: tail.events.length, type: "exit", ...fields, outputTruncated: tail.truncated }
    return true
  }
  const output = (type: "stdout" | "stderr", bytes: Uint8Array) => {
    const data = bytes.subarray(0, Math.max(0, tail.budget))
    if (data.length < bytes.length) tail.truncated = true
    tail.budget -= data.length
    if (data.length > 0) tail.events.push({ seq: tail.events.length, type, data })
  }
  switch (frame.event) {
    case "stdout":
    case "stderr":
      output(frame.event, new Uint8Array(Buffer.from(frame.data, "base64")))
      return false
    case "exit": {
      const parsed = decodeExit(frame.data)
      if (Either.isLeft(parsed)) {
        tail.failure = fail("unavailable", `cloudflare exec sent an unreadable exit frame: ${frame.data.slice(0, 100)}`)
        return true
      }
      return exit({ exitCode: parsed.right.exit_code, signal: null, cancelled: false, timedOut: false })
    }
    case "error": {
      const parsed = decodeError(frame.data)
      const error = Either.isRight(parsed) ? parsed.right : { error: frame.data.slice(0, 300), code: undefined }
      if (error.code !== undefined && TIMEOUT_CODES.has(error.code)) return exit({ exitCode: null, signal: "SIGKILL", cancelled: false, timedOut: true })
      output("stderr", new TextEncoder().encode(`${error.code === undefined ? "" : `${error.code}: `}${error.error}\n`))
      return exit({ exitCode: null, signal: null, cancelled: false, timedOut: false })
    }
    default:
      return false // comments, keep-alives and frames of other kinds are not the command's
  }
}

export const makeProcesses = (ctx: CloudflareContext) => {
  const { api, fail, send, sandboxPath } = ctx
  const tails = new Map<string, Tail>()
  const forget = () => {
    let finished = 0
    for (const t of tails.values()) if (t.done) finished++
    for (const [key, t] of tails) {
      if (finished <= MAX_FINISHED) break
      if (t.done) {
        tails.delete(key)
        finished--
      }
    }
  }

  const exec: SandboxProvider["exec"] = (sandbox, input) =>
    Effect.gen(function*() {
      const proc = ctx.capabilities.process
      if (proc === null) return yield* unsupported(NAME, "processes")
      if (input.command.length === 0) return yield* fail("invalid_request", "the command is empty")
      if (input.pty !== undefined) return yield* unsupported(NAME, "terminals")
      if (input.stdin === true) return yield* unsupported(NAME, "standard input")
      const executionId = `${PREFIX}${input.processId}`
      // Asked again (its first answer was lost): the command already runs.
      if (tails.has(executionId)) return { executionId }
      const argv = argvWithEnvironment(input.command, { ...environmentOf(sandbox), ...input.environment })
      if (Either.isLeft(argv)) return yield* fail("invalid_request", argv.left)
      const timeoutMs = Math.max(1, Math.min(input.timeoutSeconds * 1000, ctx.requestTimeoutMs))
      const body = { argv: argv.right, timeout_ms: timeoutMs, ...(input.cwd === undefined ? {} : { cwd: input.cwd }) }
      const tail: Tail = { events: [], exit: null, failure: null, done: false, budget: Math.min(input.maxOutputBytes, proc.maxOutputBytes), truncated: false, news: new News() }
      const started = yield* Deferred.make<void, ProviderError>()
      const parser = makeSseParser()
      const decoder = new TextDecoder()
      let over = false
      const take = (frames: ReadonlyArray<SseFrame>) => {
        const kept = tail.events.length
        for (const frame of frames) if (!over) over = applyFrame(tail, frame, fail)
        if (tail.events.length !== kept || over) tail.news.tell()
      }
      // The whole exchange runs detached from the caller: the stream outlives this call.
      const read = Effect.gen(function*() {
        const response = yield* send(
          api("POST", sandboxPath(sandbox.resourceId, "/exec")).pipe(
            HttpClientRequest.setHeader("accept", "text/event-stream"),
            HttpClientRequest.bodyUnsafeJson(body)
          ),
          "exec"
        )
        yield* Deferred.succeed(started, undefined)
        yield* response.stream.pipe(
          Stream.map((chunk) => take(parser.push(decoder.decode(chunk, { stream: true })))),
          Stream.takeUntil(() => over),
          Stream.runDrain,
          Effect.mapError((e) => fail("not_found", `the cloudflare exec stream broke (${e.message}); the bridge keeps no record of a command, so its outcome is lost`)),
          // A stream that says nothing for longer than the command may run is given up.
          Effect.timeoutFail({
            duration: `${timeoutMs + ctx.requestTimeoutMs} millis`,
            onTimeout: () => fail("not_found", `the cloudflare exec stream sent no exit within ${timeoutMs + ctx.requestTimeoutMs} ms; its outcome is lost`)
          })
        )
        if (!over) take([...parser.push(decoder.decode()), ...parser.end()])
        if (!over) tail.failure = fail("not_found", "the cloudflare exec stream ended without an exit frame; its outcome is lost")
      })
      tails.set(executionId, tail)
      Effect.runFork(read.pipe(
        Effect.catchAll((e) => Effect.zipRight(Effect.sync(() => void (tail.failure = e)), Deferred.fail(started, e))),
        Effect.ensuring(Effect.sync(() => {
          tail.done = true
          tail.news.tell()
          forget()
        }))
      ))
      // The bridge's answer to the start (a refusal fails the exec itself).
      yield* Deferred.await(started).pipe(Effect.tapError(() => Effect.sync(() => tails.delete(executionId))))
      return { executionId }
    })

  const execEvents: SandboxProvider["execEvents"] = (_sandbox, executionId, fromSeq) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process === null) return yield* unsupported(NAME, "processes")
      if (!executionId.startsWith(PREFIX)) return yield* fail("invalid_request", `${executionId} is not a Cloudflare execution id`)
      const tail = tails.get(executionId)
      if (tail === undefined) {
        return yield* fail(
          "not_found",
          `the command ${executionId.slice(PREFIX.length)} is not known here: its output stream was read by a gateway process that stopped, and the Cloudflare bridge keeps no record of commands, so its output and exit are lost`
        )
      }
      const deadline = Date.now() + ctx.eventsWaitMs
      while (!tail.done && tail.exit === null && tail.events.length <= fromSeq && Date.now() < deadline) yield* Effect.sleep("10 millis")
      const all: Array<ExecEvent> = tail.exit === null ? [...tail.events] : [...tail.events, tail.exit]
      if (all.length <= fromSeq && tail.failure !== null) return yield* tail.failure
      return all.slice(fromSeq)
    })

  /** The stream is read into the tail as it comes, so a quiet command's job waits on that. */
  const execNews: NonNullable<SandboxProvider["execNews"]> = (_sandbox, executionId, maxMs) =>
    Effect.suspend(() => {
      const tail = tails.get(executionId)
      // Unknown here: `execEvents` says so at once.
      return tail === undefined || tail.done ? Effect.void : tail.news.wait(maxMs)
    })

  const cancelExec: SandboxProvider["cancelExec"] = () => Effect.fail(unsupported(NAME, "cancelling processes (the bridge has no route for it)"))

  return { exec, execEvents, execNews, execNewsAfterMs: 0, cancelExec }
}
