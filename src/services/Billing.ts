/**
 * An organization's billing as its members see it: balance, auto top-up, purchases, ledger and the last week's
 * charges; purchase quotes; auto top-up settings (managers). Payments themselves are not taken by this gateway.
 */
import { Effect } from "effect"
import { BillingRepo } from "../db/repos/Billing.ts"
import { conflict, validationError } from "../domain/Errors.ts"
import { isPurchaseAmount, microToUsd, purchaseFee, usdToMicro } from "../domain/Money.ts"
import { ANY_ROLE, MANAGERS } from "../domain/Principals.ts"
import { nowIso } from "../domain/Time.ts"
import { requireOrgRole } from "./Access.ts"
import { computeUsage } from "./Usage.ts"
import type { OrganizationId } from "../domain/Ids.ts"

const DAY_MS = 86_400_000

const billingOf = (organizationId: OrganizationId, canManage: boolean) =>
  Effect.gen(function*() {
    const now = yield* nowIso
    yield* BillingRepo.ensureAccount(organizationId)
    const account = (yield* BillingRepo.account(organizationId))!
    const credited = yield* BillingRepo.autoTopupCreditedSince(organizationId, `${now.slice(0, 7)}-01T00:00:00.000Z`)
    const purchases = yield* BillingRepo.recentPurchases(organizationId, 20)
    const ledger = yield* BillingRepo.recentLedger(organizationId, 100)
    // The last 7 UTC days of usage charges, oldest first, today last, zero-filled.
    const today = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), new Date(now).getUTCDate())
    const days = Array.from({ length: 7 }, (_, i) => new Date(today - (6 - i) * DAY_MS).toISOString().slice(0, 10))
    const charges = yield* BillingRepo.usageChargesByDay(organizationId, days[0]!)
    const byDay = new Map(charges.map((c) => [c.day, c.total]))
    return {
      organization_id: organizationId,
      balance_microusd: String(account.balance_microusd),
      balance_usd: microToUsd(account.balance_microusd),
      can_manage: canManage,
      payment_method: account.payment_method_brand !== null && account.payment_method_last4 !== null
        ? { brand: account.payment_method_brand, last4: account.payment_method_last4 }
        : null,
      auto_topup: {
        enabled: account.auto_topup_enabled,
        status: account.auto_topup_status,
        threshold_usd: microToUsd(account.auto_topup_threshold_microusd),
        refill_usd: microToUsd(account.auto_topup_refill_microusd),
        monthly_cap_usd: microToUsd(account.auto_topup_monthly_cap_microusd),
        month_credited_usd: microToUsd(credited),
        paused_reason: account.auto_topup_paused_reason
      },
      purchases: purchases.map((p) => ({
        id: p.id,
        source: p.source,
        status: p.status,
        credit_usd: microToUsd(p.credit_microusd),
        fee_usd: microToUsd(p.fee_microusd),
        total_usd: microToUsd(p.total_microusd),
        receipt_url: p.receipt_url,
        invoice_url: p.invoice_url,
        created_at: p.created_at,
        paid_at: p.paid_at
      })),
      ledger: ledger.map((l) => ({
        id: l.id,
        kind: l.kind,
        amount_microusd: String(l.amount_microusd),
        amount_usd: microToUsd(l.amount_microusd),
        description: l.description,
        created_at: l.created_at
      })),
      weekly_activity: days.map((date) => ({ date, amount_microusd: String(byDay.get(date) ?? 0n) }))
    }
  })

/** Any member reads it; `can_manage` says whether they may change it. */
export const billingFor = (organizationId: OrganizationId) =>
  Effect.gen(function*() {
    const access = yield* requireOrgRole(organizationId, ANY_ROLE)
    return yield* billingOf(organizationId, MANAGERS.includes(access.role))
  })

/** What a purchase of `amountUsd` costs: credit, fee and total. */
export const purchaseQuote = (organizationId: OrganizationId, amountUsd: string) =>
  Effect.gen(function*() {
    yield* requireOrgRole(organizationId)
    const credit = usdToMicro(amountUsd)
    if (!isPurchaseAmount(credit)) {
      return yield* validationError("A purchase is $5.00 to $10,000.00", [{ path: "amount_usd", message: "must be between 5.00 and 10000.00" }])
    }
    const fee = purchaseFee(credit)
    return {
      amount_usd: microToUsd(credit),
      credit_microusd: credit.toString(),
      fee_microusd: fee.toString(),
      total_microusd: (credit + fee).toString(),
      credit_usd: microToUsd(credit),
      fee_usd: microToUsd(fee),
      total_usd: microToUsd(credit + fee),
      fee_rate: "0.055" as const,
      min_fee_usd: "0.80" as const,
      pricing_version: "purchase_fee.v1" as const
    }
  }).pipe(Effect.withSpan("Billing.purchaseQuote", { attributes: { "organization.id": organizationId } }))

export const setAutoTopup = (
  organizationId: OrganizationId,
  input: { readonly enabled: boolean; readonly threshold_usd: string; readonly refill_usd: string; readonly monthly_cap_usd: string }
) =>
  Effect.gen(function*() {
    yield* requireOrgRole(organizationId, MANAGERS)
    const threshold = usdToMicro(input.threshold_usd)
    const refill = usdToMicro(input.refill_usd)
    const cap = usdToMicro(input.monthly_cap_usd)
    const issues: Array<{ path: string; message: string }> = []
    if (threshold <= 0n) issues.push({ path: "threshold_usd", message: "must be greater than 0" })
    if (!isPurchaseAmount(refill)) issues.push({ path: "refill_usd", message: "must be a purchase amount: 5.00 to 10000.00" })
    if (cap < refill) issues.push({ path: "monthly_cap_usd", message: "must be at least refill_usd" })
    if (issues.length > 0) return yield* validationError("Invalid auto top-up settings", issues)
    const account = yield* BillingRepo.account(organizationId)
    if (input.enabled && (account?.payment_method_brand ?? null) === null) {
      return yield* conflict("conflict", "Auto top-up needs a saved payment method; this gateway has no payment processor configured")
    }
    yield* BillingRepo.setAutoTopup(organizationId, { enabled: input.enabled, thresholdMicrousd: threshold, refillMicrousd: refill, monthlyCapMicrousd: cap })
    return yield* billingOf(organizationId, true)
  }).pipe(Effect.withSpan("Billing.setAutoTopup"))

/** Usage of the organization's sandboxes over a period (any member; services/Usage.ts). */
export const usageFor = (organizationId: OrganizationId, params: Parameters<typeof computeUsage>[1]) =>
  Effect.zipRight(requireOrgRole(organizationId), computeUsage(organizationId, params))
