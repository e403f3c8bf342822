/**
 * Runloop executions: `POST /v1/devboxes/{id}/execute_async {command}` (one shell line: into the working
 * directory, the environment exported, then `exec` of the quoted argv) answers the execution; `GET
 * /v1/devboxes/{id}/executions/{execution_id}` is its status, and once `completed` its exit status and whole
 * output (buffered: stdout, then stderr); `POST …/executions/{execution_id}/kill {kill_process_group: true}`
 * cancels it. The execution id carries Runloop's, so `execEvents` and `cancelExec` work after a gateway restart.
 *
 * No persistent shell (`shell_name`) is used: it would carry one command's directory and environment into the
 * next. Runloop has no name for an execution, so a retried exec whose first answer was lost may run twice.
 * Timeouts: none is sent; the gateway cancels a process at its deadline.
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import { cdOrMark, cwdMissing, endedAtCd } from "../../core/cwd.ts"
import { bufferedEvents, type ExecInput, type ProviderSandbox, type SandboxProvider, unsupported } from "../../core/Provider.ts"
import { decodeExecutionId, encodeExecutionId, exitOf, NAME, type RunloopContext, shellDir, shellQuote, WireExecution } from "./wire.ts"

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

export const makeProcesses = (ctx: RunloopContext) => {
  const { api, decode, devboxPath, fail, send } = ctx
  /** Executions this instance killed: their exit is a cancel whatever status the shell reports. */
  const killed = new Set<string>()

  const executionPath = (sandbox: ProviderSandbox, executionId: string, rest = "") =>
    devboxPath(sandbox.resourceId, `/executions/${encodeURIComponent(executionId)}${rest}`)
  const getExecution = (sandbox: ProviderSandbox, executionId: string) =>
    send(api("GET", executionPath(sandbox, executionId)), "get execution").pipe(Effect.flatMap(decode(WireExecution, "get execution")))

  const refOf = (executionId: string) => {
    const ref = decodeExecutionId(executionId)
    return ref === undefined ? Effect.fail(fail("invalid_request", `${executionId} is not a Runloop execution id`)) : Effect.succeed(ref)
  }

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
      return { executionId: encodeExecutionId({ executionId: started.execution_id, maxOutputBytes }) }
    })

  const execEvents: SandboxProvider["execEvents"] = (sandbox, executionId, fromSeq) =>
    Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const execution = yield* getExecution(sandbox, ref.executionId)
      if (execution.status !== "completed") return []
      // Stopped at the `cd`: the working directory is missing (core/cwd.ts), not the command's failure.
      if (endedAtCd({ stdout: execution.stdout ?? "", stderr: execution.stderr ?? "" }, execution.exit_status)) return yield* cwdMissing(NAME)
      const events = bufferedEvents(
        { stdout: execution.stdout ?? "", stderr: execution.stderr ?? "" },
        exitOf(execution.exit_status, killed.has(ref.executionId)),
        ref.maxOutputBytes,
        execution.stdout_truncated === true || execution.stderr_truncated === true
      )
      return events.slice(fromSeq)
    })

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

  return { exec, execEvents, cancelExec }
}
