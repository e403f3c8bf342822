/**
 * Computer use as the API accepts it (reference §2 "Runtime"): actions and screenshots are runtime operations
 * (`computer_action`, `computer_screenshot`) run by jobs in the sandbox's order, after everything accepted before
 * them; recordings are a resource of their own, started and stopped by jobs in the same order.
 *
 * Bounds: a sandbox has at most MAX_QUEUED_COMPUTER_OPERATIONS actions and screenshots queued or running (more is
 * 429 `too_many_requests`), and they run one at a time, so a flood on one sandbox waits on that sandbox alone.
 * Only a sandbox created with `features.computer_use` has a desktop.
 */
import { Effect } from "effect"
import { inTransaction } from "../../db/Db.ts"
import { RECORDING_CHUNK_BYTES, type RecordingRow, RecordingsRepo } from "../../db/repos/Recordings.ts"
import { RuntimeOperationsRepo } from "../../db/repos/RuntimeOperations.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import type { ComputerAction, TakeScreenshot } from "../../domain/Computer.ts"
import { apiError, conflict, notFound, TooManyRequests } from "../../domain/Errors.ts"
import { newId, type RecordingId, type RuntimeOperationId, type SandboxId } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { enqueueJob } from "../JobRegistry.ts"
import { type Caller, readySandboxOf, sandboxOf } from "./SandboxAccess.ts"
import { parseRange } from "./RawFiles.ts"
import { ComputerActionJob, ComputerScreenshotJob, RecordingStartJob, RecordingStopJob } from "./JobTypes.ts"
import { getRuntimeOperationRow } from "./RuntimeOperations.ts"
import type { SandboxRow } from "./SandboxRows.ts"
import { unsupportedCall } from "./Unsupported.ts"

export const MAX_QUEUED_COMPUTER_OPERATIONS = 32

export const computerJobKey = (kind: "computer_action" | "computer_screenshot", id: RuntimeOperationId) => `runtime:${kind}:${id}`
export const recordingJobKey = (what: "start" | "stop", id: RecordingId) => `recording:${what}:${id}`

type Computer = NonNullable<NonNullable<SandboxRow["capabilities"]>["computer"]>

/** The sandbox's desktop: it asked for one at create, and its provider has computer use. */
const computerOf = (sandbox: SandboxRow) =>
  Effect.gen(function*() {
    const computer: Computer | null = sandbox.capabilities?.computer ?? null
    // The provider has none: the message names the feature that places a sandbox where there is one.
    if (computer === null) return yield* unsupportedCall(sandbox, { kind: "desktop" })
    if (sandbox.requested.features?.computer_use !== true) {
      return yield* conflict("capability_unsupported", "This sandbox has no desktop: create it with features.computer_use: true", { provider: sandbox.provider })
    }
    return computer
  })

export type ComputerOperationInput =
  | { readonly kind: "computer_action"; readonly request: ComputerAction }
  | { readonly kind: "computer_screenshot"; readonly request: TakeScreenshot }

export const startComputerOperation = (caller: Caller, sandboxId: SandboxId, input: ComputerOperationInput) =>
  inTransaction(Effect.gen(function*() {
    const sandbox = yield* readySandboxOf(caller, sandboxId)
    const computer = yield* computerOf(sandbox)
    if (input.kind === "computer_action" && !computer.actions.includes(input.request.type)) {
      return yield* conflict("capability_unsupported", `${sandbox.provider} desktops do not take ${input.request.type} actions`, { provider: sandbox.provider, supported: computer.actions })
    }
    if (input.kind === "computer_screenshot" && !computer.screenshot.formats.includes(input.request.format)) {
      return yield* conflict("capability_unsupported", `${sandbox.provider} desktops take no ${input.request.format} screenshots`, { provider: sandbox.provider, supported: computer.screenshot.formats })
    }
    const queued = yield* RuntimeOperationsRepo.countLive(sandboxId, ["computer_action", "computer_screenshot"])
    if (queued >= MAX_QUEUED_COMPUTER_OPERATIONS) {
      return yield* apiError(TooManyRequests, "too_many_requests", `The sandbox already has ${queued} computer actions and screenshots waiting; wait for them to finish`, { queued, limit: MAX_QUEUED_COMPUTER_OPERATIONS })
    }
    const now = yield* nowIso
    const id = newId("rop")
    yield* RuntimeOperationsRepo.insert({ id, projectId: caller.projectId, sandboxId, kind: input.kind, request: input.request, now })
    yield* SandboxesRepo.touch(sandboxId)
    yield* enqueueJob(input.kind === "computer_action" ? ComputerActionJob : ComputerScreenshotJob, {
      dedupeKey: computerJobKey(input.kind, id),
      payload: { runtime_operation_id: id },
      sandboxId,
      ordered: true
    })
    return (yield* getRuntimeOperationRow(id))!
  })).pipe(Effect.withSpan("Computer.startComputerOperation", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

/** A sandbox's recordings (the caller checked it is theirs), newest first, after the (created_at, id) position if given. */
export const recordingPage = (sandboxId: SandboxId, after: readonly [string, string] | undefined, limit: number) => RecordingsRepo.page(sandboxId, after, limit)

export const recordingOf = (caller: Caller, sandboxId: SandboxId, id: RecordingId) =>
  Effect.flatMap(RecordingsRepo.get(id), (row) =>
    row === undefined || row.project_id !== caller.projectId || row.sandbox_id !== sandboxId ? Effect.fail(notFound("Recording")) : Effect.succeed(row))

export const startRecording = (caller: Caller, sandboxId: SandboxId, input: { readonly format: "mp4"; readonly label?: string | undefined }) =>
  inTransaction(Effect.gen(function*() {
    const sandbox = yield* readySandboxOf(caller, sandboxId)
    const computer = yield* computerOf(sandbox)
    if (!computer.recording.formats.includes(input.format)) {
      return yield* conflict("capability_unsupported", `${sandbox.provider} desktops cannot be recorded as ${input.format}`, { provider: sandbox.provider, supported: computer.recording.formats })
    }
    const now = yield* nowIso
    const id = newId("rec")
    yield* RecordingsRepo.insert({ id, projectId: caller.projectId, sandboxId, label: input.label ?? null, now })
    yield* SandboxesRepo.touch(sandboxId)
    yield* enqueueJob(RecordingStartJob, { dedupeKey: recordingJobKey("start", id), payload: { recording_id: id }, sandboxId, ordered: true })
    return (yield* RecordingsRepo.get(id))!
  })).pipe(Effect.withSpan("Computer.startRecording", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

/**
 * recording → stopping (then the stop job ends it and keeps its mp4). Stopping a recording that is still starting
 * is 409 `invalid_recording_state`; one already stopping or over is answered as it is.
 */
export const stopRecording = (caller: Caller, sandboxId: SandboxId, id: RecordingId) =>
  inTransaction(Effect.gen(function*() {
    yield* sandboxOf(caller, sandboxId)
    const row: RecordingRow = yield* recordingOf(caller, sandboxId, id)
    if (row.state === "starting") {
      return yield* conflict("invalid_recording_state", "The recording is still starting; stop it once it is recording", { state: row.state })
    }
    if (row.state === "recording" && (yield* RecordingsRepo.markStopping(id, yield* nowIso))) {
      yield* enqueueJob(RecordingStopJob, { dedupeKey: recordingJobKey("stop", id), payload: { recording_id: id }, sandboxId, ordered: true })
    }
    return (yield* RecordingsRepo.get(id))!
  })).pipe(Effect.withSpan("Computer.stopRecording", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

/**
 * A stopped recording's mp4, or the part a `Range` asks for (RawFiles.ts `parseRange`): its size, the range
 * (undefined: whole; "unsatisfiable"), and the bytes. 409 `invalid_recording_state` until it is stopped.
 */
export const recordingContent = (caller: Caller, sandboxId: SandboxId, id: RecordingId, rangeHeader: string | undefined) =>
  Effect.gen(function*() {
    yield* sandboxOf(caller, sandboxId)
    const row = yield* recordingOf(caller, sandboxId, id)
    if (row.state !== "stopped" || row.byte_length === null) {
      return yield* conflict("invalid_recording_state", `The recording is ${row.state}; its mp4 can be downloaded once it is stopped`, { state: row.state })
    }
    const size = row.byte_length
    const range = parseRange(rangeHeader, size)
    if (range === "unsatisfiable") return { size, range, data: new Uint8Array() }
    const [from, to] = range === undefined ? [0, size - 1] : [range.start, range.end]
    if (size === 0) return { size, range, data: new Uint8Array() }
    const chunks = yield* RecordingsRepo.chunksOf(id, from, to)
    const whole = Buffer.concat(chunks.map((c) => c.data))
    const offset = from - Math.floor(from / RECORDING_CHUNK_BYTES) * RECORDING_CHUNK_BYTES
    return { size, range, data: new Uint8Array(whole.subarray(offset, offset + (to - from + 1))) }
  }).pipe(Effect.withSpan("Computer.recordingContent", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))
