/** `/o/{id}/usage`: spending by day (a chart, per provider), by provider and by project (tables). */
import { useState } from "preact/hooks"
import { get } from "../api.ts"
import { Chart } from "../chart.tsx"
import { useWorkspace } from "../workspace.tsx"
import type { UsageW } from "../types.ts"
import { Field, Show, useLoad } from "../ui.tsx"

const COLORS = ["#3b82f6", "#10b981", "#f59e0b", "#ef4444", "#8b5cf6", "#ec4899", "#14b8a6", "#84cc16", "#f97316", "#6366f1", "#64748b"]

export const Usage = ({ org }: { readonly org: string }) => {
  const { projects } = useWorkspace()
  const [from, setFrom] = useState("")
  const [through, setThrough] = useState("")
  const query = new URLSearchParams({ ...(from === "" ? {} : { from }), ...(through === "" ? {} : { through }) }).toString()
  const usage = useLoad(() => get<UsageW>(`/v1/organizations/${org}/usage${query === "" ? "" : `?${query}`}`), [org, query])
  const projectName = (id: string) => projects.find((p) => p.id === id)?.name ?? id
  return (
    <section>
      <h1>Usage</h1>
      <div class="filters">
        <Field label="From" type="date" value={from} onInput={setFrom} />
        <Field label="Through" type="date" value={through} onInput={setThrough} />
      </div>
      <Show load={usage} what="usage">{(u) => {
        const providers = [...new Set(u.daily.flatMap((d) => d.providers.map((p) => p.provider)))]
        return (
          <>
            <p>Total <strong>${u.summary.total_cost.current.usd}</strong> <span class="muted">({u.period.from.slice(0, 10)} – {u.period.through.slice(0, 10)}; projected month end ${u.summary.projected_month_end.usd})</span></p>
            <Chart title="Spent per day, by provider" bars={providers.length <= 1} x={u.daily.map((d) => Date.parse(`${d.date}T00:00:00Z`) / 1000)}
              series={(providers.length === 0 ? ["total"] : providers).map((name, i) => ({
                label: name,
                color: COLORS[i % COLORS.length]!,
                values: u.daily.map((d) => Number(name === "total" ? d.total_cost.microusd : d.providers.find((p) => p.provider === name)?.cost.microusd ?? 0) / 1e6)
              }))} format={(v) => `$${v.toFixed(2)}`} />
            <div class="split">
              <table class="table compact" aria-label="Usage by provider">
                <caption>By provider</caption>
                <thead><tr><th scope="col">Provider</th><th scope="col">Sandboxes</th><th scope="col">Cost</th></tr></thead>
                <tbody>{u.by_provider.map((p) => <tr key={p.provider}><td>{p.provider}</td><td class="num">{p.sandbox_count}</td><td class="num">${p.cost.usd}</td></tr>)}</tbody>
              </table>
              <table class="table compact" aria-label="Usage by project">
                <caption>By project</caption>
                <thead><tr><th scope="col">Project</th><th scope="col">Sandboxes</th><th scope="col">Cost</th></tr></thead>
                <tbody>{u.by_project.map((p) => <tr key={p.project_id}><td>{projectName(p.project_id)}</td><td class="num">{p.sandbox_count}</td><td class="num">${p.cost.usd}</td></tr>)}</tbody>
              </table>
            </div>
          </>
        )
      }}</Show>
    </section>
  )
}
