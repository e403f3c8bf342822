/**
 * The credit ledger: every change of an organization's balance is one ledger entry, written in the same
 * transaction as the balance update (callers run these inside their transaction). Money is integer micro-USD.
 */
import { Effect } from "effect"
import { BillingRepo, type LedgerKind, type LedgerPosting } from "../db/repos/Billing.ts"
import { newUuid, type OrganizationId, type UserId } from "../domain/Ids.ts"
import { nowIso } from "../domain/Time.ts"
import { appendEvent } from "./Events.ts"

export type { LedgerKind, LedgerPosting }

export const WELCOME_CREDIT_MICROUSD = 500_000_000n

/** Posts one entry and moves the balance; returns the new balance, or `null` if it was a duplicate. */
export const postLedgerEntry = (posting: LedgerPosting) => BillingRepo.post(posting)

/**
 * The $500 welcome credit, once per user (enforced by the welcome_credit_grants primary key), into the given
 * organization, recorded as a paid `welcome_grant` purchase with no fee and a `deposit` ledger entry.
 * Returns false when the user already had it.
 */
export const grantWelcomeCredit = (userId: UserId, organizationId: OrganizationId) =>
  Effect.gen(function*() {
    const now = yield* nowIso
    if (!(yield* BillingRepo.claimWelcomeGrant(userId, organizationId, now))) return false
    const purchaseId = newUuid()
    yield* BillingRepo.ensureAccount(organizationId)
    yield* BillingRepo.insertPaidGrant({ id: purchaseId, organizationId, source: "welcome_grant", creditMicrousd: WELCOME_CREDIT_MICROUSD, now })
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
  })
