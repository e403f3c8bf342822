/**
 * Files on the project path (the dashboard's): the routes of FilesystemApi under
 * `/v1/projects/{project_id}/sandboxes/{sandbox_id}/…`, with a user's credential for any member of the project's
 * organization, served by the same handlers (a raw write streams through RawWrites.ts as on the key path).
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { ConflictWire, ForbiddenWire, NotFoundWire, PayloadTooLargeWire, RangeNotSatisfiableWire, ServiceUnavailableWire } from "../../domain/Errors.ts"
import { DeleteFile, ListFiles, RawFileParams, RawReadHeaders, RawWriteParams, RawWritten, ReadFile, RuntimeOperation, WriteFile } from "../../domain/Runtime.ts"
import { UserAuth } from "../Security.ts"
import { IdempotencyHeaders, projectIdParam } from "./Common.ts"
import { runtimeOperationIdParam, sandboxIdParam } from "./SandboxPlane.ts"

const same = (route: string) => `As \`${route}\`, for a member of the project's organization.`

export class ProjectFilesystemApi extends HttpApiGroup.make("projectFilesystem")
  .add(
    HttpApiEndpoint.post("read")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/filesystem/read`
      .setPayload(ReadFile)
      .addSuccess(RuntimeOperation, { status: 202 })
      .annotate(OpenApi.Description, same("POST /v1/sandboxes/{sandbox_id}/filesystem/read"))
  )
  .add(
    HttpApiEndpoint.post("write")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/filesystem/write`
      .setPayload(WriteFile)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(RuntimeOperation, { status: 202 })
  )
  .add(
    HttpApiEndpoint.post("list")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/filesystem/list`
      .setPayload(ListFiles)
      .addSuccess(RuntimeOperation, { status: 202 })
  )
  .add(
    HttpApiEndpoint.post("delete")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/filesystem/delete`
      .setPayload(DeleteFile)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(RuntimeOperation, { status: 202 })
  )
  .add(
    HttpApiEndpoint.get("getRuntimeOperation")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/runtime-operations/${runtimeOperationIdParam}`
      .addSuccess(RuntimeOperation)
  )
  .add(
    HttpApiEndpoint.get("readContent")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/files/content`
      .setUrlParams(RawFileParams)
      .setHeaders(RawReadHeaders)
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }))
      .addError(RangeNotSatisfiableWire)
      .addError(ServiceUnavailableWire)
      .annotate(OpenApi.Description, same("GET /v1/sandboxes/{sandbox_id}/files/content"))
  )
  .add(
    HttpApiEndpoint.put("writeContent")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/files/content`
      .setUrlParams(RawWriteParams)
      .setPayload(HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }))
      .addSuccess(RawWritten)
      .addSuccess(RawWritten, { status: 201 })
      .addError(PayloadTooLargeWire)
      .addError(ServiceUnavailableWire)
      .annotate(OpenApi.Description, same("PUT /v1/sandboxes/{sandbox_id}/files/content"))
  )
  .addError(NotFoundWire)
  .addError(ConflictWire)
  .addError(ForbiddenWire)
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Project files")
{}
