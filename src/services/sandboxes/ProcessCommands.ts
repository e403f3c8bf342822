/**
 * Processes as the API accepts them: start (queued with its job, run at once by the runner), read, cancel, and
 * the reads their routes answer (a sandbox's latest, a process's events, its end). The execution itself is
 * Processes.ts's job.
 */
import { Effect } from "effect"
import { inTransaction } from "../../db/Db.ts"
import { ProcessesRepo } from "../../db/repos/Processes.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { conflict, notFound } from "../../domain/Errors.ts"
import { newId, type ProcessId, type SandboxId } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import { appendEvent } from "../Events.ts"
import { enqueueJob } from "../JobRegistry.ts"
import { nextSignal, processTopic } from "../Signals.ts"
import { ProcessExecuteJob } from "./JobTypes.ts"
import { appendProcessEvent, getProcessRow, processJobKey, TERMINAL_PROCESS_STATES } from "./Processes.ts"
import { type Caller, readySandboxOf, requireCapability, sandboxOf } from "./SandboxAccess.ts"
import { unsupportedCall } from "./Unsupported.ts"

export interface StartProcessInput {
  readonly command: ReadonlyArray<string>
  readonly cwd?: string | undefined
  readonly environment?: Readonly<Record<string, string>> | undefined
  readonly timeout_seconds: number
  readonly max_output_bytes: number
  readonly stdin: boolean
  readonly pty?: { readonly cols: number; readonly rows: number } | undefined
}

export const startProcess = (caller: Caller, sandboxId: SandboxId, input: StartProcessInput) =>
  inTransaction(Effect.gen(function*() {
    const sandbox = yield* readySandboxOf(caller, sandboxId)
    yield* requireCapability(sandbox, ["process", "execute"], { kind: "execute" })
    // Refused before anything starts: a provider that cannot take input never gets such a process.
    const provider = (yield* ProviderAccounts).target(sandbox)?.provider
    if (input.stdin && input.pty === undefined && (provider?.sendInput === undefined || provider.capabilities.process?.stdin === false)) {
      return yield* unsupportedCall(sandbox, { kind: "stdin" })
    }
    if (input.pty !== undefined && (provider?.capabilities.process?.terminal !== true || provider.resizeTerminal === undefined || provider.sendInput === undefined)) {
      return yield* unsupportedCall(sandbox, { kind: "terminal" })
    }
    const now = yield* nowIso
    const id = newId("proc")
    yield* ProcessesRepo.insert({
      id,
      projectId: caller.projectId,
      sandboxId,
      keyId: caller.keyId,
      command: input.command,
      cwd: input.cwd ?? null,
      environment: input.environment ?? {},
      timeoutSeconds: input.timeout_seconds,
      maxOutputBytes: input.max_output_bytes,
      // A terminal always takes input (typed through an attach or `…/stdin`).
      stdin: input.stdin || input.pty !== undefined,
      pty: input.pty ?? null,
      now
    })
    yield* SandboxesRepo.touch(sandboxId)
    yield* appendProcessEvent(id, "queued", {})
    yield* appendEvent({ type: "process.queued", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: sandboxId, process_id: id } })
    yield* enqueueJob(ProcessExecuteJob, { dedupeKey: processJobKey(id), payload: { process_id: id }, sandboxId, ordered: true })
    return (yield* getProcessRow(id))!
  })).pipe(Effect.withSpan("ProcessCommands.startProcess", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

/** A process of the caller's project, or 404. */
export const processOf = (caller: Caller, sandboxId: SandboxId, processId: ProcessId) =>
  Effect.flatMap(getProcessRow(processId), (row) =>
    row === undefined || row.project_id !== caller.projectId || row.sandbox_id !== sandboxId ? Effect.fail(notFound("Process")) : Effect.succeed(row))

export const cancelProcess = (caller: Caller, sandboxId: SandboxId, processId: ProcessId) =>
  inTransaction(Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    const row = yield* processOf(caller, sandboxId, processId)
    if (TERMINAL_PROCESS_STATES.includes(row.state)) {
      return yield* conflict("process_terminal", `The process already ${row.state === "succeeded" ? "succeeded" : `is ${row.state}`}`, { state: row.state })
    }
    if (row.state !== "queued") yield* requireCapability(sandbox, ["process", "cancel"], { kind: "cancel" })
    if (row.cancel_requested_at === null) {
      yield* ProcessesRepo.requestCancel(processId, yield* nowIso)
      yield* appendProcessEvent(processId, "cancel_requested", {})
      yield* appendEvent({ type: "process.cancel_requested", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: sandboxId, process_id: processId } })
    }
    return (yield* getProcessRow(processId))!
  })).pipe(Effect.withSpan("ProcessCommands.cancelProcess", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))


/** A sandbox's latest processes (at most `limit`), with the sandbox (its capabilities go with each). */
export const latestProcesses = (caller: Caller, sandboxId: SandboxId, limit: number) =>
  Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    return { sandbox, processes: yield* ProcessesRepo.latestOf(sandbox.id, limit) }
  })

/** A process's stored events after `afterSeq`, at most `limit`. */
export const processEventsAfter = (processId: ProcessId, afterSeq: number, limit: number) => ProcessesRepo.eventsAfter(processId, afterSeq, limit)

/** Whether the process has ended (or is gone): a followed event stream closes then. */
export const processFinished = (processId: ProcessId) =>
  Effect.map(ProcessesRepo.get(processId), (row) => row === undefined || TERMINAL_PROCESS_STATES.includes(row.state))

/** The process in its terminal state once it ends, if that is within `ms`; woken as its events are stored. */
export const processEndedWithin = (processId: ProcessId, ms: number) =>
  Effect.gen(function*() {
    const deadline = Date.now() + ms
    for (;;) {
      const row = yield* ProcessesRepo.get(processId)
      if (row !== undefined && TERMINAL_PROCESS_STATES.includes(row.state)) return row
      const left = deadline - Date.now()
      if (left <= 0) return undefined
      yield* nextSignal(processTopic(processId), Math.min(left, 1000))
    }
  })
