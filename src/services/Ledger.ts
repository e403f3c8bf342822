/**
 * The credit ledger: every change of an organization's balance is one ledger entry, written in the same
 * transaction as the balance update (callers run these inside their transaction). Money is integer micro-USD.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { newUuid } from "../domain/Ids.ts"
import { nowIso } from "../domain/Time.ts"
import { ensureBillingAccount } from "../db/repos/Billing.ts"
import { appendEvent } from "./Events.ts"

export const WELCOME_CREDIT_MICROUSD = 500_000_000n

export type LedgerKind = "deposit" | "usage_charge" | "usage_correction" | "adjustment"


export interface LedgerPosting {
  readonly organizationId: string
  readonly kind: LedgerKind
  /** Positive credits the balance, negative debits it. */
  readonly amountMicrousd: bigint
  readonly description: string
  /** With a reference, posting twice is a no-op (unique on type + id): safe to retry. */
  readonly reference?: { readonly type: string; readonly id: string } | undefined
}

/** Posts one entry and moves the balance; returns the new balance, or None-equivalent `null` if it was a duplicate. */
export const postLedgerEntry = (posting: LedgerPosting) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* ensureBillingAccount(posting.organizationId)
    if (posting.reference !== undefined) {
      const seen = yield* sql`SELECT 1 FROM ledger_entries WHERE reference_type = ${posting.reference.type} AND reference_id = ${posting.reference.id}`
      if (seen.length > 0) return null
    }
    const now = yield* nowIso
    const amount = Number(posting.amountMicrousd)
    const rows = yield* sql<{ balance_microusd: number }>`
      UPDATE billing_accounts SET balance_microusd = balance_microusd + ${amount}, updated_at = ${now}
      WHERE organization_id = ${posting.organizationId} RETURNING balance_microusd`
    const balance = BigInt(rows[0]?.balance_microusd ?? 0)
    const id = newUuid()
    yield* sql`INSERT INTO ledger_entries (id, organization_id, kind, amount_microusd, balance_after_microusd, description, reference_type, reference_id, created_at)
      VALUES (${id}, ${posting.organizationId}, ${posting.kind}, ${amount}, ${Number(balance)}, ${posting.description},
              ${posting.reference?.type ?? null}, ${posting.reference?.id ?? null}, ${now})`
    return { id, balanceMicrousd: balance }
  }).pipe(Effect.orDie)

/**
 * The $500 welcome credit, once per user (enforced by the welcome_credit_grants primary key), into the given
 * organization, recorded as a paid `welcome_grant` purchase with no fee and a `deposit` ledger entry.
 * Returns false when the user already had it.
 */
export const grantWelcomeCredit = (userId: string, organizationId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    const inserted = yield* sql`INSERT INTO welcome_credit_grants (user_id, organization_id, granted_at)
      VALUES (${userId}, ${organizationId}, ${now}) ON CONFLICT (user_id) DO NOTHING RETURNING user_id`
    if (inserted.length === 0) return false
    const purchaseId = newUuid()
    const amount = Number(WELCOME_CREDIT_MICROUSD)
    yield* ensureBillingAccount(organizationId)
    yield* sql`INSERT INTO purchases (id, organization_id, source, status, credit_microusd, fee_microusd, total_microusd, created_at, paid_at)
      VALUES (${purchaseId}, ${organizationId}, 'welcome_grant', 'paid', ${amount}, 0, 0, ${now}, ${now})`
    yield* postLedgerEntry({
      organizationId,
      kind: "deposit",
      amountMicrousd: WELCOME_CREDIT_MICROUSD,
      description: "Welcome credit",
      reference: { type: "purchase", id: purchaseId }
    })
    yield* appendEvent({
      type: "billing.credits_granted",
      organizationId,
      data: { purchase_id: purchaseId, amount_microusd: WELCOME_CREDIT_MICROUSD.toString(), source: "welcome_grant" }
    })
    return true
  }).pipe(Effect.orDie)
