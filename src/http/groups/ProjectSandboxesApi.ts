/**
 * Project-path sandbox aliases for dashboard clients (reference §2 "Sandboxes", P routes): a user's credential (the
 * dashboard's session cookie or a user access token), the project in the path and no project header. Pause,
 * resume and delete answer 200 (not 202) with `{sandbox, operation}`; create, extend, capabilities and metrics
 * are the key routes' own handlers (SandboxesHttp.ts), with their answers.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ConflictWire, ForbiddenWire, NotFoundWire, PaymentRequiredWire, ServiceUnavailableWire } from "../../domain/Errors.ts"
import { SandboxMetrics } from "../../domain/Metrics.ts"
import { Capabilities } from "../../domain/Runtime.ts"
import { ExtendSandbox, Sandbox, SandboxMutation, SandboxRequest } from "../../domain/Sandbox.ts"
import { UserAuth } from "../Security.ts"
import { IdempotencyHeaders, projectIdParam } from "./Common.ts"
import { sandboxIdParam } from "./SandboxPlane.ts"

export const ProjectSandboxList = Schema.Struct({ sandboxes: Schema.Array(Sandbox) }).annotations({ identifier: "ProjectSandboxList" })

export class ProjectSandboxesApi extends HttpApiGroup.make("projectSandboxes")
  .add(
    HttpApiEndpoint.get("list")`/v1/projects/${projectIdParam}/sandboxes`
      .addSuccess(ProjectSandboxList)
      .addError(NotFoundWire)
      .annotate(OpenApi.Description, "Every sandbox of the project, newest first (no paging).")
  )
  .add(
    HttpApiEndpoint.post("create")`/v1/projects/${projectIdParam}/sandboxes`
      .setPayload(SandboxRequest)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(SandboxMutation, { status: 202 })
      .addError(NotFoundWire)
      .addError(PaymentRequiredWire)
      .addError(ConflictWire)
      .annotate(OpenApi.Description, "As `POST /v1/sandboxes` (`Idempotency-Key` required), for a member of the project's organization; `Location` is the operation on the project path.")
  )
  .add(HttpApiEndpoint.get("get")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}`.addSuccess(Sandbox).addError(NotFoundWire))
  .add(
    HttpApiEndpoint.post("extend")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/extend`
      .setPayload(ExtendSandbox)
      .addSuccess(Sandbox)
      .addError(NotFoundWire)
      .addError(ConflictWire)
      .annotate(OpenApi.Description, "As `POST /v1/sandboxes/{sandbox_id}/actions/extend`.")
  )
  .add(
    HttpApiEndpoint.get("capabilities")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/capabilities`
      .addSuccess(Capabilities)
      .addError(NotFoundWire)
      .addError(ConflictWire)
  )
  .add(
    HttpApiEndpoint.get("metrics")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/metrics`
      .addSuccess(SandboxMetrics)
      .addError(NotFoundWire)
      .addError(ConflictWire)
      .addError(ServiceUnavailableWire)
      .annotate(OpenApi.Description, "As `GET /v1/sandboxes/{sandbox_id}/metrics`.")
  )
  .add(
    HttpApiEndpoint.post("pause")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/pause`
      .addSuccess(SandboxMutation)
      .addError(NotFoundWire)
      .addError(ConflictWire)
  )
  .add(
    HttpApiEndpoint.post("resume")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/resume`
      .addSuccess(SandboxMutation)
      .addError(NotFoundWire)
      .addError(ConflictWire)
  )
  .add(HttpApiEndpoint.del("delete")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}`.addSuccess(SandboxMutation).addError(NotFoundWire))
  .addError(ForbiddenWire)
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Project sandboxes")
{}
