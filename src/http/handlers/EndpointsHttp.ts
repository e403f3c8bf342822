/** `/v1/sandboxes/{id}/endpoints`: create (idempotent), list, revoke; URLs are served by the endpoint listener. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { type CreateEndpoint, Endpoint } from "../../domain/Runtime.ts"
import { createEndpoint, endpointPage, revokeEndpoint } from "../../services/sandboxes/EndpointCommands.ts"
import { sandboxOf } from "../../services/sandboxes/SandboxAccess.ts"
import { sandboxCapabilities } from "../../services/sandboxes/SandboxRows.ts"
import { EndpointConnections } from "../../services/sandboxes/EndpointConnections.ts"
import type { EndpointRow } from "../../services/sandboxes/Endpoints.ts"
import { Api } from "../Api.ts"
import { EndpointOrigin } from "../EndpointProxy.ts"
import type { IdempotencyHeaders } from "../groups/Common.ts"
import { decodeCursor, page, type PageParams } from "../Pagination.ts"
import { capabilitiesOf, endpointToWire } from "../wire/Sandboxes.ts"
import { accepted, keyCaller, ListPosition, type PlaneCaller, planeContext } from "./PlaneSupport.ts"
import type { EndpointId, SandboxId } from "../../domain/Ids.ts"

type Path = { readonly sandbox_id: SandboxId }

/** The endpoint routes' handlers for a caller: a project key's, or a member's on the project path (ProjectRuntimeHttp.ts). */
export const endpointHandlers = Effect.gen(function*() {
  const { idempotency, runner, provide } = yield* planeContext
  const { addressing } = yield* EndpointOrigin
  const connections = yield* EndpointConnections
  const wire = (row: EndpointRow) => Effect.map(sandboxCapabilities(row.sandbox_id), (caps) => endpointToWire(row, caps))
  return {
    create: (caller: PlaneCaller, { headers, path, payload }: { readonly headers: typeof IdempotencyHeaders.Type; readonly path: Path; readonly payload: typeof CreateEndpoint.Type }) =>
      Effect.gen(function*() {
        const endpoint = yield* idempotency.remember({
          principalId: caller.principalId,
          scope: `endpoints.create:${caller.projectId}:${path.sandbox_id}`,
          key: headers["idempotency-key"],
          required: true,
          request: payload,
          schema: Endpoint,
          run: Effect.flatMap(createEndpoint(caller, path.sandbox_id, payload, addressing), wire)
        })
        yield* runner.wake
        return yield* accepted(Endpoint, endpoint, `${caller.base}/sandboxes/${path.sandbox_id}/endpoints`)
      }).pipe(provide),
    list: (caller: PlaneCaller, { path, urlParams }: { readonly path: Path; readonly urlParams: typeof PageParams.Type }) =>
      Effect.gen(function*() {
        const sandbox = yield* sandboxOf(caller, path.sandbox_id)
        const scope = `endpoints:${path.sandbox_id}`
        const position = urlParams.cursor === undefined ? undefined : yield* decodeCursor(scope, urlParams.cursor, ListPosition)
        const rows = yield* endpointPage(path.sandbox_id, position, urlParams.limit + 1)
        const { items, next } = page(rows, urlParams.limit, scope, (last) => [last.created_at, last.id])
        return { endpoints: items.map((r) => endpointToWire(r, capabilitiesOf(sandbox))), next_cursor: next }
      }).pipe(provide),
    revoke: (caller: PlaneCaller, { path }: { readonly path: Path & { readonly endpoint_id: EndpointId } }) =>
      Effect.gen(function*() {
        const row = yield* revokeEndpoint(caller, path.sandbox_id, path.endpoint_id)
        // Open exchanges through it are cut now (the watchdog would within a quarter second anyway).
        yield* connections.recheck
        yield* runner.wake
        return yield* accepted(Endpoint, yield* wire(row), `${caller.base}/sandboxes/${path.sandbox_id}/endpoints`)
      }).pipe(provide)
  }
})

export const EndpointsLive = HttpApiBuilder.group(Api, "endpoints", (handlers) =>
  Effect.gen(function*() {
    const h = yield* endpointHandlers
    return handlers
      .handle("create", (request) => Effect.flatMap(keyCaller, (caller) => h.create(caller, request)))
      .handle("list", (request) => Effect.flatMap(keyCaller, (caller) => h.list(caller, request)))
      .handle("revoke", (request) => Effect.flatMap(keyCaller, (caller) => h.revoke(caller, request)))
  }))
