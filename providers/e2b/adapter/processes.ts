/**
 * E2B processes. Each execution is started with our process id as its envd `tag`, so it can be found again.
 * envd keeps no output for a client that is not attached, so each stream is read in the background into a small
 * per-execution buffer, which `execEvents` drains (events the caller acknowledged by asking from a later seq are
 * dropped). After a gateway restart (or a broken stream: a pause drops every envd connection) the adapter
 * re-attaches with `process.Process/Connect {tag}`: real envd then streams only what comes next (output written
 * while nobody was attached is lost; a process that ended meanwhile is unknown to envd, so its exit is lost too),
 * while the built-in emulator replays from the start and says so (`REPLAY_HEADER`), and the adapter skips what it
 * had already handed out. Cancel: SIGTERM, then SIGKILL after a grace period. `Connect-Timeout-Ms` on Start
 * makes envd kill the process at its timeout, even with nobody attached.
 */
import { HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Cause, Deferred, Duration, Effect, Either, Exit, Stream } from "effect"
import type { ExecEvent } from "../../../src/runtime/LocalRuntime.ts"
import { FOLLOWED_EXECUTIONS, reattachFailed, type ProviderError, type ProviderSandbox, type SandboxProvider, type UnnumberedExecEvent, waitAsPoll } from "../../../src/providers/Provider.ts"
import { type ConnectErrorBody, encodeEnvelope, END_STREAM, type Envelope, EnvelopeDecoder, STREAM_CONTENT_TYPE, trailerError } from "../connect.ts"
import { News } from "../../core/news.ts"
import type { E2BContext } from "./context.ts"
import { connectKind, ENVD_STDIN_FLAG, envdAtLeast, Empty, ProcessList, REPLAY_HEADER, signalOfStatus } from "./wire.ts"

const REQUEST_TIMEOUT = Duration.seconds(60)
const KILL_GRACE = Duration.seconds(5)

interface Execution {
  readonly key: string
  readonly selector: { readonly tag: string } | { readonly pid: number }
  /** Events the caller has not acknowledged yet; the first has seq `base`. */
  base: number
  events: Array<ExecEvent>
  outputBytes: number
  truncated: boolean
  done: boolean
  cancelled: boolean
  attached: boolean
  failure: ProviderError | null
  retryAt: number
  failingSince: number | null
  readonly maxOutputBytes: number
  readonly startedAt: number | null
  readonly timeoutMs: number | null
  /** Told when the stream brings something or ends (`execNews`). */
  readonly news: News
}
const nextSeq = (x: Execution) => x.base + x.events.length

export const makeProcesses = (ctx: E2BContext) => {
  const { accessOf, fail, envd, envdRequest, unary, userHeader } = ctx
  const executions = new Map<string, Execution>()
  const connectFailure = (what: string, error: ConnectErrorBody) => fail(connectKind(error.code), `e2b ${what}: ${error.code}: ${error.message}`)

  const executionKey = (sandbox: ProviderSandbox, executionId: string) => `${sandbox.resourceId}/${executionId}`
  /**
   * `e2b:<tag>`, or `e2b-pty:<tag>` for a command on a terminal (its input is typed as pty bytes); ids of the form
   * `e2b:<digits>` (older adapter versions) select by pid.
   */
  const selectorOf = (executionId: string): Execution["selector"] => {
    const rest = executionId.replace(/^e2b(-pty)?:/, "")
    return /^\d+$/.test(rest) ? { pid: Number(rest) } : { tag: rest }
  }
  const newExecution = (key: string, selector: Execution["selector"], fields: Partial<Pick<Execution, "base" | "maxOutputBytes" | "startedAt" | "timeoutMs">> = {}): Execution => ({
    key,
    selector,
    base: fields.base ?? 0,
    events: [],
    outputBytes: 0,
    truncated: false,
    done: false,
    cancelled: false,
    attached: false,
    failure: null,
    retryAt: 0,
    failingSince: null,
    maxOutputBytes: fields.maxOutputBytes ?? ctx.capabilities.process?.maxOutputBytes ?? 100 * 1024 * 1024,
    startedAt: fields.startedAt ?? null,
    timeoutMs: fields.timeoutMs ?? null,
    news: new News()
  })

  const finish = (x: Execution, event: Extract<UnnumberedExecEvent, { type: "exit" }>, emit: (e: UnnumberedExecEvent) => void) => {
    emit(event)
    x.done = true
    setTimeout(() => {
      if (executions.get(x.key) === x) executions.delete(x.key)
    }, FOLLOWED_EXECUTIONS.forgetAfterMs).unref()
  }

  /**
   * Reads one Start/Connect stream into the execution's buffer until it ends. `replay`: the server sends the
   * output from the start (the emulator), so events the buffer already had are skipped.
   */
  const pump = (x: Execution, response: HttpClientResponse.HttpClientResponse, replay: boolean, started: Deferred.Deferred<void, ProviderError>) => {
    const decoder = new EnvelopeDecoder()
    let seq = replay ? 0 : nextSeq(x)
    let bytes = replay ? 0 : x.outputBytes
    let truncated = replay ? false : x.truncated
    const emit = (event: UnnumberedExecEvent) => {
      if (seq >= nextSeq(x)) {
        x.events.push({ ...event, seq } as ExecEvent)
        x.outputBytes = bytes
        x.truncated = truncated
        x.news.tell()
      }
      seq += 1
    }
    const onEnvelope = (envelope: Envelope) => {
      if (x.done) return
      if ((envelope.flags & END_STREAM) !== 0) {
        const error = trailerError(envelope.message)
        if (error?.code === "deadline_exceeded" && x.timeoutMs !== null) {
          // envd's deadline (Connect-Timeout-Ms) ended the call as it killed the process, before the end event.
          finish(x, { type: "exit", exitCode: null, signal: "SIGKILL", cancelled: x.cancelled, timedOut: !x.cancelled, outputTruncated: truncated }, emit)
        } else if (error !== null) {
          x.failure = connectFailure("process stream", error)
        }
        return
      }
      const event = (envelope.message as { event?: Record<string, unknown> } | null)?.event ?? {}
      const start = event["start"] as { pid?: unknown } | undefined
      const data = event["data"] as { stdout?: unknown; stderr?: unknown; pty?: unknown } | undefined
      const end = event["end"] as { exitCode?: unknown; exited?: unknown; status?: unknown } | undefined
      if (start !== undefined) {
        Deferred.unsafeDone(started, Exit.void)
      } else if (data !== undefined) {
        // A terminal's output is one stream: it arrives as `pty` and is handed on as stdout.
        const field = typeof data.stdout === "string" ? "stdout" : typeof data.stderr === "string" ? "stderr" : typeof data.pty === "string" ? "pty" : null
        if (field === null) return
        const type = field === "stderr" ? "stderr" : "stdout"
        const raw = Buffer.from(String(data[field]), "base64")
        let chunk = new Uint8Array(raw.buffer, raw.byteOffset, raw.length) // a plain view, not a Buffer
        const room = Math.max(0, x.maxOutputBytes - bytes)
        if (chunk.length > room) {
          chunk = chunk.subarray(0, room)
          truncated = true
        }
        bytes += chunk.length
        if (chunk.length > 0) emit({ type, data: chunk })
      } else if (end !== undefined) {
        // Protobuf JSON leaves out defaults: no `exitCode` means 0, no `exited` means false.
        const exited = end.exited === true
        const signal = exited ? null : signalOfStatus(typeof end.status === "string" ? end.status : "")
        const timedOut = !x.cancelled && !exited && x.timeoutMs !== null && x.startedAt !== null && Date.now() - x.startedAt >= x.timeoutMs - 50
        finish(x, { type: "exit", exitCode: exited ? Number(end.exitCode ?? 0) : null, signal, cancelled: x.cancelled, timedOut, outputTruncated: truncated }, emit)
      }
      // keepalive: nothing to do
    }
    return response.stream.pipe(
      Stream.runForEach((chunk) => Effect.sync(() => decoder.push(chunk).forEach(onEnvelope))),
      Effect.catchAllCause((cause) =>
        Effect.sync(() => {
          const error = Cause.squash(cause)
          if (!x.done) x.failure = fail("unavailable", `the e2b process stream broke: ${error instanceof Error ? error.message : String(error)}`)
        })
      ),
      Effect.ensuring(Effect.sync(() => {
        x.attached = false
        // Ended or broken: the next `execEvents` takes the exit or attaches again.
        x.news.tell()
        Deferred.unsafeDone(started, Exit.fail(x.failure ?? fail("unavailable", "the process stream ended before the process started")))
      }))
    )
  }

  /** Opens a Start or Connect stream and checks it is one (a proxy may answer with a plain error page). */
  const openStream = (sandbox: ProviderSandbox, method: "Start" | "Connect", body: unknown, headers: Record<string, string>) =>
    envd(
      sandbox,
      (a) =>
        envdRequest(sandbox, a, "POST", `/process.Process/${method}`).pipe(
          HttpClientRequest.setHeaders({ "connect-protocol-version": "1", "keepalive-ping-interval": "50", ...userHeader(a), ...headers }),
          HttpClientRequest.bodyUint8Array(encodeEnvelope(body), STREAM_CONTENT_TYPE)
        ),
      `process.Process/${method}`,
      { mutating: method === "Start" }
    ).pipe(
      Effect.filterOrFail(
        (response) => (response.headers["content-type"] ?? "").startsWith(STREAM_CONTENT_TYPE),
        (response) => fail("unavailable", `e2b process.Process/${method} answered ${response.headers["content-type"] ?? "no content type"}, not a Connect stream`)
      )
    )

  /** Starts reading a stream in the background; resolves once the process's start event came. */
  const attach = (x: Execution, response: HttpClientResponse.HttpClientResponse) =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void, ProviderError>()
      yield* Effect.forkDaemon(pump(x, response, response.headers[REPLAY_HEADER] === "start", started))
      yield* Deferred.await(started).pipe(
        Effect.timeoutFail({ duration: REQUEST_TIMEOUT, onTimeout: () => fail("unavailable", "e2b sent no start event") })
      )
    })

  const reattach = (sandbox: ProviderSandbox, x: Execution) =>
    Effect.gen(function*() {
      x.attached = true
      x.failure = null
      const response = yield* openStream(sandbox, "Connect", { process: x.selector }, {})
      yield* attach(x, response)
    }).pipe(Effect.tapError(() => Effect.sync(() => {
      x.attached = false
    })))

  const signal = (sandbox: ProviderSandbox, x: Execution, name: "SIGNAL_SIGTERM" | "SIGNAL_SIGKILL") =>
    unary(sandbox, "process.Process/SendSignal", { process: x.selector, signal: name }, Empty, true)

  const lostMessage = (x: Execution) =>
    `the process ${JSON.stringify(x.selector)} is no longer known to envd: it ended while no client was attached (E2B keeps no record of finished processes), so its exit status and any output after event ${nextSeq(x)} are lost`

  const exec: SandboxProvider["exec"] = (sandbox, input) =>
    Effect.gen(function*() {
      const [cmd, ...args] = input.command
      if (cmd === undefined || cmd === "") return yield* fail("invalid_request", "the command is empty")
      const a = yield* accessOf(sandbox)
      const executionId = `${input.pty === undefined ? "e2b" : "e2b-pty"}:${input.processId}`
      const key = executionKey(sandbox, executionId)
      const known = executions.get(key)
      if (known !== undefined && (known.attached || known.done)) return { executionId } // already started by this process
      const timeoutMs = input.timeoutSeconds > 0 ? input.timeoutSeconds * 1000 : null
      const x = newExecution(key, { tag: input.processId }, { maxOutputBytes: input.maxOutputBytes, startedAt: Date.now(), timeoutMs })
      // A retried exec (its first answer was lost) finds its process by tag and re-attaches instead of starting it
      // twice; a first attempt has nothing to find, and saves envd a round trip.
      const running = input.firstAttempt === true
        ? false
        : (yield* unary(sandbox, "process.Process/List", {}, ProcessList)).processes.some((p) => p.tag === input.processId)
      x.attached = true
      executions.set(key, x)
      const response = yield* (running
        ? openStream(sandbox, "Connect", { process: x.selector }, {})
        : openStream(
          sandbox,
          "Start",
          {
            process: { cmd, args, envs: input.environment ?? {}, ...(input.cwd === undefined ? {} : { cwd: input.cwd }) },
            tag: input.processId,
            ...(input.pty === undefined ? {} : { pty: { size: { cols: input.pty.cols, rows: input.pty.rows } } }),
            // Older envd keeps every process's stdin open; from 0.3.0 it is closed unless asked for.
            ...(envdAtLeast(a.envdVersion, ENVD_STDIN_FLAG) ? { stdin: input.stdin === true } : {})
          },
          timeoutMs === null ? {} : { "connect-timeout-ms": String(timeoutMs) }
        )).pipe(Effect.tapError(() => Effect.sync(() => executions.delete(key))))
      yield* attach(x, response).pipe(Effect.tapError(() => Effect.sync(() => executions.delete(key))))
      return { executionId }
    })

  const execEvents: SandboxProvider["execEvents"] = (sandbox, executionId, fromSeq) =>
    Effect.gen(function*() {
      const key = executionKey(sandbox, executionId)
      let x = executions.get(key)
      if (x === undefined) {
        // Not seen by this process (the gateway restarted): re-attach, continuing the caller's sequence.
        x = newExecution(key, selectorOf(executionId), { base: fromSeq })
        executions.set(key, x)
      }
      if (fromSeq < x.base || fromSeq > nextSeq(x)) {
        return yield* fail("invalid_request", `events from ${fromSeq} are not available (this execution has ${x.base}..${nextSeq(x)})`)
      }
      // Asking from `fromSeq` acknowledges everything before it.
      x.events.splice(0, fromSeq - x.base)
      x.base = fromSeq
      if (x.events.length === 0 && !x.done && !x.attached && Date.now() >= x.retryAt) {
        const attached = yield* Effect.either(reattach(sandbox, x))
        if (Either.isRight(attached)) {
          x.failingSince = null
        } else if (attached.left.kind === "not_found") {
          if (!x.cancelled) return yield* fail("not_found", lostMessage(x))
          // We cancelled it and it is gone: that is the outcome, only the signal is unknown.
          const current = x
          let seq = nextSeq(current)
          finish(current, { type: "exit", exitCode: null, signal: null, cancelled: true, timedOut: false, outputTruncated: current.truncated }, (e) => {
            current.events.push({ ...e, seq: seq++ } as ExecEvent)
          })
        } else if (attached.left.kind === "unavailable") {
          // Paused or briefly unreachable: no events yet; try again shortly, and give up after a while.
          if (reattachFailed(x)) return yield* attached.left
        } else {
          return yield* attached.left
        }
      }
      return x.events.slice()
    })

  /**
   * The stream is read into the buffer as it comes, so a quiet command's job waits on that. Not attached (a
   * restart, a broken stream): as often as a quiet command was polled, since `execEvents` is what attaches again.
   */
  const execNews: NonNullable<SandboxProvider["execNews"]> = (sandbox, executionId, maxMs) =>
    Effect.suspend(() => {
      const x = executions.get(executionKey(sandbox, executionId))
      if (x !== undefined && x.attached && !x.done) return x.news.wait(maxMs)
      return x?.news.pending === true ? Effect.void : waitAsPoll(maxMs)
    })

  const cancelExec: SandboxProvider["cancelExec"] = (sandbox, executionId) =>
    Effect.gen(function*() {
      const key = executionKey(sandbox, executionId)
      let x = executions.get(key)
      if (x === undefined) {
        x = newExecution(key, selectorOf(executionId))
        executions.set(key, x)
      }
      if (x.done) return { cancelled: false }
      const before = x.cancelled
      x.cancelled = true // before the signal, so the exit that follows says so
      const current = x
      const sent = yield* signal(sandbox, current, "SIGNAL_SIGTERM").pipe(
        Effect.as(true),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(false)),
        Effect.tapError(() => Effect.sync(() => {
          current.cancelled = before
        }))
      )
      if (!sent) {
        current.cancelled = before
        return { cancelled: false }
      }
      yield* Effect.forkDaemon(
        Effect.sleep(KILL_GRACE).pipe(Effect.zipRight(Effect.suspend(() => (current.done ? Effect.void : Effect.ignore(signal(sandbox, current, "SIGNAL_SIGKILL"))))))
      )
      return { cancelled: true }
    })

  /** Forgets a destroyed sandbox's executions. */
  const forget = (sandboxId: string) => {
    for (const key of executions.keys()) if (key.startsWith(`${sandboxId}/`)) executions.delete(key)
  }

  /**
   * envd's SendInput (base64 bytes) and CloseStdin, addressed by our tag like every other call. A terminal takes
   * its input as `pty` bytes, and its end as ^D typed (envd has no CloseStdin for a terminal).
   */
  const sendInput = (sandbox: ProviderSandbox, executionId: string, data: Uint8Array, eof: boolean) =>
    Effect.gen(function*() {
      const selector = selectorOf(executionId)
      const pty = executionId.startsWith("e2b-pty:")
      const bytes = pty && eof ? Buffer.concat([data, Buffer.from([4])]) : data
      if (bytes.length > 0) {
        const input = { [pty ? "pty" : "stdin"]: Buffer.from(bytes).toString("base64") }
        yield* unary(sandbox, "process.Process/SendInput", { process: selector, input }, Empty, true)
      }
      if (eof && !pty) yield* unary(sandbox, "process.Process/CloseStdin", { process: selector }, Empty, true)
    })

  /** envd's Update: a terminal's new size. */
  const resizeTerminal = (sandbox: ProviderSandbox, executionId: string, size: { readonly cols: number; readonly rows: number }) =>
    executionId.startsWith("e2b-pty:")
      ? unary(sandbox, "process.Process/Update", { process: selectorOf(executionId), pty: { size: { cols: size.cols, rows: size.rows } } }, Empty, true)
      : Effect.fail(fail("invalid_request", "the process has no terminal"))

  return { exec, execEvents, execNews, cancelExec, sendInput, resizeTerminal, forget }
}
