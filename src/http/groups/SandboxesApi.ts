/**
 * Sandboxes with a project key (reference §2 "Sandboxes"): `Authorization: Bearer metal_sk_…` plus
 * `X-Metal-Project-ID`. Lifecycle changes answer 202 with `{sandbox, operation}` and `Location` of the operation.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { BadRequest, Conflict, failsWith, NotFound, PaymentRequired, ServiceUnavailable } from "../../domain/Errors.ts"
import { SandboxMetrics } from "../../domain/Metrics.ts"
import { Capabilities } from "../../domain/Runtime.ts"
import { ExtendSandbox, Provider, Sandbox, SandboxList, SandboxMutation, SandboxRequest, SandboxState } from "../../domain/Sandbox.ts"
import { CursorParam, LimitParam } from "../Pagination.ts"
import { ProjectKeyAuth } from "../Security.ts"
import { IdempotencyHeaders } from "./Common.ts"
import { sandboxIdParam } from "./SandboxPlane.ts"

/**
 * `?state=ready&state=paused&provider=e2b`, with the usual `cursor` and `limit`. `metadata.<key>=<value>` filters
 * are read from the query by the handler: a key of any name cannot be declared here without losing the other
 * parameters in the OpenAPI document.
 */
export const SandboxListParams = Schema.Struct({
  cursor: Schema.optional(CursorParam),
  limit: LimitParam,
  state: Schema.optional(Schema.Union(SandboxState, Schema.Array(SandboxState).pipe(Schema.minItems(1), Schema.maxItems(14)))),
  provider: Schema.optional(Provider)
})

export class SandboxesApi extends HttpApiGroup.make("sandboxes")
  .add(
    HttpApiEndpoint.post("create", "/v1/sandboxes")
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "idempotency_in_progress", "idempotency_mismatch"))
      .addError(failsWith(PaymentRequired, "insufficient_credits"))
      .setPayload(SandboxRequest)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(SandboxMutation, { status: 202 })
      .annotate(
        OpenApi.Description,
        "Accepts a sandbox request (`Idempotency-Key` required: 400 `idempotency_key_required` without it). 402 `insufficient_credits` when the organization has no credit; 409 `idempotency_mismatch` / `idempotency_in_progress`. Poll the operation in `Location`."
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/sandboxes")
      .setUrlParams(SandboxListParams)
      .addSuccess(SandboxList)
      .annotate(
        OpenApi.Description,
        "The project's sandboxes, newest first; `next_cursor` is null on the last page. Filters: `state` (repeatable: any of them), `provider`, and `metadata.<key>=<value>` (up to 16; all must match). A cursor belongs to its list and filters: a foreign, tampered or reused-with-other-filters cursor is a 422."
      )
  )
  .add(
    HttpApiEndpoint.get("get")`/v1/sandboxes/${sandboxIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Sandbox)
  )
  .add(
    HttpApiEndpoint.del("delete")`/v1/sandboxes/${sandboxIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(SandboxMutation, { status: 202 })
      .annotate(OpenApi.Description, "Destroys the sandbox. Destroying a stopped sandbox returns an operation that has already succeeded.")
  )
  .add(
    HttpApiEndpoint.post("pause")`/v1/sandboxes/${sandboxIdParam}/actions/pause`
      .addError(failsWith(Conflict, "invalid_sandbox_state", "recording_active", "unsupported_operation"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(SandboxMutation, { status: 202 })
      .annotate(OpenApi.Description, "409 `unsupported_operation` when the provider cannot pause; 409 `invalid_sandbox_state` unless the sandbox is ready.")
  )
  .add(
    HttpApiEndpoint.post("resume")`/v1/sandboxes/${sandboxIdParam}/actions/resume`
      .addError(failsWith(Conflict, "capability_unsupported", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(SandboxMutation, { status: 202 })
      .annotate(OpenApi.Description, "409 `capability_unsupported` when the provider cannot resume; 409 `invalid_sandbox_state` unless the sandbox is paused or resuming.")
  )
  .add(
    HttpApiEndpoint.post("extend")`/v1/sandboxes/${sandboxIdParam}/actions/extend`
      .addError(failsWith(Conflict, "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(ExtendSandbox)
      .addSuccess(Sandbox)
      .annotate(
        OpenApi.Description,
        "Moves the runtime deadline to now + `runtime_timeout_seconds` (earlier or later than before) and answers the sandbox with its new `expires_at`. 409 `invalid_sandbox_state` unless the sandbox is ready; a resume arms a fresh deadline from the request's `runtime_timeout_seconds`."
      )
  )
  .add(
    HttpApiEndpoint.get("capabilities")`/v1/sandboxes/${sandboxIdParam}/capabilities`
      .addError(failsWith(Conflict, "capabilities_unavailable", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Capabilities)
      .annotate(OpenApi.Description, "The provider's capability manifest; 409 `invalid_sandbox_state` until the sandbox is ready, `capabilities_unavailable` without a snapshot.")
  )
  .add(
    HttpApiEndpoint.get("metrics")`/v1/sandboxes/${sandboxIdParam}/metrics`
      .addError(failsWith(Conflict, "invalid_sandbox_state", "provider_auth", "provider_capacity", "provider_customer", "provider_invalid_request", "provider_quota", "provider_timeout_absent", "provider_unavailable", "provider_unknown_outcome"))
      .addError(failsWith(NotFound, "metrics_unavailable", "not_found"))
      .addError(failsWith(ServiceUnavailable, "provider_auth", "provider_capacity", "provider_customer", "provider_invalid_request", "provider_quota", "provider_timeout", "provider_timeout_absent", "provider_unavailable", "provider_unknown_outcome"))
      .addSuccess(SandboxMetrics)
      .annotate(
        OpenApi.Description,
        "What the sandbox consumes now: CPU, memory, disk, network and processes (null where its source does not count it). Emulated providers answer from the local runtime (the sandbox's cgroups, disk and network namespace); remote providers from their metrics API. 404 `metrics_unavailable` (with `details.provider`) for a provider without one; 409 `invalid_sandbox_state` unless the sandbox is ready or paused; 503 when the provider does not answer."
      )
  )
  .middleware(ProjectKeyAuth)
  .annotate(OpenApi.Title, "Sandboxes")
{}
