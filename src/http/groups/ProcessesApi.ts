/**
 * Processes in a sandbox (reference §2 "Runtime"): start (202, `Idempotency-Key` required), read, events as a
 * finite SSE batch (≤100 frames, ≤1 MiB), cancel (202, key optional), standard input (202).
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { BadRequest, Conflict, failsWith, NotFound, ServiceUnavailable, UpgradeRequired } from "../../domain/Errors.ts"
import { Process, ProcessWithOutput, StartProcess, StdinWritten, WriteStdin } from "../../domain/Runtime.ts"
import { ProjectKeyAuth } from "../Security.ts"
import { IdempotencyHeaders } from "./Common.ts"
import { EventStream, FollowParams, LastEventIdHeaders, processIdParam, sandboxIdParam } from "./SandboxPlane.ts"

/** `?wait_seconds=N`: run and wait (1–300 s). */
export const StartProcessParams = Schema.Struct({
  wait_seconds: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 300)).annotations({
    description: "Wait up to this many seconds for the process to end: 201 with its terminal state and its output if it does, else 202"
  }))
})

/** `?after=N`: an attach replays the output events after sequence N (default 0: all the output kept). */
export const AttachParams = Schema.Struct({
  after: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(0, Number.MAX_SAFE_INTEGER)).annotations({
    description: "Replay the output after this event sequence (an earlier attach's position); default 0, all the output kept"
  }))
})

export class ProcessesApi extends HttpApiGroup.make("processes")
  .add(
    HttpApiEndpoint.post("start")`/v1/sandboxes/${sandboxIdParam}/processes`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(StartProcess)
      .setHeaders(IdempotencyHeaders)
      .setUrlParams(StartProcessParams)
      .addSuccess(Process, { status: 202 })
      .addSuccess(ProcessWithOutput.annotations({ description: "With `wait_seconds`: the process ended in time (its terminal state), with its output" }), { status: 201 })
      .annotate(
        OpenApi.Description,
        "`Idempotency-Key` required (400 `idempotency_key_required`). `?wait_seconds=N` (1–300): answers 201 with the process in its terminal state when it ends within N seconds, with its output (`stdout`, `stderr` as UTF-8 text; `stdout_base64`/`stderr_base64` too when the bytes are not UTF-8; at most 1 MiB of each, `output_capped` when that cut it — the events hold all the output kept), else 202 as without it (a replay with the same key waits the same way); not with `stdin: true` (422). `stdin: true` keeps its input open for `…/stdin` (409 `capability_unsupported` on a provider that cannot take input). 409 `invalid_sandbox_state` unless the sandbox is ready, `capability_unsupported` when its provider cannot run processes, `idempotency_mismatch` on a reused key."
      )
  )
  .add(
    HttpApiEndpoint.get("get")`/v1/sandboxes/${sandboxIdParam}/processes/${processIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Process)
  )
  .add(
    HttpApiEndpoint.get("events")`/v1/sandboxes/${sandboxIdParam}/processes/${processIdParam}/events`
      .addError(failsWith(NotFound, "not_found"))
      .setHeaders(LastEventIdHeaders)
      .setUrlParams(FollowParams)
      .addSuccess(EventStream)
      .annotate(
        OpenApi.Description,
        "At most 100 frames and 1 MiB after `Last-Event-ID`, or with `follow=true` every event as it is stored until the process ends (live output); `data:` is `{sequence, process_id, type, occurred_at, data}` (schema `ProcessEventFrame`); types queued, started, stdout, stderr, cancel_requested, exited, cancelled, timed_out, failed."
      )
  )
  .add(
    HttpApiEndpoint.post("cancel")`/v1/sandboxes/${sandboxIdParam}/processes/${processIdParam}/actions/cancel`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "process_terminal"))
      .addError(failsWith(NotFound, "not_found"))
      .setHeaders(IdempotencyHeaders)
      .addSuccess(Process, { status: 202 })
      .annotate(OpenApi.Description, "Moves the process to `cancelling`; 409 `process_terminal` once it has finished, `capability_unsupported` if the provider cannot cancel.")
  )
  .add(
    HttpApiEndpoint.post("stdin")`/v1/sandboxes/${sandboxIdParam}/processes/${processIdParam}/stdin`
      .addError(failsWith(Conflict, "invalid_process_state", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(ServiceUnavailable, "sandbox_unresponsive", "stdin_write_failed"))
      .setPayload(WriteStdin)
      .addSuccess(StdinWritten, { status: 202 })
      .annotate(
        OpenApi.Description,
        "Writes `data_base64` (at most 1 MiB decoded) to the standard input of a process started with `\"stdin\": true`, after the writes before it; `eof: true` closes the input after the data. 202 once the bytes were handed to the process. 409 `invalid_process_state` when it was not started with stdin, its input was closed, it has ended (or has not started within 10 s); 503 when its provider does not answer."
      )
  )
  .add(
    HttpApiEndpoint.get("attach")`/v1/sandboxes/${sandboxIdParam}/processes/${processIdParam}/attach`
      .addError(failsWith(Conflict, "invalid_process_state"))
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(UpgradeRequired, "upgrade_required"))
      .setUrlParams(AttachParams)
      .addSuccess(HttpApiSchema.Empty(101).annotations({ description: "Switching Protocols: the WebSocket is open" }))
      .annotate(
        OpenApi.Description,
        "A WebSocket (`Upgrade: websocket`, with the usual `Authorization` and `X-Metal-Project-ID` headers) to a process started with `pty`. Server → client: binary frames of terminal output (first the output kept after `?after`, then live), a text frame `{\"type\":\"exit\",\"state\",\"exit_code\"}` when the process ends (then close 1000), and `{\"type\":\"error\",\"code\",\"message\"}` for a frame that could not be applied. Client → server: binary frames are typed into the terminal (at most 1 MiB each; larger closes with 1009), text frames `{\"type\":\"resize\",\"cols\":1-1000,\"rows\":1-1000}` resize it. Closing the socket does not end the process; a second attach takes over (the first is closed with 4000). An open attach keeps the sandbox from its idle timeout. 409 `invalid_process_state` for a process without a terminal or one that ended; 426 `upgrade_required` without the upgrade."
      )
  )
  .middleware(ProjectKeyAuth)
  .annotate(OpenApi.Title, "Processes")
{}
