/**
 * Billing: `billing_accounts` (the balance and auto top-up settings), `purchases`, `ledger_entries` (every change
 * of a balance, written with it) and `welcome_credit_grants`. Money is integer micro-USD, read as bigint.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { newUuid, type OrganizationId, type UserId } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { IdColumn, IntBoolean, MicroUsd, rowsOf, run } from "../Rows.ts"

export type LedgerKind = "deposit" | "usage_charge" | "usage_correction" | "adjustment"

export const AccountRow = Schema.Struct({
  organization_id: IdColumn.organization,
  balance_microusd: MicroUsd,
  payment_method_brand: Schema.NullOr(Schema.String),
  payment_method_last4: Schema.NullOr(Schema.String),
  auto_topup_enabled: IntBoolean,
  auto_topup_status: Schema.Literal("disabled", "active", "paused"),
  auto_topup_threshold_microusd: MicroUsd,
  auto_topup_refill_microusd: MicroUsd,
  auto_topup_monthly_cap_microusd: MicroUsd,
  auto_topup_paused_reason: Schema.NullOr(Schema.String)
})
export type AccountRow = typeof AccountRow.Type

export const PurchaseRow = Schema.Struct({
  id: Schema.String,
  source: Schema.Literal("checkout", "auto_topup", "admin_grant", "welcome_grant"),
  status: Schema.Literal("pending", "paid", "failed", "canceled", "requires_action"),
  credit_microusd: MicroUsd,
  fee_microusd: MicroUsd,
  total_microusd: MicroUsd,
  receipt_url: Schema.NullOr(Schema.String),
  invoice_url: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  paid_at: Schema.NullOr(Schema.String)
})
export type PurchaseRow = typeof PurchaseRow.Type

export const LedgerRow = Schema.Struct({
  id: Schema.String,
  kind: Schema.Literal("deposit", "usage_charge", "usage_correction", "adjustment"),
  amount_microusd: MicroUsd,
  description: Schema.String,
  created_at: Schema.String
})
export type LedgerRow = typeof LedgerRow.Type

export interface LedgerPosting {
  readonly organizationId: OrganizationId
  readonly kind: LedgerKind
  /** Positive credits the balance, negative debits it. */
  readonly amountMicrousd: bigint
  readonly description: string
  /** With a reference, posting twice is a no-op (unique on type + id): safe to retry. */
  readonly reference?: { readonly type: string; readonly id: string } | undefined
}

export interface NewPurchase {
  readonly id: string
  readonly organizationId: OrganizationId
  readonly source: PurchaseRow["source"]
  readonly creditMicrousd: bigint
  readonly now: string
}

export class BillingRepo extends Effect.Service<BillingRepo>()("app/db/BillingRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const accounts = rowsOf("billing_accounts", AccountRow)
    const balances = rowsOf("billing_accounts", Schema.Struct({ balance_microusd: MicroUsd }))
    const purchases = rowsOf("purchases", PurchaseRow)
    const ledger = rowsOf("ledger_entries", LedgerRow)
    const totals = rowsOf("purchases", Schema.Struct({ total: Schema.NullOr(MicroUsd) }))
    const days = rowsOf("ledger_entries", Schema.Struct({ day: Schema.String, total: MicroUsd }))
    const ids = rowsOf("purchases", Schema.Struct({ id: Schema.String }))

    /** Creates the billing account row if it is missing. */
    const ensureAccount = (organizationId: OrganizationId) =>
      Effect.flatMap(nowIso, (now) =>
        run(sql`INSERT INTO billing_accounts (organization_id, updated_at) VALUES (${organizationId}, ${now})
          ON CONFLICT (organization_id) DO NOTHING`))

    return {
      ensureAccount,
      account: (organizationId: OrganizationId) => accounts.first(sql`SELECT * FROM billing_accounts WHERE organization_id = ${organizationId}`),
      balance: (organizationId: OrganizationId) =>
        Effect.map(balances.first(sql`SELECT balance_microusd FROM billing_accounts WHERE organization_id = ${organizationId}`), (row) => row?.balance_microusd),
      /** Posts one entry and moves the balance (call inside a transaction); null when the reference was posted before. */
      post: (posting: LedgerPosting) =>
        Effect.gen(function*() {
          yield* ensureAccount(posting.organizationId)
          if (posting.reference !== undefined) {
            const seen = yield* sql`SELECT 1 FROM ledger_entries WHERE reference_type = ${posting.reference.type} AND reference_id = ${posting.reference.id}`.pipe(Effect.orDie)
            if (seen.length > 0) return null
          }
          const now = yield* nowIso
          const amount = Number(posting.amountMicrousd)
          const after = yield* balances.first(sql`UPDATE billing_accounts SET balance_microusd = balance_microusd + ${amount}, updated_at = ${now}
            WHERE organization_id = ${posting.organizationId} RETURNING balance_microusd`)
          const balance = after?.balance_microusd ?? 0n
          const id = newUuid()
          yield* run(sql`INSERT INTO ledger_entries (id, organization_id, kind, amount_microusd, balance_after_microusd, description, reference_type, reference_id, created_at)
            VALUES (${id}, ${posting.organizationId}, ${posting.kind}, ${amount}, ${Number(balance)}, ${posting.description},
                    ${posting.reference?.type ?? null}, ${posting.reference?.id ?? null}, ${now})`)
          return { id, balanceMicrousd: balance }
        }),
      /** A paid purchase without a fee (grants: welcome credit, operator credit). */
      insertPaidGrant: (purchase: NewPurchase) =>
        run(sql`INSERT INTO purchases (id, organization_id, source, status, credit_microusd, fee_microusd, total_microusd, created_at, paid_at)
          VALUES (${purchase.id}, ${purchase.organizationId}, ${purchase.source}, 'paid', ${Number(purchase.creditMicrousd)}, 0, 0, ${purchase.now}, ${purchase.now})`),
      /** Records the user's welcome grant; false when the user already had it (once per user). */
      claimWelcomeGrant: (userId: UserId, organizationId: OrganizationId, now: string) =>
        Effect.map(
          sql`INSERT INTO welcome_credit_grants (user_id, organization_id, granted_at)
            VALUES (${userId}, ${organizationId}, ${now}) ON CONFLICT (user_id) DO NOTHING RETURNING user_id`.pipe(Effect.orDie),
          (rows) => rows.length > 0
        ),
      autoTopupCreditedSince: (organizationId: OrganizationId, since: string) =>
        Effect.map(totals.first(sql`SELECT SUM(credit_microusd) AS total FROM purchases
          WHERE organization_id = ${organizationId} AND source = 'auto_topup' AND status = 'paid' AND paid_at >= ${since}`), (row) => row?.total ?? 0n),
      recentPurchases: (organizationId: OrganizationId, limit: number) =>
        purchases.all(sql`SELECT * FROM purchases WHERE organization_id = ${organizationId} ORDER BY created_at DESC, id DESC LIMIT ${limit}`),
      recentLedger: (organizationId: OrganizationId, limit: number) =>
        ledger.all(sql`SELECT id, kind, amount_microusd, description, created_at FROM ledger_entries WHERE organization_id = ${organizationId}
          ORDER BY created_at DESC, id DESC LIMIT ${limit}`),
      /** Usage charges per UTC day (YYYY-MM-DD) from `fromDay` on, as positive amounts. */
      usageChargesByDay: (organizationId: OrganizationId, fromDay: string) =>
        days.all(sql`SELECT substr(created_at, 1, 10) AS day, SUM(-amount_microusd) AS total
          FROM ledger_entries WHERE organization_id = ${organizationId} AND kind = 'usage_charge' AND created_at >= ${fromDay}
          GROUP BY day`),
      firstPendingPurchase: (organizationId: OrganizationId) =>
        Effect.map(ids.first(sql`SELECT id FROM purchases WHERE organization_id = ${organizationId} AND status IN ('pending', 'requires_action') LIMIT 1`), (row) => row?.id),
      setAutoTopup: (organizationId: OrganizationId, settings: { readonly enabled: boolean; readonly thresholdMicrousd: bigint; readonly refillMicrousd: bigint; readonly monthlyCapMicrousd: bigint }) =>
        Effect.flatMap(nowIso, (now) =>
          run(sql`UPDATE billing_accounts SET auto_topup_enabled = ${settings.enabled ? 1 : 0},
            auto_topup_status = ${settings.enabled ? "active" : "disabled"}, auto_topup_paused_reason = NULL,
            auto_topup_threshold_microusd = ${Number(settings.thresholdMicrousd)}, auto_topup_refill_microusd = ${Number(settings.refillMicrousd)},
            auto_topup_monthly_cap_microusd = ${Number(settings.monthlyCapMicrousd)}, updated_at = ${now}
            WHERE organization_id = ${organizationId}`))
    }
  })
}) {}
