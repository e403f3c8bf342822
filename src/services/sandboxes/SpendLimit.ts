/**
 * Spend limit (reference §7 "Zero balance"): when a usage charge leaves an organization's balance at or below
 * zero, and auto top-up is not active (this gateway has no payment processor, so it never is), every sandbox
 * billed against that balance that is still active is destroyed, each with a `sandbox_destroy` operation and
 * `state_reason: "spend_limit"`, and `billing.spend_limit_reached` `{balance_microusd, terminated_count}` is
 * recorded. Billed against the balance: `managed` sandboxes, and here also `emulated` ones, whose estimated cost
 * is charged the same way (credits are the operator's quota). BYOK sandboxes are untouched. A job per
 * organization, armed by cost sync; it looks at the balance again when it runs (credit may have come meanwhile).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { appendEvent } from "../Events.ts"
import { enqueueJob, type Job, type JobHandler } from "../OperationRunner.ts"
import { startSystemAction } from "./LifecycleJobs.ts"
import { LIVE_STATES, type SandboxRow } from "./SandboxRows.ts"

export const SPEND_LIMIT_JOB = "billing.spend_limit.enforce"

/** States a spend limit ends: the live ones, but for those already on their way out. */
const ACTIVE = LIVE_STATES.filter((state) => state !== "stopping" && state !== "cleanup_pending")

/** Arms the enforcement when the balance is at or below zero (call inside the transaction that charged it). */
export const armSpendLimitIfExhausted = (organizationId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ balance_microusd: number }>`SELECT balance_microusd FROM billing_accounts WHERE organization_id = ${organizationId}`
    if (rows[0] === undefined || rows[0].balance_microusd > 0) return
    yield* enqueueJob({ type: SPEND_LIMIT_JOB, dedupeKey: `billing:spend_limit:${organizationId}`, payload: { organization_id: organizationId }, replace: true })
  }).pipe(Effect.orDie)

export const makeSpendLimitHandler = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  const run = (job: Job) =>
    Effect.gen(function*() {
      const { organization_id: organizationId } = job.payload as { organization_id: string }
      const balance = (yield* sql<{ balance_microusd: number }>`SELECT balance_microusd FROM billing_accounts WHERE organization_id = ${organizationId}`)[0]
      if (balance === undefined || balance.balance_microusd > 0) return
      const sandboxes = yield* sql<SandboxRow>`SELECT * FROM sandboxes WHERE organization_id = ${organizationId}
        AND billing_mode IN ('managed', 'emulated') AND state IN ${sql.in(ACTIVE)}`
      for (const sandbox of sandboxes) yield* startSystemAction(sandbox, "destroy", "spend_limit")
      yield* appendEvent({
        type: "billing.spend_limit_reached",
        organizationId,
        data: { balance_microusd: String(balance.balance_microusd), terminated_count: sandboxes.length }
      })
      yield* Effect.logWarning("spend limit reached: destroying the organization's billed sandboxes", { organization: organizationId, count: sandboxes.length })
    }).pipe(sql.withTransaction, Effect.orDie, Effect.provideService(SqlClient.SqlClient, sql))

  return { run, giveUp: () => Effect.void } satisfies JobHandler
})
