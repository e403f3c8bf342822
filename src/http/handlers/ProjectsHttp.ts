import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Project } from "../../domain/Accounts.ts"
import { MANAGERS } from "../../domain/Principals.ts"
import { requireOrgRole } from "../../services/Access.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { createProject, deleteProject, getProject, listProjects, updateProject } from "../../services/Projects.ts"
import { provideServiceContext } from "../../services/ServiceContext.ts"
import { Api } from "../Api.ts"
import { projectToWire } from "../wire/Accounts.ts"

export const ProjectsLive = HttpApiBuilder.group(Api, "projects", (handlers) =>
  Effect.gen(function*() {
    const idempotency = yield* IdempotencyStore
    const provide = yield* provideServiceContext

    return handlers
      .handle("list", ({ path }) => listProjects(path.organization_id).pipe(Effect.map((rows) => ({ projects: rows.map(projectToWire) })), provide))
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
            run: Effect.map(createProject(path.organization_id, payload), projectToWire)
          })
        }).pipe(provide))
      .handle("get", ({ path }) => getProject(path.project_id).pipe(Effect.map(projectToWire), provide))
      .handle("update", ({ path, payload }) => updateProject(path.project_id, payload).pipe(Effect.map(projectToWire), provide))
      .handle("delete", ({ path }) => deleteProject(path.project_id).pipe(provide))
  }))
