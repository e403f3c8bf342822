/**
 * Sandbox endpoints (spec §2.9): provisioning → active → revoking → revoked, or expired / failed. The provider
 * exposes the port (its own URL and lease); the gateway hands out its own capability URL on the endpoint listener
 * (never the API's origin; see src/domain/EndpointAddress.ts), and its reverse proxy checks the lease on every
 * request and cuts open exchanges when the lease ends (EndpointConnections), before the expiry job has even run.
 */
import { Effect } from "effect"
import { provideRepositories } from "../../db/Database.ts"
import { inTransaction } from "../../db/Db.ts"
import { type EndpointRow, EndpointsRepo, type EndpointState } from "../../db/repos/Endpoints.ts"
import type { ErrorObject } from "../../domain/Errors.ts"
import { nowIso } from "../../domain/Time.ts"
import { appendEvent } from "../Events.ts"
import { cancelJob, enqueueJob, type JobHandler, JobError } from "../JobRegistry.ts"
import { EndpointExpireJob } from "./JobTypes.ts"
import { actionFailure, logProviderFailure } from "./ProviderErrors.ts"
import { getSandboxRow } from "./SandboxRows.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import type { EndpointId, SandboxId } from "../../domain/Ids.ts"

export type { EndpointRow, EndpointState }

export const getEndpointRow = (id: EndpointId) => EndpointsRepo.get(id)

/** What the endpoint listener checks a request against: the endpoint's token hash, state and lease, its sandbox's state. */
export const endpointAccess = (id: EndpointId) => EndpointsRepo.access(id)

export const endpointExpiryJob = (row: { id: EndpointId; lease_expires_at: string; sandbox_id: SandboxId }) =>
  enqueueJob(EndpointExpireJob, {
    dedupeKey: `endpoint:expire:${row.id}`,
    payload: { endpoint_id: row.id },
    availableAt: row.lease_expires_at,
    sandboxId: row.sandbox_id
  })

interface EndpointRef {
  readonly endpoint_id: EndpointId
}

export const makeEndpointHandlers = Effect.gen(function*() {
  const accounts = yield* ProviderAccounts
  const provide = yield* provideRepositories

  /**
   * Moves the endpoint on; an end the user did not ask for (`expired`, `failed`) is also a durable event
   * (`endpoint.expired`, `endpoint.failed`: webhooks, the event stream), in the same transaction.
   */
  const setState = (id: EndpointId, from: ReadonlyArray<EndpointState>, to: EndpointState, fields: { providerLeaseId?: string; providerUrl?: string; error?: ErrorObject } = {}) =>
    inTransaction(Effect.gen(function*() {
      const moved = yield* EndpointsRepo.setState(id, from, to, fields)
      if (moved && (to === "expired" || to === "failed")) {
        const row = yield* getEndpointRow(id)
        const sandbox = row === undefined ? undefined : yield* getSandboxRow(row.sandbox_id)
        if (row !== undefined && sandbox !== undefined) {
          yield* appendEvent({
            type: `endpoint.${to}`,
            organizationId: sandbox.organization_id,
            projectId: row.project_id,
            data: { sandbox_id: row.sandbox_id, endpoint_id: id, port: row.port, ...(fields.error !== undefined ? { error: fields.error } : {}) }
          })
        }
      }
      return moved
    }))

  const providerFor = (sandboxId: SandboxId) => Effect.map(getSandboxRow(sandboxId), (sandbox) => accounts.target(sandbox))

  /** Revokes at the provider (idempotent); failures are retried by the job. */
  const revokeAtProvider = (row: EndpointRow) =>
    Effect.gen(function*() {
      if (row.provider_lease_id === null) return
      const target = yield* providerFor(row.sandbox_id)
      if (target === undefined) return
      yield* target.provider.revokeHttpEndpoint(target.resource, row.provider_lease_id).pipe(
        Effect.catchAll((e) =>
          e.kind === "not_found"
            ? Effect.void
            : Effect.zipRight(
              logProviderFailure("revoke endpoint", e),
              new JobError({ error: { ...actionFailure("endpoint_revoke_failed", `revoke the endpoint on port ${row.port}`, e), retryable: true }, retryable: true })
            )
        )
      )
    })

  const create: JobHandler<EndpointRef> = {
    run: (job) =>
      Effect.gen(function*() {
        const { endpoint_id: id } = job.payload
        const row = yield* getEndpointRow(id)
        if (row === undefined || row.state !== "provisioning") return
        const target = yield* providerFor(row.sandbox_id)
        if (target === undefined || target.sandbox.state !== "ready") {
          yield* setState(id, ["provisioning"], "failed", {
            error: { code: "invalid_sandbox_state", message: "The sandbox is not ready", retryable: false }
          })
          return
        }
        const now = yield* nowIso
        const leaseSeconds = Math.max(1, Math.ceil((Date.parse(row.lease_expires_at) - Date.parse(now)) / 1000))
        const exposed = yield* target.provider.exposeHttpEndpoint(target.resource, { port: row.port, leaseSeconds }).pipe(
          Effect.catchAll((e) =>
            Effect.zipRight(
              logProviderFailure("expose endpoint", e),
              new JobError({
                error: actionFailure(e.kind === "unsupported" ? "capability_unsupported" : "endpoint_create_failed", `expose port ${row.port}`, e),
                retryable: e.retryable || e.kind === "unavailable"
              })
            )
          )
        )
        const activated = yield* setState(id, ["provisioning"], "active", { providerLeaseId: exposed.leaseId, providerUrl: exposed.url })
        // Revoked or expired while we were provisioning: do not leave a lease behind at the provider.
        if (!activated) yield* revokeAtProvider({ ...row, provider_lease_id: exposed.leaseId })
      }).pipe(provide),
    giveUp: (job, error) => setState(job.payload.endpoint_id, ["provisioning"], "failed", { error }).pipe(Effect.asVoid, provide)
  }

  const revoke: JobHandler<EndpointRef> = {
    run: (job) =>
      Effect.gen(function*() {
        const { endpoint_id: id } = job.payload
        const row = yield* getEndpointRow(id)
        if (row === undefined || row.state !== "revoking") return
        yield* revokeAtProvider(row)
        yield* setState(id, ["revoking"], "revoked")
        yield* cancelJob(`endpoint:expire:${id}`)
      }).pipe(provide),
    giveUp: (job, error) => setState(job.payload.endpoint_id, ["revoking"], "failed", { error }).pipe(Effect.asVoid, provide)
  }

  const expire: JobHandler<EndpointRef> = {
    run: (job) =>
      Effect.gen(function*() {
        const { endpoint_id: id } = job.payload
        const row = yield* getEndpointRow(id)
        if (row === undefined || (row.state !== "active" && row.state !== "provisioning")) return
        const now = yield* nowIso
        if (row.lease_expires_at > now) return { rescheduleAt: row.lease_expires_at }
        yield* setState(id, ["active", "provisioning"], "expired")
        yield* revokeAtProvider(row)
      }).pipe(provide),
    giveUp: () => Effect.void
  }

  return { create, revoke, expire }
})
