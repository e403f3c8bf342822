/**
 * Runloop executions, on the routes Runloop's SDK uses: `POST /v1/devboxes/{id}/execute_async {command}` (one shell
 * line: into the working directory, the environment exported, then `exec` of the quoted argv) answers the
 * execution; `GET /v1/devboxes/{id}/executions/{execution_id}` is its status, and once `completed` its exit status
 * and output (buffered: stdout, then stderr). Runloop answers only the last lines of each output there (100 by
 * default, `*_truncated` when lines were left out), so a cut output is read whole from the execution's event
 * streams (`…/stream_stdout_updates`, `…/stream_stderr_updates`: `{output, offset}` events), as the SDK's
 * `ExecutionResult.stdout()` does — at most `maxOutputBytes` of each, counted as it comes, the rest left unread.
 * `POST …/executions/{execution_id}/kill {kill_process_group: true}` cancels it. The execution id carries
 * Runloop's, so `execEvents` and `cancelExec` work after a gateway restart.
 *
 * Not used: standard input (`attach_stdin`, `send_std_in`): Runloop's own SDK disables it (its `sendStdIn`
 * kills the execution), so processes asking for stdin are refused, as declared.
 *
 * No persistent shell (`shell_name`) is used: it would carry one command's directory and environment into the
 * next. Runloop has no name for an execution, so a retried exec whose first answer was lost may run twice.
 * Timeouts: none is sent; the gateway cancels a process at its deadline.
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect, Stream } from "effect"
import { cdOrMark, cwdMissing, endedAtCd } from "../../../src/providers/cwd.ts"
import { bufferedEvents, type ExecInput, type ProviderError, type ProviderSandbox, type SandboxProvider, unsupported, waitAsPoll } from "../../../src/providers/Provider.ts"
import { executionIds, exitOf, NAME, type RunloopContext, shellDir, shellQuote, WireExecution } from "./wire.ts"

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/** The shell line: `cd` into the working directory (the home when none is given), exports, then the argv. */
export const commandLine = (input: Pick<ExecInput, "command" | "cwd" | "environment">) => {
  const parts: Array<string> = []
  if (input.cwd !== undefined) parts.push(cdOrMark(shellDir(input.cwd)))
  const env = Object.entries(input.environment ?? {})
  if (env.length > 0) parts.push(`export ${env.map(([k, v]) => `${k}=${shellQuote(v)}`).join(" ")}`)
  parts.push(`exec ${input.command.map(shellQuote).join(" ")}`)
  return parts.join(" && ")
}

/** The longest line of an event stream read (one event's JSON): a provider sending more is not what we expect. */
export const MAX_EVENT_LINE_CHARS = 16 * 1024 * 1024

/**
 * The `output` of a server-sent event stream of `{output, offset}` events, at most `cap` bytes of it (UTF-8):
 * reading stops at the cap (`truncated`), or fails when a line passes `MAX_EVENT_LINE_CHARS` or an event is not
 * of that shape. Nothing is read past what is needed.
 */
export const readOutputEvents = <E>(
  body: Stream.Stream<Uint8Array, E>,
  cap: number,
  fail: (message: string) => ProviderError
): Effect.Effect<{ readonly output: string; readonly truncated: boolean }, ProviderError> => {
  const decoder = new TextDecoder()
  const state = { pending: "", data: [] as Array<string>, event: "", parts: [] as Array<Uint8Array>, size: 0, truncated: false }
  const dispatch = (): ProviderError | undefined => {
    const data = state.data.join("\n")
    const event = state.event
    state.data = []
    state.event = ""
    if (data === "") return undefined
    if (event === "error") return fail(`runloop output stream sent an error: ${data.slice(0, 300)}`)
    let parsed: unknown
    try {
      parsed = JSON.parse(data)
    } catch {
      return fail("runloop output stream sent an event that is not JSON")
    }
    const output = (parsed as { output?: unknown } | null)?.output
    if (typeof output !== "string") return fail("runloop output stream sent an event without output")
    const bytes = Buffer.from(output, "utf8")
    const room = cap - state.size
    if (bytes.length > room) state.truncated = true
    const kept = bytes.subarray(0, Math.max(0, room))
    state.parts.push(kept)
    state.size += kept.length
    return undefined
  }
  const take = (text: string): ProviderError | undefined => {
    state.pending += text
    for (let nl = state.pending.indexOf("\n"); nl !== -1 && !state.truncated; nl = state.pending.indexOf("\n")) {
      const line = state.pending.slice(0, nl).replace(/\r$/, "")
      state.pending = state.pending.slice(nl + 1)
      if (line === "") {
        const failed = dispatch()
        if (failed !== undefined) return failed
      } else if (line.startsWith("data:")) state.data.push(line.slice(line[5] === " " ? 6 : 5))
      else if (line.startsWith("event:")) state.event = line.slice(6).trim()
      // comments (":") and other fields are not ours
    }
    return state.pending.length > MAX_EVENT_LINE_CHARS ? fail(`runloop output stream sent a line longer than ${MAX_EVENT_LINE_CHARS} characters`) : undefined
  }
  return body.pipe(
    Stream.mapError(() => fail("runloop output stream broke off")),
    Stream.runFoldWhileEffect(false, (done) => !done && !state.truncated, (_, chunk) => {
      const failed = take(decoder.decode(chunk, { stream: true }))
      return failed === undefined ? Effect.succeed(false) : Effect.fail(failed)
    }),
    Effect.flatMap(() => {
      // A last event without its blank line still counts.
      const failed = state.truncated ? undefined : take(`${decoder.decode()}\n\n`)
      return failed === undefined ? Effect.succeed({ output: Buffer.concat(state.parts).toString("utf8"), truncated: state.truncated }) : Effect.fail(failed)
    })
  )
}

export const makeProcesses = (ctx: RunloopContext) => {
  const { api, decode, devboxPath, fail, send } = ctx
  /** Executions this instance killed: their exit is a cancel whatever status the shell reports. */
  const killed = new Set<string>()

  const executionPath = (sandbox: ProviderSandbox, executionId: string, rest = "") =>
    devboxPath(sandbox.resourceId, `/executions/${encodeURIComponent(executionId)}${rest}`)
  const getExecution = (sandbox: ProviderSandbox, executionId: string) =>
    send(api("GET", executionPath(sandbox, executionId)), "get execution").pipe(Effect.flatMap(decode(WireExecution, "get execution")))

  const refOf = executionIds.decode

  const exec: SandboxProvider["exec"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process === null) return yield* unsupported(NAME, "processes")
      if (input.stdin === true) return yield* unsupported(NAME, "standard input")
      if (input.command.length === 0) return yield* fail("invalid_request", "the command is empty")
      const bad = Object.keys(input.environment ?? {}).find((k) => !ENV_NAME.test(k))
      if (bad !== undefined) return yield* fail("invalid_request", `${bad} is not a valid environment variable name`)
      const maxOutputBytes = Math.min(input.maxOutputBytes, ctx.capabilities.process.maxOutputBytes)
      const started = yield* send(
        api("POST", devboxPath(sandbox.resourceId, "/execute_async")).pipe(HttpClientRequest.bodyUnsafeJson({ command: commandLine(input) })),
        "execute"
      ).pipe(Effect.flatMap(decode(WireExecution, "execute")))
      return { executionId: executionIds.encode({ executionId: started.execution_id, maxOutputBytes }) }
    })

  /** One whole output of an execution from its event stream, at most `cap` bytes. */
  const wholeOutput = (sandbox: ProviderSandbox, executionId: string, which: "stdout" | "stderr", cap: number) =>
    send(
      api("GET", executionPath(sandbox, executionId, `/stream_${which}_updates`)).pipe(HttpClientRequest.setHeader("accept", "text/event-stream")),
      `stream ${which}`
    ).pipe(Effect.flatMap((response) => readOutputEvents(response.stream, cap, (message) => fail("unavailable", message))))

  const execEvents: SandboxProvider["execEvents"] = (sandbox, executionId, fromSeq) =>
    Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const execution = yield* getExecution(sandbox, ref.executionId)
      if (execution.status !== "completed") return []
      // Stopped at the `cd`: the working directory is missing (src/providers/cwd.ts), not the command's failure (the mark is
      // the whole output, never cut).
      if (endedAtCd({ stdout: execution.stdout ?? "", stderr: execution.stderr ?? "" }, execution.exit_status)) return yield* cwdMissing(NAME)
      let stdout = { output: execution.stdout ?? "", truncated: false }
      let stderr = { output: execution.stderr ?? "", truncated: false }
      // Only the last lines came: the whole output is in the streams (each read up to the limit, no further).
      if (execution.stdout_truncated === true) stdout = yield* wholeOutput(sandbox, ref.executionId, "stdout", ref.maxOutputBytes)
      if (execution.stderr_truncated === true) stderr = yield* wholeOutput(sandbox, ref.executionId, "stderr", ref.maxOutputBytes)
      const events = bufferedEvents(
        { stdout: stdout.output, stderr: stderr.output },
        exitOf(execution.exit_status, killed.has(ref.executionId)),
        ref.maxOutputBytes,
        stdout.truncated || stderr.truncated
      )
      return events.slice(fromSeq)
    })

  /**
   * Runloop gives a command's output once it completed, so the news is its completion: the execution's
   * `wait_for_status` long-poll, sent as the SDK's `awaitCompleted` sends it and, as it does, left after `maxMs`
   * (Runloop answers 408 once it has held a request 25 s: the wait ends then). One that fails waits as a poll would.
   */
  const execNews: NonNullable<SandboxProvider["execNews"]> = (sandbox, executionId, maxMs) =>
    refOf(executionId).pipe(
      Effect.flatMap((ref) =>
        send(
          api("POST", executionPath(sandbox, ref.executionId, "/wait_for_status")).pipe(HttpClientRequest.bodyUnsafeJson({ statuses: ["completed"] })),
          "wait for execution",
          { mutating: false, accept: (status) => status === 408 }
        )
      ),
      Effect.flatMap((response) => Effect.ignore(response.text)),
      Effect.timeout(maxMs),
      Effect.catchAll(() => waitAsPoll(maxMs))
    )

  const cancelExec: SandboxProvider["cancelExec"] = (sandbox, executionId) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process?.cancel !== true) return yield* unsupported(NAME, "cancelling processes")
      const ref = yield* refOf(executionId)
      const execution = yield* getExecution(sandbox, ref.executionId).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))
      // Already over: its real exit is kept.
      if (execution === null || execution.status === "completed") return { cancelled: false }
      killed.add(ref.executionId)
      return yield* send(
        api("POST", executionPath(sandbox, ref.executionId, "/kill")).pipe(HttpClientRequest.bodyUnsafeJson({ kill_process_group: true })),
        "kill execution"
      ).pipe(
        Effect.as({ cancelled: true }),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed({ cancelled: false }))
      )
    })

  return { exec, execEvents, execNews, execNewsAfterMs: 0, cancelExec }
}
