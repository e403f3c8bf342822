/** `/v1/sandboxes/{id}/filesystem/…`: each file operation answers 202 with a runtime operation to poll. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Schema } from "effect"
import { RuntimeOperation } from "../../domain/Runtime.ts"
import { runtimeOperationOf, type RuntimeOperationInput, startRuntimeOperation } from "../../services/sandboxes/Commands.ts"
import { runtimeOperationJobKey, type RuntimeOperationRow } from "../../services/sandboxes/RuntimeOperations.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { Api } from "../Api.ts"
import { runtimeOperationToWire } from "../wire/Sandboxes.ts"
import { accepted, keyCaller, planeContext } from "./PlaneSupport.ts"

export const FilesystemLive = HttpApiBuilder.group(Api, "filesystem", (handlers) =>
  Effect.gen(function*() {
    const { idempotency, runner, provide, tx } = yield* planeContext
    const wire = (row: RuntimeOperationRow) => Effect.map(SandboxesRepo.capabilities(row.sandbox_id), (caps) => runtimeOperationToWire(row, caps))
    const respond = (sandboxId: string, op: Schema.Schema.Type<typeof RuntimeOperation>) =>
      Effect.zipRight(runner.runNow(runtimeOperationJobKey(op.kind, op.id)), accepted(RuntimeOperation, op, `/v1/sandboxes/${sandboxId}/runtime-operations/${op.id}`))
    /** Writes and deletes take an optional Idempotency-Key; reads and lists are safe to repeat. */
    const start = (sandboxId: string, operation: RuntimeOperationInput, key: string | undefined, idempotent: boolean) =>
      Effect.gen(function*() {
        const caller = yield* keyCaller
        const run = Effect.flatMap(startRuntimeOperation(caller, sandboxId, operation), wire)
        const op = idempotent
          ? yield* idempotency.remember({
            principalId: caller.keyId!,
            scope: `${operation.kind}:${caller.projectId}:${sandboxId}`,
            key,
            required: false,
            request: operation.request,
            schema: RuntimeOperation,
            run
          })
          : yield* tx(run)
        return yield* respond(sandboxId, op)
      })
    return handlers
      .handle("read", ({ path, payload }) => start(path.sandbox_id, { kind: "filesystem_read", request: payload }, undefined, false).pipe(provide))
      .handle("list", ({ path, payload }) => start(path.sandbox_id, { kind: "filesystem_list", request: payload }, undefined, false).pipe(provide))
      .handle("write", ({ headers, path, payload }) =>
        start(path.sandbox_id, { kind: "filesystem_write", request: payload }, headers["idempotency-key"], true).pipe(provide))
      .handle("delete", ({ headers, path, payload }) =>
        start(path.sandbox_id, { kind: "filesystem_delete", request: payload }, headers["idempotency-key"], true).pipe(provide))
      .handle("getRuntimeOperation", ({ path }) =>
        Effect.flatMap(keyCaller, (c) => Effect.flatMap(runtimeOperationOf(c, path.sandbox_id, path.runtime_operation_id), wire)).pipe(provide))
  }))
