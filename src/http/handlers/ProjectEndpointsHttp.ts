/** `/v1/projects/{id}/sandboxes/{id}/endpoints…` for members: the key routes' handlers (EndpointsHttp.ts). */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { endpointHandlers } from "./EndpointsHttp.ts"
import { memberCaller, planeContext } from "./PlaneSupport.ts"
import type { ProjectId } from "../../domain/Ids.ts"

export const ProjectEndpointsLive = HttpApiBuilder.group(Api, "projectEndpoints", (handlers) =>
  Effect.gen(function*() {
    const { provide } = yield* planeContext
    const h = yield* endpointHandlers
    const member = (projectId: ProjectId) => memberCaller(projectId).pipe(provide)
    return handlers
      .handle("create", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.create(caller, request)))
      .handle("list", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.list(caller, request)))
      .handle("revoke", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.revoke(caller, request)))
  }))
