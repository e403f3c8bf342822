/**
 * Handlers of the sandbox plane. Mutations write rows + job in one transaction (through IdempotencyStore where
 * the route takes a key), wake the runner after commit, and answer 202 with the record to poll and a Location.
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { conflict, notFound } from "../../domain/Errors.ts"
import { Capabilities, Endpoint, Process, RuntimeOperation } from "../../domain/Runtime.ts"
import { SandboxMutation, SandboxRequest } from "../../domain/Sandbox.ts"
import { requireProjectRole } from "../../services/Access.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { OperationRunner } from "../../services/OperationRunner.ts"
import {
  type Caller,
  cancelProcess,
  createEndpoint,
  createSandbox,
  destroySandbox,
  pauseSandbox,
  processOf,
  resumeSandbox,
  revokeEndpoint,
  runtimeOperationOf,
  sandboxOf,
  startProcess,
  startRuntimeOperation
} from "../../services/sandboxes/Commands.ts"
import { endpointToWire, type EndpointRow } from "../../services/sandboxes/Endpoints.ts"
import { operationEvents, PROCESS_BATCH_BYTES, processEvents, sseBody } from "../../services/sandboxes/EventStreams.ts"
import { getOperation, operationToWire } from "../../services/sandboxes/Operations.ts"
import { processJobKey, processToWire, type ProcessRow } from "../../services/sandboxes/Processes.ts"
import { runtimeOperationJobKey, runtimeOperationToWire, type RuntimeOperationRow } from "../../services/sandboxes/RuntimeOperations.ts"
import { capabilitiesOf, getSandboxRow, type SandboxRow, sandboxToWire } from "../../services/sandboxes/SandboxRows.ts"
import { EndpointConnections } from "../../services/sandboxes/EndpointConnections.ts"
import { EndpointOrigin } from "../EndpointProxy.ts"
import { Api } from "../Api.ts"
import { decodeCursor, page } from "../Pagination.ts"
import { CurrentProjectKey } from "../Security.ts"

/** Newest-first lists page by (created_at, id); a cursor carrying anything else is a 422. */
const ListPosition = Schema.Tuple(Schema.String, Schema.String)

const keyCaller = Effect.map(CurrentProjectKey, (k): Caller => ({ projectId: k.projectId, organizationId: k.organizationId, keyId: k.keyId }))


const accepted = <A, I>(schema: Schema.Schema<A, I>, body: A, location: string) =>
  HttpServerResponse.schemaJson(schema)(body, { status: 202, headers: { location } }).pipe(Effect.orDie)

const sse = (body: string) => HttpServerResponse.text(body, { contentType: "text/event-stream", headers: { "cache-control": "no-store" } })

const encodeRequest = Schema.encodeSync(SandboxRequest)

const mutationWire = (m: { sandbox: SandboxRow; operation: Parameters<typeof operationToWire>[0] }) => ({
  sandbox: sandboxToWire(m.sandbox),
  operation: operationToWire(m.operation)
})

/** What every sandbox-plane handler group uses: the database (also as a transaction), idempotency, the runner. */
const planeContext = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const idempotency = yield* IdempotencyStore
  const runner = yield* OperationRunner
  const provide = Effect.provideService(SqlClient.SqlClient, sql)
  const tx = <A, E, R>(effect: Effect.Effect<A, E, R>) => sql.withTransaction(effect).pipe(Effect.catchTag("SqlError", Effect.die))
  return { sql, idempotency, runner, provide, tx }
})

export const SandboxesLive = HttpApiBuilder.group(Api, "sandboxes", (handlers) =>
  Effect.gen(function*() {
    const { sql, idempotency, runner, provide, tx } = yield* planeContext
    const respondMutation = (m: Schema.Schema.Type<typeof SandboxMutation>) =>
      Effect.zipRight(runner.wake, accepted(SandboxMutation, m, `/v1/operations/${m.operation.id}`))

    return handlers
      .handle("create", ({ headers, payload }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          const mutation = yield* idempotency.remember({
            principalId: caller.keyId!,
            scope: `sandboxes.create:${caller.projectId}`,
            key: headers["idempotency-key"],
            required: true,
            request: payload,
            schema: SandboxMutation,
            run: Effect.map(createSandbox(caller, { requested: encodeRequest(payload) }), mutationWire)
          })
          return yield* respondMutation(mutation)
        }).pipe(provide))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          const scope = `sandboxes:${caller.projectId}`
          const position = urlParams.cursor === undefined ? undefined : yield* decodeCursor(scope, urlParams.cursor, ListPosition)
          const rows = yield* (position === undefined
            ? sql<SandboxRow>`SELECT * FROM sandboxes WHERE project_id = ${caller.projectId} ORDER BY created_at DESC, id DESC LIMIT ${urlParams.limit + 1}`
            : sql<SandboxRow>`SELECT * FROM sandboxes WHERE project_id = ${caller.projectId}
                AND (created_at < ${position[0]} OR (created_at = ${position[0]} AND id < ${position[1]}))
                ORDER BY created_at DESC, id DESC LIMIT ${urlParams.limit + 1}`).pipe(Effect.orDie)
          const { items, next } = page(rows, urlParams.limit, scope, (last) => [last.created_at, last.id])
          return { sandboxes: items.map(sandboxToWire), next_cursor: next }
        }).pipe(provide))
      .handle("get", ({ path }) => Effect.flatMap(keyCaller, (caller) => Effect.map(sandboxOf(caller, path.sandbox_id), sandboxToWire)).pipe(provide))
      .handle("delete", ({ path }) =>
        Effect.flatMap(keyCaller, (caller) => tx(destroySandbox(caller, path.sandbox_id))).pipe(Effect.map(mutationWire), Effect.flatMap(respondMutation), provide))
      .handle("pause", ({ path }) =>
        Effect.flatMap(keyCaller, (caller) => tx(pauseSandbox(caller, path.sandbox_id))).pipe(Effect.map(mutationWire), Effect.flatMap(respondMutation), provide))
      .handle("resume", ({ path }) =>
        Effect.flatMap(keyCaller, (caller) => tx(resumeSandbox(caller, path.sandbox_id))).pipe(Effect.map(mutationWire), Effect.flatMap(respondMutation), provide))
      .handle("capabilities", ({ path }) =>
        Effect.gen(function*() {
          const sandbox = yield* sandboxOf(yield* keyCaller, path.sandbox_id)
          if (sandbox.state !== "ready") return yield* conflict("invalid_sandbox_state", `The sandbox is ${sandbox.state}; capabilities are known once it is ready`)
          const caps = capabilitiesOf(sandbox)
          if (caps === null) return yield* conflict("capabilities_unavailable", "No capability snapshot for this sandbox")
          return caps as Schema.Schema.Type<typeof Capabilities>
        }).pipe(provide))
  }))

export const ProjectSandboxesLive = HttpApiBuilder.group(Api, "projectSandboxes", (handlers) =>
  Effect.gen(function*() {
    const { sql, runner, provide, tx } = yield* planeContext
    const userCaller = (projectId: string) =>
      Effect.map(requireProjectRole(projectId), (access): Caller => ({ projectId, organizationId: access.organizationId, keyId: null }))
    const done = <E, R>(effect: Effect.Effect<Parameters<typeof mutationWire>[0], E, R>) =>
      effect.pipe(Effect.map(mutationWire), Effect.tap(() => runner.wake))

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          yield* userCaller(path.project_id)
          const rows = yield* sql<SandboxRow>`SELECT * FROM sandboxes WHERE project_id = ${path.project_id} ORDER BY created_at DESC, id DESC`.pipe(Effect.orDie)
          return { sandboxes: rows.map(sandboxToWire) }
        }).pipe(provide))
      .handle("get", ({ path }) =>
        Effect.flatMap(userCaller(path.project_id), (caller) => Effect.map(sandboxOf(caller, path.sandbox_id), sandboxToWire)).pipe(provide))
      .handle("pause", ({ path }) => done(Effect.flatMap(userCaller(path.project_id), (c) => tx(pauseSandbox(c, path.sandbox_id)))).pipe(provide))
      .handle("resume", ({ path }) => done(Effect.flatMap(userCaller(path.project_id), (c) => tx(resumeSandbox(c, path.sandbox_id)))).pipe(provide))
      .handle("delete", ({ path }) => done(Effect.flatMap(userCaller(path.project_id), (c) => tx(destroySandbox(c, path.sandbox_id)))).pipe(provide))
  }))

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
          return sse(sseBody(yield* operationEvents(path.operation_id, after)))
        }).pipe(provide))
  }))

export const ProcessesLive = HttpApiBuilder.group(Api, "processes", (handlers) =>
  Effect.gen(function*() {
    const { idempotency, runner, provide } = yield* planeContext
    const wire = (row: ProcessRow) => Effect.map(getSandboxRow(row.sandbox_id), (s) => processToWire(row, capabilitiesOf(s)))
    return handlers
      .handle("start", ({ headers, path, payload }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          const process = yield* idempotency.remember({
            principalId: caller.keyId!,
            scope: `processes.create:${caller.projectId}:${path.sandbox_id}`,
            key: headers["idempotency-key"],
            required: true,
            request: payload,
            schema: Process,
            run: Effect.flatMap(startProcess(caller, path.sandbox_id, payload), wire)
          })
          yield* runner.runNow(processJobKey(process.id))
          return yield* accepted(Process, process, `/v1/sandboxes/${path.sandbox_id}/processes/${process.id}`)
        }).pipe(provide))
      .handle("get", ({ path }) => Effect.flatMap(keyCaller, (c) => Effect.flatMap(processOf(c, path.sandbox_id, path.process_id), wire)).pipe(provide))
      .handle("events", ({ headers, path }) =>
        Effect.gen(function*() {
          yield* processOf(yield* keyCaller, path.sandbox_id, path.process_id)
          const after = Number(headers["last-event-id"] ?? "0")
          return sse(sseBody(yield* processEvents(path.process_id, after), PROCESS_BATCH_BYTES))
        }).pipe(provide))
      .handle("cancel", ({ headers, path }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          const process = yield* idempotency.remember({
            principalId: caller.keyId!,
            scope: `processes.cancel:${caller.projectId}:${path.process_id}`,
            key: headers["idempotency-key"],
            required: false,
            request: null,
            schema: Process,
            run: Effect.flatMap(cancelProcess(caller, path.sandbox_id, path.process_id), wire)
          })
          yield* runner.wake
          return yield* accepted(Process, process, `/v1/sandboxes/${path.sandbox_id}/processes/${process.id}`)
        }).pipe(provide))
  }))

export const FilesystemLive = HttpApiBuilder.group(Api, "filesystem", (handlers) =>
  Effect.gen(function*() {
    const { idempotency, runner, provide, tx } = yield* planeContext
    const wire = (row: RuntimeOperationRow) => Effect.map(getSandboxRow(row.sandbox_id), (s) => runtimeOperationToWire(row, capabilitiesOf(s)))
    const respond = (sandboxId: string, op: Schema.Schema.Type<typeof RuntimeOperation>) =>
      Effect.zipRight(runner.runNow(runtimeOperationJobKey(op.kind, op.id)), accepted(RuntimeOperation, op, `/v1/sandboxes/${sandboxId}/runtime-operations/${op.id}`))
    const start = (sandboxId: string, kind: RuntimeOperationRow["kind"], request: unknown, key: string | undefined, idempotent: boolean) =>
      Effect.gen(function*() {
        const caller = yield* keyCaller
        const run = Effect.flatMap(startRuntimeOperation(caller, sandboxId, kind, request), wire)
        const op = idempotent
          ? yield* idempotency.remember({ principalId: caller.keyId!, scope: `${kind}:${caller.projectId}:${sandboxId}`, key, required: false, request, schema: RuntimeOperation, run })
          : yield* tx(run)
        return yield* respond(sandboxId, op)
      })
    return handlers
      .handle("read", ({ path, payload }) => start(path.sandbox_id, "filesystem_read", payload, undefined, false).pipe(provide))
      .handle("list", ({ path, payload }) => start(path.sandbox_id, "filesystem_list", payload, undefined, false).pipe(provide))
      .handle("write", ({ headers, path, payload }) => start(path.sandbox_id, "filesystem_write", payload, headers["idempotency-key"], true).pipe(provide))
      .handle("delete", ({ headers, path, payload }) => start(path.sandbox_id, "filesystem_delete", payload, headers["idempotency-key"], true).pipe(provide))
      .handle("getRuntimeOperation", ({ path }) =>
        Effect.flatMap(keyCaller, (c) => Effect.flatMap(runtimeOperationOf(c, path.sandbox_id, path.runtime_operation_id), wire)).pipe(provide))
  }))

export const EndpointsLive = HttpApiBuilder.group(Api, "endpoints", (handlers) =>
  Effect.gen(function*() {
    const { sql, idempotency, runner, provide, tx } = yield* planeContext
    const { addressing } = yield* EndpointOrigin
    const connections = yield* EndpointConnections
    const wire = (row: EndpointRow) => Effect.map(getSandboxRow(row.sandbox_id), (s) => endpointToWire(row, capabilitiesOf(s)))
    return handlers
      .handle("create", ({ headers, path, payload }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          const endpoint = yield* idempotency.remember({
            principalId: caller.keyId!,
            scope: `endpoints.create:${caller.projectId}:${path.sandbox_id}`,
            key: headers["idempotency-key"],
            required: true,
            request: payload,
            schema: Endpoint,
            run: Effect.flatMap(createEndpoint(caller, path.sandbox_id, payload, addressing), wire)
          })
          yield* runner.wake
          return yield* accepted(Endpoint, endpoint, `/v1/sandboxes/${path.sandbox_id}/endpoints`)
        }).pipe(provide))
      .handle("list", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          yield* sandboxOf(caller, path.sandbox_id)
          const scope = `endpoints:${path.sandbox_id}`
          const position = urlParams.cursor === undefined ? undefined : yield* decodeCursor(scope, urlParams.cursor, ListPosition)
          const rows = yield* (position === undefined
            ? sql<EndpointRow>`SELECT * FROM endpoints WHERE sandbox_id = ${path.sandbox_id} ORDER BY created_at DESC, id DESC LIMIT ${urlParams.limit + 1}`
            : sql<EndpointRow>`SELECT * FROM endpoints WHERE sandbox_id = ${path.sandbox_id}
                AND (created_at < ${position[0]} OR (created_at = ${position[0]} AND id < ${position[1]}))
                ORDER BY created_at DESC, id DESC LIMIT ${urlParams.limit + 1}`).pipe(Effect.orDie)
          const { items, next } = page(rows, urlParams.limit, scope, (last) => [last.created_at, last.id])
          const sandbox = yield* getSandboxRow(path.sandbox_id)
          return { endpoints: items.map((r) => endpointToWire(r, capabilitiesOf(sandbox))), next_cursor: next }
        }).pipe(provide))
      .handle("revoke", ({ path }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          const row = yield* tx(revokeEndpoint(caller, path.sandbox_id, path.endpoint_id))
          // Open exchanges through it are cut now (the watchdog would within a quarter second anyway).
          yield* connections.recheck
          yield* runner.wake
          return yield* accepted(Endpoint, yield* wire(row), `/v1/sandboxes/${path.sandbox_id}/endpoints`)
        }).pipe(provide))
  }))

