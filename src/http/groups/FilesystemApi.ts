/**
 * File operations (reference §2 "Runtime"): each POST answers 202 with a runtime operation to poll at
 * `…/runtime-operations/{id}` (its `Location`). Write and delete take an optional `Idempotency-Key`.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { BadRequest, Conflict, failsWith, NotFound, PayloadTooLarge, RangeNotSatisfiable, ServiceUnavailable, Unprocessable } from "../../domain/Errors.ts"
import { DeleteFile, ListFiles, RawFileParams, RawReadHeaders, RawWriteParams, RawWritten, ReadFile, RuntimeOperation, WriteFile } from "../../domain/Runtime.ts"
import { ProjectKeyAuth } from "../Security.ts"
import { IdempotencyHeaders } from "./Common.ts"
import { runtimeOperationIdParam, sandboxIdParam } from "./SandboxPlane.ts"

const notReady = "409 `invalid_sandbox_state` unless the sandbox is ready; 409 `capability_unsupported` when its provider lacks the operation (or the write mode)."

export class FilesystemApi extends HttpApiGroup.make("filesystem")
  .add(
    HttpApiEndpoint.post("read")`/v1/sandboxes/${sandboxIdParam}/filesystem/read`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(ReadFile)
      .addSuccess(RuntimeOperation, { status: 202 })
      .annotate(OpenApi.Description, `Reads up to limit_bytes from offset_bytes; the result carries data_base64 and eof. ${notReady}`)
  )
  .add(
    HttpApiEndpoint.post("write")`/v1/sandboxes/${sandboxIdParam}/filesystem/write`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(WriteFile)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(RuntimeOperation, { status: 202 })
      .annotate(OpenApi.Description, `Writes data_base64 (at most 10 MiB decoded) with mode create, overwrite or append. ${notReady}`)
  )
  .add(
    HttpApiEndpoint.post("list")`/v1/sandboxes/${sandboxIdParam}/filesystem/list`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(ListFiles)
      .addSuccess(RuntimeOperation, { status: 202 })
      .annotate(OpenApi.Description, `Lists a directory (recursively if asked) up to max_entries; the result says whether it was truncated. ${notReady}`)
  )
  .add(
    HttpApiEndpoint.post("delete")`/v1/sandboxes/${sandboxIdParam}/filesystem/delete`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(DeleteFile)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(RuntimeOperation, { status: 202 })
      .annotate(OpenApi.Description, `Deletes a file, or a directory with recursive: true. ${notReady}`)
  )
  .add(
    HttpApiEndpoint.get("getRuntimeOperation")`/v1/sandboxes/${sandboxIdParam}/runtime-operations/${runtimeOperationIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(RuntimeOperation)
  )
  .add(
    HttpApiEndpoint.get("readContent")`/v1/sandboxes/${sandboxIdParam}/files/content`
      .addError(failsWith(Conflict, "capability_unsupported", "file_exists", "invalid_sandbox_state", "is_a_directory", "runtime_operation_failed"))
      .addError(failsWith(NotFound, "file_not_found", "not_found"))
      .addError(failsWith(RangeNotSatisfiable, "range_not_satisfiable"))
      .addError(failsWith(ServiceUnavailable, "runtime_operation_failed", "sandbox_busy", "sandbox_unresponsive"))
      .addError(failsWith(Unprocessable, "invalid_path"))
      .setUrlParams(RawFileParams)
      .setHeaders(RawReadHeaders)
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }))
      .annotate(
        OpenApi.Description,
        `The file's bytes, streamed (\`Content-Length\`, a weak \`ETag\` from its size and modification time, \`Accept-Ranges: bytes\`). One \`Range: bytes=a-b\` (or \`a-\`, \`-n\`) answers 206 with \`Content-Range\`; a malformed or unsatisfiable one 416 with \`Content-Range: bytes */<size>\`; \`If-None-Match\` with the ETag answers 304. 404 \`file_not_found\`; 409 \`is_a_directory\`. ${notReady}`
      )
  )
  .add(
    HttpApiEndpoint.put("writeContent")`/v1/sandboxes/${sandboxIdParam}/files/content`
      .addError(failsWith(Conflict, "capability_unsupported", "file_exists", "invalid_sandbox_state", "is_a_directory", "runtime_operation_failed"))
      .addError(failsWith(NotFound, "file_not_found", "not_found"))
      .addError(failsWith(PayloadTooLarge, "payload_too_large"))
      .addError(failsWith(ServiceUnavailable, "runtime_operation_failed", "sandbox_busy", "sandbox_unresponsive"))
      .addError(failsWith(Unprocessable, "invalid_path"))
      .setUrlParams(RawWriteParams)
      .setPayload(HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }))
      .addSuccess(RawWritten)
      .addSuccess(RawWritten, { status: 201 })
      .annotate(
        OpenApi.Description,
        `Writes the request body (raw bytes) to the file: \`mode\` create (409 \`file_exists\` if it exists), overwrite (default) or append; \`create_parents=true\` makes missing directories. 201 when the file was created, 200 when replaced or appended, with its size. Where the provider's wire streams writes (E2B) the body streams through as it comes, up to \`RAW_WRITE_MAX_BYTES\` (1 GiB by default); elsewhere it is taken whole, up to the provider's largest write (10 MiB). Past the limit: 413 \`payload_too_large\` with \`details.limit_bytes\` — before a byte is read when \`Content-Length\` says so — and nothing is written; a broken upload writes nothing either. ${notReady}`
      )
  )
  .middleware(ProjectKeyAuth)
  .annotate(OpenApi.Title, "Files")
{}
