/**
 * Operations (reference §2 "Operations and events"): read with the project key that caused them or the key that
 * created their sandbox; anything else is a 404 (members read them with a user token on the project path:
 * ProjectOperationsApi). Events come as a finite SSE batch of every event after `Last-Event-ID`.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { failsWith, NotFound } from "../../domain/Errors.ts"
import { Operation } from "../../domain/Operation.ts"
import { ProjectKeyAuth } from "../Security.ts"
import { EventStream, FollowParams, LastEventIdHeaders, operationIdParam } from "./SandboxPlane.ts"

export class OperationsApi extends HttpApiGroup.make("operations")
  .add(
    HttpApiEndpoint.get("get")`/v1/operations/${operationIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Operation)
  )
  .add(
    HttpApiEndpoint.get("events")`/v1/operations/${operationIdParam}/events`
      .addError(failsWith(NotFound, "not_found"))
      .setHeaders(LastEventIdHeaders)
      .setUrlParams(FollowParams)
      .addSuccess(EventStream)
      .annotate(
        OpenApi.Description,
        "Every event after `Last-Event-ID` (with `follow=true`: held open until the operation completes). Frames `id: <sequence>`, `event: <type>`, `data: {sequence, operation_id, type, occurred_at, data}` (schema `OperationEventFrame`); types queued, state_changed, completed, attempt_started, attempt_failed, and image_pull (a create from an OCI image on an emulated provider: `resolved` with its layers and size, each `layer` fetched or `cached`, `done`)."
      )
  )
  .middleware(ProjectKeyAuth)
  .annotate(OpenApi.Title, "Operations")
{}
