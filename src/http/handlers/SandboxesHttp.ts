/** `/v1/sandboxes` with a project API key: create (idempotent), list, read, pause, resume, extend, delete, capabilities, metrics. */
import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { Effect, Option, Schema } from "effect"
import { conflict, validationError } from "../../domain/Errors.ts"
import { type ExtendSandbox, SandboxMutation, SandboxRequest } from "../../domain/Sandbox.ts"
import { createSandbox, destroySandbox, extendSandbox, pauseSandbox, resumeSandbox } from "../../services/sandboxes/SandboxCommands.ts"
import { sandboxOf } from "../../services/sandboxes/SandboxAccess.ts"
import { sandboxPage } from "../../services/sandboxes/SandboxRows.ts"
import { sandboxMetrics } from "../../services/sandboxes/Metrics.ts"
import { Api } from "../Api.ts"
import type { IdempotencyHeaders } from "../groups/Common.ts"
import type { SandboxListParams } from "../groups/SandboxesApi.ts"
import { decodeCursor, page } from "../Pagination.ts"
import { capabilitiesOf, mutationToWire, sandboxToWire } from "../wire/Sandboxes.ts"
import { metricsToWire } from "../wire/Metrics.ts"
import { accepted, keyCaller, ListPosition, type PlaneCaller, planeContext } from "./PlaneSupport.ts"
import type { SandboxId } from "../../domain/Ids.ts"

const encodeRequest = Schema.encodeSync(SandboxRequest)

const MAX_METADATA_FILTERS = 16

const MAX_METADATA_VALUE = 500

/**
 * The list's filters: states (deduplicated, in a fixed order) and provider from the declared parameters, and the
 * `metadata.<key>=<value>` entries from the query itself (a repeated key: its last value).
 */
const listFilter = (params: typeof SandboxListParams.Type, query: URLSearchParams) => {
  const states = params.state === undefined ? undefined : [...new Set(typeof params.state === "string" ? [params.state] : params.state)].sort()
  const metadata: Record<string, string> = {}
  for (const [name, value] of query) if (name.startsWith("metadata.")) metadata[name.slice("metadata.".length)] = value
  return { states, provider: params.provider, metadata }
}

const badMetadataFilter = (metadata: Readonly<Record<string, string>>) => {
  const entries = Object.entries(metadata)
  if (entries.length > MAX_METADATA_FILTERS) return { path: "metadata", message: `at most ${MAX_METADATA_FILTERS} metadata.<key> filters` }
  const [key] = entries.find(([k, v]) => k.length === 0 || k.length > 256 || k === "__proto__" || v.length > MAX_METADATA_VALUE) ?? []
  return key === undefined ? undefined : { path: `metadata.${key.slice(0, 100)}`, message: `a key of 1-256 characters (not __proto__) and a value of at most ${MAX_METADATA_VALUE}` }
}

type Path = { readonly sandbox_id: SandboxId }

/**
 * The handlers the key routes share with the project path (ProjectSandboxesHttp.ts): create, extend, capabilities,
 * metrics, for a caller.
 */
export const sandboxHandlers = Effect.gen(function*() {
  const { idempotency, runner, provide, startNow } = yield* planeContext
  return {
    create: (caller: PlaneCaller, { headers, payload }: { readonly headers: typeof IdempotencyHeaders.Type; readonly payload: typeof SandboxRequest.Type }) =>
      Effect.gen(function*() {
        // The provision job is written already claimed by this runner when it has room (no claim after the
        // commit); a replayed request answers what was stored and has no job to start.
        const lease = Option.getOrUndefined(yield* runner.lease)
        let claimed: Parameters<typeof runner.runClaimed>[0] | undefined
        // Not interrupted between the commit and the job's start (a client that hangs up then): a leased job
        // left unstarted would wait for its lease to expire.
        const mutation = yield* Effect.uninterruptible(Effect.gen(function*() {
          const committed = yield* idempotency.remember({
            principalId: caller.principalId,
            scope: `sandboxes.create:${caller.projectId}`,
            key: headers["idempotency-key"],
            required: true,
            request: payload,
            schema: SandboxMutation,
            run: Effect.map(createSandbox(caller, { requested: encodeRequest(payload) }, lease), (created) => {
              claimed = created.job
              return mutationToWire(created)
            })
          })
          yield* claimed === undefined ? startNow(committed) : runner.runClaimed(claimed)
          return committed
        }))
        return yield* accepted(SandboxMutation, mutation, `${caller.base}/operations/${mutation.operation.id}`)
      }).pipe(provide),
    extend: (caller: PlaneCaller, { path, payload }: { readonly path: Path; readonly payload: typeof ExtendSandbox.Type }) =>
      extendSandbox(caller, path.sandbox_id, payload.runtime_timeout_seconds).pipe(Effect.tap(runner.wake), Effect.map(sandboxToWire), provide),
    metrics: (caller: PlaneCaller, { path }: { readonly path: Path }) =>
      sandboxMetrics(caller, path.sandbox_id).pipe(Effect.map(({ metrics, sandbox }) => metricsToWire(sandbox, metrics)), provide),
    capabilities: (caller: PlaneCaller, { path }: { readonly path: Path }) =>
      Effect.gen(function*() {
        const sandbox = yield* sandboxOf(caller, path.sandbox_id)
        if (sandbox.state !== "ready") return yield* conflict("invalid_sandbox_state", `The sandbox is ${sandbox.state}; capabilities are known once it is ready`)
        const caps = capabilitiesOf(sandbox)
        if (caps === null) return yield* conflict("capabilities_unavailable", "No capability snapshot for this sandbox")
        return caps
      }).pipe(provide)
  }
})

export const SandboxesLive = HttpApiBuilder.group(Api, "sandboxes", (handlers) =>
  Effect.gen(function*() {
    const { provide, startNow } = yield* planeContext
    const h = yield* sandboxHandlers
    const respondMutation = (m: Schema.Schema.Type<typeof SandboxMutation>) =>
      Effect.zipRight(startNow(m), accepted(SandboxMutation, m, `/v1/operations/${m.operation.id}`))

    return handlers
      .handle("create", (request) => Effect.flatMap(keyCaller, (caller) => h.create(caller, request)))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* keyCaller
          const request = yield* HttpServerRequest.HttpServerRequest
          const filter = listFilter(urlParams, new URL(request.url, "http://gateway").searchParams)
          const bad = badMetadataFilter(filter.metadata)
          if (bad !== undefined) return yield* validationError("Request validation failed", [bad])
          // A cursor belongs to its list: the project and the filters (canonical, so their order does not matter).
          const scope = `sandboxes:${caller.projectId}:${JSON.stringify([filter.states ?? null, filter.provider ?? null, Object.entries(filter.metadata).sort()])}`
          const position = urlParams.cursor === undefined ? undefined : yield* decodeCursor(scope, urlParams.cursor, ListPosition)
          const rows = yield* sandboxPage(caller.projectId, position, urlParams.limit + 1, filter)
          const { items, next } = page(rows, urlParams.limit, scope, (last) => [last.created_at, last.id])
          return { sandboxes: items.map(sandboxToWire), next_cursor: next }
        }).pipe(provide))
      .handle("get", ({ path }) => Effect.flatMap(keyCaller, (caller) => Effect.map(sandboxOf(caller, path.sandbox_id), sandboxToWire)).pipe(provide))
      .handle("delete", ({ path }) =>
        Effect.flatMap(keyCaller, (caller) => destroySandbox(caller, path.sandbox_id)).pipe(Effect.map(mutationToWire), Effect.flatMap(respondMutation), provide))
      .handle("pause", ({ path }) =>
        Effect.flatMap(keyCaller, (caller) => pauseSandbox(caller, path.sandbox_id)).pipe(Effect.map(mutationToWire), Effect.flatMap(respondMutation), provide))
      .handle("resume", ({ path }) =>
        Effect.flatMap(keyCaller, (caller) => resumeSandbox(caller, path.sandbox_id)).pipe(Effect.map(mutationToWire), Effect.flatMap(respondMutation), provide))
      .handle("extend", (request) => Effect.flatMap(keyCaller, (caller) => h.extend(caller, request)))
      .handle("metrics", (request) => Effect.flatMap(keyCaller, (caller) => h.metrics(caller, request)))
      .handle("capabilities", (request) => Effect.flatMap(keyCaller, (caller) => h.capabilities(caller, request)))
  }))
