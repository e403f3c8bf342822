/** Projects of an organization: listed and read by its members, created, renamed and deleted by its managers. */
import { Effect } from "effect"
import { inTransaction } from "../db/Db.ts"
import { ProjectsRepo } from "../db/repos/Projects.ts"
import { SandboxesRepo } from "../db/repos/Sandboxes.ts"
import type { CreateProject, UpdateProject } from "../domain/Accounts.ts"
import { conflict } from "../domain/Errors.ts"
import { MANAGERS } from "../domain/Principals.ts"
import { nowIso } from "../domain/Time.ts"
import { requireOrgRole, requireProjectRole } from "./Access.ts"
import { appendEvent } from "./Events.ts"
import { accessChanged } from "./LiveStreams.ts"
import type { OrganizationId, ProjectId } from "../domain/Ids.ts"

export const listProjects = (organizationId: OrganizationId) =>
  Effect.gen(function*() {
    yield* requireOrgRole(organizationId)
    return yield* ProjectsRepo.ofOrganization(organizationId)
  })

/** The new project and its event (the caller checked the role; it runs inside the idempotency reservation). */
export const createProject = (organizationId: OrganizationId, input: typeof CreateProject.Type) =>
  Effect.gen(function*() {
    const row = yield* ProjectsRepo.insert({ organizationId, name: input.name.trim(), slug: input.slug })
    yield* appendEvent({ type: "project.created", organizationId: row.organization_id, projectId: row.id, data: { project_id: row.id, name: row.name } })
    return row
  }).pipe(Effect.withSpan("Projects.createProject", { attributes: { "organization.id": organizationId } }))

export const getProject = (projectId: ProjectId) =>
  Effect.gen(function*() {
    // Any member may read, so the only refusal is the non-member's 404.
    yield* requireProjectRole(projectId).pipe(Effect.catchTag("Forbidden", Effect.die))
    return (yield* ProjectsRepo.get(projectId))!
  })

export const updateProject = (projectId: ProjectId, input: typeof UpdateProject.Type) =>
  inTransaction(Effect.gen(function*() {
    yield* requireProjectRole(projectId, MANAGERS)
    const row = yield* ProjectsRepo.update(projectId, { name: input.name.trim(), slug: input.slug })
    yield* appendEvent({ type: "project.updated", organizationId: row.organization_id, projectId: row.id, data: { project_id: row.id, name: row.name, slug: row.slug } })
    return row
  })).pipe(Effect.withSpan("Projects.updateProject", { attributes: { "project.id": projectId } }))

/** Refused while a sandbox of the project is live; the project's streams end too. */
export const deleteProject = (projectId: ProjectId) =>
  inTransaction(Effect.gen(function*() {
    const access = yield* requireProjectRole(projectId, MANAGERS)
    const live = yield* SandboxesRepo.firstLive({ projectId })
    if (live !== undefined) {
      return yield* conflict("project_has_active_resources", "Destroy the project's sandboxes first", { resource: "sandbox", id: live.id, state: live.state })
    }
    yield* ProjectsRepo.softDelete(projectId, yield* nowIso)
    yield* appendEvent({ type: "project.deleted", organizationId: access.organizationId, projectId, data: { project_id: projectId } })
    return { id: projectId, deleted: true as const }
  })).pipe(Effect.tap(() => accessChanged), Effect.withSpan("Projects.deleteProject", { attributes: { "project.id": projectId } }))
