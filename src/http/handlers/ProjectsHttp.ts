import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Db } from "../../db/Db.ts"
import { provideRepositories } from "../../db/Database.ts"
import { ProjectsRepo } from "../../db/repos/Projects.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { Project } from "../../domain/Accounts.ts"
import { conflict } from "../../domain/Errors.ts"
import { MANAGERS } from "../../domain/Principals.ts"
import { nowIso } from "../../domain/Time.ts"
import { requireOrgRole, requireProjectRole } from "../../services/Access.ts"
import { appendEvent } from "../../services/Events.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { accessChanged } from "../../services/LiveStreams.ts"
import { Api } from "../Api.ts"
import { projectToWire } from "../wire/Accounts.ts"

export const ProjectsLive = HttpApiBuilder.group(Api, "projects", (handlers) =>
  Effect.gen(function*() {
    const idempotency = yield* IdempotencyStore
    const db = yield* Db
    const projects = yield* ProjectsRepo
    const provide = yield* provideRepositories
    const inTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>) => db.transaction(effect).pipe(provide)

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id)
          return { projects: (yield* projects.ofOrganization(path.organization_id)).map(projectToWire) }
        }).pipe(provide))
      .handle("create", ({ headers, path, payload }) =>
        Effect.gen(function*() {
          const access = yield* requireOrgRole(path.organization_id, MANAGERS)
          return yield* idempotency.remember({
            principalId: access.userId,
            scope: `projects.create:${path.organization_id}`,
            key: headers["idempotency-key"],
            required: false,
            request: payload,
            schema: Project,
            run: Effect.gen(function*() {
              const row = yield* projects.insert({ organizationId: path.organization_id, name: payload.name.trim(), slug: payload.slug })
              yield* appendEvent({ type: "project.created", organizationId: row.organization_id, projectId: row.id, data: { project_id: row.id, name: row.name } })
              return projectToWire(row)
            })
          })
        }).pipe(provide))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          // Any member may read, so the only refusal is the non-member's 404.
          yield* requireProjectRole(path.project_id).pipe(Effect.catchTag("Forbidden", Effect.die))
          return projectToWire((yield* projects.get(path.project_id))!)
        }).pipe(provide))
      .handle("update", ({ path, payload }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireProjectRole(path.project_id, MANAGERS)
          const row = yield* projects.update(path.project_id, { name: payload.name.trim(), slug: payload.slug })
          yield* appendEvent({ type: "project.updated", organizationId: row.organization_id, projectId: row.id, data: { project_id: row.id, name: row.name, slug: row.slug } })
          return projectToWire(row)
        })))
      .handle("delete", ({ path }) =>
        inTransaction(Effect.gen(function*() {
          const access = yield* requireProjectRole(path.project_id, MANAGERS)
          const live = yield* SandboxesRepo.firstLive({ projectId: path.project_id })
          if (live !== undefined) {
            return yield* conflict("project_has_active_resources", "Destroy the project's sandboxes first", { resource: "sandbox", id: live.id, state: live.state })
          }
          yield* projects.softDelete(path.project_id, yield* nowIso)
          yield* appendEvent({ type: "project.deleted", organizationId: access.organizationId, projectId: path.project_id, data: { project_id: path.project_id } })
          return { id: path.project_id, deleted: true as const }
        })).pipe(Effect.tap(() => provide(accessChanged)))) // the project's streams end too
  }))
