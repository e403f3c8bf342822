/**
 * Processes (spec §2.6; reference §3 "Process"): queued → running → succeeded | failed | cancelled | timed_out,
 * with `cancelling` in between. The `process.execute` job starts the command at the provider and then copies its
 * ordered output into `process_events` until it exits. It keeps its lease while the process runs; after a gateway
 * restart the job is reclaimed and carries on from the provider sequence it had reached, so no output is lost or
 * duplicated (the provider keeps running processes while the gateway is away).
 */
import { Effect, Option } from "effect"
import { provideRepositories } from "../../db/Database.ts"
import { Db } from "../../db/Db.ts"
import { type NewProcessEvent, type ProcessRow, ProcessesRepo, type ProcessStateValue, type TerminalProcessState } from "../../db/repos/Processes.ts"
import { notify, processTopic, publish, signalled } from "../Signals.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import type { ErrorObject } from "../../domain/Errors.ts"
import { nowIso } from "../../domain/Time.ts"
import type { ExecEvent } from "../../runtime/LocalRuntime.ts"
import { type ProviderError, QUIET_POLL_MS, type SandboxProvider } from "../../providers/Provider.ts"
import { appendEvent } from "../Events.ts"
import { type JobHandler, JobError } from "../JobRegistry.ts"
import { logProviderFailure, processFailure } from "./ProviderErrors.ts"
import { getSandboxRow } from "./SandboxRows.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import type { ProcessId, ProjectId, SandboxId } from "../../domain/Ids.ts"

export type { ProcessRow }
export type ProcessState = ProcessStateValue
export const TERMINAL_PROCESS_STATES: ReadonlyArray<ProcessState> = ["succeeded", "failed", "cancelled", "timed_out"]

/** Output is stored in chunks of at most this size (reference: 256 KiB). */
const CHUNK_BYTES = 256 * 1024
/** Grace after the deadline before the gateway cancels itself (the provider enforces the timeout too). */
const DEADLINE_GRACE_MS = 2_000
/** The longest wait between two polls of a running command's provider while it is busy (heard from within the last QUIET_AFTER_MS). */
const MAX_IDLE_MS = 10
/** A command not heard from for this long is quiet: its provider is polled less often, the longer the quieter. */
const QUIET_AFTER_MS = 100
/** The longest wait between two polls of a quiet command (what its next output may wait to be noticed). */
const MAX_QUIET_WAIT_MS = QUIET_POLL_MS
/**
 * A command quiet this long waits on its provider's push (`execNews`: Daytona follows its log over a WebSocket)
 * instead of being polled, unless its provider says how long (`execNewsAfterMs`: 0 where the news is in memory).
 */
const PUSH_AFTER_QUIET_MS = 1_000
/** The longest such a wait without news: what a lost push would cost, and how late a deadline may be noticed. */
const MAX_PUSH_WAIT_MS = 5_000
/**
 * The most an empty poll waits before the next: 10 ms while the command is busy; once it is quiet, a tenth of how
 * long it has been (a command quiet for 2.5 s or more is polled 4 times a second). Without that a command quiet for
 * minutes — a server, a long build — was polled 100 times a second: ten of them took a third of a core of the
 * gateway on E2B and two thirds of the machine on Daytona's emulator.
 */
export const pollCap = (quietMs: number) => Math.min(MAX_QUIET_WAIT_MS, Math.max(MAX_IDLE_MS, quietMs < QUIET_AFTER_MS ? 0 : quietMs / 10))

/** Whether a command quiet for `quietMs` waits on its provider's push rather than being polled (no cancel in flight). */
export const waitsOnNews = (provider: Pick<SandboxProvider, "execNews" | "execNewsAfterMs">, quietMs: number) =>
  provider.execNews !== undefined && quietMs >= (provider.execNewsAfterMs ?? PUSH_AFTER_QUIET_MS)

export const getProcessRow = (id: ProcessId) => ProcessesRepo.get(id)

export const processJobKey = (processId: ProcessId) => `process:execute:${processId}`

/**
 * Appends one event with the next sequence number of the process (call inside a transaction), published (Signals.ts
 * `publish`: here, and to the other replicas in the append's own statement).
 */
export const appendProcessEvent = (processId: ProcessId, type: string, data: Readonly<Record<string, unknown>>) =>
  Effect.zipLeft(ProcessesRepo.appendEvent(processId, type, data, processTopic(processId)), notify(processTopic(processId)))

/** A provider failure as the process's error: in the user's terms (ProviderErrors.ts); the provider's words are logged. */
const providerFailure = (row: { readonly command: ReadonlyArray<string>; readonly cwd: string | null }) => (e: ProviderError) =>
  Effect.zipRight(
    logProviderFailure("process", e),
    Effect.fail(
      new JobError({
        error: processFailure(e, { command: row.command, cwd: row.cwd }),
        retryable: e.retryable || e.kind === "unavailable" || e.kind === "unknown_outcome"
      })
    )
  )

/** The durable event of each way a process ends (reference §8 has no `process.timed_out`: it is a failure). */
const END_EVENT: Record<TerminalProcessState, string> = {
  succeeded: "process.completed",
  failed: "process.failed",
  timed_out: "process.failed",
  cancelled: "process.cancelled"
}

/**
 * A process's durable event (webhooks, the event stream): `process.queued`, `.started`, `.cancel_requested`,
 * and how it ended. Call inside the transaction of the change it records.
 */
export const processEvent = (
  row: { readonly id: ProcessId; readonly sandbox_id: SandboxId; readonly project_id: ProjectId },
  type: string,
  data: Readonly<Record<string, unknown>> = {}
) =>
  Effect.gen(function*() {
    const sandbox = yield* getSandboxRow(row.sandbox_id)
    if (sandbox === undefined) return
    yield* appendEvent({ type, organizationId: sandbox.organization_id, projectId: row.project_id, data: { sandbox_id: row.sandbox_id, process_id: row.id, ...data } })
  })

const endedEvent = (
  row: { readonly id: ProcessId; readonly sandbox_id: SandboxId; readonly project_id: ProjectId },
  state: TerminalProcessState,
  fields: { readonly exitCode?: number | null; readonly error?: ErrorObject | null }
) => processEvent(row, END_EVENT[state], { state, exit_code: fields.exitCode ?? null, ...(fields.error ? { error: fields.error } : {}) })

/** Finishes a process (no-op if already terminal), with its durable event. */
export const finishProcess = (
  processId: ProcessId,
  state: TerminalProcessState,
  fields: { readonly exitCode?: number | null; readonly signal?: string | null; readonly error?: ErrorObject | null; readonly truncated?: boolean }
) =>
  Effect.gen(function*() {
    const finished = yield* ProcessesRepo.finish(processId, state, fields)
    const row = finished ? yield* ProcessesRepo.get(processId) : undefined
    if (row !== undefined) yield* endedEvent(row, state, fields)
    yield* publish(processTopic(processId))
    return finished
  })

/** The terminal state, error and events a provider's exit event leads to. */
const outcomeOf = (row: ProcessRow, exit: Extract<ExecEvent, { type: "exit" }>, timedOutByUs: boolean) => {
  if (exit.cancelled && !timedOutByUs && !exit.timedOut) {
    return { state: "cancelled" as const, error: null, events: [["cancelled", { termination_signal: exit.signal }]] as const }
  }
  if (exit.timedOut || timedOutByUs) {
    const error: ErrorObject = { code: "process_timed_out", message: `The process ran longer than ${row.timeout_seconds} s`, retryable: false }
    return { state: "timed_out" as const, error, events: [["timed_out", { timeout_seconds: row.timeout_seconds, termination_signal: exit.signal }]] as const }
  }
  if (exit.exitCode === 0) return { state: "succeeded" as const, error: null, events: [["exited", { exit_code: 0 }]] as const }
  const error: ErrorObject = exit.exitCode === null
    ? { code: "process_killed", message: `The process was killed by ${exit.signal ?? "a signal"}`, retryable: false }
    : { code: "process_exit_nonzero", message: `The process exited with code ${exit.exitCode}`, retryable: false, details: { exit_code: exit.exitCode } }
  return { state: "failed" as const, error, events: [["exited", { exit_code: exit.exitCode }], ["failed", error]] as const }
}

/**
 * Stores a batch of provider events in three steps (read the counters with the row locked, insert the events,
 * update the row), inside the caller's transaction; touches the sandbox; returns the exit event if one came. Output past
 * `max_output_bytes` is dropped and marks the process truncated. Nothing is written to a process that is
 * already terminal.
 */
export const storeProcessEvents = (processId: ProcessId, events: ReadonlyArray<ExecEvent>, timedOutByUs: boolean) =>
  Effect.gen(function*() {
    const now = yield* nowIso
    const row = (yield* ProcessesRepo.getForUpdate(processId))!
    if (TERMINAL_PROCESS_STATES.includes(row.state)) return undefined
    let exit: Extract<ExecEvent, { type: "exit" }> | undefined
    let { provider_seq: providerSeq, next_event_seq: seq, output_bytes: output, stdout_bytes: stdout, stderr_bytes: stderr } = row
    let truncated = row.output_truncated
    const rows: Array<NewProcessEvent> = []
    const append = (type: string, data: Readonly<Record<string, unknown>>) =>
      rows.push({ process_id: processId, seq: ++seq, type, occurred_at: now, data: JSON.stringify(data) })
    for (const event of events) {
      if (event.seq !== providerSeq) continue // duplicate or out of order: the provider re-sent something we have
      providerSeq += 1
      if (event.type === "exit") {
        exit = event
        break
      }
      const data = event.data.subarray(0, Math.max(0, row.max_output_bytes - output))
      if (data.length < event.data.length) truncated = true
      let offset = event.type === "stdout" ? stdout : stderr
      for (let start = 0; start < data.length; start += CHUNK_BYTES) {
        const chunk = data.subarray(start, start + CHUNK_BYTES)
        append(event.type, { data_base64: Buffer.from(chunk).toString("base64"), byte_length: chunk.length, stream_offset_bytes: offset })
        offset += chunk.length
      }
      output += data.length
      if (event.type === "stdout") stdout += data.length
      else stderr += data.length
    }
    const outcome = exit === undefined ? undefined : outcomeOf(row, exit, timedOutByUs)
    for (const [type, data] of outcome?.events ?? []) append(type, data)
    yield* ProcessesRepo.insertEvents(rows)
    yield* ProcessesRepo.saveProgress(processId, {
      providerSeq,
      nextEventSeq: seq,
      outputBytes: output,
      stdoutBytes: stdout,
      stderrBytes: stderr,
      truncated: truncated || exit?.outputTruncated === true,
      outcome: outcome === undefined
        ? undefined
        : { state: outcome.state, exitCode: exit!.exitCode, signal: exit!.signal, error: outcome.error, now }
    })
    if (outcome !== undefined) yield* endedEvent(row, outcome.state, { exitCode: exit!.exitCode, error: outcome.error })
    yield* SandboxesRepo.touch(row.sandbox_id)
    yield* publish(processTopic(processId))
    return exit
  })

export const makeProcessHandler = Effect.gen(function*() {
  const accounts = yield* ProviderAccounts
  const db = yield* Db
  const tx = db.transaction

  const failNotRunnable = (row: ProcessRow, message: string) =>
    Effect.gen(function*() {
      const error: ErrorObject = { code: "sandbox_not_ready", message, retryable: false }
      yield* appendProcessEvent(row.id, "failed", error)
      yield* finishProcess(row.id, "failed", { error })
    }).pipe(tx)

  /** `leaveOrder`: once the process has started, the sandbox's next process or file operation may start. */
  const run = (processId: ProcessId, leaveOrder: Effect.Effect<void>, attempt: number) =>
    Effect.gen(function*() {
      let row = yield* getProcessRow(processId)
      if (row === undefined || TERMINAL_PROCESS_STATES.includes(row.state)) return
      const sandbox = yield* getSandboxRow(row.sandbox_id)
      const ctx = Option.fromNullable(accounts.target(sandbox))
      if (Option.isNone(ctx) || sandbox === undefined) return yield* failNotRunnable(row, "The sandbox has no running provider resource")

      let firstEvents: ReadonlyArray<ExecEvent> | undefined
      if (row.execution_id === null) {
        if (row.cancel_requested_at !== null) {
          yield* Effect.gen(function*() {
            yield* appendProcessEvent(processId, "cancelled", { termination_signal: null })
            yield* finishProcess(processId, "cancelled", {})
          }).pipe(tx)
          return
        }
        if (sandbox.state !== "ready") return yield* failNotRunnable(row, `The sandbox is ${sandbox.state}, not ready`)
        const started = yield* ctx.value.provider.exec(ctx.value.resource, {
          command: row.command,
          cwd: row.cwd ?? undefined,
          environment: row.environment,
          timeoutSeconds: row.timeout_seconds,
          maxOutputBytes: row.max_output_bytes,
          processId,
          firstAttempt: attempt === 1,
          stdin: row.stdin,
          pty: row.pty_cols === null || row.pty_rows === null ? undefined : { cols: row.pty_cols, rows: row.pty_rows }
        }).pipe(Effect.catchAll(providerFailure(row)))
        const now = yield* nowIso
        // One statement takes the event's sequence number and records the start; the event follows it.
        const recordStart = tx(Effect.tap(ProcessesRepo.recordStart(processId, started.executionId, now), (recorded) => processEvent(recorded, "process.started")))
        // The provider is asked for the first events while the start is recorded (a short command is often over by
        // then); they are stored after it, so the start comes first.
        const [recorded, first] = yield* Effect.all([
          recordStart,
          ctx.value.provider.execEvents(ctx.value.resource, started.executionId, 0).pipe(Effect.catchAll(providerFailure(row)))
        ], { concurrency: 2 })
        row = recorded
        firstEvents = first
      }
      yield* leaveOrder

      const executionId = row.execution_id!
      const deadline = Date.parse(row.started_at ?? row.created_at) + row.timeout_seconds * 1000 + DEADLINE_GRACE_MS
      let cancelSent = false
      let timedOutByUs = false
      // Poll tightly for short commands, then back off (buffered providers only say "done" when asked). An empty
      // poll is followed by a wait as long as it took, up to the cap (pollCap: 10 ms while the command is busy,
      // longer once it is quiet): a provider whose poll is dear (several calls, each doing work in the sandbox, as
      // Daytona's in-process emulator) is not asked back to back, and one whose poll is a slow round trip to its cloud
      // waits no more than it did. A cancel request or input (a signal on the process's topic) ends the wait at once,
      // and input counts as activity: what it makes the command write is polled for tightly. A command quiet for a
      // second (or at once, where the news is in memory) waits on its provider's push instead (`execNews`), up to
      // MAX_PUSH_WAIT_MS.
      let idleMs = 1
      let polls = 0
      let polledAt = Date.now()
      let heardAt = Date.now()
      /** The last wait was on the provider's news (and the poll after it has not brought anything yet). */
      let newsEnded = false
      let progress: { readonly state: ProcessState; readonly cancel_requested_at: string | null; readonly provider_seq: number } = row
      for (let first = true; ; first = false) {
        // The row just written needs no second read; later rounds look for a cancel request or a finish.
        if (!first) progress = (yield* ProcessesRepo.progressOf(processId))!
        if (TERMINAL_PROCESS_STATES.includes(progress.state)) return
        if (!cancelSent && (progress.cancel_requested_at !== null || Date.now() > deadline)) {
          timedOutByUs = progress.cancel_requested_at === null
          cancelSent = true
          yield* ctx.value.provider.cancelExec(ctx.value.resource, executionId).pipe(
            Effect.catchAll((e) => Effect.logWarning("cancel at the provider failed", { process: processId, error: e.message }))
          )
        }
        polledAt = Date.now()
        const events = first && firstEvents !== undefined && !cancelSent
          ? firstEvents
          : yield* ctx.value.provider.execEvents(ctx.value.resource, executionId, progress.provider_seq).pipe(Effect.catchAll(providerFailure(row)))
        if (events.length > 0) {
          const exit = yield* storeProcessEvents(processId, events, timedOutByUs).pipe(tx)
          if (exit !== undefined) return
          idleMs = 1
          polls = 0
          heardAt = Date.now()
          newsEnded = false
        } else {
          const quietMs = Date.now() - heardAt
          const cap = pollCap(quietMs)
          // News that brought nothing (output the last poll had read already, or a provider that answers at once) is
          // followed by one wait as a poll waits: a wait that keeps ending at once must not spin the job.
          const news: SandboxProvider["execNews"] = waitsOnNews(ctx.value.provider, quietMs) && !cancelSent && !newsEnded ? ctx.value.provider.execNews : undefined
          newsEnded = news !== undefined
          const woken = news !== undefined
            // News from the provider ends the wait as the time running out would (a poll follows).
            ? yield* Effect.raceFirst(
              signalled(processTopic(processId), Math.max(MAX_IDLE_MS, Math.min(MAX_PUSH_WAIT_MS, deadline - Date.now()))),
              // It cannot fail; should an adapter's wait die all the same, the job waits as a poll would, and lives.
              news(ctx.value.resource, executionId, MAX_PUSH_WAIT_MS).pipe(
                Effect.catchAllCause(() => Effect.sleep(MAX_QUIET_WAIT_MS)),
                Effect.as(false)
              )
            )
            : yield* signalled(processTopic(processId), Math.max(Math.min(idleMs, cap), Math.min(Date.now() - polledAt, cap)))
          if (woken) {
            idleMs = 1
            polls = 0
            heardAt = Date.now()
          } else if (++polls > 30) idleMs = Math.min(idleMs * 2, cap)
        }
      }
    })

  const giveUp = (processId: ProcessId, error: ErrorObject) =>
    Effect.gen(function*() {
      yield* appendProcessEvent(processId, "failed", error)
      yield* finishProcess(processId, "failed", { error: { ...error, code: error.code === "internal_error" ? "process_failed" : error.code } })
    }).pipe(tx)

  const provide = yield* provideRepositories
  return {
    run: (job) => provide(run(job.payload.process_id, job.leaveOrder, job.attempt)),
    giveUp: (job, error) => provide(giveUp(job.payload.process_id, error))
  } satisfies JobHandler<{ readonly process_id: ProcessId }>
})
