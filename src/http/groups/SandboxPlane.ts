/**
 * Pieces shared by the sandbox-plane groups (reference §2 "Sandboxes", "Operations and events", "Runtime"):
 * path parameters, the finite SSE batch and its `Last-Event-ID` header. The groups themselves are one file each
 * (SandboxesApi, ProjectSandboxesApi, OperationsApi, ProcessesApi, FilesystemApi, EndpointsApi).
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { EndpointId, OperationId, ProcessId, RecordingId, RuntimeOperationId, SandboxId } from "../../domain/Ids.ts"

export const sandboxIdParam = HttpApiSchema.param("sandbox_id", SandboxId)
export const operationIdParam = HttpApiSchema.param("operation_id", OperationId)
export const processIdParam = HttpApiSchema.param("process_id", ProcessId)
export const runtimeOperationIdParam = HttpApiSchema.param("runtime_operation_id", RuntimeOperationId)
export const endpointIdParam = HttpApiSchema.param("endpoint_id", EndpointId)
export const recordingIdParam = HttpApiSchema.param("recording_id", RecordingId)

/** A finite batch of server-sent events; reconnect with `Last-Event-ID` for more. */
export const EventStream = HttpApiSchema.Text({ contentType: "text/event-stream" }).annotations({
  description: "A finite batch of server-sent events (`id:`, `event:`, `data:` lines); empty when there is nothing new"
})

/** `?follow=true`: the stream stays open and sends each event as it is stored (see each route). */
export const FollowParams = Schema.Struct({
  follow: Schema.optional(Schema.BooleanFromString.annotations({
    identifier: "Follow",
    description: "`true`: hold the stream open, send each event as it is stored, a `: heartbeat` comment every 15 s, and end after the terminal event"
  }))
})

/** Header keys are lower-case (that is how the server sees them). */
export const LastEventIdHeaders = Schema.Struct({
  "last-event-id": Schema.optional(
    Schema.String.pipe(Schema.pattern(/^\d{1,15}$/, { message: () => "must be an event id (digits)" })).annotations({
      identifier: "LastEventId",
      description: "The `id` of the last frame received; the batch holds the events after it"
    })
  )
})
