/** `/v1/sandboxes` with a project API key: create (idempotent), list, read, pause, resume, delete, capabilities. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Schema } from "effect"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { conflict } from "../../domain/Errors.ts"
import { SandboxMutation, SandboxRequest } from "../../domain/Sandbox.ts"
import { createSandbox, destroySandbox, pauseSandbox, resumeSandbox, sandboxOf } from "../../services/sandboxes/Commands.ts"
import { Api } from "../Api.ts"
import { decodeCursor, page } from "../Pagination.ts"
import { capabilitiesOf, mutationToWire, sandboxToWire } from "../wire/Sandboxes.ts"
import { accepted, keyCaller, ListPosition, planeContext } from "./PlaneSupport.ts"

const encodeRequest = Schema.encodeSync(SandboxRequest)

export const SandboxesLive = HttpApiBuilder.group(Api, "sandboxes", (handlers) =>
  Effect.gen(function*() {
    const { idempotency, runner, provide, tx } = yield* planeContext
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
            run: Effect.map(createSandbox(caller, { requested: encodeRequest(payload) }), mutationToWire)
          })
          return yield* respondMutation(mutation)
        }).pipe(provide))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          const scope = `sandboxes:${caller.projectId}`
          const position = urlParams.cursor === undefined ? undefined : yield* decodeCursor(scope, urlParams.cursor, ListPosition)
          const rows = yield* SandboxesRepo.page(caller.projectId, position, urlParams.limit + 1)
          const { items, next } = page(rows, urlParams.limit, scope, (last) => [last.created_at, last.id])
          return { sandboxes: items.map(sandboxToWire), next_cursor: next }
        }).pipe(provide))
      .handle("get", ({ path }) => Effect.flatMap(keyCaller, (caller) => Effect.map(sandboxOf(caller, path.sandbox_id), sandboxToWire)).pipe(provide))
      .handle("delete", ({ path }) =>
        Effect.flatMap(keyCaller, (caller) => tx(destroySandbox(caller, path.sandbox_id))).pipe(Effect.map(mutationToWire), Effect.flatMap(respondMutation), provide))
      .handle("pause", ({ path }) =>
        Effect.flatMap(keyCaller, (caller) => tx(pauseSandbox(caller, path.sandbox_id))).pipe(Effect.map(mutationToWire), Effect.flatMap(respondMutation), provide))
      .handle("resume", ({ path }) =>
        Effect.flatMap(keyCaller, (caller) => tx(resumeSandbox(caller, path.sandbox_id))).pipe(Effect.map(mutationToWire), Effect.flatMap(respondMutation), provide))
      .handle("capabilities", ({ path }) =>
        Effect.gen(function*() {
          const sandbox = yield* sandboxOf(yield* keyCaller, path.sandbox_id)
          if (sandbox.state !== "ready") return yield* conflict("invalid_sandbox_state", `The sandbox is ${sandbox.state}; capabilities are known once it is ready`)
          const caps = capabilitiesOf(sandbox)
          if (caps === null) return yield* conflict("capabilities_unavailable", "No capability snapshot for this sandbox")
          return caps
        }).pipe(provide))
  }))
