/**
 * What the sandbox consumes, charted while the tab is open: the metrics route answers the present (its source
 * samples now), so the page reads it every SAMPLE_MS and keeps the last MAX_POINTS readings — CPU, memory, disk,
 * network (rates from successive byte counts).
 */
import { useEffect, useState } from "preact/hooks"
import { get } from "../api.ts"
import { Chart } from "../chart.tsx"
import type { MetricsW, SandboxW } from "../types.ts"
import { bytes, ErrorBox } from "../ui.tsx"

const SAMPLE_MS = 2000
const MAX_POINTS = 150
/** The charts span at least a minute (the first readings are not squeezed against one edge). */
const MIN_SPAN_SECONDS = 60

export const Metrics = ({ base, sandbox }: { readonly base: string; readonly sandbox: SandboxW }) => {
  const [samples, setSamples] = useState<ReadonlyArray<MetricsW>>([])
  const [error, setError] = useState<unknown>(undefined)
  const live = sandbox.state === "ready" || sandbox.state === "paused"
  useEffect(() => {
    if (!live) return
    let stopped = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const sample = () =>
      get<MetricsW>(`${base}/metrics`).then((m) => {
        setError(undefined)
        setSamples((seen) => [...seen.slice(-(MAX_POINTS - 1)), m])
      }, setError).finally(() => {
        if (!stopped) timer = setTimeout(sample, SAMPLE_MS)
      })
    void sample()
    return () => {
      stopped = true
      clearTimeout(timer)
    }
  }, [base, live])
  if (!live) return <p class="muted">Metrics are read while the sandbox is ready or paused.</p>
  const x = samples.map((m) => Date.parse(m.collected_at) / 1000)
  const rate = (pick: (m: MetricsW) => number | null) =>
    samples.map((m, i) => {
      const before = samples[i - 1]
      const now = pick(m)
      const then = before === undefined ? null : pick(before)
      if (before === undefined || now === null || then === null) return null
      const seconds = (Date.parse(m.collected_at) - Date.parse(before.collected_at)) / 1000
      return seconds > 0 ? Math.max(0, (now - then) / seconds) : null
    })
  const cpu = samples.some((m) => m.cpu_used_percent !== null) ? samples.map((m) => m.cpu_used_percent) : rate((m) => m.cpu_seconds).map((v) => (v === null ? null : v * 100))
  const last = samples[samples.length - 1]
  return (
    <div>
      <ErrorBox error={error} />
      {last !== undefined && (
        <p class="muted">Source: {last.source === "local_runtime" ? "this host's runtime" : "the provider's metrics"} · {last.process_count ?? "—"} processes · memory limit {bytes(last.memory_limit_bytes)} · disk {bytes(last.disk_limit_bytes)}</p>
      )}
      <div class="charts" data-samples={samples.length}>
        <Chart minSpan={MIN_SPAN_SECONDS} title="CPU (% of one CPU)" x={x} series={[{ label: "CPU", values: cpu, color: "#3b82f6" }]} format={(v) => `${v < 10 ? v.toFixed(1) : v.toFixed(0)}%`} />
        <Chart minSpan={MIN_SPAN_SECONDS} title="Memory" x={x} series={[{ label: "used", values: samples.map((m) => m.memory_bytes), color: "#8b5cf6" }]} format={bytes} />
        <Chart minSpan={MIN_SPAN_SECONDS} title="Disk" x={x} series={[{ label: "used", values: samples.map((m) => m.disk_bytes), color: "#f59e0b" }]} format={bytes} />
        <Chart minSpan={MIN_SPAN_SECONDS} title="Network (per second)" x={x} series={[
          { label: "received", values: rate((m) => m.network_rx_bytes), color: "#10b981" },
          { label: "sent", values: rate((m) => m.network_tx_bytes), color: "#ef4444" }
        ]} format={(v) => `${bytes(v)}/s`} />
      </div>
    </div>
  )
}
