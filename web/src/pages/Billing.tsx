/** `/o/{id}/billing`: the balance, the weekly activity (a chart), the ledger, purchases, and the auto top-up. */
import { useEffect, useState } from "preact/hooks"
import { get, put } from "../api.ts"
import { Chart } from "../chart.tsx"
import type { BillingW } from "../types.ts"
import { Badge, Check, Field, Form, Show, useLoad, When } from "../ui.tsx"

const usd = (micro: string) => `$${(Number(micro) / 1e6).toFixed(2)}`

export const Billing = ({ org }: { readonly org: string }) => {
  const billing = useLoad(() => get<BillingW>(`/v1/organizations/${org}/billing`), [org])
  return (
    <section>
      <h1>Billing</h1>
      <Show load={billing} what="billing">{(b) => (
        <>
          <p class="balance">Balance <strong>${b.balance_usd}</strong>{b.payment_method !== null && <span class="muted"> · {b.payment_method.brand} •••• {b.payment_method.last4}</span>}</p>
          <Chart title="Weekly activity (spent per day)" bars x={b.weekly_activity.map((d) => Date.parse(`${d.date}T00:00:00Z`) / 1000)}
            series={[{ label: "spent", values: b.weekly_activity.map((d) => Number(d.amount_microusd) / 1e6), color: "#3b82f6" }]} format={(v) => `$${v.toFixed(2)}`} />
          <AutoTopup key={b.organization_id} billing={b} onSaved={(saved) => billing.update(() => saved)} />
          <h2>Ledger</h2>
          {b.ledger.length === 0 ? <p class="muted">No entries.</p> : (
            <table class="table compact" aria-label="Ledger">
              <thead><tr><th scope="col">When</th><th scope="col">Kind</th><th scope="col">Amount</th><th scope="col">Description</th></tr></thead>
              <tbody>{b.ledger.map((e) => (
                <tr key={e.id}><td><When at={e.created_at} /></td><td>{e.kind.replaceAll("_", " ")}</td><td class="num">{usd(e.amount_microusd)}</td><td>{e.description}</td></tr>
              ))}</tbody>
            </table>
          )}
          <h2>Purchases</h2>
          {b.purchases.length === 0 ? <p class="muted">None.</p> : (
            <table class="table compact" aria-label="Purchases">
              <thead><tr><th scope="col">When</th><th scope="col">Source</th><th scope="col">Status</th><th scope="col">Credit</th><th scope="col">Total</th></tr></thead>
              <tbody>{b.purchases.map((p) => (
                <tr key={p.id}><td><When at={p.created_at} /></td><td>{p.source.replaceAll("_", " ")}</td><td><Badge state={p.status} /></td><td class="num">${p.credit_usd}</td><td class="num">${p.total_usd}</td></tr>
              ))}</tbody>
            </table>
          )}
        </>
      )}</Show>
    </section>
  )
}

const AutoTopup = ({ billing, onSaved }: { readonly billing: BillingW; readonly onSaved: (b: BillingW) => void }) => {
  const a = billing.auto_topup
  const [enabled, setEnabled] = useState(a.enabled)
  const [threshold, setThreshold] = useState(a.threshold_usd)
  const [refill, setRefill] = useState(a.refill_usd)
  const [cap, setCap] = useState(a.monthly_cap_usd)
  useEffect(() => setEnabled(a.enabled), [a.enabled])
  return (
    <>
      <h2>Auto top-up <Badge state={a.status} /></h2>
      {a.paused_reason !== null && <p class="muted">Paused: {a.paused_reason}</p>}
      <p class="muted">This month: ${a.month_credited_usd} credited.{billing.can_manage ? "" : " Only owners and admins change it."}</p>
      <Form submit="Save auto top-up" label="Auto top-up" class="form inline" onSubmit={async () => onSaved(await put<BillingW>(`/v1/organizations/${billing.organization_id}/billing/auto-topup`, { enabled, threshold_usd: threshold, refill_usd: refill, monthly_cap_usd: cap }))}>
        <Check label="Enabled" checked={enabled} onChange={setEnabled} />
        <Field label="When the balance falls below ($)" value={threshold} onInput={setThreshold} required pattern="\d+(\.\d{1,2})?" />
        <Field label="Add ($)" value={refill} onInput={setRefill} required pattern="\d+(\.\d{1,2})?" />
        <Field label="At most per month ($)" value={cap} onInput={setCap} required pattern="\d+(\.\d{1,2})?" />
      </Form>
    </>
  )
}
