/**
 * Sandbox endpoints (reference §2 "Runtime"): a sandbox port served at a URL under a time-limited lease. Create
 * needs an `Idempotency-Key`; revoke is idempotent once the lease is revoked or expired.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { BadRequest, Conflict, failsWith, NotFound } from "../../domain/Errors.ts"
import { CreateEndpoint, Endpoint, EndpointList } from "../../domain/Runtime.ts"
import { PageParams } from "../Pagination.ts"
import { ProjectKeyAuth } from "../Security.ts"
import { IdempotencyHeaders } from "./Common.ts"
import { endpointIdParam, sandboxIdParam } from "./SandboxPlane.ts"

export class EndpointsApi extends HttpApiGroup.make("endpoints")
  .add(
    HttpApiEndpoint.post("create")`/v1/sandboxes/${sandboxIdParam}/endpoints`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "endpoint_conflict", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(CreateEndpoint)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(Endpoint, { status: 202 })
      .annotate(
        OpenApi.Description,
        "`Idempotency-Key` required (400 `idempotency_key_required`). 409 `endpoint_conflict` when the port already has a live lease; 409 `invalid_sandbox_state` unless the sandbox is ready."
      )
  )
  .add(
    HttpApiEndpoint.get("list")`/v1/sandboxes/${sandboxIdParam}/endpoints`
      .addError(failsWith(NotFound, "not_found"))
      .setUrlParams(PageParams)
      .addSuccess(EndpointList)
  )
  .add(
    HttpApiEndpoint.del("revoke")`/v1/sandboxes/${sandboxIdParam}/endpoints/${endpointIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Endpoint, { status: 202 })
  )
  .middleware(ProjectKeyAuth)
  .annotate(OpenApi.Title, "Endpoints")
{}
