/**
 * Project-path sandbox aliases for dashboard clients (reference §2 "Sandboxes", P routes): a user's credential (the
 * dashboard's session cookie or a user access token), the project in the path and no project header. Pause,
 * resume and delete answer 200 (not 202) with `{sandbox, operation}`; create, extend, capabilities and metrics
 * are the key routes' own handlers (SandboxesHttp.ts), with their answers.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { BadRequest, Conflict, failsWith, Forbidden, NotFound, PaymentRequired, ServiceUnavailable } from "../../domain/Errors.ts"
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
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(ProjectSandboxList)
      .annotate(OpenApi.Description, "Every sandbox of the project, newest first (no paging).")
  )
  .add(
    HttpApiEndpoint.post("create")`/v1/projects/${projectIdParam}/sandboxes`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "idempotency_in_progress", "idempotency_mismatch"))
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(PaymentRequired, "insufficient_credits"))
      .setPayload(SandboxRequest)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(SandboxMutation, { status: 202 })
      .annotate(OpenApi.Description, "As `POST /v1/sandboxes` (`Idempotency-Key` required), for a member of the project's organization; `Location` is the operation on the project path.")
  )
  .add(
    HttpApiEndpoint.get("get")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Sandbox)
  )
  .add(
    HttpApiEndpoint.post("extend")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/extend`
      .addError(failsWith(Conflict, "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(ExtendSandbox)
      .addSuccess(Sandbox)
      .annotate(OpenApi.Description, "As `POST /v1/sandboxes/{sandbox_id}/actions/extend`.")
  )
  .add(
    HttpApiEndpoint.get("capabilities")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/capabilities`
      .addError(failsWith(Conflict, "capabilities_unavailable", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Capabilities)
  )
  .add(
    HttpApiEndpoint.get("metrics")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/metrics`
      .addError(failsWith(Conflict, "invalid_sandbox_state", "provider_auth", "provider_capacity", "provider_customer", "provider_invalid_request", "provider_quota", "provider_timeout_absent", "provider_unavailable", "provider_unknown_outcome"))
      .addError(failsWith(NotFound, "metrics_unavailable", "not_found"))
      .addError(failsWith(ServiceUnavailable, "provider_auth", "provider_capacity", "provider_customer", "provider_invalid_request", "provider_quota", "provider_timeout", "provider_timeout_absent", "provider_unavailable", "provider_unknown_outcome"))
      .addSuccess(SandboxMetrics)
      .annotate(OpenApi.Description, "As `GET /v1/sandboxes/{sandbox_id}/metrics`.")
  )
  .add(
    HttpApiEndpoint.post("pause")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/pause`
      .addError(failsWith(Conflict, "invalid_sandbox_state", "recording_active", "unsupported_operation"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(SandboxMutation)
  )
  .add(
    HttpApiEndpoint.post("resume")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/resume`
      .addError(failsWith(Conflict, "capability_unsupported", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(SandboxMutation)
  )
  .add(
    HttpApiEndpoint.del("delete")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(SandboxMutation)
  )
  // A member of another organization, or one whose role may not do this.
  .addError(failsWith(Forbidden, "forbidden"))
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Project sandboxes")
{}
