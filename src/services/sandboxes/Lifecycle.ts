/**
 * Sandbox lifecycle jobs: provision (routing and fallback), pause, resume, destroy, and the two timers —
 * runtime timeout and idle timeout — each honouring `destroy` or `pause` (the reference system ignores pause and
 * idle timeouts; we do not). Lifecycle jobs of one sandbox share the lock key `sandbox:<id>`, so they never overlap.
 */
import { Context, Effect, Option } from "effect"
import { LocalRuntime } from "../../runtime/LocalRuntime.ts"
import { repositories, type Repositories } from "../../db/Database.ts"
import { Db } from "../../db/Db.ts"
import { EndpointsRepo } from "../../db/repos/Endpoints.ts"
import { ProcessesRepo } from "../../db/repos/Processes.ts"
import { RuntimeOperationsRepo } from "../../db/repos/RuntimeOperations.ts"
import { RecordingsRepo } from "../../db/repos/Recordings.ts"
import { requestOf, SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import type { ErrorObject } from "../../domain/Errors.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import type { ProviderError, ProviderSandbox, SandboxProvider } from "../../providers/Provider.ts"
import { appendEvent } from "../Events.ts"
import { cancelJob, type JobHandler, JobError, jobRow, rearmJobs } from "../JobRegistry.ts"
import { armCostSync, COST_SYNC_FINAL_SECONDS, COST_SYNC_FIRST_SECONDS, costSyncRow } from "./CostSync.ts"
import { IdleCheckJob, type LifecyclePayload } from "./JobTypes.ts"
import { runtimeTimeoutRow, sandboxLockKey, startSystemAction } from "./LifecycleJobs.ts"
import { appendProcessEvent, finishProcess } from "./Processes.ts"
import { setOperationState } from "./Operations.ts"
import { actionFailure, logProviderFailure } from "./ProviderErrors.ts"
import { provisionSandbox } from "./Provisioning.ts"
import { getSandboxRow, type SandboxRow, setSandboxState } from "./SandboxRows.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import type { SandboxId } from "../../domain/Ids.ts"

/** A sandbox's timers from its request, for a sandbox made ready (or resumed) now: the runtime deadline, the idle timeout. */
const timersOf = (sandbox: SandboxRow) =>
  Effect.gen(function*() {
    const { lifecycle } = yield* requestOf(sandbox)
    const now = yield* nowIso
    return { now, deadline: isoAfter(now, lifecycle.runtime_timeout_seconds), idleSeconds: lifecycle.idle_timeout_seconds }
  })

/**
 * Arms the runtime timeout (at `timers.deadline`), the idle check and the cost sync for a sandbox that just became
 * ready, in one statement; `deadlineStored`: its `expires_at` says the deadline already (written with the ready state).
 */
const armTimers = (sandboxId: SandboxId, timers: Effect.Effect.Success<ReturnType<typeof timersOf>>, deadlineStored: boolean) =>
  Effect.gen(function*() {
    const idle = timers.idleSeconds
    yield* rearmJobs([
      costSyncRow(sandboxId, COST_SYNC_FIRST_SECONDS),
      runtimeTimeoutRow(sandboxId, timers.deadline),
      ...(idle === undefined ? [] : [
        jobRow(IdleCheckJob, {
          dedupeKey: `sandbox:idle_check:${sandboxId}`,
          lockKey: sandboxLockKey(sandboxId),
          payload: { sandbox_id: sandboxId },
          availableAt: isoAfter(timers.now, Math.min(idle, 10 * 365 * 86400)),
          replace: true,
          sandboxId
        })
      ])
    ])
    if (!deadlineStored) yield* SandboxesRepo.setDeadline(sandboxId, timers.deadline)
  })

const disarmTimers = (sandboxId: SandboxId) =>
  Effect.all([cancelJob(`sandbox:runtime_timeout:${sandboxId}`), cancelJob(`sandbox:idle_check:${sandboxId}`), SandboxesRepo.setDeadline(sandboxId, null)], { discard: true })

/** The operation's error says what failed in the user's terms (ProviderErrors.ts); the provider's words are logged. */
const providerJobError = (code: string, what: string, e: ProviderError) =>
  Effect.zipRight(
    logProviderFailure(what, e),
    Effect.fail(new JobError({ error: actionFailure(code, what, e), retryable: e.retryable || e.kind === "unavailable" || e.kind === "timeout_absent" }))
  )

export const makeLifecycleHandlers = Effect.gen(function*() {
  const accounts = yield* ProviderAccounts
  // Emulated providers run on this host's runtime: their images are pulled with progress (Provisioning.ts).
  const localRuntime = yield* Effect.serviceOption(LocalRuntime)
  const db = yield* Db
  const context = Context.add(yield* repositories, ProviderAccounts, accounts)
  const provide = <A, E>(effect: Effect.Effect<A, E, Repositories | ProviderAccounts>) => Effect.provide(effect, context)
  const tx = <A, E, R>(effect: Effect.Effect<A, E, R>) => db.transaction(effect)

  const target = (sandbox: SandboxRow) => accounts.target(sandbox)

  const event = (sandbox: SandboxRow, type: string, data: Record<string, unknown> = {}) =>
    appendEvent({ type, organizationId: sandbox.organization_id, projectId: sandbox.project_id, data: { sandbox_id: sandbox.id, provider: sandbox.provider, ...data } })

  /** Everything that stops with the sandbox: running processes, live endpoints, open recordings, timers. */
  const settleChildren = (sandbox: SandboxRow) =>
    Effect.gen(function*() {
      const sandboxId = sandbox.id
      const now = yield* nowIso
      const error: ErrorObject = { code: "sandbox_stopped", message: "The sandbox stopped", retryable: false }
      for (const processId of yield* ProcessesRepo.liveOf(sandboxId)) {
        yield* appendProcessEvent(processId, "failed", error)
        yield* finishProcess(processId, "failed", { error })
      }
      yield* EndpointsRepo.revokeLiveOf(sandboxId, now)
      yield* RuntimeOperationsRepo.failLiveOf(sandboxId, now)
      const recordings = yield* RecordingsRepo.failLiveOf(sandboxId, now)
      for (const id of recordings.ids) {
        yield* appendEvent({ type: "recording.stop", organizationId: sandbox.organization_id, projectId: sandbox.project_id, data: { sandbox_id: sandboxId, recording_id: id, state: "failed", error: recordings.error } })
      }
      yield* disarmTimers(sandboxId)
    })

  const provision: JobHandler<LifecyclePayload> = {
    run: (job) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload
        const sandbox = yield* getSandboxRow(sandboxId)
        if (sandbox === undefined) return
        if (sandbox.state !== "routing" && sandbox.state !== "provisioning" && sandbox.state !== "provision_unknown") {
          // Destroyed before it was provisioned: nothing to do for this operation.
          yield* setOperationState(operationId, "cancelled")
          return
        }
        // Three independent statements, at once (on PostgreSQL, three connections' round trips overlap): the
        // operation runs; created here, should the sandbox land on this node's local runtime it lives here
        // (markReady unpins a remote one); and the providers it may go to.
        const [candidates] = yield* Effect.all([
          accounts.candidates(sandbox.organization_id),
          setOperationState(operationId, "running"),
          SandboxesRepo.pinHere(sandboxId)
        ], { concurrency: "unbounded" })
        // Nothing can exist at a provider before the job's first attempt (a state of provision_unknown says otherwise).
        const firstCreate = job.attempt === 1 && sandbox.state !== "provision_unknown"
        const outcome = yield* provisionSandbox(sandbox, operationId, candidates, firstCreate, Option.getOrUndefined(localRuntime))
        switch (outcome._tag) {
          case "Provisioned": {
            const becameReady = yield* Effect.gen(function*() {
              const timers = yield* timersOf(sandbox)
              const ready = yield* SandboxesRepo.markReady(sandboxId, {
                provider: outcome.provider,
                billingMode: outcome.billingMode,
                network: outcome.network,
                resource: outcome.sandbox,
                capabilities: outcome.capabilities,
                expiresAt: timers.deadline
              })
              if (ready === undefined) return false
              yield* armTimers(ready.id, timers, true)
              yield* event(ready, "sandbox.ready")
              yield* setOperationState(operationId, "succeeded")
              return true
            }).pipe(tx)
            if (!becameReady) {
              // Destroy was requested while we were creating it: the resource exists, so destroy it now.
              yield* SandboxesRepo.setProviderResource(sandboxId, outcome.provider, outcome.sandbox)
              yield* setOperationState(operationId, "cancelled")
            }
            return
          }
          case "NoEligibleProvider":
          case "Failed": {
            const error = outcome.error
            yield* Effect.gen(function*() {
              if (outcome._tag === "Failed") yield* SandboxesRepo.setPlacement(sandboxId, outcome.placement.provider, outcome.placement.billingMode)
              yield* setSandboxState(sandboxId, "failed", { reason: error.code, unless: ["stopping", "stopped"] })
              yield* setOperationState(operationId, "failed", error)
              yield* event(sandbox, "sandbox.failed", { code: error.code })
            }).pipe(tx)
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
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload
        yield* setSandboxState(sandboxId, "failed", { reason: "sandbox_provision_failed", unless: ["stopping", "stopped", "ready"] })
        yield* setOperationState(operationId, "failed", error)
      }).pipe(tx, provide)
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
    readonly timers: (sandboxId: SandboxId) => Effect.Effect<void>
  }): JobHandler<LifecyclePayload> => ({
    run: (job) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload
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
        }).pipe(tx)
      }).pipe(provide),
    giveUp: (job, error) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload
        yield* SandboxesRepo.revertTransition(sandboxId, spec.from, spec.revertTo)
        yield* setOperationState(operationId, "failed", error)
      }).pipe(tx, provide)
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
    timers: (sandboxId) =>
      Effect.flatMap(getSandboxRow(sandboxId), (row) => (row === undefined ? Effect.void : Effect.flatMap(timersOf(row), (timers) => armTimers(row.id, timers, false)))).pipe(provide)
  })

  const destroy: JobHandler<LifecyclePayload> = {
    run: (job) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload
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
          yield* settleChildren(sandbox)
          yield* armCostSync(sandboxId, COST_SYNC_FINAL_SECONDS)
          yield* event(sandbox, "sandbox.deleted", sandbox.state_reason === null ? {} : { reason: sandbox.state_reason })
          yield* setOperationState(operationId, "succeeded")
        }).pipe(tx)
      }).pipe(provide),
    giveUp: (job, error) =>
      Effect.gen(function*() {
        const { sandbox_id: sandboxId, operation_id: operationId } = job.payload
        yield* setSandboxState(sandboxId, "cleanup_failed", { reason: "sandbox_destroy_failed" })
        yield* setOperationState(operationId, "failed", error)
      }).pipe(tx, provide)
  }

  const timeoutAction = (sandbox: SandboxRow, action: "destroy" | "pause", reason: string) => tx(startSystemAction(sandbox, action, reason))

  const runtimeTimeout: JobHandler<{ readonly sandbox_id: SandboxId }> = {
    run: (job) =>
      Effect.gen(function*() {
        const sandbox = yield* getSandboxRow(job.payload.sandbox_id)
        if (sandbox === undefined || sandbox.state !== "ready") return
        const { lifecycle } = yield* requestOf(sandbox)
        yield* timeoutAction(sandbox, lifecycle.on_runtime_timeout, "runtime_timeout")
      }).pipe(provide),
    giveUp: () => Effect.void
  }

  const idleCheck: JobHandler<{ readonly sandbox_id: SandboxId }> = {
    run: (job) =>
      Effect.gen(function*() {
        const sandbox = yield* getSandboxRow(job.payload.sandbox_id)
        if (sandbox === undefined || sandbox.state !== "ready") return
        const { lifecycle } = yield* requestOf(sandbox)
        const idleSeconds = lifecycle.idle_timeout_seconds
        if (idleSeconds === undefined) return
        const now = yield* nowIso
        // A running process is activity: look again one idle period from now.
        if ((yield* ProcessesRepo.busyCount(sandbox.id)) > 0) return { rescheduleAt: isoAfter(now, idleSeconds) }
        const idleUntil = isoAfter(sandbox.last_activity_at ?? sandbox.ready_at ?? now, idleSeconds)
        if (idleUntil > now) return { rescheduleAt: idleUntil }
        yield* timeoutAction(sandbox, lifecycle.on_idle_timeout, "idle_timeout")
      }).pipe(provide),
    giveUp: () => Effect.void
  }

  /** The provider's own timer follows an extended deadline (where the provider has one). */
  const extendLifetime: JobHandler<{ readonly sandbox_id: SandboxId; readonly seconds: number }> = {
    run: (job) =>
      Effect.gen(function*() {
        const sandbox = yield* getSandboxRow(job.payload.sandbox_id)
        if (sandbox?.state !== "ready") return
        const t = target(sandbox)
        if (t?.provider.extendLifetime === undefined) return
        yield* t.provider.extendLifetime(t.resource, job.payload.seconds).pipe(
          Effect.catchAll((e) => providerJobError("sandbox_extend_failed", "extend the sandbox's lifetime at its provider", e))
        )
      }).pipe(provide),
    giveUp: () => Effect.void
  }

  return { provision, pause, resume, destroy, runtimeTimeout, idleCheck, extendLifetime }
})
