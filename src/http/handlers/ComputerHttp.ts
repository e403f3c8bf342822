/**
 * `/v1/sandboxes/{id}/computer/…` and `…/recordings…`: actions (Idempotency-Key required) and screenshots answer
 * 202 with a runtime operation to poll; recordings are started (key required), listed, read, stopped (key
 * optional), and their mp4 downloaded with ranges.
 */
import { HttpApiBuilder, HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Recording } from "../../domain/Computer.ts"
import { apiError, RangeNotSatisfiable } from "../../domain/Errors.ts"
import { RuntimeOperation } from "../../domain/Runtime.ts"
import { computerJobKey, type ComputerOperationInput, recordingContent, recordingJobKey, recordingOf, recordingPage, startComputerOperation, startRecording, stopRecording } from "../../services/sandboxes/Computer.ts"
import type { RuntimeOperationRow } from "../../services/sandboxes/RuntimeOperations.ts"
import { sandboxOf } from "../../services/sandboxes/SandboxAccess.ts"
import { sandboxCapabilities } from "../../services/sandboxes/SandboxRows.ts"
import { Api } from "../Api.ts"
import { decodeCursor, page } from "../Pagination.ts"
import { recordingToWire } from "../wire/Computer.ts"
import { runtimeOperationToWire } from "../wire/Sandboxes.ts"
import { accepted, keyCaller, ListPosition, planeContext } from "./PlaneSupport.ts"
import type { SandboxId } from "../../domain/Ids.ts"

export const ComputerLive = HttpApiBuilder.group(Api, "computer", (handlers) =>
  Effect.gen(function*() {
    const { idempotency, runner, provide } = yield* planeContext
    const wire = (row: RuntimeOperationRow) => Effect.map(sandboxCapabilities(row.sandbox_id), (caps) => runtimeOperationToWire(row, caps))
    const operation = (sandboxId: SandboxId, input: ComputerOperationInput, key: string | undefined) =>
      Effect.gen(function*() {
        const caller = yield* keyCaller
        const run = Effect.flatMap(startComputerOperation(caller, sandboxId, input), wire)
        const op = input.kind === "computer_action"
          ? yield* idempotency.remember({
            principalId: caller.keyId!,
            scope: `computer_action:${caller.projectId}:${sandboxId}`,
            key,
            required: true,
            request: input.request,
            schema: RuntimeOperation,
            run
          })
          : yield* run
        yield* runner.runNow(computerJobKey(input.kind, op.id))
        return yield* accepted(RuntimeOperation, op, `/v1/sandboxes/${sandboxId}/runtime-operations/${op.id}`)
      })
    const recordingAnswer = (sandboxId: SandboxId, recording: typeof Recording.Type, job?: string) =>
      Effect.gen(function*() {
        if (job !== undefined) yield* runner.runNow(job)
        return yield* accepted(Recording, recording, `/v1/sandboxes/${sandboxId}/recordings/${recording.id}`)
      })
    return handlers
      .handle("action", ({ headers, path, payload }) =>
        operation(path.sandbox_id, { kind: "computer_action", request: payload }, headers["idempotency-key"]).pipe(provide))
      .handle("screenshot", ({ path, payload }) => operation(path.sandbox_id, { kind: "computer_screenshot", request: payload }, undefined).pipe(provide))
      .handle("listRecordings", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          yield* sandboxOf(caller, path.sandbox_id)
          const scope = `recordings:${path.sandbox_id}`
          const position = urlParams.cursor === undefined ? undefined : yield* decodeCursor(scope, urlParams.cursor, ListPosition)
          const rows = yield* recordingPage(path.sandbox_id, position, urlParams.limit + 1)
          const { items, next } = page(rows, urlParams.limit, scope, (last) => [last.created_at, last.id])
          return { recordings: items.map(recordingToWire), next_cursor: next }
        }).pipe(provide))
      .handle("startRecording", ({ headers, path, payload }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          const recording = yield* idempotency.remember({
            principalId: caller.keyId!,
            scope: `recordings.create:${caller.projectId}:${path.sandbox_id}`,
            key: headers["idempotency-key"],
            required: true,
            request: payload,
            schema: Recording,
            run: Effect.map(startRecording(caller, path.sandbox_id, payload), recordingToWire)
          })
          return yield* recordingAnswer(path.sandbox_id, recording, recordingJobKey("start", recording.id))
        }).pipe(provide))
      .handle("getRecording", ({ path }) =>
        Effect.flatMap(keyCaller, (caller) => Effect.map(recordingOf(caller, path.sandbox_id, path.recording_id), recordingToWire)).pipe(provide))
      .handle("stopRecording", ({ headers, path }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          const recording = yield* idempotency.remember({
            principalId: caller.keyId!,
            scope: `recordings.stop:${caller.projectId}:${path.sandbox_id}:${path.recording_id}`,
            key: headers["idempotency-key"],
            required: false,
            request: null,
            schema: Recording,
            run: Effect.map(stopRecording(caller, path.sandbox_id, path.recording_id), recordingToWire)
          })
          return yield* recordingAnswer(path.sandbox_id, recording, recording.state === "stopping" ? recordingJobKey("stop", recording.id) : undefined)
        }).pipe(provide))
      .handle("recordingContent", ({ headers, path }) =>
        Effect.gen(function*() {
          const content = yield* recordingContent(yield* keyCaller, path.sandbox_id, path.recording_id, headers.range)
          if (content.range === "unsatisfiable") {
            yield* HttpApp.appendPreResponseHandler((_req, res) => Effect.succeed(HttpServerResponse.setHeader(res, "content-range", `bytes */${content.size}`)))
            return yield* apiError(RangeNotSatisfiable, "range_not_satisfiable", `The range is malformed or outside the recording's ${content.size} bytes`, { size_bytes: content.size })
          }
          const ranged = content.range !== undefined
          return HttpServerResponse.uint8Array(content.data, {
            status: ranged ? 206 : 200,
            contentType: "video/mp4",
            headers: {
              "accept-ranges": "bytes",
              "cache-control": "no-store",
              ...(ranged ? { "content-range": `bytes ${content.range!.start}-${content.range!.end}/${content.size}` } : {})
            }
          })
        }).pipe(provide))
  }))
