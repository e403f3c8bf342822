/**
 * Processes on the project path (the dashboard's): the routes of ProcessesApi under
 * `/v1/projects/{project_id}/sandboxes/{sandbox_id}/processes`, with a user's credential (the session cookie or a
 * user access token) for any member of the project's organization, served by the same handlers — plus the list
 * of a sandbox's processes.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { BadRequest, Conflict, failsWith, Forbidden, NotFound, ServiceUnavailable, UpgradeRequired } from "../../domain/Errors.ts"
import { Process, ProcessWithOutput, StartProcess, StdinWritten, WriteStdin } from "../../domain/Runtime.ts"
import { UserAuth } from "../Security.ts"
import { IdempotencyHeaders, projectIdParam } from "./Common.ts"
import { AttachParams, StartProcessParams } from "./ProcessesApi.ts"
import { EventStream, FollowParams, LastEventIdHeaders, processIdParam, sandboxIdParam } from "./SandboxPlane.ts"

export const ProcessList = Schema.Struct({ processes: Schema.Array(Process) }).annotations({ identifier: "ProcessList" })

const same = (route: string) => `As \`${route}\`, for a member of the project's organization.`

export class ProjectProcessesApi extends HttpApiGroup.make("projectProcesses")
  .add(
    HttpApiEndpoint.post("start")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/processes`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(StartProcess)
      .setHeaders(IdempotencyHeaders)
      .setUrlParams(StartProcessParams)
      .addSuccess(Process, { status: 202 })
      .addSuccess(ProcessWithOutput.annotations({ description: "With `wait_seconds`: the process ended in time (its terminal state), with its output" }), { status: 201 })
      .annotate(OpenApi.Description, same("POST /v1/sandboxes/{sandbox_id}/processes"))
  )
  .add(
    HttpApiEndpoint.get("list")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/processes`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(ProcessList)
      .annotate(OpenApi.Description, "The sandbox's latest 100 processes, newest first.")
  )
  .add(
    HttpApiEndpoint.get("get")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/processes/${processIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Process)
  )
  .add(
    HttpApiEndpoint.get("events")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/processes/${processIdParam}/events`
      .addError(failsWith(NotFound, "not_found"))
      .setHeaders(LastEventIdHeaders)
      .setUrlParams(FollowParams)
      .addSuccess(EventStream)
      .annotate(OpenApi.Description, same("GET /v1/sandboxes/{sandbox_id}/processes/{process_id}/events"))
  )
  .add(
    HttpApiEndpoint.post("cancel")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/processes/${processIdParam}/actions/cancel`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "process_terminal"))
      .addError(failsWith(NotFound, "not_found"))
      .setHeaders(IdempotencyHeaders)
      .addSuccess(Process, { status: 202 })
  )
  .add(
    HttpApiEndpoint.post("stdin")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/processes/${processIdParam}/stdin`
      .addError(failsWith(Conflict, "invalid_process_state", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(ServiceUnavailable, "sandbox_unresponsive", "stdin_write_failed"))
      .setPayload(WriteStdin)
      .addSuccess(StdinWritten, { status: 202 })
  )
  .add(
    HttpApiEndpoint.get("attach")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/processes/${processIdParam}/attach`
      .addError(failsWith(Conflict, "invalid_process_state"))
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(UpgradeRequired, "upgrade_required"))
      .setUrlParams(AttachParams)
      .addSuccess(HttpApiSchema.Empty(101).annotations({ description: "Switching Protocols: the WebSocket is open" }))
      .annotate(OpenApi.Description, `${same("GET /v1/sandboxes/{sandbox_id}/processes/{process_id}/attach")} With the session cookie, the handshake's Origin must be the API's (403 \`csrf_failed\`).`)
  )
  // A member of another organization, or one whose role may not do this.
  .addError(failsWith(Forbidden, "forbidden"))
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Project processes")
{}
