/** Billing and usage (spec §2.12, §4.8; reference §7). */
import { Schema } from "effect"
import { strict, Timestamp } from "./Accounts.ts"
import { OrganizationId, ProjectId, SandboxId, Uuid } from "./Ids.ts"

export const UsdAmount = Schema.String.pipe(
  Schema.pattern(/^\d+(?:\.\d{1,2})?$/, { message: () => "must be dollars with at most two decimals, e.g. 25 or 12.50" }),
  Schema.maxLength(20)
).annotations({ identifier: "UsdAmount" })

export const Purchase = Schema.Struct({
  id: Uuid,
  source: Schema.Literal("checkout", "auto_topup", "admin_grant", "welcome_grant"),
  status: Schema.Literal("pending", "paid", "failed", "canceled", "requires_action"),
  credit_usd: Schema.String,
  fee_usd: Schema.String,
  total_usd: Schema.String,
  receipt_url: Schema.NullOr(Schema.String),
  invoice_url: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  paid_at: Schema.NullOr(Timestamp)
}).annotations({ identifier: "Purchase" })

export const LedgerEntry = Schema.Struct({
  id: Uuid,
  kind: Schema.Literal("deposit", "usage_charge", "usage_correction", "adjustment"),
  amount_microusd: Schema.String,
  amount_usd: Schema.String,
  description: Schema.String,
  created_at: Timestamp
}).annotations({ identifier: "LedgerEntry" })

export const AutoTopup = Schema.Struct({
  enabled: Schema.Boolean,
  status: Schema.Literal("disabled", "active", "paused"),
  threshold_usd: Schema.String,
  refill_usd: Schema.String,
  monthly_cap_usd: Schema.String,
  month_credited_usd: Schema.String,
  paused_reason: Schema.NullOr(Schema.String)
}).annotations({ identifier: "AutoTopup" })

export const OrganizationBilling = Schema.Struct({
  organization_id: OrganizationId,
  balance_microusd: Schema.String,
  balance_usd: Schema.String,
  can_manage: Schema.Boolean,
  payment_method: Schema.NullOr(Schema.Struct({ brand: Schema.String, last4: Schema.String })),
  auto_topup: AutoTopup,
  purchases: Schema.Array(Purchase),
  ledger: Schema.Array(LedgerEntry),
  weekly_activity: Schema.Array(Schema.Struct({ date: Schema.String, amount_microusd: Schema.String }))
}).annotations({ identifier: "OrganizationBilling" })

export const AutoTopupSettings = Schema.Struct({
  enabled: Schema.Boolean,
  threshold_usd: UsdAmount,
  refill_usd: UsdAmount,
  monthly_cap_usd: UsdAmount
}).annotations({ identifier: "AutoTopupSettings", ...strict })

export const QuoteParams = Schema.Struct({ amount_usd: UsdAmount })
export const BillingQuote = Schema.Struct({
  amount_usd: Schema.String,
  credit_microusd: Schema.String,
  fee_microusd: Schema.String,
  total_microusd: Schema.String,
  credit_usd: Schema.String,
  fee_usd: Schema.String,
  total_usd: Schema.String,
  fee_rate: Schema.Literal("0.055"),
  min_fee_usd: Schema.Literal("0.80"),
  pricing_version: Schema.Literal("purchase_fee.v1")
}).annotations({ identifier: "BillingQuote" })

export const Amount = Schema.Struct({ microusd: Schema.String, usd: Schema.String }).annotations({ identifier: "Amount" })
const Comparison = Schema.Struct({ current: Amount, previous: Amount, change_percent: Schema.NullOr(Schema.Number) })

export const BillingModeFilter = Schema.Literal("all", "managed", "byok", "emulated")
export const IsoDate = Schema.String.pipe(
  Schema.filter((s) => /^\d{4}-\d{2}-\d{2}(T[\d:.]+Z?)?$/.test(s) && !Number.isNaN(Date.parse(s)), { message: () => "must be an ISO 8601 date or date-time" })
)

export const UsageParams = Schema.Struct({
  from: Schema.optional(IsoDate),
  through: Schema.optional(IsoDate),
  project_id: Schema.optional(ProjectId),
  provider: Schema.optional(Schema.String.pipe(Schema.maxLength(40))),
  billing_mode: Schema.optionalWith(BillingModeFilter, { default: () => "all" as const }),
  sandbox_id: Schema.optional(SandboxId),
  limit: Schema.optionalWith(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100)), { default: () => 100 })
})

export const OrganizationUsage = Schema.Struct({
  period: Schema.Struct({ from: Timestamp, through: Timestamp, comparison_from: Timestamp, comparison_through: Timestamp, timezone: Schema.Literal("UTC") }),
  summary: Schema.Struct({ total_cost: Comparison, managed_cost: Comparison, byok_cost: Comparison, emulated_cost: Comparison, projected_month_end: Amount }),
  coverage: Schema.Struct({
    available_percent: Schema.Number,
    items: Schema.Array(Schema.Struct({ provenance: Schema.String, confidence: Schema.String, cost: Amount, percent: Schema.Number })),
    unavailable_sandbox_count: Schema.Number
  }),
  daily: Schema.Array(Schema.Struct({
    date: Schema.String,
    total_cost: Amount,
    managed_cost: Amount,
    byok_cost: Amount,
    emulated_cost: Amount,
    providers: Schema.Array(Schema.Struct({ provider: Schema.String, cost: Amount })),
    projects: Schema.Array(Schema.Struct({ project_id: Schema.String, cost: Amount }))
  })),
  by_provider: Schema.Array(Schema.Struct({ provider: Schema.String, cost: Amount, sandbox_count: Schema.Number })),
  by_project: Schema.Array(Schema.Struct({ project_id: Schema.String, cost: Amount, sandbox_count: Schema.Number })),
  top_sandboxes: Schema.Array(Schema.Struct({ sandbox_id: Schema.String, project_id: Schema.String, provider: Schema.String, billing_mode: Schema.String, cost: Amount })),
  activity: Schema.Array(Schema.Struct({
    sandbox_id: Schema.String,
    project_id: Schema.String,
    provider: Schema.String,
    billing_mode: Schema.String,
    cost_delta: Amount,
    cumulative_cost: Amount,
    provenance: Schema.String,
    confidence: Schema.String,
    rate_card_version: Schema.NullOr(Schema.String),
    measured_through: Timestamp
  })),
  generated_at: Timestamp
}).annotations({ identifier: "OrganizationUsage" })
