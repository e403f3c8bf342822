/**
 * Organization usage (reference §7 "OrganizationUsage"), computed from `usage_records` (one row per cost
 * snapshot delta). Default window: the last 30 UTC days; at most 366 days; the comparison window is the
 * equal-length window just before. Zero usage is a valid, fully shaped answer.
 */
import { Effect } from "effect"
import { UsageRepo, type UsageRow } from "../db/repos/Usage.ts"
import { validationError } from "../domain/Errors.ts"
import { amount } from "../domain/Money.ts"
import { nowIso } from "../domain/Time.ts"
import type { OrganizationId, ProjectId, SandboxId } from "../domain/Ids.ts"

const DAY_MS = 86_400_000
const MAX_DAYS = 366

export interface UsageQuery {
  readonly from?: string | undefined
  readonly through?: string | undefined
  readonly project_id?: ProjectId | undefined
  readonly provider?: string | undefined
  readonly billing_mode: "all" | "managed" | "byok" | "emulated"
  readonly sandbox_id?: SandboxId | undefined
  readonly limit: number
}

const startOfUtcDay = (ms: number) => ms - (ms % DAY_MS)
const sum = (rows: ReadonlyArray<UsageRow>) => rows.reduce((t, r) => t + r.cost_delta_microusd, 0n)
const changePercent = (current: bigint, previous: bigint) =>
  previous === 0n ? null : Math.round((Number(current - previous) / Number(previous)) * 10_000) / 100
const compare = (current: ReadonlyArray<UsageRow>, previous: ReadonlyArray<UsageRow>) => {
  const c = sum(current)
  const p = sum(previous)
  return { current: amount(c), previous: amount(p), change_percent: changePercent(c, p) }
}
const groupBy = <K extends string>(rows: ReadonlyArray<UsageRow>, key: (r: UsageRow) => K) => {
  const groups = new Map<K, Array<UsageRow>>()
  for (const r of rows) groups.set(key(r), [...(groups.get(key(r)) ?? []), r])
  return groups
}

export const computeUsage = (organizationId: OrganizationId, query: UsageQuery) =>
  Effect.gen(function*() {
    const nowText = yield* nowIso
    const now = Date.parse(nowText)
    const through = query.through !== undefined ? Date.parse(query.through) : now
    const from = query.from !== undefined ? Date.parse(query.from) : startOfUtcDay(through) - 29 * DAY_MS
    if (from > through) return yield* validationError("Invalid window", [{ path: "from", message: "must not be after through" }])
    if (through - from > MAX_DAYS * DAY_MS) return yield* validationError("Invalid window", [{ path: "from", message: `the window is at most ${MAX_DAYS} days` }])
    const span = through - from
    const comparisonFrom = from - span
    const iso = (ms: number) => new Date(ms).toISOString()
    const rows = yield* UsageRepo.inWindow(organizationId, {
      after: iso(comparisonFrom),
      through: iso(through),
      projectId: query.project_id,
      provider: query.provider,
      sandboxId: query.sandbox_id,
      billingMode: query.billing_mode
    })
    const current = rows.filter((r) => Date.parse(r.measured_through) > from)
    const previous = rows.filter((r) => Date.parse(r.measured_through) <= from)
    const mode = (m: string) => (r: UsageRow) => r.billing_mode === m
    const total = sum(current)

    // Linear month-end projection from month-to-date cost.
    const monthStart = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), 1)
    const monthEnd = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth() + 1, 1)
    const monthToDate = sum(rows.filter((r) => Date.parse(r.measured_through) >= monthStart))
    const elapsed = Math.max(1, now - monthStart)
    const projected = BigInt(Math.round(Number(monthToDate) * ((monthEnd - monthStart) / elapsed)))

    const provenances = groupBy(current, (r) => `${r.provenance}|${r.confidence}` as string)
    const days: Array<string> = []
    for (let d = startOfUtcDay(from); d <= through; d += DAY_MS) days.push(iso(d).slice(0, 10))
    const byDay = groupBy(current, (r) => r.measured_through.slice(0, 10))
    const bySandbox = groupBy(current, (r) => r.sandbox_id)

    return {
      period: { from: iso(from), through: iso(through), comparison_from: iso(comparisonFrom), comparison_through: iso(from), timezone: "UTC" as const },
      summary: {
        total_cost: compare(current, previous),
        managed_cost: compare(current.filter(mode("managed")), previous.filter(mode("managed"))),
        byok_cost: compare(current.filter(mode("byok")), previous.filter(mode("byok"))),
        emulated_cost: compare(current.filter(mode("emulated")), previous.filter(mode("emulated"))),
        projected_month_end: amount(projected)
      },
      coverage: {
        available_percent: 100,
        items: [...provenances.entries()].map(([key, group]) => {
          const [provenance, confidence] = key.split("|") as [string, string]
          const cost = sum(group)
          return { provenance, confidence, cost: amount(cost), percent: total === 0n ? 0 : Math.round((Number(cost) / Number(total)) * 10_000) / 100 }
        }),
        unavailable_sandbox_count: 0
      },
      daily: days.map((date) => {
        const group = byDay.get(date) ?? []
        return {
          date,
          total_cost: amount(sum(group)),
          managed_cost: amount(sum(group.filter(mode("managed")))),
          byok_cost: amount(sum(group.filter(mode("byok")))),
          emulated_cost: amount(sum(group.filter(mode("emulated")))),
          providers: [...groupBy(group, (r) => r.provider).entries()].map(([provider, g]) => ({ provider, cost: amount(sum(g)) })),
          projects: [...groupBy(group, (r) => r.project_id).entries()].map(([project_id, g]) => ({ project_id, cost: amount(sum(g)) }))
        }
      }),
      by_provider: [...groupBy(current, (r) => r.provider).entries()].map(([provider, g]) => ({
        provider,
        cost: amount(sum(g)),
        sandbox_count: new Set(g.map((r) => r.sandbox_id)).size
      })),
      by_project: [...groupBy(current, (r) => r.project_id).entries()].map(([project_id, g]) => ({
        project_id,
        cost: amount(sum(g)),
        sandbox_count: new Set(g.map((r) => r.sandbox_id)).size
      })),
      top_sandboxes: [...bySandbox.entries()]
        .map(([sandbox_id, g]) => ({ sandbox_id, project_id: g[0]!.project_id, provider: g[0]!.provider, billing_mode: g[0]!.billing_mode, total: sum(g) }))
        .sort((a, b) => (a.total < b.total ? 1 : a.total > b.total ? -1 : 0))
        .slice(0, query.limit)
        .map(({ total: t, ...rest }) => ({ ...rest, cost: amount(t) })),
      activity: current.slice(-query.limit).reverse().map((r) => ({
        sandbox_id: r.sandbox_id,
        project_id: r.project_id,
        provider: r.provider,
        billing_mode: r.billing_mode,
        cost_delta: amount(r.cost_delta_microusd),
        cumulative_cost: amount(r.cumulative_microusd),
        provenance: r.provenance,
        confidence: r.confidence,
        rate_card_version: r.rate_card_version,
        measured_through: r.measured_through
      })),
      generated_at: nowText
    }
  })
