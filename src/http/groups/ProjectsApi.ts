/** Projects (spec §4.3; reference §2 "Projects, API keys"). Members read, owners and admins write; non-members get 404 on `/v1/projects/…`. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { BadRequest, Conflict, failsWith, Forbidden, NotFound } from "../../domain/Errors.ts"
import { CreateProject, Deleted, Project, ProjectList, UpdateProject } from "../../domain/Accounts.ts"
import { UserAuth } from "../Security.ts"
import { IdempotencyHeaders, organizationIdParam, projectIdParam } from "./Common.ts"

export class ProjectsApi extends HttpApiGroup.make("projects")
  .add(
    HttpApiEndpoint.get("list")`/v1/organizations/${organizationIdParam}/projects`
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(Forbidden, "forbidden"))
      .addSuccess(ProjectList)
  )
  .add(
    HttpApiEndpoint.post("create")`/v1/organizations/${organizationIdParam}/projects`
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "conflict", "idempotency_in_progress", "idempotency_mismatch"))
      .addError(failsWith(Forbidden, "forbidden"))
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
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(Conflict, "conflict"))
      .addError(failsWith(Forbidden, "forbidden"))
      .setPayload(UpdateProject)
      .addSuccess(Project)
  )
  .add(
    HttpApiEndpoint.del("delete")`/v1/projects/${projectIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(Conflict, "project_has_active_resources"))
      .addError(failsWith(Forbidden, "forbidden"))
      .addSuccess(Deleted)
  )
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Projects")
  .annotate(OpenApi.Description, "Projects of an organization, with a user access token. Slugs are unique among an organization's live projects.")
{}
