/**
 * `/v1/sandboxes/{id}/processes`: start (idempotent, started at once), read, output events, cancel, stdin, and
 * the checks of a terminal attach (the WebSocket itself is Attach.ts's).
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { LiveStreams } from "../../services/LiveStreams.ts"
import { apiError, UpgradeRequired, validationError } from "../../domain/Errors.ts"
import { OUTPUT_IN_ANSWER_BYTES, Process, ProcessWithOutput, type StartProcess, StdinWritten, type WriteStdin } from "../../domain/Runtime.ts"
import { cancelProcess, processEndedWithin, processEventsAfter, processFinished, processOf, startProcess } from "../../services/sandboxes/ProcessCommands.ts"
import { processJobKey, type ProcessRow } from "../../services/sandboxes/Processes.ts"
import { sandboxCapabilities } from "../../services/sandboxes/SandboxRows.ts"
import { nextSignal, processTopic } from "../../services/Signals.ts"
import { writeStdin } from "../../services/sandboxes/Stdin.ts"
import { attachable } from "../../services/sandboxes/Terminals.ts"
import { attachCheckPassed, isAttachCheck } from "../Attach.ts"
import { Api } from "../Api.ts"
import { allowedFor, answerWithin, followResponse, followStream, PROCESS_BATCH_BYTES, PROCESS_BATCH_EVENTS, processEventFrame, sseBody, sseResponse } from "../Sse.ts"
import { processToWire, processWithOutputToWire } from "../wire/Sandboxes.ts"
import { keptOutput } from "../../services/sandboxes/ProcessOutput.ts"
import type { IdempotencyHeaders } from "../groups/Common.ts"
import type { StartProcessParams } from "../groups/ProcessesApi.ts"
import type { FollowParams, LastEventIdHeaders } from "../groups/SandboxPlane.ts"
import { accepted, keyCaller, type PlaneCaller, planeContext } from "./PlaneSupport.ts"
import type { ProcessId, SandboxId } from "../../domain/Ids.ts"

type Path = { readonly sandbox_id: SandboxId; readonly process_id: ProcessId }

/** The process routes' handlers for a caller: a project key's, or a member's on the project path (ProjectRuntimeHttp.ts). */
export const processHandlers = Effect.gen(function*() {
  const { idempotency, runner, provide } = yield* planeContext
  const streams = yield* LiveStreams
  const wire = (row: ProcessRow) => Effect.map(sandboxCapabilities(row.sandbox_id), (caps) => processToWire(row, caps))
  /** The process in its terminal state once it ends, if that is within `ms`. */
  const endedWithin = (processId: ProcessId, ms: number) =>
    Effect.flatMap(processEndedWithin(processId, ms), (row) => (row === undefined ? Effect.succeed(undefined) : wire(row)))
  return {
    start: (caller: PlaneCaller, { headers, path, payload, urlParams }: {
      readonly headers: typeof IdempotencyHeaders.Type
      readonly path: { readonly sandbox_id: SandboxId }
      readonly payload: typeof StartProcess.Type
      readonly urlParams: typeof StartProcessParams.Type
    }) =>
      Effect.gen(function*() {
        if (urlParams.wait_seconds !== undefined && (payload.stdin || payload.pty !== undefined)) {
          const field = payload.stdin ? "stdin" : "pty"
          return yield* validationError("Request validation failed", [{ path: field, message: `a process with ${field === "stdin" ? "stdin open" : "a terminal"} waits for its input: start it without ?wait_seconds` }])
        }
        const process = yield* idempotency.remember({
          principalId: caller.principalId,
          scope: `processes.create:${caller.projectId}:${path.sandbox_id}`,
          key: headers["idempotency-key"],
          required: true,
          request: payload,
          schema: Process,
          run: Effect.flatMap(startProcess(caller, path.sandbox_id, payload), wire)
        })
        yield* runner.runNow(processJobKey(process.id))
        const location = `${caller.base}/sandboxes/${path.sandbox_id}/processes/${process.id}`
        const ended = urlParams.wait_seconds === undefined ? undefined : yield* endedWithin(process.id, urlParams.wait_seconds * 1000)
        if (ended !== undefined) {
          // Finished in time: its output comes with it (one call for `echo hi`).
          const answer = processWithOutputToWire(ended, yield* keptOutput(ended.id, OUTPUT_IN_ANSWER_BYTES))
          return yield* HttpServerResponse.schemaJson(ProcessWithOutput)(answer, { status: 201, headers: { location } }).pipe(Effect.orDie)
        }
        return yield* accepted(Process, process, location)
      }).pipe(provide),
    get: (caller: PlaneCaller, { path }: { readonly path: Path }) => Effect.flatMap(processOf(caller, path.sandbox_id, path.process_id), wire).pipe(provide),
    events: (caller: PlaneCaller, { headers, path, urlParams }: { readonly headers: typeof LastEventIdHeaders.Type; readonly path: Path; readonly urlParams: typeof FollowParams.Type }) =>
      Effect.gen(function*() {
        yield* processOf(caller, path.sandbox_id, path.process_id)
        const after = Number(headers["last-event-id"] ?? "0")
        const read = (from: number) => Effect.map(processEventsAfter(path.process_id, from, PROCESS_BATCH_EVENTS), (rows) => rows.map(processEventFrame(path.process_id)))
        if (urlParams.follow === true) {
          const finished = processFinished(path.process_id)
          const allowed = yield* allowedFor(streams, caller.holder)
          return followResponse(allowed(followStream({ after, read: (from) => provide(read(from)), finished: provide(finished), signal: (ms) => nextSignal(processTopic(path.process_id), ms) })))
        }
        return sseResponse(sseBody(yield* read(after), PROCESS_BATCH_BYTES))
      }).pipe(provide),
    cancel: (caller: PlaneCaller, { headers, path }: { readonly headers: typeof IdempotencyHeaders.Type; readonly path: Path }) =>
      Effect.gen(function*() {
        const process = yield* idempotency.remember({
          principalId: caller.principalId,
          scope: `processes.cancel:${caller.projectId}:${path.process_id}`,
          key: headers["idempotency-key"],
          required: false,
          request: null,
          schema: Process,
          run: Effect.flatMap(cancelProcess(caller, path.sandbox_id, path.process_id), wire)
        })
        yield* runner.wake
        return yield* accepted(Process, process, `${caller.base}/sandboxes/${path.sandbox_id}/processes/${process.id}`)
      }).pipe(provide),
    stdin: (caller: PlaneCaller, { path, payload }: { readonly path: Path; readonly payload: typeof WriteStdin.Type }) =>
      writeStdin(caller, path.sandbox_id, path.process_id, Buffer.from(payload.data_base64, "base64"), payload.eof).pipe(
        Effect.flatMap((written) => HttpServerResponse.schemaJson(StdinWritten)(written, { status: 202 }).pipe(Effect.orDie)),
        answerWithin,
        provide
      ),
    attach: (caller: PlaneCaller, { path }: { readonly path: Path }) =>
      Effect.gen(function*() {
        yield* attachable(caller, path.sandbox_id, path.process_id)
        // The gateway's own check before it upgrades (Attach.ts): everything the API checks has passed.
        if (isAttachCheck((yield* HttpServerRequest.HttpServerRequest).headers)) return attachCheckPassed(caller.holder)
        return yield* apiError(UpgradeRequired, "upgrade_required", "This route is a WebSocket: connect with Upgrade: websocket")
      }).pipe(provide)
  }
})

export const ProcessesLive = HttpApiBuilder.group(Api, "processes", (handlers) =>
  Effect.gen(function*() {
    const h = yield* processHandlers
    return handlers
      .handle("start", (request) => Effect.flatMap(keyCaller, (caller) => h.start(caller, request)))
      .handle("get", (request) => Effect.flatMap(keyCaller, (caller) => h.get(caller, request)))
      .handle("events", (request) => Effect.flatMap(keyCaller, (caller) => h.events(caller, request)))
      .handle("cancel", (request) => Effect.flatMap(keyCaller, (caller) => h.cancel(caller, request)))
      .handle("stdin", (request) => Effect.flatMap(keyCaller, (caller) => h.stdin(caller, request)))
      .handle("attach", (request) => Effect.flatMap(keyCaller, (caller) => h.attach(caller, request)))
  }))
