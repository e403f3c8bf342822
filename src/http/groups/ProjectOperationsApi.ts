/**
 * Operations on the project path (reference §2 "Operations and events"): a member's user token reads any
 * operation of the project, for example one returned by a project-path pause, resume or delete.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { failsWith, Forbidden, NotFound } from "../../domain/Errors.ts"
import { Operation } from "../../domain/Operation.ts"
import { UserAuth } from "../Security.ts"
import { projectIdParam } from "./Common.ts"
import { EventStream, FollowParams, LastEventIdHeaders, operationIdParam } from "./SandboxPlane.ts"

export class ProjectOperationsApi extends HttpApiGroup.make("projectOperations")
  .add(
    HttpApiEndpoint.get("get")`/v1/projects/${projectIdParam}/operations/${operationIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Operation)
  )
  .add(
    HttpApiEndpoint.get("events")`/v1/projects/${projectIdParam}/operations/${operationIdParam}/events`
      .addError(failsWith(NotFound, "not_found"))
      .setHeaders(LastEventIdHeaders)
      .setUrlParams(FollowParams)
      .addSuccess(EventStream)
      .annotate(OpenApi.Description, "As `GET /v1/operations/{operation_id}/events`, for a member of the project's organization.")
  )
  // A member of another organization, or one whose role may not do this.
  .addError(failsWith(Forbidden, "forbidden"))
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Project operations")
{}
