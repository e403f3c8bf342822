/**
 * Sandbox lifecycle jobs: provision (routing and fallback), pause, resume, destroy, and the two timers —
 * runtime timeout and idle timeout — each honouring `destroy` or `pause` (the reference system ignores pause and
 * idle timeouts; we do not). Lifecycle jobs of one sandbox share the lock key `sandbox:<id>`, so they never overlap.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { ErrorObject } from "../../domain/Errors.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import { type ProviderError, ProviderRegistry, type ProviderSandbox, type SandboxProvider } from "../../../providers/core/Provider.ts"
import { appendEvent } from "../Events.ts"
import { cancelJob, enqueueJob, type Job, type JobHandler, JobError } from "../OperationRunner.ts"
import { armCostSync, COST_SYNC_FINAL_SECONDS, COST_SYNC_FIRST_SECONDS } from "./CostSync.ts"
import { type LifecyclePayload, sandboxLockKey, startSystemAction } from "./LifecycleJobs.ts"
import { appendProcessEvent, finishProcess } from "./Processes.ts"
import { setOperationState } from "./Operations.ts"
import { actionFailure, logProviderFailure } from "./ProviderErrors.ts"
import { provisionSandbox } from "./Provisioning.ts"
import { getSandboxRow, providerTarget, type SandboxRow, setSandboxState } from "./SandboxRows.ts"

interface Requested {
  readonly lifecycle: {
    readonly runtime_timeout_seconds: number
    readonly idle_timeout_seconds?: number | undefined
    readonly on_runtime_timeout: "destroy" | "pause"
    readonly on_idle_timeout: "destroy" | "pause"
  }
}

/** Arms the runtime timeout (from now), the idle check and the cost sync for a sandbox that just became ready. */
const armTimers = (sandbox: SandboxRow) =>
  Effect.gen(function*() {
    yield* armCostSync(sandbox.id, COST_SYNC_FIRST_SECONDS)
    const now = yield* nowIso
    const requested = JSON.parse(sandbox.requested) as Requested
    yield* enqueueJob({
      type: "sandbox.runtime_timeout",
      dedupeKey: `sandbox:runtime_timeout:${sandbox.id}`,
      lockKey: sandboxLockKey(sandbox.id),
      payload: { sandbox_id: sandbox.id },
      availableAt: isoAfter(now, requested.lifecycle.runtime_timeout_seconds),
      replace: true
    })
    if (requested.lifecycle.idle_timeout_seconds !== undefined) {
      yield* enqueueJob({
        type: "sandbox.idle_check",
        dedupeKey: `sandbox:idle_check:${sandbox.id}`,
        lockKey: sandboxLockKey(sandbox.id),
        payload: { sandbox_id: sandbox.id },
        availableAt: isoAfter(now, Math.min(requested.lifecycle.idle_timeout_seconds, 10 * 365 * 86400)),
        replace: true
      })
    }
  })

const disarmTimers = (sandboxId: string) =>
  Effect.all([cancelJob(`sandbox:runtime_timeout:${sandboxId}`), cancelJob(`sandbox:idle_check:${sandboxId}`)], { discard: true })

/** The operation's error says what failed in the user's terms (ProviderErrors.ts); the provider's words are logged. */
const providerJobError = (code: string, what: string, e: ProviderError) =>
  Effect.zipRight(
    logProviderFailure(what, e),
    Effect.fail(new JobError({ error: actionFailure(code, what, e), retryable: e.retryable || e.kind === "unavailable" || e.kind === "timeout_absent" }))
  )

export const makeLifecycleHandlers = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const registry = yield* ProviderRegistry
  const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.provideService(ProviderRegistry, registry))

  const target = (sandbox: SandboxRow) => providerTarget(registry, sandbox)

  const event = (sandbox: SandboxRow, type: string, data: Record<string, unknown> = {}) =>
    appendEvent({ type, organizationId: sandbox.organization_id, projectId: sandbox.project_id, data: { sandbox_id: sandbox.id, provider: sandbox.provider, ...data } })

  /** Everything that stops with the sandbox: running processes, live endpoints, timers. */
  const settleChildren = (sandboxId: string) =>
    Effect.gen(function*() {
      const now = yield* nowIso
      const live = yield* sql<{ id: string }>`SELECT id FROM processes WHERE sandbox_id = ${sandboxId} AND state IN ('queued', 'running', 'cancelling')`
      const error: ErrorObject = { code: "sandbox_stopped", message: "The sandbox stopped", retryable: false }
      for (const p of live) {
        yield* appendProcessEvent(p.id, "failed", error)
        yield* finishProcess(p.id, "failed", { error })
      }
      yield* sql`UPDATE endpoints SET state = 'revoked', revoked_at = ${now}, updated_at = ${now}
        WHERE sandbox_id = ${sandboxId} AND state IN ('provisioning', 'active', 'revoking')`
      yield* sql`UPDATE runtime_operations SET state = 'failed', completed_at = ${now},
        error = ${JSON.stringify({ code: "sandbox_stopped", message: "The sandbox stopped", retryable: false })}
        WHERE sandbox_id = ${sandboxId} AND state IN ('queued', 'running')`
      yield* disarmTimers(sandboxId)
    }).pipe(Effect.orDie)

  const provision: JobHandler = {
    run: (job: Job) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload as LifecyclePayload
        const sandbox = yield* getSandboxRow(sandboxId)
        if (sandbox === undefined) return
        if (sandbox.state !== "routing" && sandbox.state !== "provisioning" && sandbox.state !== "provision_unknown") {
          // Destroyed before it was provisioned: nothing to do for this operation.
          yield* setOperationState(operationId, "cancelled")
          return
        }
        yield* setOperationState(operationId, "running")
        const outcome = yield* provisionSandbox(sandbox, operationId)
        switch (outcome._tag) {
          case "Provisioned": {
            const now = yield* nowIso
            const becameReady = yield* Effect.gen(function*() {
              const updated = yield* sql`UPDATE sandboxes SET state = 'ready', provider = ${outcome.provider}, billing_mode = ${outcome.billingMode},
                  provider_resource = ${JSON.stringify(outcome.sandbox)}, resolved_resources = ${JSON.stringify(outcome.sandbox.resolvedResources)},
                  capabilities = ${JSON.stringify(outcome.capabilities)}, ready_at = ${now}, last_activity_at = ${now}, updated_at = ${now},
                  state_reason = NULL
                WHERE id = ${sandboxId} AND state IN ('routing', 'provisioning', 'provision_unknown') RETURNING id`
              if (updated.length === 0) return false
              const fresh = (yield* getSandboxRow(sandboxId))!
              yield* armTimers(fresh)
              yield* event(fresh, "sandbox.ready")
              yield* setOperationState(operationId, "succeeded")
              return true
            }).pipe(sql.withTransaction, Effect.orDie)
            if (!becameReady) {
              // Destroy was requested while we were creating it: the resource exists, so destroy it now.
              yield* sql`UPDATE sandboxes SET provider = ${outcome.provider}, provider_resource = ${JSON.stringify(outcome.sandbox)} WHERE id = ${sandboxId}`.pipe(Effect.orDie)
              yield* setOperationState(operationId, "cancelled")
            }
            return
          }
          case "NoEligibleProvider":
          case "Failed": {
            const error = outcome.error
            yield* Effect.gen(function*() {
              yield* setSandboxState(sandboxId, "failed", { reason: error.code, unless: ["stopping", "stopped"] })
              yield* setOperationState(operationId, "failed", error)
              yield* event(sandbox, "sandbox.failed", { code: error.code })
            }).pipe(sql.withTransaction, Effect.orDie)
            return
          }
          case "ProvisionUnknown": {
            yield* setSandboxState(sandboxId, "provision_unknown", { reason: "provider_unknown_outcome" })
            yield* setOperationState(operationId, "reconciling")
            // Retried: the next run reconciles (finds the resource by our id) before anything else.
            return { rescheduleAt: isoAfter(yield* nowIso, 5) }
          }
        }
      }).pipe(provide),
    giveUp: (job, error) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload as LifecyclePayload
        yield* setSandboxState(sandboxId, "failed", { reason: "sandbox_provision_failed", unless: ["stopping", "stopped", "ready"] })
        yield* setOperationState(operationId, "failed", error)
      }).pipe(sql.withTransaction, Effect.orDie, provide)
  }

  /**
   * Pause and resume share one shape: `from` (the transitional state set by the API) → provider call → `to`;
   * on a final failure the sandbox goes back to `revertTo`. A repeated or superseded job settles its operation.
   */
  const transition = (spec: {
    readonly from: "pausing" | "resuming"
    readonly to: "paused" | "ready"
    readonly revertTo: "ready" | "paused"
    readonly call: (t: { provider: SandboxProvider; resource: ProviderSandbox }) => Effect.Effect<void, ProviderError>
    readonly failCode: string
    /** What the action does, for messages: "pause the sandbox". */
    readonly what: string
    readonly event: string
    /** Timers: paused sandboxes have none; resumed ones get fresh ones. */
    readonly timers: (sandboxId: string) => Effect.Effect<void>
  }): JobHandler => ({
    run: (job: Job) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload as LifecyclePayload
        const sandbox = yield* getSandboxRow(sandboxId)
        if (sandbox === undefined || sandbox.state !== spec.from) {
          yield* setOperationState(operationId, sandbox?.state === spec.to ? "succeeded" : "cancelled")
          return
        }
        yield* setOperationState(operationId, "running")
        const t = target(sandbox)
        if (t === undefined) return yield* new JobError({ error: { code: "provider_unavailable", message: "No provider resource", retryable: false }, retryable: false })
        yield* spec.call(t).pipe(Effect.catchAll((e) => providerJobError(spec.failCode, spec.what, e)))
        yield* Effect.gen(function*() {
          if (yield* setSandboxState(sandboxId, spec.to, { unless: ["stopping", "stopped"] })) yield* spec.timers(sandboxId)
          yield* event(sandbox, spec.event)
          yield* setOperationState(operationId, "succeeded")
        }).pipe(sql.withTransaction, Effect.orDie)
      }).pipe(provide),
    giveUp: (job, error) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload as LifecyclePayload
        yield* sql`UPDATE sandboxes SET state = ${spec.revertTo} WHERE id = ${sandboxId} AND state = ${spec.from}`
        yield* setOperationState(operationId, "failed", error)
      }).pipe(sql.withTransaction, Effect.orDie, provide)
  })

  const pause = transition({
    from: "pausing",
    to: "paused",
    revertTo: "ready",
    call: (t) => t.provider.pause(t.resource),
    failCode: "sandbox_pause_failed",
    what: "pause the sandbox",
    event: "sandbox.paused",
    timers: (sandboxId) => provide(disarmTimers(sandboxId))
  })

  const resume = transition({
    from: "resuming",
    to: "ready",
    revertTo: "paused",
    call: (t) => t.provider.resume(t.resource),
    failCode: "sandbox_resume_failed",
    what: "resume the sandbox",
    event: "sandbox.resumed",
    timers: (sandboxId) => Effect.flatMap(getSandboxRow(sandboxId), (row) => (row === undefined ? Effect.void : armTimers(row))).pipe(provide)
  })

  const destroy: JobHandler = {
    run: (job: Job) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload as LifecyclePayload
        const sandbox = yield* getSandboxRow(sandboxId)
        if (sandbox === undefined) return
        if (sandbox.state === "stopped") {
          yield* setOperationState(operationId, "succeeded")
          return
        }
        yield* setOperationState(operationId, "running")
        const t = target(sandbox)
        if (t !== undefined) {
          yield* t.provider.destroy(t.resource).pipe(
            Effect.catchAll((e) => e.kind === "not_found" ? Effect.void : providerJobError("sandbox_destroy_failed", "delete the sandbox", e))
          )
        }
        yield* Effect.gen(function*() {
          yield* setSandboxState(sandboxId, "stopped")
          yield* settleChildren(sandboxId)
          yield* armCostSync(sandboxId, COST_SYNC_FINAL_SECONDS)
          yield* event(sandbox, "sandbox.deleted", sandbox.state_reason === null ? {} : { reason: sandbox.state_reason })
          yield* setOperationState(operationId, "succeeded")
        }).pipe(sql.withTransaction, Effect.orDie)
      }).pipe(provide),
    giveUp: (job, error) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload as LifecyclePayload
        yield* setSandboxState(sandboxId, "cleanup_failed", { reason: "sandbox_destroy_failed" })
        yield* setOperationState(operationId, "failed", error)
      }).pipe(sql.withTransaction, Effect.orDie, provide)
  }

  const timeoutAction = (sandbox: SandboxRow, action: "destroy" | "pause", reason: string) =>
    startSystemAction(sandbox, action, reason).pipe(sql.withTransaction, Effect.orDie)

  const runtimeTimeout: JobHandler = {
    run: (job: Job) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId } = job.payload as { sandbox_id: string }
        const sandbox = yield* getSandboxRow(sandboxId)
        if (sandbox === undefined || sandbox.state !== "ready") return
        const requested = JSON.parse(sandbox.requested) as Requested
        yield* timeoutAction(sandbox, requested.lifecycle.on_runtime_timeout, "runtime_timeout")
      }).pipe(provide),
    giveUp: () => Effect.void
  }

  const idleCheck: JobHandler = {
    run: (job: Job) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId } = job.payload as { sandbox_id: string }
        const sandbox = yield* getSandboxRow(sandboxId)
        if (sandbox === undefined || sandbox.state !== "ready") return
        const requested = JSON.parse(sandbox.requested) as Requested
        const idleSeconds = requested.lifecycle.idle_timeout_seconds
        if (idleSeconds === undefined) return
        const now = yield* nowIso
        const busy = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM processes WHERE sandbox_id = ${sandboxId} AND state IN ('queued', 'running', 'cancelling')`.pipe(Effect.orDie)
        // A running process is activity: look again one idle period from now.
        if ((busy[0]?.n ?? 0) > 0) return { rescheduleAt: isoAfter(now, idleSeconds) }
        const idleUntil = isoAfter(sandbox.last_activity_at ?? sandbox.ready_at ?? now, idleSeconds)
        if (idleUntil > now) return { rescheduleAt: idleUntil }
        yield* timeoutAction(sandbox, requested.lifecycle.on_idle_timeout, "idle_timeout")
      }).pipe(provide),
    giveUp: () => Effect.void
  }

  return { provision, pause, resume, destroy, runtimeTimeout, idleCheck }
})
