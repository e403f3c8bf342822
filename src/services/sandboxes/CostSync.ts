/**
 * Cost sync (reference §7): the provider's cumulative cost since ready becomes a `usage_records` row per change
 * and, unless the sandbox runs on the organization's own provider account (byok), a ledger charge of the delta
 * (`usage_charge`, or `usage_correction` when it went down). First sync 5 s after ready, then every 60 s while
 * ready (5 min while paused), and a final one after destroy. Retried like any job; never double-charged (the
 * ledger entry references its usage record); a charge that exhausts the balance arms the spend limit
 * (SpendLimit.ts). Each sync of a ready or paused sandbox also asks the provider
 * whether it still has the resource (provider loss).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { newUuid } from "../../domain/Ids.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import { ProviderRegistry } from "../../../providers/core/Provider.ts"
import { appendEvent } from "../Events.ts"
import { postLedgerEntry } from "../Ledger.ts"
import { enqueueJob, type Job, type JobHandler, JobError } from "../OperationRunner.ts"
import { startSystemAction } from "./LifecycleJobs.ts"
import { armSpendLimitIfExhausted } from "./SpendLimit.ts"
import { getSandboxRow, providerTarget, type SandboxRow } from "./SandboxRows.ts"

export const COST_SYNC_FIRST_SECONDS = 5
const COST_SYNC_READY_SECONDS = 60
const COST_SYNC_PAUSED_SECONDS = 300
export const COST_SYNC_FINAL_SECONDS = 2

/** (Re)arms the sandbox's cost sync `afterSeconds` from now. */
export const armCostSync = (sandboxId: string, afterSeconds: number) =>
  Effect.flatMap(nowIso, (now) =>
    enqueueJob({
      type: "sandbox.cost_sync",
      dedupeKey: `sandbox:cost_sync:${sandboxId}`,
      payload: { sandbox_id: sandboxId },
      availableAt: isoAfter(now, afterSeconds),
      replace: true
    }))

export const makeCostSyncHandler = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const registry = yield* ProviderRegistry

  /**
   * Provider loss (reference §3 "Provider loss"): a ready or paused sandbox whose resource the provider no longer
   * has, or reports failed, goes to `stopping` (`provider_stopped`) and is destroyed, with an operation. An
   * inspect that fails says nothing. Returns whether the sandbox was found lost.
   */
  const checkLoss = (sandbox: SandboxRow, target: NonNullable<ReturnType<typeof providerTarget>>) =>
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
      }).pipe(sql.withTransaction, Effect.orDie)
    })

  const run = (job: Job) =>
    Effect.gen(function*() {
      const { sandbox_id: sandboxId } = job.payload as { sandbox_id: string }
      const sandbox = yield* getSandboxRow(sandboxId)
      const target = providerTarget(registry, sandbox)
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
        const last = yield* sql<{ cumulative_microusd: number }>`SELECT cumulative_microusd FROM usage_records
          WHERE sandbox_id = ${sandboxId} ORDER BY measured_through DESC, rowid DESC LIMIT 1`
        const delta = cost.amountMicrousd - BigInt(last[0]?.cumulative_microusd ?? 0)
        yield* sql`UPDATE sandboxes SET cost_microusd = ${Number(cost.amountMicrousd)}, cost_updated_at = ${now} WHERE id = ${sandboxId}`
        if (delta === 0n) return
        const recordId = newUuid()
        yield* sql`INSERT INTO usage_records (id, organization_id, project_id, sandbox_id, provider, billing_mode, cost_delta_microusd,
            cumulative_microusd, provenance, confidence, rate_card_version, measured_through, created_at)
          VALUES (${recordId}, ${sandbox.organization_id}, ${sandbox.project_id}, ${sandboxId}, ${target.provider.name}, ${sandbox.billing_mode},
                  ${Number(delta)}, ${Number(cost.amountMicrousd)}, ${cost.provenance}, ${cost.confidence}, ${cost.rateCardVersion},
                  ${cost.measuredThrough}, ${now})`
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
      }).pipe(sql.withTransaction, Effect.orDie)
      return again
    }).pipe(Effect.provideService(SqlClient.SqlClient, sql))

  return { run, giveUp: () => Effect.void } satisfies JobHandler
})
