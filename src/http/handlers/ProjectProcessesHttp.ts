/** `/v1/projects/{id}/sandboxes/{id}/processes…` for members: the key routes' handlers (ProcessesHttp.ts), and the list. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { latestProcesses } from "../../services/sandboxes/ProcessCommands.ts"
import { Api } from "../Api.ts"
import { capabilitiesOf, processToWire } from "../wire/Sandboxes.ts"
import { memberCaller, planeContext } from "./PlaneSupport.ts"
import { processHandlers } from "./ProcessesHttp.ts"
import type { ProjectId } from "../../domain/Ids.ts"

/** How many of a sandbox's processes the list shows. */
const LIST_LIMIT = 100

export const ProjectProcessesLive = HttpApiBuilder.group(Api, "projectProcesses", (handlers) =>
  Effect.gen(function*() {
    const { provide } = yield* planeContext
    const h = yield* processHandlers
    const member = (projectId: ProjectId) => memberCaller(projectId).pipe(provide)
    return handlers
      .handle("start", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.start(caller, request)))
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          const { processes, sandbox } = yield* latestProcesses(yield* memberCaller(path.project_id), path.sandbox_id, LIST_LIMIT)
          const caps = capabilitiesOf(sandbox)
          return { processes: processes.map((row) => processToWire(row, caps)) }
        }).pipe(provide))
      .handle("get", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.get(caller, request)))
      .handle("events", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.events(caller, request)))
      .handle("cancel", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.cancel(caller, request)))
      .handle("stdin", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.stdin(caller, request)))
      .handle("attach", (request) => Effect.flatMap(member(request.path.project_id), (caller) => h.attach(caller, request)))
  }))
