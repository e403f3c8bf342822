/** `/v1/operations/{id}` and its events: an operation is read with the key that caused it. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { OperationsRepo } from "../../db/repos/Operations.ts"
import { notFound } from "../../domain/Errors.ts"
import { getOperation } from "../../services/sandboxes/Operations.ts"
import { Api } from "../Api.ts"
import { operationEventFrame, sseBody, sseResponse } from "../Sse.ts"
import { operationToWire } from "../wire/Sandboxes.ts"
import { keyCaller, planeContext } from "./PlaneSupport.ts"

export const OperationsLive = HttpApiBuilder.group(Api, "operations", (handlers) =>
  Effect.gen(function*() {
    const { provide } = yield* planeContext
    const operationOf = (id: string) =>
      Effect.gen(function*() {
        const caller = yield* keyCaller
        const row = yield* getOperation(id)
        // As in the reference: an operation is read with the key that caused it (its sandbox's key for timers).
        if (row === undefined || row.project_id !== caller.projectId || row.created_by_key_id !== caller.keyId) return yield* notFound("Operation")
        return row
      })
    return handlers
      .handle("get", ({ path }) => Effect.map(operationOf(path.operation_id), operationToWire).pipe(provide))
      .handle("events", ({ headers, path }) =>
        Effect.gen(function*() {
          yield* operationOf(path.operation_id)
          const after = Number(headers["last-event-id"] ?? "0")
          const events = yield* OperationsRepo.eventsAfter(path.operation_id, after)
          return sseResponse(sseBody(events.map(operationEventFrame(path.operation_id))))
        }).pipe(provide))
  }))
