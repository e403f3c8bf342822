/**
 * Freestyle commands through `POST /v5/vms/{id}/exec-await {command, timeoutMs, stdin?}`: one call that holds until
 * the command ends (at most 300 s, Freestyle's cap for VMs without its native exec agent, hence
 * `maxTimeoutSeconds: 300`; `timeoutMs` is always sent, Freestyle's default being 30 s) and answers its whole
 * output (`{stdout, stderr, statusCode}`): output is buffered until the end, stdout then stderr.
 *
 * - The command is one shell line: into the working directory, the sandbox's and the process's environment
 *   exported, then `exec` of the quoted argv (`exec-await` has no cwd field; its `env` would do as well as the
 *   exports, which also work on older agents).
 * - `exec` answers at once with our execution id; the call runs in the background in this instance, and
 *   `execEvents` answers nothing until it is over, then the buffered events and the exit.
 * - Standard input (`stdin: true`): what `sendInput` gives is held until end-of-file, then sent with the command as
 *   base64 (at most 1 MiB), so a command reading its input gets all of it at once.
 * - Exits: `statusCode` is the exit code; a null one is a command the timeout killed (Freestyle's SDK says so), as is
 *   a 408 (`EXEC_TIMED_OUT`). A 202 is unresolved (the 202 rule): the command may still run, and nothing more can be learnt
 *   through `exec-await`, so the exit says `UNKNOWN` instead of inventing an exit code, and the call is never sent
 *   again (a command is not run twice).
 * - No cancel: `exec-await` has no handle to kill (reference §3.1). The outcome is held in memory: after a gateway
 *   restart an execution it started reads as an `UNKNOWN` exit.
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import type { ExecEvent } from "../../../src/runtime/LocalRuntime.ts"
import type { ExecInput, ProviderError, ProviderSandbox, SandboxProvider } from "../../../src/providers/Provider.ts"
import { cdOrMark, cwdMissing, endedAtCd } from "../../../src/providers/cwd.ts"
import { bufferedEvents, unsupported } from "../../../src/providers/Provider.ts"
import {
  executionIds,
  type ExecutionRef,
  type FreestyleContext,
  MAX_EXEC_SECONDS,
  MAX_STDIN_BYTES,
  NAME,
  shellQuote,
  WireExecResult
} from "./wire.ts"
import { News } from "../../core/news.ts"

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
/** Finished executions kept for reading again (the oldest are forgotten first). */
const MAX_KEPT = 512

/** The shell line: `cd` into the working directory, exports, then the argv. */
export const commandLine = (input: Pick<ExecInput, "command" | "cwd">, environment: Readonly<Record<string, string>>) => {
  const parts: Array<string> = []
  if (input.cwd !== undefined) parts.push(cdOrMark(shellQuote(input.cwd)))
  const env = Object.entries(environment)
  if (env.length > 0) parts.push(`export ${env.map(([k, v]) => `${k}=${shellQuote(v)}`).join(" ")}`)
  parts.push(`exec ${input.command.map(shellQuote).join(" ")}`)
  return parts.join(" && ")
}

type Exit = Extract<ExecEvent, { type: "exit" }>
type ExitFields = Pick<Exit, "exitCode" | "signal" | "timedOut">

const UNKNOWN: ExitFields = { exitCode: null, signal: "UNKNOWN", timedOut: false }


interface Run {
  /** The request, sent once the standard input (if any) is complete. */
  readonly body: { readonly command: string; readonly timeoutMs: number }
  readonly vmId: string
  readonly maxOutputBytes: number
  readonly stdin: Array<Uint8Array>
  stdinBytes: number
  started: boolean
  events: ReadonlyArray<ExecEvent> | null
  failure: ProviderError | null
  /** Told when its answer came (`execNews`). */
  readonly news: News
}

const envOf = (sandbox: ProviderSandbox): Record<string, string> => {
  const env = sandbox.metadata["environment"]
  if (env === null || typeof env !== "object" || Array.isArray(env)) return {}
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => typeof e[1] === "string"))
}

export const makeProcesses = (ctx: FreestyleContext) => {
  const { api, decode, fail, sendExec, vmPath } = ctx
  const runs = new Map<string, Run>()

  const forget = () => {
    if (runs.size <= MAX_KEPT) return
    for (const [key, run] of runs) {
      if (runs.size <= MAX_KEPT) break
      if (run.events !== null || run.failure !== null) runs.delete(key)
    }
  }

  /** Sends `exec-await` once, in the background, and keeps what it answers. */
  const start = (run: Run) => {
    run.started = true
    const stdin = Buffer.concat(run.stdin)
    const body = stdin.length === 0 ? run.body : { ...run.body, stdin: stdin.toString("base64") }
    const call = sendExec(api("POST", vmPath(run.vmId, "/exec-await")).pipe(HttpClientRequest.bodyUnsafeJson(body)), "exec-await", {
      accept: (status) => status === 408
    }).pipe(
      Effect.flatMap((response) => {
        if (response.status === 408) return Effect.succeed(bufferedEvents({ stdout: "", stderr: "" }, { exitCode: null, signal: null, timedOut: true }, run.maxOutputBytes))
        if (response.status === 202) return Effect.succeed(bufferedEvents({ stdout: "", stderr: "" }, UNKNOWN, run.maxOutputBytes))
        return Effect.flatMap(decode(WireExecResult, "exec-await")(response), (result) =>
          // Stopped at the `cd`: the working directory is missing (src/providers/cwd.ts), not the command's failure.
          endedAtCd({ stdout: result.stdout ?? "", stderr: result.stderr ?? "" }, result.statusCode)
            ? Effect.fail(cwdMissing(NAME))
            // A null status is a command the timeout killed (Freestyle's ExecResult), its output kept.
            : Effect.succeed(bufferedEvents(
            { stdout: result.stdout ?? "", stderr: result.stderr ?? "" },
            result.statusCode == null ? { exitCode: null, signal: null, timedOut: true } : { exitCode: result.statusCode, signal: null, timedOut: false },
            run.maxOutputBytes
          )))
      }),
      // A lost answer: the command may have run; its exit is not known (it is not sent again).
      Effect.catchIf((e) => e.kind === "unknown_outcome", () => Effect.succeed(bufferedEvents({ stdout: "", stderr: "" }, UNKNOWN, run.maxOutputBytes))),
      Effect.match({
        onFailure: (e) => void (run.failure = e),
        onSuccess: (events) => void (run.events = events)
      }),
      Effect.ensuring(Effect.sync(() => run.news.tell()))
    )
    Effect.runFork(call)
  }

  const refOf = executionIds.decode

  const exec: SandboxProvider["exec"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (ctx.capabilities.process === null) return yield* unsupported(NAME, "processes")
      if (input.pty !== undefined) return yield* unsupported(NAME, "terminals")
      if (input.command.length === 0) return yield* fail("invalid_request", "the command is empty")
      const environment = { ...envOf(sandbox), ...input.environment }
      const bad = Object.keys(environment).find((k) => !ENV_NAME.test(k))
      if (bad !== undefined) return yield* fail("invalid_request", `${bad} is not a valid environment variable name`)
      const seconds = Math.min(Math.max(1, Math.ceil(input.timeoutSeconds)), MAX_EXEC_SECONDS)
      const ref: ExecutionRef = { vmId: sandbox.resourceId, key: crypto.randomUUID() }
      const run: Run = {
        body: { command: commandLine(input, environment), timeoutMs: seconds * 1000 },
        vmId: sandbox.resourceId,
        maxOutputBytes: Math.min(input.maxOutputBytes, ctx.capabilities.process.maxOutputBytes),
        stdin: [],
        stdinBytes: 0,
        started: false,
        events: null,
        failure: null,
        news: new News()
      }
      runs.set(ref.key, run)
      forget()
      // With standard input the command waits for its end (sent with the command); otherwise it starts now.
      if (input.stdin !== true) start(run)
      return { executionId: executionIds.encode(ref) }
    })

  const execEvents: SandboxProvider["execEvents"] = (_sandbox, executionId, fromSeq) =>
    Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const run = runs.get(ref.key)
      // Started by another instance (before a restart): its outcome went with it.
      if (run === undefined) return bufferedEvents({ stdout: "", stderr: "" }, UNKNOWN, 0).slice(fromSeq)
      if (run.failure !== null) return yield* run.failure
      return run.events === null ? [] : run.events.slice(fromSeq)
    })

  const sendInput: NonNullable<SandboxProvider["sendInput"]> = (_sandbox, executionId, data, eof) =>
    Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const run = runs.get(ref.key)
      if (run === undefined) return yield* fail("not_found", `freestyle execution ${executionId} is not known here`)
      if (run.started) return yield* fail("customer", "the standard input of this command is already closed")
      if (run.stdinBytes + data.length > MAX_STDIN_BYTES) return yield* fail("invalid_request", `freestyle takes at most ${MAX_STDIN_BYTES} bytes of standard input`)
      run.stdin.push(data.slice())
      run.stdinBytes += data.length
      if (eof) start(run)
    })

  /** Its answer comes to this instance in the background, so a quiet command's job waits for that. */
  const execNews: NonNullable<SandboxProvider["execNews"]> = (_sandbox, executionId, maxMs) =>
    refOf(executionId).pipe(
      Effect.flatMap((ref) => {
        const run = runs.get(ref.key)
        // Unknown here (its outcome went with another instance) or answered: `execEvents` says so at once.
        return run === undefined || run.events !== null || run.failure !== null ? Effect.void : run.news.wait(maxMs)
      }),
      Effect.catchAll(() => Effect.void)
    )

  const cancelExec: SandboxProvider["cancelExec"] = () => Effect.fail(unsupported(NAME, "cancelling processes (exec-await has no handle to kill)"))

  return { exec, execEvents, execNews, execNewsAfterMs: 0, cancelExec, sendInput }
}
