/**
 * Spend limit (reference §7 "Zero balance"): when a usage charge leaves an organization's balance at or below
 * zero, and auto top-up is not active (this gateway has no payment processor, so it never is), every sandbox
 * billed against that balance that is still active is destroyed, each with a `sandbox_destroy` operation and
 * `state_reason: "spend_limit"`, and `billing.spend_limit_reached` `{balance_microusd, terminated_count}` is
 * recorded. Billed against the balance: `managed` sandboxes, and here also `emulated` ones, whose estimated cost
 * is charged the same way (credits are the operator's quota). BYOK sandboxes are untouched. A job per
 * organization, armed by cost sync; it looks at the balance again when it runs (credit may have come meanwhile).
 */
import { Effect } from "effect"
import { repositories } from "../../db/Database.ts"
import { Db } from "../../db/Db.ts"
import { BillingRepo } from "../../db/repos/Billing.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { appendEvent } from "../Events.ts"
import { enqueueJob, type JobHandler } from "../JobRegistry.ts"
import { SpendLimitJob } from "./JobTypes.ts"
import { startSystemAction } from "./LifecycleJobs.ts"
import { LIVE_STATES } from "./SandboxRows.ts"
import type { OrganizationId } from "../../domain/Ids.ts"

/** States a spend limit ends: the live ones, but for those already on their way out. */
const ACTIVE = LIVE_STATES.filter((state) => state !== "stopping" && state !== "cleanup_pending")

/** Arms the enforcement when the balance is at or below zero (call inside the transaction that charged it). */
export const armSpendLimitIfExhausted = (organizationId: OrganizationId) =>
  Effect.gen(function*() {
    const balance = yield* BillingRepo.balance(organizationId)
    if (balance === undefined || balance > 0n) return
    yield* enqueueJob(SpendLimitJob, { dedupeKey: `billing:spend_limit:${organizationId}`, payload: { organization_id: organizationId }, replace: true })
  })

export const makeSpendLimitHandler = Effect.gen(function*() {
  const db = yield* Db
  const context = yield* repositories

  const run = (organizationId: OrganizationId) =>
    Effect.gen(function*() {
      const balance = yield* BillingRepo.balance(organizationId)
      if (balance === undefined || balance > 0n) return
      const sandboxes = yield* SandboxesRepo.billedIn(organizationId, ACTIVE)
      for (const sandbox of sandboxes) yield* startSystemAction(sandbox, "destroy", "spend_limit")
      yield* appendEvent({
        type: "billing.spend_limit_reached",
        organizationId,
        data: { balance_microusd: String(balance), terminated_count: sandboxes.length }
      })
      yield* Effect.logWarning("spend limit reached: destroying the organization's billed sandboxes", { organization: organizationId, count: sandboxes.length })
    }).pipe(db.transaction, Effect.provide(context))

  return { run: (job) => run(job.payload.organization_id), giveUp: () => Effect.void } satisfies JobHandler<{ readonly organization_id: OrganizationId }>
})
