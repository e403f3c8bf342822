/** `/v1/projects/{id}/operations/{operation_id}` with a user token: any operation of the project, for its members. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { notFound } from "../../domain/Errors.ts"
import { CurrentUser } from "../../domain/Principals.ts"
import { requireProjectRole } from "../../services/Access.ts"
import { LiveStreams, userHolder } from "../../services/LiveStreams.ts"
import { visibleOperation } from "../../services/sandboxes/Operations.ts"
import { Api } from "../Api.ts"
import { allowedFor } from "../Sse.ts"
import { operationToWire } from "../wire/Sandboxes.ts"
import { operationEvents } from "./OperationsHttp.ts"
import { planeContext } from "./PlaneSupport.ts"
import type { OperationId, ProjectId } from "../../domain/Ids.ts"

export const ProjectOperationsLive = HttpApiBuilder.group(Api, "projectOperations", (handlers) =>
  Effect.gen(function*() {
    const { provide } = yield* planeContext
    const streams = yield* LiveStreams
    const operationOf = (projectId: ProjectId, operationId: OperationId) =>
      Effect.gen(function*() {
        yield* requireProjectRole(projectId)
        const row = yield* visibleOperation({ projectId, keyId: null }, operationId)
        return row === undefined ? yield* notFound("Operation") : row
      })
    return handlers
      .handle("get", ({ path }) => Effect.map(operationOf(path.project_id, path.operation_id), operationToWire).pipe(provide))
      .handle("events", ({ headers, path, urlParams }) =>
        Effect.gen(function*() {
          yield* operationOf(path.project_id, path.operation_id)
          const allowed = yield* allowedFor(streams, userHolder(yield* CurrentUser, path.project_id))
          return yield* operationEvents(path.operation_id, headers["last-event-id"], urlParams.follow, provide, allowed)
        }).pipe(provide))
  }))
