/**
 * The jobs of computer use (Computer.ts): an action or a screenshot at the provider (a runtime operation:
 * queued → running → succeeded | failed, with the durable event `computer.action` / `computer.screenshot`), and a
 * recording's start and stop (`recording.start`, `recording.stop`: the mp4 is read from the provider, at most
 * RECORDING_MAX_BYTES, checked to be an mp4, and kept by the gateway).
 *
 * What comes from the sandbox is checked again here, whatever the provider: a screenshot must be the image format
 * asked for, within SCREENSHOT_MAX_BYTES. A reclaimed action whose outcome is unknown fails closed
 * (`runtime_operation_unknown_outcome`) rather than running twice; a screenshot is simply taken again.
 */
import { Config, Effect } from "effect"
import { provideRepositories } from "../../db/Database.ts"
import { inTransaction } from "../../db/Db.ts"
import { type RecordingRow, RecordingsRepo } from "../../db/repos/Recordings.ts"
import { type ComputerOperationRow, RuntimeOperationsRepo, type StoredResult } from "../../db/repos/RuntimeOperations.ts"
import { imageFormatOf, SCREENSHOT_MAX_BYTES } from "../../domain/Computer.ts"
import type { ErrorObject } from "../../domain/Errors.ts"
import { nowIso } from "../../domain/Time.ts"
import type { ProviderError, ProviderSandbox, SandboxProvider } from "../../providers/Provider.ts"
import { appendEvent } from "../Events.ts"
import { type JobHandler, JobError } from "../JobRegistry.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import { logProviderFailure, providerCode } from "./ProviderErrors.ts"
import { getSandboxRow, type SandboxRow, touchSandbox } from "./SandboxRows.ts"
import type { RecordingId, RuntimeOperationId } from "../../domain/Ids.ts"

/** The most of a recording's mp4 the gateway keeps (RECORDING_MAX_BYTES): a longer recording fails, saying so. */
export const DEFAULT_RECORDING_MAX_BYTES = 256 * 1024 * 1024

/** A failure at the provider, in the user's terms (the provider's own words go to the log). */
const computerFailure = (what: string, e: ProviderError): { readonly final: boolean; readonly error: ErrorObject } => {
  const details = { reason: providerCode(e), provider: e.provider }
  switch (e.kind) {
    case "unsupported":
      return { final: true, error: { code: "capability_unsupported", message: `${e.provider} sandboxes cannot ${what}`, retryable: false, details } }
    case "invalid_request":
    case "customer":
    case "not_found":
      // The desktop refused it (outside the screen, a key it does not know, no desktop running).
      return { final: true, error: { code: "computer_operation_failed", message: `The sandbox's desktop refused to ${what}`, retryable: false, details } }
    default:
      return {
        final: false,
        error: { code: "computer_operation_failed", message: `The sandbox or its provider did not answer while trying to ${what}; try again`, retryable: e.retryable, details }
      }
  }
}

const describe = (row: ComputerOperationRow) => (row.kind === "computer_screenshot" ? "take a screenshot" : `perform ${row.request.type}`)

export const makeComputerHandlers = Effect.gen(function*() {
  const accounts = yield* ProviderAccounts
  const operations = yield* RuntimeOperationsRepo
  const recordings = yield* RecordingsRepo
  const provide = yield* provideRepositories
  const recordingMaxBytes = yield* Config.integer("RECORDING_MAX_BYTES").pipe(
    Config.withDefault(DEFAULT_RECORDING_MAX_BYTES),
    Config.validate({ message: "RECORDING_MAX_BYTES must be a positive number of bytes", validation: (n) => n > 0 }),
    Effect.orDie
  )

  /** The sandbox's provider with its desktop driver, or why there is none to use. */
  const targetOf = (sandbox: SandboxRow | undefined): { readonly provider: SandboxProvider; readonly resource: ProviderSandbox } | ErrorObject => {
    const target = accounts.target(sandbox)
    if (sandbox === undefined || sandbox.state === "stopping" || sandbox.state === "stopped") {
      return { code: "sandbox_stopped", message: "The sandbox stopped", retryable: false }
    }
    if (sandbox.state !== "ready" || target === undefined) {
      return { code: "invalid_sandbox_state", message: `The sandbox is ${sandbox.state}, not ready`, retryable: false }
    }
    if (target.provider.computer === undefined) return { code: "capability_unsupported", message: `${sandbox.provider} sandboxes have no desktop`, retryable: false }
    return target
  }

  // Actions and screenshots -----------------------------------------------------------------------------------

  const complete = (row: ComputerOperationRow, state: "succeeded" | "failed", result: StoredResult | null, error: ErrorObject | null, data?: Uint8Array) =>
    inTransaction(Effect.gen(function*() {
      if (!(yield* operations.complete(row.id, { state, result, error, data, now: yield* nowIso }))) return
      const sandbox = yield* getSandboxRow(row.sandbox_id)
      if (sandbox === undefined) return
      yield* appendEvent({
        type: row.kind === "computer_action" ? "computer.action" : "computer.screenshot",
        organizationId: sandbox.organization_id,
        projectId: row.project_id,
        data: {
          sandbox_id: row.sandbox_id,
          runtime_operation_id: row.id,
          state,
          ...(row.kind === "computer_action" ? { action: row.request.type } : { format: row.request.format }),
          ...(error !== null ? { error } : {})
        }
      })
    }))

  const perform = (row: ComputerOperationRow, provider: SandboxProvider, resource: ProviderSandbox) =>
    Effect.gen(function*() {
      const computer = provider.computer!
      if (row.kind === "computer_action") {
        const done = yield* computer.action(resource, row.request)
        return { result: { kind: "computer_action" as const, action: row.request.type, cursor_position: done.cursor } }
      }
      const r = row.request
      const shot = yield* computer.screenshot(resource, { format: r.format, showCursor: r.show_cursor, quality: r.quality, scale: r.scale, region: r.region })
      // Attacker bytes: passed on only as the image they claim to be, within the cap.
      if (shot.data.length > SCREENSHOT_MAX_BYTES || imageFormatOf(shot.data) !== r.format) {
        return yield* Effect.fail({ invalid: true as const })
      }
      return {
        result: { kind: "computer_screenshot" as const, format: r.format, byte_length: shot.data.length, cursor_position: shot.cursor },
        data: shot.data
      }
    })

  const runOperation = (id: RuntimeOperationId) =>
    Effect.gen(function*() {
      const row = yield* operations.get(id)
      if (row === undefined || (row.kind !== "computer_action" && row.kind !== "computer_screenshot") || (row.state !== "queued" && row.state !== "running")) return
      if (row.state === "running" && row.kind === "computer_action") {
        return yield* complete(row, "failed", null, {
          code: "runtime_operation_unknown_outcome",
          message: "The gateway restarted while this action ran; it may or may not have been performed",
          retryable: false
        })
      }
      const target = targetOf(yield* getSandboxRow(row.sandbox_id))
      if (!("provider" in target)) return yield* complete(row, "failed", null, target)
      yield* operations.markRunning(id, yield* nowIso)
      const outcome = yield* perform(row, target.provider, target.resource).pipe(
        Effect.map((value) => ({ ok: true as const, value })),
        Effect.catchAll((e) => {
          if ("invalid" in e) {
            return Effect.succeed({
              ok: false as const,
              error: { code: "computer_operation_failed", message: "The sandbox sent a screenshot that is not the image asked for, or too large", retryable: false }
            })
          }
          const failure = computerFailure(describe(row), e)
          return Effect.zipRight(
            logProviderFailure(row.kind, e),
            failure.final || row.kind === "computer_action"
              // An action is not repeated: the provider may have performed it.
              ? Effect.succeed({ ok: false as const, error: failure.error })
              : Effect.fail(new JobError({ error: failure.error, retryable: e.retryable || e.kind === "unavailable" }))
          )
        })
      )
      yield* touchSandbox(row.sandbox_id)
      if (outcome.ok) yield* complete(row, "succeeded", outcome.value.result, null, "data" in outcome.value ? outcome.value.data : undefined)
      else yield* complete(row, "failed", null, outcome.error)
    })

  const operation: JobHandler<{ readonly runtime_operation_id: RuntimeOperationId }> = {
    run: (job) => provide(runOperation(job.payload.runtime_operation_id)),
    giveUp: (job, error) =>
      provide(Effect.flatMap(operations.get(job.payload.runtime_operation_id), (row) =>
        row === undefined || (row.kind !== "computer_action" && row.kind !== "computer_screenshot") ? Effect.void : complete(row, "failed", null, error)))
  }

  // Recordings ------------------------------------------------------------------------------------------------

  const recordingEvent = (row: RecordingRow, type: "recording.start" | "recording.stop", data: Record<string, unknown>) =>
    Effect.gen(function*() {
      const sandbox = yield* getSandboxRow(row.sandbox_id)
      if (sandbox === undefined) return
      yield* appendEvent({ type, organizationId: sandbox.organization_id, projectId: row.project_id, data: { sandbox_id: row.sandbox_id, recording_id: row.id, ...data } })
    })

  const fail = (row: RecordingRow, error: ErrorObject) =>
    inTransaction(Effect.gen(function*() {
      if (yield* recordings.markFailed(row.id, error, yield* nowIso)) yield* recordingEvent(row, "recording.stop", { state: "failed", error })
    }))

  /** A provider failure: final (the recording fails) or worth another try of the job. */
  const onProviderFailure = (row: RecordingRow, what: string) => (e: ProviderError) =>
    Effect.gen(function*() {
      yield* logProviderFailure(what, e)
      const failure = computerFailure(what, e)
      if (failure.final) return yield* fail(row, failure.error)
      return yield* new JobError({ error: failure.error, retryable: e.retryable || e.kind === "unavailable" })
    })

  const start = (id: RecordingId) =>
    Effect.gen(function*() {
      const row = yield* recordings.get(id)
      if (row === undefined || row.state !== "starting") return
      const target = targetOf(yield* getSandboxRow(row.sandbox_id))
      if (!("provider" in target)) return yield* fail(row, target)
      yield* target.provider.computer!.startRecording(target.resource, { label: row.label ?? undefined }).pipe(
        Effect.flatMap((started) =>
          started.state === "failed"
            ? fail(row, { code: "recording_failed", message: "The sandbox's desktop could not be recorded", retryable: false })
            : inTransaction(Effect.gen(function*() {
              if (yield* recordings.markRecording(id, started.recordingId, yield* nowIso)) yield* recordingEvent(row, "recording.start", {})
            }))),
        Effect.catchAll(onProviderFailure(row, "start recording the desktop"))
      )
      yield* touchSandbox(row.sandbox_id)
    })

  const stop = (id: RecordingId) =>
    Effect.gen(function*() {
      const row = yield* recordings.get(id)
      if (row === undefined || row.state !== "stopping" || row.provider_recording_id === null) return
      const target = targetOf(yield* getSandboxRow(row.sandbox_id))
      if (!("provider" in target)) return yield* fail(row, target)
      const computer = target.provider.computer!
      const providerId = row.provider_recording_id
      yield* Effect.gen(function*() {
        const stopped = yield* computer.stopRecording(target.resource, providerId)
        if (stopped.state === "failed") return yield* fail(row, { code: "recording_failed", message: "The recording failed in the sandbox", retryable: false })
        const data = yield* computer.downloadRecording(target.resource, providerId, recordingMaxBytes).pipe(
          Effect.catchIf((e) => e.kind === "invalid_request", () =>
            Effect.fail({ tooLarge: true as const }))
        )
        const durationMs = stopped.durationSeconds === null ? null : Math.round(stopped.durationSeconds * 1000)
        const now = yield* nowIso
        yield* inTransaction(Effect.gen(function*() {
          if (yield* recordings.markStopped(id, { data, durationMs, now })) {
            yield* recordingEvent(row, "recording.stop", { state: "stopped", byte_length: data.length, duration_seconds: durationMs === null ? null : durationMs / 1000 })
          }
        }))
      }).pipe(
        Effect.catchAll((e) =>
          "tooLarge" in e
            ? fail(row, { code: "recording_too_large", message: `The recording is larger than the ${recordingMaxBytes} bytes the gateway keeps (RECORDING_MAX_BYTES)`, retryable: false })
            : onProviderFailure(row, "stop recording the desktop")(e))
      )
      yield* touchSandbox(row.sandbox_id)
    })

  const recordingHandler = (f: (id: RecordingId) => Effect.Effect<void, JobError, never>): JobHandler<{ readonly recording_id: RecordingId }> => ({
    run: (job) => f(job.payload.recording_id),
    giveUp: (job, error) => provide(Effect.flatMap(recordings.get(job.payload.recording_id), (row) => (row === undefined ? Effect.void : fail(row, error))))
  })

  return {
    operation,
    recordingStart: recordingHandler((id) => provide(start(id))),
    recordingStop: recordingHandler((id) => provide(stop(id)))
  }
})
