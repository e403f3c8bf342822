/** Projects (spec §4.3; reference §2 "Projects, API keys"). Members read, owners and admins write; non-members get 404 on `/v1/projects/…`. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { BadRequest, Conflict, failsWith, Forbidden, NotFound } from "../../domain/Errors.ts"
import { CreateProject, Deleted, Project, ProjectList, UpdateProject } from "../../domain/Accounts.ts"
import { UserAuth } from "../Security.ts"
import { IdempotencyHeaders, organizationIdParam, projectIdParam } from "./Common.ts"

export class ProjectsApi extends HttpApiGroup.make("projects")
  .add(
    HttpApiEndpoint.get("list")`/v1/organizations/${organizationIdParam}/projects`
      .addError(failsWith(Forbidden, "forbidden"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(ProjectList)
  )
  .add(
    HttpApiEndpoint.post("create")`/v1/organizations/${organizationIdParam}/projects`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "conflict", "idempotency_in_progress", "idempotency_mismatch"))
      .addError(failsWith(Forbidden, "forbidden"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(CreateProject)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(Project, { status: 201 })
  )
  .add(
    HttpApiEndpoint.get("get")`/v1/projects/${projectIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Project)
  )
  .add(
    HttpApiEndpoint.patch("update")`/v1/projects/${projectIdParam}`
      .addError(failsWith(Conflict, "conflict"))
      .addError(failsWith(Forbidden, "forbidden"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(UpdateProject)
      .addSuccess(Project)
  )
  .add(
    HttpApiEndpoint.del("delete")`/v1/projects/${projectIdParam}`
      .addError(failsWith(Conflict, "project_has_active_resources"))
      .addError(failsWith(Forbidden, "forbidden"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Deleted)
  )
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Projects")
  .annotate(OpenApi.Description, "Projects of an organization, with a user access token. Slugs are unique among an organization's live projects.")
{}
