/**
 * The operators' metrics (`GET /metrics`, Prometheus text format 0.0.4): counters this process keeps in memory
 * (requests by route and status with latency histograms, provider call failures by kind) and gauges read from
 * the database at scrape time (jobs by type and state, sandboxes by provider and state, webhook deliveries by
 * outcome). Labels come from fixed sets (route templates, not paths; provider names; error kinds), so a client
 * cannot grow the series.
 */
import { Effect } from "effect"
import { JobsRepo } from "../db/repos/Jobs.ts"
import { SandboxesRepo } from "../db/repos/Sandboxes.ts"
import { WebhookDeliveriesRepo } from "../db/repos/WebhookDeliveries.ts"

/** Upper bounds of the latency buckets, in seconds. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const
const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])

interface Histogram {
  readonly buckets: Array<number>
  sum: number
  count: number
}

/** A label value as the text format wants it: backslash, double quote and newline escaped. */
const escape = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")
const labels = (pairs: ReadonlyArray<readonly [string, string]>) => `{${pairs.map(([k, v]) => `${k}="${escape(v)}"`).join(",")}}`

export interface Gauges {
  readonly jobs: ReadonlyArray<{ readonly type: string; readonly state: string; readonly n: number }>
  readonly sandboxes: ReadonlyArray<{ readonly provider: string | null; readonly state: string; readonly n: number }>
  readonly webhookDeliveries: ReadonlyArray<{ readonly status: string; readonly n: number }>
}

export const makeTelemetry = () => {
  const requests = new Map<string, number>()
  const latencies = new Map<string, Histogram>()
  const providerFailures = new Map<string, number>()
  const startedAt = Date.now()

  /** One answered request: its method, its route template (or "unmatched"), its status and how long it took. */
  const request = (method: string, route: string, status: number, seconds: number) => {
    const m = METHODS.has(method) ? method : "OTHER"
    const key = `${m}\u0000${route}\u0000${status}`
    requests.set(key, (requests.get(key) ?? 0) + 1)
    const hkey = `${m}\u0000${route}`
    let h = latencies.get(hkey)
    if (h === undefined) {
      h = { buckets: LATENCY_BUCKETS.map(() => 0), sum: 0, count: 0 }
      latencies.set(hkey, h)
    }
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) if (seconds <= LATENCY_BUCKETS[i]!) h.buckets[i]!++
    h.sum += seconds
    h.count++
  }

  const providerFailure = (provider: string, kind: string) => {
    const key = `${provider}\u0000${kind}`
    providerFailures.set(key, (providerFailures.get(key) ?? 0) + 1)
  }

  const render = (gauges: Gauges): string => {
    const out: Array<string> = []
    const family = (name: string, type: string, help: string) => out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)

    family("sgw_http_requests_total", "counter", "HTTP requests answered, by method, route template and status.")
    for (const [key, n] of requests) {
      const [method, route, status] = key.split("\u0000") as [string, string, string]
      out.push(`sgw_http_requests_total${labels([["method", method], ["route", route], ["status", status]])} ${n}`)
    }
    family("sgw_http_request_duration_seconds", "histogram", "Time to answer (to the response head for streams), by method and route template.")
    for (const [key, h] of latencies) {
      const [method, route] = key.split("\u0000") as [string, string]
      const base: Array<readonly [string, string]> = [["method", method], ["route", route]]
      LATENCY_BUCKETS.forEach((le, i) => out.push(`sgw_http_request_duration_seconds_bucket${labels([...base, ["le", String(le)]])} ${h.buckets[i]}`))
      out.push(`sgw_http_request_duration_seconds_bucket${labels([...base, ["le", "+Inf"]])} ${h.count}`)
      out.push(`sgw_http_request_duration_seconds_sum${labels(base)} ${h.sum}`)
      out.push(`sgw_http_request_duration_seconds_count${labels(base)} ${h.count}`)
    }
    family("sgw_provider_call_failures_total", "counter", "Provider calls that failed, by provider and error kind.")
    for (const [key, n] of providerFailures) {
      const [provider, kind] = key.split("\u0000") as [string, string]
      out.push(`sgw_provider_call_failures_total${labels([["provider", provider], ["kind", kind]])} ${n}`)
    }
    family("sgw_jobs", "gauge", "Durable jobs by type and state.")
    for (const j of gauges.jobs) out.push(`sgw_jobs${labels([["type", j.type], ["state", j.state]])} ${j.n}`)
    family("sgw_sandboxes", "gauge", "Sandboxes by provider (none: not placed yet) and state.")
    for (const s of gauges.sandboxes) out.push(`sgw_sandboxes${labels([["provider", s.provider ?? "none"], ["state", s.state]])} ${s.n}`)
    family("sgw_webhook_deliveries", "gauge", "Webhook deliveries by outcome (pending, delivering, retrying, succeeded, failed).")
    for (const d of gauges.webhookDeliveries) out.push(`sgw_webhook_deliveries${labels([["status", d.status]])} ${d.n}`)
    family("sgw_process_resident_memory_bytes", "gauge", "Resident memory of the gateway process.")
    out.push(`sgw_process_resident_memory_bytes ${process.memoryUsage.rss()}`)
    family("sgw_process_uptime_seconds", "gauge", "Seconds since the gateway started.")
    out.push(`sgw_process_uptime_seconds ${(Date.now() - startedAt) / 1000}`)
    return `${out.join("\n")}\n`
  }

  return { request, providerFailure, render }
}

export class Telemetry extends Effect.Service<Telemetry>()("app/Telemetry", { sync: makeTelemetry }) {}

/** The scrape: the in-memory counters and the database's gauges, as Prometheus text. */
export const scrapeMetrics = Effect.gen(function*() {
  const telemetry = yield* Telemetry
  const jobs = yield* JobsRepo.countsByTypeAndState
  const sandboxes = yield* SandboxesRepo.countsByProviderAndState
  const webhookDeliveries = yield* WebhookDeliveriesRepo.countsByStatus
  return telemetry.render({ jobs, sandboxes, webhookDeliveries })
})
