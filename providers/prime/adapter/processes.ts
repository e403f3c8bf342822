/**
 * Prime commands: each exec asks for the sandbox's gateway (`/auth`), then opens one Connect server stream,
 * `command_session.CommandSession/Start` with the protobuf codec (`../command-session.ts`): `/bin/bash -c "exec
 * <argv>"` with the environment in `envs`, the working directory in `cwd`, and the command's timeout as
 * `Connect-Timeout-Ms`. The stream is read in the background into the execution's buffer: start (the pid), data
 * (stdout / stderr bytes), end (a zigzag `sint32` exit code, or a signal in its status); a `deadline_exceeded`
 * trailer is Prime ending the command at its timeout.
 *
 * What Prime does not offer is refused before any request: standard input, terminals, and cancel (Prime's stream
 * has no cancel the reference uses: a command ends at its timeout). The output exists only on the stream this
 * gateway opened: an execution this instance does not hold (the gateway restarted while it ran) is `not_found`.
 */
import { HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Cause, Deferred, Duration, Effect, Exit, Stream } from "effect"
import type { ExecEvent } from "../../../src/runtime/LocalRuntime.ts"
import type { ExecInput, ProviderSandbox, SandboxProvider } from "../../../src/providers/Provider.ts"
import { unsupported } from "../../../src/providers/Provider.ts"
import {
  decodeStartResponse,
  encodeStartRequest,
  END_STREAM,
  type Envelope,
  envelope,
  EnvelopeDecoder,
  START_PATH,
  STREAM_CONTENT_TYPE,
  trailerError
} from "../command-session.ts"
import { News } from "../../core/news.ts"
import { NAME, type PrimeContext } from "./wire.ts"

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
/** How long a finished execution's events are kept for re-reading. */
const FORGET_AFTER_MS = 15 * 60 * 1000
/** How long the start event may take once the stream is open. */
const START_TIMEOUT = Duration.seconds(60)

/** POSIX shell quoting. */
export const shellQuote = (s: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'"'"'`)}'`)

/** The bash line Prime runs: `exec` of the quoted argv (no shell stays between the command and its exit). */
export const commandLine = (command: ReadonlyArray<string>) => `exec ${command.map(shellQuote).join(" ")}`

/** A signal named in an end event's status (Go's wording: `signal: killed`). */
const SIGNALS: Readonly<Record<string, string>> = {
  killed: "SIGKILL",
  terminated: "SIGTERM",
  interrupt: "SIGINT",
  hangup: "SIGHUP",
  aborted: "SIGABRT",
  "segmentation fault": "SIGSEGV",
  "broken pipe": "SIGPIPE"
}
export const signalOfStatus = (status: string): string | null => {
  const match = /^signal: (.+)$/.exec(status.trim())
  if (match === null) return null
  return SIGNALS[match[1]!] ?? `SIG${match[1]!.toUpperCase().replace(/[^A-Z0-9]/g, "")}`
}

type EventWithoutSeq = ExecEvent extends infer E ? E extends unknown ? Omit<E, "seq"> : never : never

interface Execution {
  readonly key: string
  readonly maxOutputBytes: number
  readonly events: Array<ExecEvent>
  outputBytes: number
  truncated: boolean
  done: boolean
  failure: ReturnType<PrimeContext["fail"]> | null
  /** Told when an event is kept, and when the stream ends (`execNews`). */
  readonly news: News
}

export const makeProcesses = (ctx: PrimeContext) => {
  const { fail } = ctx
  const executions = new Map<string, Execution>()
  const keyOf = (sandbox: ProviderSandbox, executionId: string) => `${sandbox.resourceId}\u0000${executionId}`

  const emit = (x: Execution, event: EventWithoutSeq) => {
    x.events.push({ ...event, seq: x.events.length } as ExecEvent)
    x.news.tell()
  }
  const finish = (x: Execution, exit: Extract<EventWithoutSeq, { type: "exit" }>) => {
    if (x.done) return
    emit(x, exit)
    x.done = true
    setTimeout(() => {
      if (executions.get(x.key) === x) executions.delete(x.key)
    }, FORGET_AFTER_MS).unref()
  }

  /** Reads the stream into the execution until it ends; `started` resolves at the start event. */
  const pump = (x: Execution, response: HttpClientResponse.HttpClientResponse, started: Deferred.Deferred<void, ReturnType<typeof fail>>) => {
    const decoder = new EnvelopeDecoder()
    const exitOf = (extra: { exitCode: number | null; signal: string | null; timedOut: boolean }) =>
      ({ type: "exit" as const, cancelled: false, outputTruncated: x.truncated, ...extra })
    const onEnvelope = (e: Envelope) => {
      if (x.done) return
      if ((e.flags & END_STREAM) !== 0) {
        const error = trailerError(e.data)
        // Prime's deadline (Connect-Timeout-Ms) ended the call as it killed the command.
        if (error?.code === "deadline_exceeded") finish(x, exitOf({ exitCode: null, signal: "SIGKILL", timedOut: true }))
        else if (error !== null) {
          const kind = error.code === "not_found" ? "not_found" : error.code === "invalid_argument" || error.code === "failed_precondition" ? "invalid_request" : "unavailable"
          x.failure = fail(kind, `prime command stream ended: ${error.code} ${error.message}`)
        }
        else x.failure = fail("unavailable", "prime command stream ended without the command's end")
        // Ended before it started (the command could not be started): that is the start's answer.
        if (x.failure !== null) Deferred.unsafeDone(started, Exit.fail(x.failure))
        return
      }
      const event = decodeStartResponse(e.data)
      if (event === null || event.type === "keepalive") return
      if (event.type === "start") return void Deferred.unsafeDone(started, Exit.void)
      if (event.type === "end") {
        const signal = event.exited ? null : signalOfStatus(event.status)
        return finish(x, exitOf({ exitCode: event.exited || signal === null ? event.exitCode : null, signal, timedOut: false }))
      }
      const room = Math.max(0, x.maxOutputBytes - x.outputBytes)
      const data = event.data.length > room ? event.data.subarray(0, room) : event.data
      if (data.length < event.data.length) x.truncated = true
      x.outputBytes += data.length
      if (data.length > 0) emit(x, { type: event.type === "stderr" ? "stderr" : "stdout", data })
    }
    return response.stream.pipe(
      Stream.runForEach((chunk) => Effect.sync(() => decoder.push(chunk).forEach(onEnvelope))),
      Effect.catchAllCause((cause) =>
        Effect.sync(() => {
          const error = Cause.squash(cause)
          if (!x.done && x.failure === null) x.failure = fail("unavailable", `the prime command stream broke: ${error instanceof Error ? error.message : String(error)}`)
        })
      ),
      Effect.ensuring(Effect.sync(() => {
        if (!x.done && x.failure === null) x.failure = fail("unavailable", "the prime command stream ended early")
        x.news.tell()
        Deferred.unsafeDone(started, Exit.fail(x.failure ?? fail("unavailable", "the prime command stream ended before the command started")))
      }))
    )
  }

  const exec: SandboxProvider["exec"] = (sandbox, input: ExecInput) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process === null) return yield* unsupported(NAME, "processes")
      if (input.pty !== undefined) return yield* unsupported(NAME, "terminals")
      if (input.stdin === true) return yield* unsupported(NAME, "standard input")
      if (input.command.length === 0 || input.command[0] === "") return yield* fail("invalid_request", "the command is empty")
      const bad = Object.keys(input.environment ?? {}).find((k) => !ENV_NAME.test(k))
      if (bad !== undefined) return yield* fail("invalid_request", `${bad} is not a valid environment variable name`)
      const executionId = `prime:${input.processId}`
      const key = keyOf(sandbox, executionId)
      // Already started by this instance: the same execution (exec is idempotent per process id here).
      if (executions.has(key)) return { executionId }
      const gw = yield* ctx.gateway(sandbox)
      const body = envelope(encodeStartRequest({ cmd: "/bin/bash", args: ["-c", commandLine(input.command)], envs: input.environment ?? {}, cwd: input.cwd }))
      const timeoutMs = Math.max(1, input.timeoutSeconds) * 1000
      const response = yield* ctx.sendGateway(
        HttpClientRequest.post(`${gw.base}${START_PATH}`).pipe(
          HttpClientRequest.setHeaders({ "connect-protocol-version": "1", "connect-timeout-ms": String(timeoutMs) }),
          HttpClientRequest.bodyUint8Array(body, STREAM_CONTENT_TYPE)
        ),
        gw.token,
        START_PATH.slice(1)
      )
      if (!(response.headers["content-type"] ?? "").startsWith(STREAM_CONTENT_TYPE)) {
        return yield* fail("unavailable", `prime ${START_PATH.slice(1)} answered ${response.headers["content-type"] ?? "no content type"}, not a Connect stream`)
      }
      const x: Execution = {
        key,
        maxOutputBytes: Math.min(input.maxOutputBytes, ctx.capabilities.process.maxOutputBytes),
        events: [],
        outputBytes: 0,
        truncated: false,
        done: false,
        failure: null,
        news: new News()
      }
      executions.set(key, x)
      const started = yield* Deferred.make<void, ReturnType<typeof fail>>()
      yield* Effect.forkDaemon(pump(x, response, started))
      yield* Deferred.await(started).pipe(
        Effect.timeoutFail({ duration: START_TIMEOUT, onTimeout: () => fail("unavailable", "prime sent no start event") }),
        Effect.tapError(() => Effect.sync(() => executions.delete(key)))
      )
      return { executionId }
    })

  const execEvents: SandboxProvider["execEvents"] = (sandbox, executionId, fromSeq) =>
    Effect.gen(function*() {
      const x = executions.get(keyOf(sandbox, executionId))
      if (x === undefined) {
        return yield* fail("not_found", `${executionId} is not known to this gateway: Prime sends a command's output only on the stream that started it, which a restart cut`)
      }
      if (fromSeq > x.events.length) return yield* fail("invalid_request", `events from ${fromSeq} are not available (this execution has ${x.events.length})`)
      const events = x.events.slice(fromSeq)
      if (events.length === 0 && x.failure !== null) return yield* x.failure
      return events
    })

  /** The stream is read into the execution as it comes, so a quiet command's job waits on that. */
  const execNews: NonNullable<SandboxProvider["execNews"]> = (sandbox, executionId, maxMs) =>
    Effect.suspend(() => {
      const x = executions.get(keyOf(sandbox, executionId))
      // Unknown here, over, or its stream broken: `execEvents` says so at once.
      return x === undefined || x.done || x.failure !== null ? Effect.void : x.news.wait(maxMs)
    })

  return {
    exec,
    execEvents,
    execNews,
    execNewsAfterMs: 0,
    cancelExec: () => Effect.fail(unsupported(NAME, "cancelling processes"))
  } satisfies Partial<SandboxProvider>
}
