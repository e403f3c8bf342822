/**
 * The Cloudflare bridge's wire, as the adapter speaks it. Cloudflare's Sandbox SDK (`@cloudflare/sandbox`) runs
 * only inside Workers (a Durable Object driving a container), so the gateway talks to a Worker the operator
 * deploys (`providers/cloudflare/bridge/`), which calls the SDK (reference/providers.md §3.2, §4). Its REST + SSE
 * routes, all with `Authorization: Bearer <bridge token>`:
 *
 *   POST   /v1/sandbox                  (no body)                       → {id}
 *   GET    /v1/sandbox/{id}/running                                     → {running, instanceId}; 404 unknown
 *   POST   /v1/sandbox/{id}/exec        {argv, timeout_ms, cwd?}        → text/event-stream:
 *          `event: stdout|stderr` (data: base64 bytes) …, then `event: exit` (data: {exit_code}) or
 *          `event: error` (data: {error, code?})
 *   GET    /v1/sandbox/{id}/file/{path} (Range: bytes=a-b)              → 200 | 206 (Content-Range) | 404 | 416
 *   PUT    /v1/sandbox/{id}/file/{path} (application/octet-stream)      → 2xx
 *   DELETE /v1/sandbox/{id}                                             → 2xx; 404 when already gone
 *
 * Paths are only under `/workspace/` (sent without the leading slash, each segment URL-encoded). Error answers
 * are `{error, code?}`. The bridge refuses a non-empty `env` and any `stdin` in an exec body, and caps
 * `timeout_ms` at its own request timeout (30 s by default). The create also carries `Idempotency-Key: <our
 * sandbox id>`, an addition a bridge may ignore (the reference bridge does, ours and the emulator honour it: a
 * retried create after a lost answer gets the same sandbox).
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Schema } from "effect"
import { emulatedCapabilities } from "../../../src/providers/Capabilities.ts"
import { DECLARED } from "../../core/declared.ts"
import type { ProviderCapabilities, ProviderErrorKind } from "../../../src/providers/Provider.ts"
import { type CallOptions, type Classified, type ErrorAnswer, makeWire, plainHttpClient, snippet } from "../../core/wire.ts"

export const NAME = "cloudflare" as const
/** Cloudflare's GraphQL analytics API (container usage, for cost). */
export const DEFAULT_ANALYTICS_URL = "https://api.cloudflare.com/client/v4/graphql"
/** The bridge's own request timeout, and so the longest a command may run (reference §3.2). */
export const BRIDGE_REQUEST_TIMEOUT_MS = 30_000
/** The only directory the bridge serves files under. */
export const WORKSPACE = "/workspace"

/**
 * The Cloudflare row of reference §3.1 (`DECLARED.cloudflare`): environment sources, fixed sizing, no pause,
 * container isolation, streamed exec without cancel (10 MiB, 30 s), files c/o/a without parents, list or delete,
 * no endpoints, no internet switch (a Cloudflare container reaches the internet; nothing in the SDK turns that
 * off per sandbox). Cost only when an account id and an analytics token are configured.
 */
export const cloudflareCapabilities = (options: { readonly cost: boolean }): ProviderCapabilities => ({ ...DECLARED.cloudflare, cost: options.cost })

export interface CloudflareProviderConfig {
  /** The bridge Worker's URL (e.g. https://sandbox-bridge.example.workers.dev). */
  readonly apiUrl: string
  /** The bridge's bearer token (its `BRIDGE_TOKEN` secret). */
  readonly apiKey: string
  /** With `analyticsToken`: cost from Cloudflare's container usage analytics. */
  readonly accountId?: string | undefined
  readonly analyticsToken?: string | undefined
  /** Default https://api.cloudflare.com/client/v4/graphql. */
  readonly analyticsUrl?: string | undefined
  readonly mode: "remote" | "emulated"
  readonly httpClient?: HttpClient.HttpClient | undefined
  /** The bridge's request timeout (default 30 s): commands are cut there. */
  readonly requestTimeoutMs?: number | undefined
  /** `/running` polls while a sandbox starts. Default 500 ms remote, 20 ms emulated. */
  readonly pollIntervalMs?: number | undefined
  /** How long a sandbox may take to start. Default 90 s remote, 60 s emulated. */
  readonly startTimeoutMs?: number | undefined
  /** How long one `execEvents` waits for new output or the end. Default 1 s remote, 100 ms emulated. */
  readonly eventsWaitMs?: number | undefined
}

// ---- shapes ----

export const WireCreated = Schema.Struct({ id: Schema.String.pipe(Schema.minLength(1)) })
export const WireRunning = Schema.Struct({ running: Schema.Boolean, instanceId: Schema.optional(Schema.String) })
export const WireExit = Schema.Struct({ exit_code: Schema.Int })
export const WireExecError = Schema.Struct({ error: Schema.String, code: Schema.optional(Schema.String) })
/** The `error` frame's codes that mean the bridge's timeout ended the command. */
export const TIMEOUT_CODES: ReadonlySet<string> = new Set(["COMMAND_TIMEOUT", "TIMEOUT", "EXEC_TIMEOUT"])

// ---- server-sent events ----

export interface SseFrame {
  readonly event: string
  readonly data: string
}

/** Frames from SSE text, fed in pieces; a frame ends at a blank line (`\n\n` or `\r\n\r\n`). */
export const makeSseParser = () => {
  let pending = ""
  const parse = (block: string): SseFrame | undefined => {
    let event = "message"
    const data: Array<string> = []
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith("event:")) event = line.slice(6).trim()
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""))
    }
    return data.length === 0 ? undefined : { event, data: data.join("\n") }
  }
  return {
    /** The frames completed by this text. */
    push: (text: string): Array<SseFrame> => {
      pending += text
      const blocks = pending.split(/\r?\n\r?\n/)
      pending = blocks.pop() ?? ""
      return blocks.flatMap((b) => parse(b) ?? [])
    },
    /** What is left at the end of the stream (a last frame without its blank line). */
    end: (): Array<SseFrame> => {
      const rest = pending
      pending = ""
      return rest.trim() === "" ? [] : [parse(rest)].flatMap((f) => f ?? [])
    }
  }
}

// ---- paths ----

/** A `/workspace/…` path as the bridge takes it (no leading slash, segments encoded); undefined for any other. */
export const bridgePath = (p: string): string | undefined => {
  if (!p.startsWith(`${WORKSPACE}/`)) return undefined
  const parts = p.slice(1).split("/")
  if (parts.some((s) => s === "" || s === "." || s === "..")) return undefined
  return parts.map(encodeURIComponent).join("/")
}

// ---- errors ----

const CODE_KINDS: Readonly<Record<string, ProviderErrorKind>> = {
  UNAUTHORIZED: "auth",
  SANDBOX_NOT_FOUND: "not_found",
  FILE_NOT_FOUND: "not_found",
  RATE_LIMITED: "capacity",
  INSTANCE_LIMIT: "capacity"
}

export const classify = (answer: ErrorAnswer, _call: CallOptions): Classified => {
  const body = answer.json as { error?: unknown; code?: unknown } | undefined
  const message = typeof body?.error === "string" && body.error !== "" ? body.error : snippet(answer.text)
  const code = typeof body?.code === "string" ? body.code : undefined
  return { message, code, kind: code === undefined ? undefined : CODE_KINDS[code] }
}

// ---- cost ----

/**
 * Cloudflare Containers' prices (reference §3.2), in micro-USD: per vCPU-second of CPU time, per GiB-second of
 * memory, per GB-second of disk; egress per GB by region (North America and Europe 0.025 USD, Oceania, Korea and
 * Taiwan 0.05 USD, elsewhere 0.04 USD).
 */
export const RATE_CARD = {
  version: "cloudflare-2026-04-21",
  cpuSecondMicrousd: 20,
  gibSecondMicrousd: 2.5,
  diskGbSecondMicrousd: 0.07
} as const

export const egressGbMicrousd = (region: string) => {
  const r = region.toLowerCase()
  if (r.includes("nam") || r.includes("eur")) return 25_000
  if (r.includes("oce") || r.includes("kor") || r.includes("twn")) return 50_000
  return 40_000
}

/** One row of `containersUsageAdaptiveGroups` (or the metrics fallback). */
export const AnalyticsRow = Schema.Struct({
  dimensions: Schema.Struct({ instanceId: Schema.optional(Schema.String), region: Schema.optional(Schema.String) }),
  sum: Schema.Struct({
    cpuTimeSec: Schema.NonNegative,
    /** Byte-seconds of memory. */
    allocatedMemory: Schema.NonNegative,
    /** Byte-seconds of disk. */
    allocatedDisk: Schema.NonNegative,
    txBytes: Schema.NonNegative
  })
})
export type AnalyticsRow = typeof AnalyticsRow.Type

export const AnalyticsAnswer = Schema.Struct({
  data: Schema.NullOr(Schema.Struct({
    viewer: Schema.Struct({
      accounts: Schema.Array(Schema.Struct({ usage: Schema.Array(AnalyticsRow), metrics: Schema.Array(AnalyticsRow) }))
    })
  })),
  errors: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({ message: Schema.String }))))
})

/** The cost of usage rows at the rate card, in micro-USD (not yet rounded). */
export const usageCostMicrousd = (rows: ReadonlyArray<AnalyticsRow>) =>
  rows.reduce(
    (sum, row) =>
      sum +
      row.sum.cpuTimeSec * RATE_CARD.cpuSecondMicrousd +
      (row.sum.allocatedMemory / 2 ** 30) * RATE_CARD.gibSecondMicrousd +
      (row.sum.allocatedDisk / 1e9) * RATE_CARD.diskGbSecondMicrousd +
      (row.sum.txBytes / 1e9) * egressGbMicrousd(row.dimensions.region ?? ""),
    0
  )

/** The label the bridge gives each container, which the analytics are filtered by. */
export const costLabel = (resourceId: string) => `metal_sbx=${resourceId}`

// ---- the context the adapter's parts share ----


export const makeContext = (config: CloudflareProviderConfig) => {
  const emulated = config.mode === "emulated"
  const apiUrl = config.apiUrl.replace(/\/+$/, "")
  const requestTimeoutMs = config.requestTimeoutMs ?? BRIDGE_REQUEST_TIMEOUT_MS
  const client = config.httpClient ?? plainHttpClient()
  const wire = makeWire({ provider: NAME, client, timeout: `${requestTimeoutMs + 5_000} millis`, classify })
  const send: typeof wire.send = (request, what, options) => wire.send(request.pipe(HttpClientRequest.bearerToken(config.apiKey)), what, options)
  const api = (method: "GET" | "POST" | "PUT" | "DELETE", path: string) => HttpClientRequest.make(method)(`${apiUrl}${path}`)
  const sandboxPath = (id: string, rest = "") => `/v1/sandbox/${encodeURIComponent(id)}${rest}`
  const costEnabled = config.accountId !== undefined && config.accountId !== "" && config.analyticsToken !== undefined && config.analyticsToken !== ""
  const declared = cloudflareCapabilities({ cost: costEnabled })
  return {
    config,
    client,
    capabilities: emulated ? emulatedCapabilities(declared, { runsImages: false }) : declared,
    emulated,
    costEnabled,
    requestTimeoutMs,
    pollMs: config.pollIntervalMs ?? (emulated ? 20 : 500),
    startTimeoutMs: config.startTimeoutMs ?? (emulated ? 60_000 : 90_000),
    eventsWaitMs: config.eventsWaitMs ?? (emulated ? 100 : 1000),
    fail: wire.fail,
    decode: wire.decode,
    send,
    api,
    sandboxPath
  }
}

export type CloudflareContext = ReturnType<typeof makeContext>
