/**
 * The sandbox lifecycle as the API accepts it: create, pause, resume, extend, destroy. Each writes, in one
 * transaction (its own, or the caller's), the sandbox row, its operation, a durable event and the job; the runner is woken after commit and
 * the provider work happens in the job (LifecycleJobs.ts, Provisioning.ts).
 */
import { Effect } from "effect"
import { inTransaction } from "../../db/Db.ts"
import { BillingRepo } from "../../db/repos/Billing.ts"
import { RecordingsRepo } from "../../db/repos/Recordings.ts"
import type { Lease } from "../../db/repos/Jobs.ts"
import type { OperationRow } from "../../db/repos/Operations.ts"
import { SandboxesRepo, type StoredRequest } from "../../db/repos/Sandboxes.ts"
import { apiError, conflict, PaymentRequired } from "../../domain/Errors.ts"
import { unknownEnvironment } from "../../domain/Environments.ts"
import { newId, type OperationId, type OrganizationId, type SandboxId } from "../../domain/Ids.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import { appendEvent } from "../Events.ts"
import { enqueueJob } from "../JobRegistry.ts"
import { ExtendLifetimeJob } from "./JobTypes.ts"
import { armRuntimeTimeout, lifecycleJob, sandboxLockKey } from "./LifecycleJobs.ts"
import { insertOperation } from "./Operations.ts"
import { type Caller, capabilityOf, sandboxOf } from "./SandboxAccess.ts"
import { getSandboxRow, setSandboxState } from "./SandboxRows.ts"
import { unsupportedCall } from "./Unsupported.ts"

/** What a lifecycle command answers: the sandbox as it is now, and the operation it started. */
const mutation = (sandboxId: SandboxId, operation: OperationRow) => Effect.map(getSandboxRow(sandboxId), (sandbox) => ({ sandbox: sandbox!, operation }))

/** Creating a sandbox needs credit: the balance must be > 0 (reference §7 "Zero balance"); checked as it is inserted. */
const noCredit = (organizationId: OrganizationId) =>
  Effect.gen(function*() {
    const balance = (yield* BillingRepo.balance(organizationId)) ?? 0n
    return yield* apiError(PaymentRequired, "insufficient_credits", "The organization has no credit left; add credit to create sandboxes", { balance_microusd: String(balance) })
  })

export interface CreateSandboxInput {
  /** The decoded request with defaults applied; echoed back as `requested`. */
  readonly requested: typeof StoredRequest.Type
}

/**
 * With `leasedTo` (OperationRunner `lease`), the provision job is written already claimed when it can be, and
 * answered as `job`: the caller starts it with `runClaimed` after the commit (else with `runNow`).
 */
export const createSandbox = (caller: Caller, input: CreateSandboxInput, leasedTo?: Lease) =>
  inTransaction(Effect.gen(function*() {
    const environment = unknownEnvironment(input.requested.source)
    if (environment !== undefined) return yield* environment
    const id = newId("sbx")
    const provider = input.requested.provider !== undefined && input.requested.provider !== "auto" ? input.requested.provider : null
    const sandbox = yield* SandboxesRepo.insertIfFunded({ id, projectId: caller.projectId, organizationId: caller.organizationId, keyId: caller.keyId, requested: input.requested, provider })
    if (sandbox === undefined) return yield* noCredit(caller.organizationId)
    const operation = yield* insertOperation({ ...caller, type: "sandbox_create", resourceId: id })
    yield* appendEvent({ type: "sandbox.requested", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: id, provider } })
    const job = yield* lifecycleJob("sandbox.provision", { sandbox_id: id, operation_id: operation.id }, leasedTo)
    return { sandbox, operation, job }
  })).pipe(Effect.withSpan("SandboxCommands.createSandbox", { attributes: { "project.id": caller.projectId } }))

const PAUSABLE = new Set(["ready", "pausing"])

export const pauseSandbox = (caller: Caller, sandboxId: SandboxId) =>
  inTransaction(Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (sandbox.state === "paused") {
      const operation = yield* insertOperation({ ...caller, type: "sandbox_pause", resourceId: sandboxId, state: "succeeded" })
      return yield* mutation(sandboxId, operation)
    }
    if (!PAUSABLE.has(sandbox.state)) {
      return yield* conflict("invalid_sandbox_state", `A ${sandbox.state} sandbox cannot be paused`, { state: sandbox.state })
    }
    if (sandbox.capabilities !== null && !capabilityOf(sandbox, ["lifecycle", "pause"])) return yield* unsupportedCall(sandbox, { kind: "pause" })
    // A recording open on its desktop would freeze mid-file (reference §3 "Recording").
    const recording = yield* RecordingsRepo.liveOf(sandboxId)
    if (recording !== undefined) {
      return yield* conflict("recording_active", "The sandbox's desktop is being recorded; stop the recording before pausing it", { recording_id: recording })
    }
    yield* setSandboxState(sandboxId, "pausing")
    const operation = yield* insertOperation({ ...caller, type: "sandbox_pause", resourceId: sandboxId })
    yield* lifecycleJob("sandbox.pause", { sandbox_id: sandboxId, operation_id: operation.id })
    return yield* mutation(sandboxId, operation)
  })).pipe(Effect.withSpan("SandboxCommands.pauseSandbox", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

export const resumeSandbox = (caller: Caller, sandboxId: SandboxId) =>
  inTransaction(Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (sandbox.state === "ready") {
      const operation = yield* insertOperation({ ...caller, type: "sandbox_resume", resourceId: sandboxId, state: "succeeded" })
      return yield* mutation(sandboxId, operation)
    }
    if (sandbox.state !== "paused" && sandbox.state !== "resuming") {
      return yield* conflict("invalid_sandbox_state", `A ${sandbox.state} sandbox cannot be resumed; it must be paused`, { state: sandbox.state })
    }
    if (sandbox.capabilities !== null && !capabilityOf(sandbox, ["lifecycle", "resume"])) return yield* unsupportedCall(sandbox, { kind: "resume" })
    yield* setSandboxState(sandboxId, "resuming")
    const operation = yield* insertOperation({ ...caller, type: "sandbox_resume", resourceId: sandboxId })
    yield* lifecycleJob("sandbox.resume", { sandbox_id: sandboxId, operation_id: operation.id })
    return yield* mutation(sandboxId, operation)
  })).pipe(Effect.withSpan("SandboxCommands.resumeSandbox", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

/**
 * Moves a ready sandbox's runtime deadline to now + `seconds` (shorter or longer than before); a provider with its
 * own lifetime timer (E2B) is told in a job, after commit. The sandbox is answered with its new `expires_at`.
 */
export const extendSandbox = (caller: Caller, sandboxId: SandboxId, seconds: number) =>
  inTransaction(Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (sandbox.state !== "ready") {
      return yield* conflict("invalid_sandbox_state", `A ${sandbox.state} sandbox has no runtime deadline to move; it must be ready`, { state: sandbox.state })
    }
    yield* armRuntimeTimeout(sandboxId, isoAfter(yield* nowIso, seconds))
    yield* enqueueJob(ExtendLifetimeJob, {
      dedupeKey: `sandbox:extend_lifetime:${sandboxId}`,
      lockKey: sandboxLockKey(sandboxId),
      payload: { sandbox_id: sandboxId, seconds },
      replace: true,
      sandboxId
    })
    return (yield* getSandboxRow(sandboxId))!
  })).pipe(Effect.withSpan("SandboxCommands.extendSandbox", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

export const destroySandbox = (caller: Caller, sandboxId: SandboxId) =>
  inTransaction(Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (sandbox.state === "stopped") {
      const operation = yield* insertOperation({ ...caller, type: "sandbox_destroy", resourceId: sandboxId, state: "succeeded" })
      return yield* mutation(sandboxId, operation)
    }
    yield* setSandboxState(sandboxId, "stopping", { reason: "user_requested" })
    const operation = yield* insertOperation({ ...caller, type: "sandbox_destroy", resourceId: sandboxId })
    yield* lifecycleJob("sandbox.destroy", { sandbox_id: sandboxId, operation_id: operation.id })
    return yield* mutation(sandboxId, operation)
  })).pipe(Effect.withSpan("SandboxCommands.destroySandbox", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

