/**
 * Cost sync (reference §7): the provider's cumulative cost since ready becomes a `usage_records` row per change
 * and, unless the sandbox runs on the organization's own provider account (byok), a ledger charge of the delta
 * (`usage_charge`, or `usage_correction` when it went down). First sync 5 s after ready, then every 60 s while
 * ready (5 min while paused), and a final one after destroy. Retried like any job; never double-charged (the
 * ledger entry references its usage record); a charge that exhausts the balance arms the spend limit
 * (SpendLimit.ts). Each sync of a ready or paused sandbox also asks the provider
 * whether it still has the resource (provider loss).
 */
import { Effect } from "effect"
import { repositories } from "../../db/Database.ts"
import { Db } from "../../db/Db.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { UsageRepo } from "../../db/repos/Usage.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import { appendEvent } from "../Events.ts"
import { postLedgerEntry } from "../Ledger.ts"
import { enqueueJob, type JobHandler, JobError, jobRow } from "../JobRegistry.ts"
import { CostSyncJob } from "./JobTypes.ts"
import { startSystemAction } from "./LifecycleJobs.ts"
import { armSpendLimitIfExhausted } from "./SpendLimit.ts"
import { getSandboxRow, type SandboxRow } from "./SandboxRows.ts"
import { ProviderAccounts, type ProviderTarget } from "../ProviderAccounts.ts"
import type { SandboxId } from "../../domain/Ids.ts"

export const COST_SYNC_FIRST_SECONDS = 5
const COST_SYNC_READY_SECONDS = 60
const COST_SYNC_PAUSED_SECONDS = 300
export const COST_SYNC_FINAL_SECONDS = 2

/** A sandbox's cost sync `afterSeconds` from now (a new time replaces the old one). */
const costSync = (sandboxId: SandboxId, afterSeconds: number) =>
  Effect.map(nowIso, (now) => ({
    dedupeKey: `sandbox:cost_sync:${sandboxId}`,
    payload: { sandbox_id: sandboxId },
    availableAt: isoAfter(now, afterSeconds),
    replace: true,
    sandboxId
  }))

/** (Re)arms the sandbox's cost sync `afterSeconds` from now. */
export const armCostSync = (sandboxId: SandboxId, afterSeconds: number) => Effect.flatMap(costSync(sandboxId, afterSeconds), (job) => enqueueJob(CostSyncJob, job))

/** `armCostSync`'s job row, for `rearmJobs`. */
export const costSyncRow = (sandboxId: SandboxId, afterSeconds: number) => Effect.flatMap(costSync(sandboxId, afterSeconds), (job) => jobRow(CostSyncJob, job))

export const makeCostSyncHandler = Effect.gen(function*() {
  const accounts = yield* ProviderAccounts
  const db = yield* Db
  const context = yield* repositories

  /**
   * Provider loss (reference §3 "Provider loss"): a ready or paused sandbox whose resource the provider no longer
   * has, or reports failed, goes to `stopping` (`provider_stopped`) and is destroyed, with an operation. An
   * inspect that fails says nothing. Returns whether the sandbox was found lost.
   */
  const checkLoss = (sandbox: SandboxRow, target: ProviderTarget) =>
    Effect.gen(function*() {
      if (sandbox.state !== "ready" && sandbox.state !== "paused") return false
      const seen = yield* target.provider.inspect(target.resource).pipe(Effect.orElseSucceed(() => "unknown" as const))
      if (seen !== "absent" && seen !== "failed") return false
      return yield* Effect.gen(function*() {
        const current = yield* getSandboxRow(sandbox.id)
        if (current === undefined || (current.state !== "ready" && current.state !== "paused")) return false
        yield* Effect.logWarning("the provider lost a sandbox; destroying it", { sandbox: sandbox.id, provider: target.provider.name, seen })
        yield* startSystemAction(current, "destroy", "provider_stopped")
        return true
      }).pipe(db.transaction)
    })

  const run = (sandboxId: SandboxId) =>
    Effect.gen(function*() {
      const sandbox = yield* getSandboxRow(sandboxId)
      const target = accounts.target(sandbox)
      if (sandbox === undefined || target === undefined || sandbox.ready_at === null) return
      const now = yield* nowIso
      const lost = yield* checkLoss(sandbox, target)
      const cost = yield* target.provider.getCost(target.resource, { from: sandbox.ready_at, to: sandbox.stopped_at ?? now }).pipe(
        Effect.mapError((e) => new JobError({ error: { code: "cost_sync_failed", message: e.message, retryable: true }, retryable: true }))
      )
      const again = lost
        // The destroy just started: come back soon for the final sync (whether or not its arming reached this job).
        ? { rescheduleAt: isoAfter(now, COST_SYNC_FINAL_SECONDS) }
        : sandbox.state === "stopped" || sandbox.state === "failed"
        ? undefined
        : { rescheduleAt: isoAfter(now, sandbox.state === "paused" ? COST_SYNC_PAUSED_SECONDS : COST_SYNC_READY_SECONDS) }
      if (cost === null) return again
      yield* Effect.gen(function*() {
        yield* UsageRepo.lockSandbox(sandboxId)
        const delta = cost.amountMicrousd - (yield* UsageRepo.lastCumulative(sandboxId))
        yield* SandboxesRepo.setCost(sandboxId, cost.amountMicrousd, now)
        if (delta === 0n) return
        const recordId = yield* UsageRepo.insert({
          organizationId: sandbox.organization_id,
          projectId: sandbox.project_id,
          sandboxId,
          provider: target.provider.name,
          billingMode: sandbox.billing_mode,
          deltaMicrousd: delta,
          cumulativeMicrousd: cost.amountMicrousd,
          provenance: cost.provenance,
          confidence: cost.confidence,
          rateCardVersion: cost.rateCardVersion,
          measuredThrough: cost.measuredThrough,
          now
        })
        if (sandbox.billing_mode !== "byok") {
          yield* postLedgerEntry({
            organizationId: sandbox.organization_id,
            kind: delta > 0n ? "usage_charge" : "usage_correction",
            amountMicrousd: -delta,
            description: `Sandbox ${sandboxId} on ${target.provider.name}`,
            reference: { type: "usage_record", id: recordId }
          })
          if (delta > 0n) yield* armSpendLimitIfExhausted(sandbox.organization_id)
        }
        yield* appendEvent({
          type: "sandbox.cost_updated",
          organizationId: sandbox.organization_id,
          projectId: sandbox.project_id,
          data: { sandbox_id: sandboxId, cost_microusd: cost.amountMicrousd.toString(), delta_microusd: delta.toString() }
        })
      }).pipe(db.transaction)
      return again
    }).pipe(Effect.provide(context))

  return { run: (job) => run(job.payload.sandbox_id), giveUp: () => Effect.void } satisfies JobHandler<{ readonly sandbox_id: SandboxId }>
})
