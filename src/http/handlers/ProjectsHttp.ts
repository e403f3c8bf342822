import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Project } from "../../domain/Accounts.ts"
import { conflict } from "../../domain/Errors.ts"
import { nowIso } from "../../domain/Time.ts"
import { getProject, insertProject, projectsOf, projectToWire, updateProject } from "../../db/repos/Projects.ts"
import { requireOrgRole, requireProjectRole } from "../../services/Access.ts"
import { MANAGERS } from "../../domain/Principals.ts"
import { appendEvent } from "../../services/Events.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { Api } from "../Api.ts"

export const ProjectsLive = HttpApiBuilder.group(Api, "projects", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const idempotency = yield* IdempotencyStore
    const provide = Effect.provideService(SqlClient.SqlClient, sql)
    const inTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      sql.withTransaction(effect).pipe(Effect.catchTag("SqlError", Effect.die), provide)

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id)
          return { projects: (yield* projectsOf(path.organization_id)).map(projectToWire) }
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
              const row = yield* insertProject({ organizationId: path.organization_id, name: payload.name.trim(), slug: payload.slug })
              yield* appendEvent({ type: "project.created", organizationId: row.organization_id, projectId: row.id, data: { project_id: row.id, name: row.name } })
              return projectToWire(row)
            })
          })
        }).pipe(provide))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          // Any member may read, so the only refusal is the non-member's 404.
          yield* requireProjectRole(path.project_id).pipe(Effect.catchTag("Forbidden", Effect.die))
          return projectToWire((yield* getProject(path.project_id))!)
        }).pipe(provide))
      .handle("update", ({ path, payload }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireProjectRole(path.project_id, MANAGERS)
          const row = yield* updateProject(path.project_id, { name: payload.name.trim(), slug: payload.slug })
          yield* appendEvent({ type: "project.updated", organizationId: row.organization_id, projectId: row.id, data: { project_id: row.id, name: row.name, slug: row.slug } })
          return projectToWire(row)
        })))
      .handle("delete", ({ path }) =>
        inTransaction(Effect.gen(function*() {
          const access = yield* requireProjectRole(path.project_id, MANAGERS)
          const live = yield* sql<{ id: string; state: string }>`SELECT id, state FROM sandboxes WHERE project_id = ${path.project_id}
            AND state NOT IN ('stopped', 'failed', 'cleanup_failed') LIMIT 1`
          if (live[0] !== undefined) {
            return yield* conflict("project_has_active_resources", "Destroy the project's sandboxes first", { resource: "sandbox", id: live[0].id, state: live[0].state })
          }
          const now = yield* nowIso
          yield* sql`UPDATE projects SET deleted_at = ${now}, updated_at = ${now} WHERE id = ${path.project_id}`
          yield* appendEvent({ type: "project.deleted", organizationId: access.organizationId, projectId: path.project_id, data: { project_id: path.project_id } })
          return { id: path.project_id, deleted: true as const }
        })))
  }))
