/** `/v1/projects/{id}/sandboxes/{id}/filesystem…`, `…/files/content` for members: the key routes' handlers (FilesystemHttp.ts). */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { filesystemHandlers } from "./FilesystemHttp.ts"
import { memberCaller, planeContext } from "./PlaneSupport.ts"
import type { ProjectId } from "../../domain/Ids.ts"

export const ProjectFilesystemLive = HttpApiBuilder.group(Api, "projectFilesystem", (handlers) =>
  Effect.gen(function*() {
    const { provide } = yield* planeContext
    const h = yield* filesystemHandlers
    const member = (projectId: ProjectId) => memberCaller(projectId).pipe(provide)
    return handlers
      .handle("read", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.read(caller, request)))
      .handle("list", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.list(caller, request)))
      .handle("write", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.write(caller, request)))
      .handle("delete", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.delete(caller, request)))
      .handle("getRuntimeOperation", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.getRuntimeOperation(caller, request)))
      .handle("readContent", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.readContent(caller, request)))
      .handle("writeContent", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.writeContent(caller, request)))
  }))
