/**
 * The lifecycle jobs a sandbox's state changes are carried out by (one lock per sandbox, one destroy per
 * sandbox), and the pause or destroy the gateway starts itself. Kept apart from their handlers (Lifecycle.ts) so
 * that the commands, timers and cost sync can start them without depending on the handlers.
 */
import { Effect } from "effect"
import { enqueueJob, jobRow } from "../JobRegistry.ts"
import type { Lease } from "../../db/repos/Jobs.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { type LifecyclePayload, RuntimeTimeoutJob, SandboxDestroyJob, SandboxPauseJob, SandboxProvisionJob, SandboxResumeJob } from "./JobTypes.ts"
import { insertOperation } from "./Operations.ts"
import { type SandboxRow, setSandboxState } from "./SandboxRows.ts"
import type { OperationId, SandboxId } from "../../domain/Ids.ts"
import type { OperationType } from "../../domain/Operation.ts"

type OperationTypeName = typeof OperationType.Type

export type { LifecyclePayload }

/** Lifecycle jobs and timers of one sandbox never run at the same time. */
export const sandboxLockKey = (sandboxId: SandboxId) => `sandbox:${sandboxId}`

const LIFECYCLE_JOBS = {
  "sandbox.provision": SandboxProvisionJob,
  "sandbox.pause": SandboxPauseJob,
  "sandbox.resume": SandboxResumeJob,
  "sandbox.destroy": SandboxDestroyJob
}

/** The runtime timeout's job, firing at `at` (a new time replaces the old one). */
const runtimeTimeout = (sandboxId: SandboxId, at: string) => ({
  dedupeKey: `sandbox:runtime_timeout:${sandboxId}`,
  lockKey: sandboxLockKey(sandboxId),
  payload: { sandbox_id: sandboxId },
  availableAt: at,
  replace: true,
  sandboxId
})

/** The runtime timeout's job row, for `rearmJobs`; the sandbox's `expires_at` is the caller's. */
export const runtimeTimeoutRow = (sandboxId: SandboxId, at: string) => jobRow(RuntimeTimeoutJob, runtimeTimeout(sandboxId, at))

/** The runtime timeout fires at `at` (a new time replaces the old one), and the sandbox says so (`expires_at`). */
export const armRuntimeTimeout = (sandboxId: SandboxId, at: string) =>
  Effect.zipRight(enqueueJob(RuntimeTimeoutJob, runtimeTimeout(sandboxId, at)), SandboxesRepo.setDeadline(sandboxId, at))

/** A lifecycle job's dedupe key. One destroy per sandbox: a user destroy re-arms (replaces) a pending timeout-driven one. */
const lifecycleJobKey = (type: keyof typeof LIFECYCLE_JOBS, payload: LifecyclePayload) =>
  type === "sandbox.destroy" ? `sandbox:destroy:${payload.sandbox_id}` : `${type}:${payload.operation_id}`

const JOB_OF_OPERATION = {
  sandbox_create: "sandbox.provision",
  sandbox_pause: "sandbox.pause",
  sandbox_resume: "sandbox.resume",
  sandbox_destroy: "sandbox.destroy"
} as const satisfies Record<OperationTypeName, keyof typeof LIFECYCLE_JOBS>

/** The dedupe key of the job that carries out a lifecycle operation (for the runner's `runNow`). */
export const operationJobKey = (operation: { readonly type: OperationTypeName; readonly id: OperationId; readonly resource_id: SandboxId }) =>
  lifecycleJobKey(JOB_OF_OPERATION[operation.type], { sandbox_id: operation.resource_id, operation_id: operation.id })

/** `leasedTo`: see `enqueueJob` (a create's provision job, its sandbox new in the same transaction). */
export const lifecycleJob = (type: keyof typeof LIFECYCLE_JOBS, payload: LifecyclePayload, leasedTo?: Lease) =>
  enqueueJob(LIFECYCLE_JOBS[type], {
    dedupeKey: lifecycleJobKey(type, payload),
    lockKey: sandboxLockKey(payload.sandbox_id),
    payload,
    replace: type === "sandbox.destroy",
    sandboxId: payload.sandbox_id
  }, leasedTo)

/**
 * A pause or destroy the gateway starts itself (a timer, a resource the provider lost), with an operation so
 * clients can see it. Call inside a transaction.
 */
export const startSystemAction = (sandbox: SandboxRow, action: "destroy" | "pause", reason: string) =>
  Effect.gen(function*() {
    const operation = yield* insertOperation({
      projectId: sandbox.project_id,
      organizationId: sandbox.organization_id,
      keyId: sandbox.created_by_key_id,
      type: action === "destroy" ? "sandbox_destroy" : "sandbox_pause",
      resourceId: sandbox.id
    })
    yield* setSandboxState(sandbox.id, action === "destroy" ? "stopping" : "pausing", { reason })
    yield* lifecycleJob(action === "destroy" ? "sandbox.destroy" : "sandbox.pause", { sandbox_id: sandbox.id, operation_id: operation.id })
  })
