/**
 * `GET /metrics` for operators (issue 14, item 3): absent without METRICS_TOKEN, bearer-only with it, and the
 * scrape parses as Prometheus text with requests by route template and status (latency histograms), jobs by
 * type and state, sandboxes by provider and state and provider call failures by kind.
 */
import fs from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, bootstrap, expectEnvelope, type RunningServer, startServer, tempDataDir } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, waitRuntimeOperation } from "../support/sandbox.ts"

const TOKEN = "metrics-token-0123456789abcdef"

interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

/** The text format 0.0.4, strictly: every line a comment (# HELP / # TYPE) or `name{labels} value`. */
const parsePrometheus = (text: string): Array<Sample> => {
  expect(text.endsWith("\n")).toBe(true)
  const samples: Array<Sample> = []
  for (const line of text.trimEnd().split("\n")) {
    if (line.startsWith("# HELP ") || line.startsWith("# TYPE ")) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (m === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const pair of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]!] = pair[2]!.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c))
    const value = m[3] === "+Inf" ? Infinity : Number(m[3])
    expect(Number.isNaN(value), line).toBe(false)
    samples.push({ name: m[1]!, labels, value })
  }
  return samples
}

const find = (samples: ReadonlyArray<Sample>, name: string, labels: Record<string, string>) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))

describe("GET /metrics without METRICS_TOKEN", () => {
  let server: RunningServer
  beforeAll(async () => {
    server = await startServer()
  })
  afterAll(() => server.stop())

  it("does not exist", async () => {
    const res = await api(server.url).get("/metrics", { headers: { authorization: `Bearer ${TOKEN}` } })
    expectEnvelope(res, 404)
  })
})

describe("GET /metrics with METRICS_TOKEN", () => {
  let server: RunningServer
  let http: ReturnType<typeof api>
  let auth: KeyAuth
  beforeAll(async () => {
    server = await startServer({ env: { METRICS_TOKEN: TOKEN } })
    http = api(server.url)
    const owner = await bootstrap(server.dataDir, "prometheus@example.com")
    auth = { token: owner.api_key, project: owner.project_id }
  })
  afterAll(() => server.stop())

  const scrape = async () => {
    const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
    return parsePrometheus(await res.text())
  }

  it("answers only the bearer token, in the envelope otherwise", async () => {
    expectEnvelope(await http.get("/metrics"), 401, "unauthenticated")
    expectEnvelope(await http.get("/metrics", { headers: { authorization: `Bearer ${TOKEN}x` } }), 401, "unauthenticated")
    expectEnvelope(await http.get("/metrics", { headers: { authorization: TOKEN } }), 401, "unauthenticated")
    // A project key is no metrics token.
    expectEnvelope(await http.get("/metrics", { headers: { authorization: `Bearer ${auth.token}` } }), 401, "unauthenticated")
    expectEnvelope(await http.post("/metrics", { headers: { authorization: `Bearer ${TOKEN}` } }), 405, "method_not_allowed")
  })

  it("counts requests by route template and status, with histograms; gauges jobs, sandboxes and provider failures", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
    for (let i = 0; i < 3; i++) expect((await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).status).toBe(200)
    expectEnvelope(await http.get("/v1/sandboxes/sbx_0000000000000000000000000000", auth), 404)
    expectEnvelope(await http.get("/no/such/route/at/all", auth), 404)
    // A read of a missing file fails at the provider: one failure of its kind.
    const read = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/read`, { ...auth, body: { path: "/workspace/missing" }, headers: { "idempotency-key": idempotencyKey("r") } })
    if (read.status === 202) await waitRuntimeOperation(http, auth, sandbox.id, read.body.id)

    const samples = await scrape()
    const gets = find(samples, "sgw_http_requests_total", { method: "GET", route: "/v1/sandboxes/:sandbox_id" })
    expect(gets.find((s) => s.labels["status"] === "200")?.value).toBeGreaterThanOrEqual(3)
    expect(gets.find((s) => s.labels["status"] === "404")?.value).toBe(1)
    // Paths are never labels: no sandbox id appears anywhere.
    expect(samples.some((s) => Object.values(s.labels).some((v) => v.includes(sandbox.id)))).toBe(false)
    expect(find(samples, "sgw_http_requests_total", { route: "unmatched", status: "404" })[0]?.value).toBeGreaterThanOrEqual(1)

    const buckets = find(samples, "sgw_http_request_duration_seconds_bucket", { method: "GET", route: "/v1/sandboxes/:sandbox_id" })
    const values = buckets.map((b) => b.value)
    expect(values).toEqual([...values].sort((a, b) => a - b))
    const count = find(samples, "sgw_http_request_duration_seconds_count", { method: "GET", route: "/v1/sandboxes/:sandbox_id" })[0]!.value
    expect(buckets.find((b) => b.labels["le"] === "+Inf")?.value).toBe(count)
    expect(count).toBeGreaterThanOrEqual(4)

    expect(find(samples, "sgw_sandboxes", { provider: "daytona", state: "ready" })[0]?.value).toBe(1)
    expect(find(samples, "sgw_jobs", { state: "succeeded" }).reduce((n, s) => n + s.value, 0)).toBeGreaterThanOrEqual(1)
    expect(find(samples, "sgw_provider_call_failures_total", { provider: "daytona" }).reduce((n, s) => n + s.value, 0)).toBeGreaterThanOrEqual(1)
    expect(find(samples, "sgw_process_resident_memory_bytes", {})[0]?.value).toBeGreaterThan(0)
    const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()
    expect(text).toContain("# TYPE sgw_webhook_deliveries gauge")
  }, 60_000)
})

describe("METRICS_TOKEN validation", () => {
  it("a short token stops the gateway at start with a message that says why", async () => {
    const dataDir = tempDataDir("short-token")
    try {
      await expect(startServer({ dataDir, env: { METRICS_TOKEN: "short" } })).rejects.toThrow(/METRICS_TOKEN must be at least 16 characters/)
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  }, 30_000)
})
