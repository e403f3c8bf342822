/**
 * Endpoints on the project path (the dashboard's): the routes of EndpointsApi under
 * `/v1/projects/{project_id}/sandboxes/{sandbox_id}/endpoints`, with a user's credential for any member of the
 * project's organization, served by the same handlers.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { BadRequest, Conflict, failsWith, Forbidden, NotFound } from "../../domain/Errors.ts"
import { CreateEndpoint, Endpoint, EndpointList } from "../../domain/Runtime.ts"
import { PageParams } from "../Pagination.ts"
import { UserAuth } from "../Security.ts"
import { IdempotencyHeaders, projectIdParam } from "./Common.ts"
import { endpointIdParam, sandboxIdParam } from "./SandboxPlane.ts"

export class ProjectEndpointsApi extends HttpApiGroup.make("projectEndpoints")
  .add(
    HttpApiEndpoint.post("create")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/endpoints`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "endpoint_conflict", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(CreateEndpoint)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(Endpoint, { status: 202 })
      .annotate(OpenApi.Description, "As `POST /v1/sandboxes/{sandbox_id}/endpoints`, for a member of the project's organization.")
  )
  .add(
    HttpApiEndpoint.get("list")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/endpoints`
      .addError(failsWith(NotFound, "not_found"))
      .setUrlParams(PageParams).addSuccess(EndpointList)
  )
  .add(
    HttpApiEndpoint.del("revoke")`/v1/projects/${projectIdParam}/sandboxes/${sandboxIdParam}/endpoints/${endpointIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Endpoint, { status: 202 })
  )
  // A member of another organization, or one whose role may not do this.
  .addError(failsWith(Forbidden, "forbidden"))
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Project endpoints")
{}
