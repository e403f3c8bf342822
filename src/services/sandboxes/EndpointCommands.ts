/**
 * HTTP endpoints as the API accepts them: create (a lease, a token, the job that opens it) and revoke; the
 * provider work and lease expiry are Endpoints.ts's jobs, the traffic the endpoint listener's.
 */
import { Effect } from "effect"
import { inTransaction } from "../../db/Db.ts"
import { EndpointsRepo } from "../../db/repos/Endpoints.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { conflict, notFound } from "../../domain/Errors.ts"
import { type EndpointAddressing, endpointUrl, newEndpointToken } from "../../domain/EndpointAddress.ts"
import { type EndpointId, newId, type SandboxId } from "../../domain/Ids.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import { sha256Hex } from "../../domain/Tokens.ts"
import { appendEvent } from "../Events.ts"
import { enqueueJob } from "../JobRegistry.ts"
import { endpointExpiryJob, getEndpointRow } from "./Endpoints.ts"
import { EndpointCreateJob, EndpointRevokeJob } from "./JobTypes.ts"
import { type Caller, readySandboxOf, requireCapability, sandboxOf } from "./SandboxAccess.ts"

export const createEndpoint = (caller: Caller, sandboxId: SandboxId, input: { readonly port: number; readonly protocol: string; readonly lease_seconds: number }, addressing: EndpointAddressing) =>
  inTransaction(Effect.gen(function*() {
    const sandbox = yield* readySandboxOf(caller, sandboxId)
    yield* requireCapability(sandbox, ["http_endpoints", "create"], { kind: "endpoints", port: input.port })
    const existing = yield* EndpointsRepo.liveOnPort(sandboxId, input.port)
    if (existing !== undefined) {
      return yield* conflict("endpoint_conflict", `Port ${input.port} already has a live endpoint`, { endpoint_id: existing })
    }
    const now = yield* nowIso
    const id = newId("ep")
    const token = newEndpointToken()
    const row = {
      id,
      lease_expires_at: isoAfter(now, input.lease_seconds)
    }
    yield* EndpointsRepo.insert({
      id,
      projectId: caller.projectId,
      sandboxId,
      port: input.port,
      protocol: input.protocol,
      url: endpointUrl(addressing, id, token),
      tokenHash: sha256Hex(token),
      leaseExpiresAt: row.lease_expires_at,
      now
    })
    yield* SandboxesRepo.touch(sandboxId)
    yield* enqueueJob(EndpointCreateJob, { dedupeKey: `endpoint:create:${id}`, payload: { endpoint_id: id }, sandboxId })
    yield* endpointExpiryJob({ ...row, sandbox_id: sandboxId })
    yield* appendEvent({ type: "endpoint.created", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: sandboxId, endpoint_id: id, port: input.port } })
    return (yield* getEndpointRow(id))!
  })).pipe(Effect.withSpan("EndpointCommands.createEndpoint", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

export const endpointOf = (caller: Caller, sandboxId: SandboxId, id: EndpointId) =>
  Effect.flatMap(getEndpointRow(id), (row) =>
    row === undefined || row.project_id !== caller.projectId || row.sandbox_id !== sandboxId ? Effect.fail(notFound("Endpoint")) : Effect.succeed(row))

/** Idempotent once revoked or expired. */
export const revokeEndpoint = (caller: Caller, sandboxId: SandboxId, id: EndpointId) =>
  inTransaction(Effect.gen(function*() {
    yield* sandboxOf(caller, sandboxId)
    const row = yield* endpointOf(caller, sandboxId, id)
    if (row.state === "provisioning" || row.state === "active") {
      yield* EndpointsRepo.markRevoking(id, yield* nowIso)
      yield* enqueueJob(EndpointRevokeJob, { dedupeKey: `endpoint:revoke:${id}`, payload: { endpoint_id: id }, sandboxId })
      yield* appendEvent({ type: "endpoint.revoked", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: sandboxId, endpoint_id: id } })
    }
    return (yield* getEndpointRow(id))!
  })).pipe(Effect.withSpan("EndpointCommands.revokeEndpoint", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

/** A sandbox's endpoints (the caller checked it is theirs), newest first, after the (created_at, id) position if given. */
export const endpointPage = (sandboxId: SandboxId, after: readonly [string, string] | undefined, limit: number) => EndpointsRepo.page(sandboxId, after, limit)
