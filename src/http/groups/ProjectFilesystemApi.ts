/**
 * Files on the project path (the dashboard's): the routes of FilesystemApi under
 * `/v1/projects/{project_id}/sandboxes/{sandbox_id}/…`, with a user's credential for any member of the project's
 * organization, served by the same handlers (a raw write streams through RawWrites.ts as on the key path).
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { BadRequest, Conflict, failsWith, Forbidden, NotFound, PayloadTooLarge, RangeNotSatisfiable, ServiceUnavailable, Unprocessable } from "../../domain/Errors.ts"
import { DeleteFile, ListFiles, RawFileParams, RawReadHeaders, RawWriteParams, RawWritten, ReadFile, RuntimeOperation, WriteFile } from "../../domain/Runtime.ts"
import { UserAuth } from "../Security.ts"
import { IdempotencyHeaders, projectIdParam } from "./Common.ts"
import { runtimeOperationIdParam, sandboxIdParam } from "./SandboxPlane.ts"

const same = (route: string) => `As \`${route}\`, for a member of the project's organization.`

export class ProjectFilesystemApi extends HttpApiGroup.make("projectFilesystem")
  .add(
    HttpApiEndpoint.post("read")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/filesystem/read`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(ReadFile)
      .addSuccess(RuntimeOperation, { status: 202 })
      .annotate(OpenApi.Description, same("POST /v1/sandboxes/{sandbox_id}/filesystem/read"))
  )
  .add(
    HttpApiEndpoint.post("write")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/filesystem/write`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(WriteFile)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(RuntimeOperation, { status: 202 })
  )
  .add(
    HttpApiEndpoint.post("list")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/filesystem/list`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(ListFiles)
      .addSuccess(RuntimeOperation, { status: 202 })
  )
  .add(
    HttpApiEndpoint.post("delete")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/filesystem/delete`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(DeleteFile)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(RuntimeOperation, { status: 202 })
  )
  .add(
    HttpApiEndpoint.get("getRuntimeOperation")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/runtime-operations/${runtimeOperationIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(RuntimeOperation)
  )
  .add(
    HttpApiEndpoint.get("readContent")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/files/content`
      .addError(failsWith(Conflict, "capability_unsupported", "file_exists", "invalid_sandbox_state", "is_a_directory", "runtime_operation_failed"))
      .addError(failsWith(NotFound, "file_not_found", "not_found"))
      .addError(failsWith(RangeNotSatisfiable, "range_not_satisfiable"))
      .addError(failsWith(ServiceUnavailable, "runtime_operation_failed", "sandbox_busy", "sandbox_unresponsive"))
      .addError(failsWith(Unprocessable, "invalid_path"))
      .setUrlParams(RawFileParams)
      .setHeaders(RawReadHeaders)
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }))
      .annotate(OpenApi.Description, same("GET /v1/sandboxes/{sandbox_id}/files/content"))
  )
  .add(
    HttpApiEndpoint.put("writeContent")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/files/content`
      .addError(failsWith(Conflict, "capability_unsupported", "file_exists", "invalid_sandbox_state", "is_a_directory", "runtime_operation_failed"))
      .addError(failsWith(NotFound, "file_not_found", "not_found"))
      .addError(failsWith(PayloadTooLarge, "payload_too_large"))
      .addError(failsWith(ServiceUnavailable, "runtime_operation_failed", "sandbox_busy", "sandbox_unresponsive"))
      .addError(failsWith(Unprocessable, "invalid_path"))
      .setUrlParams(RawWriteParams)
      .setPayload(HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }))
      .addSuccess(RawWritten)
      .addSuccess(RawWritten, { status: 201 })
      .annotate(OpenApi.Description, same("PUT /v1/sandboxes/{sandbox_id}/files/content"))
  )
  // A member of another organization, or one whose role may not do this.
  .addError(failsWith(Forbidden, "forbidden"))
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Project files")
{}
