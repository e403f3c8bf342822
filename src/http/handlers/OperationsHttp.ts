/**
 * `/v1/operations/{id}` and its events, read with the key that caused the operation or the key that created its
 * sandbox (services/sandboxes/Operations.ts `visibleOperation`); members read them on the project path
 * (ProjectOperationsHttp.ts).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { CurrentProjectKey } from "../../domain/Principals.ts"
import { keyHolder, LiveStreams } from "../../services/LiveStreams.ts"
import { notFound } from "../../domain/Errors.ts"
import { operationEventsAfter, operationFinished, visibleOperation } from "../../services/sandboxes/Operations.ts"
import { nextSignal, operationTopic } from "../../services/Signals.ts"
import { Api } from "../Api.ts"
import { allowedFor, type AllowedFor, followResponse, followStream, operationEventFrame, sseBody, sseResponse } from "../Sse.ts"
import { operationToWire } from "../wire/Sandboxes.ts"
import { keyCaller, planeContext } from "./PlaneSupport.ts"
import type { OperationId } from "../../domain/Ids.ts"

type Provide = Effect.Effect.Success<typeof planeContext>["provide"]

/**
 * An operation's events after `Last-Event-ID`: a finite batch, or held open with `follow=true` (for as long as
 * the caller's credential may read it: `allowed`).
 */
export const operationEvents = (operationId: OperationId, lastEventId: string | undefined, follow: boolean | undefined, provide: Provide, allowed: AllowedFor) =>
  Effect.gen(function*() {
    const after = Number(lastEventId ?? "0")
    const read = (from: number) => Effect.map(operationEventsAfter(operationId, from), (rows) => rows.map(operationEventFrame(operationId)))
    if (follow === true) {
      const finished = operationFinished(operationId)
      return followResponse(allowed(followStream({ after, read: (from) => provide(read(from)), finished: provide(finished), signal: (ms) => nextSignal(operationTopic(operationId), ms) })))
    }
    return sseResponse(sseBody(yield* provide(read(after))))
  })

export const OperationsLive = HttpApiBuilder.group(Api, "operations", (handlers) =>
  Effect.gen(function*() {
    const { provide } = yield* planeContext
    const streams = yield* LiveStreams
    const operationOf = (id: OperationId) =>
      Effect.gen(function*() {
        const caller = yield* keyCaller
        const row = yield* visibleOperation({ projectId: caller.projectId, keyId: caller.keyId }, id)
        return row === undefined ? yield* notFound("Operation") : row
      })
    return handlers
      .handle("get", ({ path }) => Effect.map(operationOf(path.operation_id), operationToWire).pipe(provide))
      .handle("events", ({ headers, path, urlParams }) =>
        Effect.gen(function*() {
          yield* operationOf(path.operation_id)
          const allowed = yield* allowedFor(streams, keyHolder(yield* CurrentProjectKey))
          return yield* operationEvents(path.operation_id, headers["last-event-id"], urlParams.follow, provide, allowed)
        }).pipe(provide))
  }))
