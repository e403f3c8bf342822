/**
 * Sandbox endpoints (spec §2.9): provisioning → active → revoking → revoked, or expired / failed. The provider
 * exposes the port (its own URL and lease); the gateway hands out its own capability URL on the endpoint listener
 * (never the API's origin; see src/domain/EndpointAddress.ts), and its reverse proxy checks the lease on every
 * request and cuts open exchanges when the lease ends (EndpointConnections), before the expiry job has even run.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { ErrorObject } from "../../domain/Errors.ts"
import type { Endpoint } from "../../domain/Runtime.ts"
import { nowIso } from "../../domain/Time.ts"
import { ProviderRegistry } from "../../../providers/core/Provider.ts"
import { cancelJob, enqueueJob, type Job, type JobHandler, JobError } from "../OperationRunner.ts"
import { actionFailure, logProviderFailure } from "./ProviderErrors.ts"
import { getSandboxRow, providerTarget } from "./SandboxRows.ts"

export type EndpointState = "provisioning" | "active" | "revoking" | "revoked" | "expired" | "failed"

export interface EndpointRow {
  readonly id: string
  readonly project_id: string
  readonly sandbox_id: string
  readonly port: number
  readonly protocol: string
  readonly state: EndpointState
  readonly url: string
  readonly token_hash: string
  readonly provider_lease_id: string | null
  readonly provider_url: string | null
  readonly error: string | null
  readonly lease_expires_at: string
  readonly revoked_at: string | null
  readonly created_at: string
  readonly updated_at: string
}

export const endpointToWire = (row: EndpointRow, providerCapabilities: unknown): typeof Endpoint.Type => ({
  id: row.id,
  type: "sandbox_endpoint" as const,
  project_id: row.project_id,
  sandbox_id: row.sandbox_id,
  port: row.port,
  protocol: row.protocol,
  state: row.state,
  url: row.url,
  lease_expires_at: row.lease_expires_at,
  revoked_at: row.revoked_at,
  error: row.error === null ? null : (JSON.parse(row.error) as ErrorObject),
  created_at: row.created_at,
  updated_at: row.updated_at,
  provider_capabilities: providerCapabilities as typeof Endpoint.Type["provider_capabilities"]
})

export const getEndpointRow = (id: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return (yield* sql<EndpointRow>`SELECT * FROM endpoints WHERE id = ${id}`)[0]
  }).pipe(Effect.orDie)

export const endpointExpiryJob = (row: { id: string; lease_expires_at: string }) =>
  enqueueJob({ type: "endpoint.expire", dedupeKey: `endpoint:expire:${row.id}`, payload: { endpoint_id: row.id }, availableAt: row.lease_expires_at })

export const makeEndpointHandlers = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const registry = yield* ProviderRegistry

  const setState = (id: string, from: ReadonlyArray<EndpointState>, to: EndpointState, fields: { providerLeaseId?: string; providerUrl?: string; error?: ErrorObject } = {}) =>
    Effect.gen(function*() {
      const now = yield* nowIso
      const updated = yield* sql`UPDATE endpoints SET state = ${to}, updated_at = ${now},
          provider_lease_id = COALESCE(${fields.providerLeaseId ?? null}, provider_lease_id),
          provider_url = COALESCE(${fields.providerUrl ?? null}, provider_url),
          error = COALESCE(${fields.error ? JSON.stringify(fields.error) : null}, error),
          revoked_at = CASE WHEN ${to} = 'revoked' THEN ${now} ELSE revoked_at END
        WHERE id = ${id} AND state IN ${sql.in(from)} RETURNING id`
      return updated.length > 0
    }).pipe(Effect.orDie)

  const providerFor = (sandboxId: string) => Effect.map(getSandboxRow(sandboxId), (sandbox) => providerTarget(registry, sandbox))

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

  const create: JobHandler = {
    run: (job: Job) =>
      Effect.gen(function*() {
        const { endpoint_id: id } = job.payload as { endpoint_id: string }
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
      }).pipe(Effect.provideService(SqlClient.SqlClient, sql)),
    giveUp: (job, error) =>
      setState((job.payload as { endpoint_id: string }).endpoint_id, ["provisioning"], "failed", { error }).pipe(Effect.asVoid)
  }

  const revoke: JobHandler = {
    run: (job: Job) =>
      Effect.gen(function*() {
        const { endpoint_id: id } = job.payload as { endpoint_id: string }
        const row = yield* getEndpointRow(id)
        if (row === undefined || row.state !== "revoking") return
        yield* revokeAtProvider(row)
        yield* setState(id, ["revoking"], "revoked")
        yield* cancelJob(`endpoint:expire:${id}`)
      }).pipe(Effect.provideService(SqlClient.SqlClient, sql)),
    giveUp: (job, error) =>
      setState((job.payload as { endpoint_id: string }).endpoint_id, ["revoking"], "failed", { error }).pipe(Effect.asVoid)
  }

  const expire: JobHandler = {
    run: (job: Job) =>
      Effect.gen(function*() {
        const { endpoint_id: id } = job.payload as { endpoint_id: string }
        const row = yield* getEndpointRow(id)
        if (row === undefined || (row.state !== "active" && row.state !== "provisioning")) return
        const now = yield* nowIso
        if (row.lease_expires_at > now) return { rescheduleAt: row.lease_expires_at }
        yield* setState(id, ["active", "provisioning"], "expired")
        yield* revokeAtProvider(row)
      }).pipe(Effect.provideService(SqlClient.SqlClient, sql)),
    giveUp: () => Effect.void
  }

  return { create, revoke, expire }
})
