/**
 * Vercel Sandbox's wire, as the adapter speaks it: the shapes it reads (only the fields used), the error bodies,
 * the sandbox and session statuses, names and execution ids, the rate card, and the context every part of the
 * adapter shares (config, the HTTP client, the authorised requests with `?teamId=`).
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Schema } from "effect"
import { createHash } from "node:crypto"
import { emulatedCapabilities } from "../../../src/providers/Capabilities.ts"
import { DECLARED } from "../../core/declared.ts"
import { executionIdCodec, IdPart, positivePart } from "../../core/executionId.ts"
import { VERCEL_SIZING } from "../../../src/providers/resources.ts"
import type { InspectState, ProviderCapabilities, ProviderErrorKind } from "../../../src/providers/Provider.ts"
import { type CallOptions, type Classified, type ErrorAnswer, makeWire, plainHttpClient, snippet } from "../../core/wire.ts"

export const NAME = "vercel" as const
export const DEFAULT_API_URL = "https://api.vercel.com"
/** Vercel sizes a sandbox by vCPUs (1–8), each with 2048 MB of memory. */
export const MB_PER_VCPU = VERCEL_SIZING.mbPerVcpu
/** The longest a sandbox (and a command) may run at Vercel: 5 hours (Pro and Enterprise plans). */
export const MAX_TIMEOUT_MS = 5 * 3600 * 1000
/** The runtime for `environment` sources (`metal/python` gets Vercel's Python runtime). */
export const DEFAULT_RUNTIME = "node24"
export const PYTHON_RUNTIME = "python3.13"

/**
 * The Vercel row of reference §3.1, plus what Vercel's API verifiably does beyond it (its SDK, @vercel/sandbox):
 * - cancel: `POST …/cmd/{cmdId}/kill {signal}` ends a command (the SDK's `Command.kill`); the reference's adapter
 *   only used it for deadlines, so its row says no cancel.
 * - network: `networkPolicy: {mode: "deny-all"}` at create keeps a sandbox off the internet, and
 *   `{mode: "custom", allowedDomains}` lets it reach only those names (`*.x` wildcards), everything else denied
 *   (the SDK's NetworkPolicy `{allow: [...]}`, its toAPINetworkPolicy). Vercel has no domain deny list.
 * - sizing: `resources.vcpus` is sent (1–8 vCPUs, 2048 MB each; `src/providers/resources.ts`), so sizing is direct.
 * Files stay c,o with parents, no list or delete (Vercel has no such routes); no endpoints (Vercel's routes are
 * fixed at create for the ports named then and cannot be revoked, so a lease could not end); no pause or pty.
 */
export const VERCEL_CAPABILITIES: ProviderCapabilities = {
  ...DECLARED.vercel,
  sizing: "direct",
  process: DECLARED.vercel.process === null ? null : { ...DECLARED.vercel.process, cancel: true },
  network: { blockInternet: true, allowDomains: true, denyDomains: false }
}

export const TAG_SANDBOX_ID = "metal.sandbox_id"

/** `metal-<id>` in a DNS-label alphabet (lowercase, digits, hyphens; at most 63), a hash when it is too long. */
export const sandboxName = (sandboxId: string) => {
  const norm = `metal-${sandboxId.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`.replace(/-+$/, "")
  if (norm.length <= 63) return norm
  const hash = createHash("sha256").update(sandboxId).digest("hex").slice(0, 10)
  return `${norm.slice(0, 52).replace(/-+$/, "")}-${hash}`
}

/** The vCPUs Vercel gives for a request (`src/providers/resources.ts`, which eligibility uses too). */
export { vercelVcpus as vcpusFor } from "../../../src/providers/resources.ts"

export interface VercelProviderConfig {
  /** The API, default https://api.vercel.com. */
  readonly apiUrl: string
  /** An access token (or an OIDC token). */
  readonly token: string
  /** The project sandboxes belong to (every call names it). */
  readonly projectId: string
  /** Sent as `?teamId=` on every call when set. */
  readonly teamId?: string | undefined
  readonly mode: "remote" | "emulated"
  readonly httpClient?: HttpClient.HttpClient | undefined
  /** Status polls while a session starts. Default 1 s remote, 20 ms emulated. */
  readonly pollIntervalMs?: number | undefined
  /** How long a session may take to start. Default 5 min remote, 60 s emulated. */
  readonly startTimeoutMs?: number | undefined
  /** How long one `execEvents` waits for new output (or the end) of a running command. Default 1 s remote, 100 ms emulated. */
  readonly logsWaitMs?: number | undefined
  readonly requestTimeoutMs?: number | undefined
}

// ---- shapes ----

const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })

export const SessionStatus = Schema.Literal("pending", "running", "stopping", "stopped", "failed", "aborted", "snapshotting")
export type SessionStatus = typeof SessionStatus.Type

export const WireSession = Schema.Struct({
  id: Schema.String,
  memory: Schema.Number,
  vcpus: Schema.Number,
  timeout: Schema.Number,
  status: SessionStatus,
  requestedAt: Schema.optional(Schema.Number),
  startedAt: Schema.optional(Schema.Number),
  stoppedAt: Schema.optional(Schema.Number),
  duration: Schema.optional(Schema.Number),
  cwd: Schema.optional(Schema.String),
  activeCpuDurationMs: Schema.optional(Schema.Number),
  networkTransfer: Schema.optional(Schema.Struct({ ingress: Schema.Number, egress: Schema.Number }))
})
export type WireSession = typeof WireSession.Type

export const WireSandbox = Schema.Struct({
  name: Schema.String,
  memory: Schema.optional(Schema.Number),
  vcpus: Schema.optional(Schema.Number),
  status: SessionStatus,
  createdAt: Schema.Number,
  currentSessionId: Schema.String,
  tags: Schema.optional(StringMap),
  totalActiveCpuDurationMs: Schema.optional(Schema.Number),
  totalDurationMs: Schema.optional(Schema.Number),
  totalEgressBytes: Schema.optional(Schema.Number)
})
export type WireSandbox = typeof WireSandbox.Type

/** `GET /v2/sandboxes/{name}` and `POST /v3/sandboxes`. */
export const WireSandboxAndSession = Schema.Struct({
  sandbox: WireSandbox,
  session: WireSession,
  routes: Schema.Array(Schema.Struct({ url: Schema.String, subdomain: Schema.String, port: Schema.Number }))
})
export type WireSandboxAndSession = typeof WireSandboxAndSession.Type
export const WireSessionOnly = Schema.Struct({ session: WireSession })

export const WireCommand = Schema.Struct({
  id: Schema.String,
  exitCode: Schema.NullOr(Schema.Number),
  startedAt: Schema.optional(Schema.Number),
  durationMs: Schema.optional(Schema.Number)
})
export const WireCommandResponse = Schema.Struct({ command: WireCommand })

/** One line of `…/cmd/{cmdId}/logs` (NDJSON). `error` ends the stream (the sandbox stopped). */
export const WireLogLine = Schema.Union(
  Schema.Struct({ stream: Schema.Literal("stdout", "stderr"), data: Schema.String }),
  Schema.Struct({ stream: Schema.Literal("error"), data: Schema.Struct({ code: Schema.String, message: Schema.String }) })
)
export type WireLogLine = typeof WireLogLine.Type

// ---- errors ----

/** Vercel answers `{error: {code, message}}`; the codes that say more than the status. */
const CODE_KINDS: Readonly<Record<string, ProviderErrorKind>> = {
  forbidden: "auth",
  rate_limited: "capacity",
  too_many_requests: "capacity",
  sandbox_limit_exceeded: "quota",
  payment_required: "quota",
  sandbox_stopped: "not_found"
}

export const classify = (answer: ErrorAnswer, _call: CallOptions): Classified => {
  const error = (answer.json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error
  const message = typeof error?.message === "string" && error.message !== "" ? error.message : snippet(answer.text)
  const code = typeof error?.code === "string" ? error.code : undefined
  return { message, code, kind: code === undefined ? undefined : CODE_KINDS[code] }
}

// ---- statuses ----

export const ENDED: ReadonlySet<SessionStatus> = new Set(["stopping", "stopped", "failed", "aborted"])

export const inspectStateOf = (status: SessionStatus): InspectState =>
  status === "running" || status === "snapshotting"
    ? "running"
    : status === "pending"
    ? "starting"
    : status === "failed" || status === "aborted"
    ? "failed"
    : "stopped"

// ---- execution ids ----

/** `vercel:` + base64url(JSON [session, command, max output bytes, timeout]): needs no memory, survives a restart. */
export const ExecutionRef = Schema.Struct({
  sessionId: IdPart,
  cmdId: IdPart,
  maxOutputBytes: positivePart(10 * 1024 * 1024),
  timeoutSeconds: positivePart(3600)
})
export type ExecutionRef = typeof ExecutionRef.Type
export const executionIds = executionIdCodec(NAME, "vercel", ExecutionRef)

// ---- cost ----

/**
 * Vercel Sandbox's published prices (reference §3.2), in micro-USD: active CPU per vCPU-hour, provisioned memory
 * per GiB-hour (billed for at least 60 s), each create, egress per GB.
 */
export const RATE_CARD = {
  version: "vercel-2026",
  activeCpuHourMicrousd: 128_000,
  gibHourMicrousd: 21_200,
  minimumBilledMs: 60_000,
  createMicrousd: 0.6,
  egressGbMicrousd: 150_000
} as const

/** The cost of a sandbox's metered usage at that rate card, in micro-USD (not yet rounded). */
export const usageCostMicrousd = (usage: { readonly activeCpuMs: number; readonly memoryMb: number; readonly durationMs: number; readonly egressBytes: number }) =>
  (usage.activeCpuMs / 3_600_000) * RATE_CARD.activeCpuHourMicrousd +
  (usage.memoryMb / 1024) * (Math.max(RATE_CARD.minimumBilledMs, usage.durationMs) / 3_600_000) * RATE_CARD.gibHourMicrousd +
  RATE_CARD.createMicrousd +
  (usage.egressBytes / 1e9) * RATE_CARD.egressGbMicrousd

// ---- the context the adapter's parts share ----


export const makeContext = (config: VercelProviderConfig) => {
  const emulated = config.mode === "emulated"
  const apiUrl = config.apiUrl.replace(/\/+$/, "")
  const wire = makeWire({ provider: NAME, client: config.httpClient ?? plainHttpClient(), timeout: `${config.requestTimeoutMs ?? 65_000} millis`, classify })
  const send: typeof wire.send = (request, what, options) => wire.send(request.pipe(HttpClientRequest.bearerToken(config.token)), what, options)
  /** A request to the API: `?teamId=` when a team is configured. */
  const api = (method: "GET" | "POST" | "DELETE", path: string) => {
    const request = HttpClientRequest.make(method)(`${apiUrl}${path}`).pipe(HttpClientRequest.acceptJson)
    return config.teamId === undefined ? request : request.pipe(HttpClientRequest.setUrlParam("teamId", config.teamId))
  }
  const sessionPath = (sessionId: string) => `/v2/sandboxes/sessions/${encodeURIComponent(sessionId)}`

  return {
    config,
    capabilities: emulated ? emulatedCapabilities(VERCEL_CAPABILITIES, { runsImages: true }) : VERCEL_CAPABILITIES,
    emulated,
    pollMs: config.pollIntervalMs ?? (emulated ? 20 : 1000),
    startTimeoutMs: config.startTimeoutMs ?? (emulated ? 60_000 : 300_000),
    logsWaitMs: config.logsWaitMs ?? (emulated ? 100 : 1000),
    fail: wire.fail,
    decode: wire.decode,
    send,
    api,
    sessionPath
  }
}

export type VercelContext = ReturnType<typeof makeContext>
