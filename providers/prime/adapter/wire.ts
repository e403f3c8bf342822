/**
 * Prime's wire, as the adapter speaks it: the shapes it reads (only the fields used), the error bodies, the
 * sandbox statuses, the label and idempotency key made from our sandbox id, the rate card, and the context every
 * part of the adapter shares (config, the HTTP client, API requests, and the per-call `/auth` that opens the
 * sandbox's gateway).
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Schema } from "effect"
import { createHash } from "node:crypto"
import { emulatedCapabilities } from "../../../src/providers/Capabilities.ts"
import type { RateCard } from "../../core/cost.ts"
import { DECLARED } from "../../core/declared.ts"
import type { InspectState, ProviderCapabilities, ProviderErrorKind, ProviderSandbox } from "../../../src/providers/Provider.ts"
import { type CallOptions, type Classified, type ErrorAnswer, makeWire, plainHttpClient, snippet } from "../../core/wire.ts"

export const NAME = "prime" as const
export const DEFAULT_API_URL = "https://api.primeintellect.ai"

/**
 * The Prime row of reference §3.1, plus one thing the SDK shows: create sends `vm: true`, so the sandbox is a VM
 * (isolation `vm`; the reference refuses any other isolation, and its row leaves the kind unstated). Everything
 * else as declared: buffered output without cancel, overwrite-only files without parents, listing or delete
 * (16 MiB), no pause, no endpoints, no internet switch, x86_64 only.
 */
export const PRIME_CAPABILITIES: ProviderCapabilities = { ...DECLARED.prime, isolation: "vm" }

/** Images for environment sources (reference §3.2). */
export const ENVIRONMENT_IMAGES: Readonly<Record<string, string>> = {
  "metal/base": "ubuntu:22.04",
  "metal/node": "node:22",
  "metal/python": "python:3.11-slim"
}

/** Our sandbox id, as the label reconcile looks for: `metal-` + the first 32 hex digits of its SHA-256. */
export const sandboxLabel = (sandboxId: string) => `metal-${createHash("sha256").update(sandboxId).digest("hex").slice(0, 32)}`
/** The create's idempotency key: the SHA-256 of our sandbox id (a retried create is the same create at Prime). */
export const idempotencyKey = (sandboxId: string) => createHash("sha256").update(`metal-sandbox:${sandboxId}`).digest("hex")
/** Prime names are 1–100 characters. */
export const sandboxName = (sandboxId: string) => `metal-${sandboxId}`.slice(0, 100)
/** Our sandbox id from a sandbox's name (the emulator labels the sandbox's jail with it). */
export const sandboxIdOfName = (name: string) => (name.startsWith("metal-") ? name.slice("metal-".length) : undefined)

/** Minutes added to the runtime timeout for Prime's own timer: a safety net behind the gateway's. */
export const TIMEOUT_MARGIN_MINUTES = 5

/**
 * Prime's published prices (reference §3.2, valid through 2026-12-22), in micro-USD per unit-hour: vCPU, GiB of
 * memory, GiB of disk. Prime reports no cost, so this is an estimate over the sandbox's lifetime.
 */
export const RATE_CARD_HOURLY = { version: "prime-2026-12-22", vcpuHourMicrousd: 20_000, gibHourMicrousd: 12_500, diskGibHourMicrousd: 200 } as const
export const RATE_CARD: RateCard = {
  version: RATE_CARD_HOURLY.version,
  vcpuSecondMicrousd: RATE_CARD_HOURLY.vcpuHourMicrousd / 3600,
  gibSecondMicrousd: RATE_CARD_HOURLY.gibHourMicrousd / 3600,
  diskGibSecondMicrousd: RATE_CARD_HOURLY.diskGibHourMicrousd / 3600,
  confidence: "medium"
}

export interface PrimeProviderConfig {
  /** The API, default https://api.primeintellect.ai (paths start with /api/v1). */
  readonly apiUrl: string
  readonly apiKey: string
  /** The team sandboxes belong to (`team_id`); `provider_options.prime.team_id` wins per request. */
  readonly teamId?: string | undefined
  readonly mode: "remote" | "emulated"
  readonly httpClient?: HttpClient.HttpClient | undefined
  /** Status polls while a sandbox starts. Default 500 ms remote, 20 ms emulated. */
  readonly pollIntervalMs?: number | undefined
  /** How long a sandbox may take to run. Default 300 s remote, 60 s emulated. */
  readonly startTimeoutMs?: number | undefined
  /** One request's deadline (not a command stream's). Default 60 s. */
  readonly requestTimeoutMs?: number | undefined
}

// ---- shapes ----

export const ENDED_STATUSES: ReadonlySet<string> = new Set(["ERROR", "TERMINATED", "TIMEOUT"])
export const STARTING_STATUSES: ReadonlySet<string> = new Set(["PENDING", "PROVISIONING"])

/** A sandbox as Prime answers it (camelCase; only what is read). */
export const WireSandbox = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  status: Schema.String,
  cpuCores: Schema.Number,
  memoryGB: Schema.Number,
  diskSizeGB: Schema.Number,
  labels: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  teamId: Schema.optional(Schema.NullOr(Schema.String)),
  startedAt: Schema.optional(Schema.NullOr(Schema.String)),
  errorType: Schema.optional(Schema.NullOr(Schema.String)),
  errorMessage: Schema.optional(Schema.NullOr(Schema.String))
})
export type WireSandbox = typeof WireSandbox.Type

export const WireSandboxList = Schema.Struct({
  sandboxes: Schema.Array(WireSandbox),
  page: Schema.Number,
  hasNext: Schema.Boolean
})

/** `POST /api/v1/sandbox/{id}/auth`: where the sandbox's gateway is, and a token for it. */
export const WireAuth = Schema.Struct({
  gateway_url: Schema.String,
  user_ns: Schema.String,
  job_id: Schema.String,
  token: Schema.String,
  expires_at: Schema.optional(Schema.String)
})
export type WireAuth = typeof WireAuth.Type

export const inspectStateOf = (status: string): InspectState =>
  status === "RUNNING"
    ? "running"
    : STARTING_STATUSES.has(status)
    ? "starting"
    : status === "PAUSED"
    ? "paused"
    : status === "ERROR"
    ? "failed"
    : status === "TERMINATED" || status === "TIMEOUT"
    ? "absent" // a terminated sandbox is gone for good; Prime only keeps its record
    : "unknown"

// ---- errors ----

/**
 * Prime's API answers FastAPI bodies (`{detail}`: a string, or a list of `{msg}` for a 422); its gateway answers
 * `{error: "sandbox_not_found"}` with a 502 for a sandbox that is gone.
 */
export const classify = (answer: ErrorAnswer, _call: CallOptions): Classified => {
  const body = answer.json as { detail?: unknown; error?: unknown; message?: unknown } | null | undefined
  if (body?.error === "sandbox_not_found") return { message: "the sandbox is no longer on its node", code: "sandbox_not_found", kind: "not_found" }
  const detail = body?.detail
  const message = typeof detail === "string"
    ? detail
    : Array.isArray(detail)
    ? detail.map((d) => (typeof (d as { msg?: unknown })?.msg === "string" ? (d as { msg: string }).msg : JSON.stringify(d))).join("; ")
    : typeof body?.message === "string"
    ? body.message
    : typeof body?.error === "string"
    ? body.error
    : snippet(answer.text)
  const kind: ProviderErrorKind | undefined = answer.status === 422 ? "invalid_request" : undefined
  return { message, kind }
}

// ---- the context the adapter's parts share ----


export const makeContext = (config: PrimeProviderConfig) => {
  const emulated = config.mode === "emulated"
  const apiUrl = config.apiUrl.replace(/\/+$/, "")
  const wire = makeWire({ provider: NAME, client: config.httpClient ?? plainHttpClient(), timeout: `${config.requestTimeoutMs ?? 60_000} millis`, classify })
  const send: typeof wire.send = (request, what, options) => wire.send(HttpClientRequest.bearerToken(request, config.apiKey), what, options)
  const api = (method: "GET" | "POST" | "DELETE", path: string) => HttpClientRequest.make(method)(`${apiUrl}/api/v1${path}`).pipe(HttpClientRequest.acceptJson)
  const sandboxPath = (id: string, rest = "") => `/sandbox/${encodeURIComponent(id)}${rest}`

  /**
   * Each runtime call first asks the API for the sandbox's gateway (`POST …/auth`): its URL, the namespace and job
   * the sandbox runs as, and a short-lived token. Calls then go to `<gateway_url>/<user_ns>/<job_id>/…` with it.
   */
  const gateway = (sandbox: ProviderSandbox) =>
    send(api("POST", sandboxPath(sandbox.resourceId, "/auth")), "sandbox auth", { mutating: false }).pipe(
      Effect.flatMap(wire.decode(WireAuth, "sandbox auth")),
      Effect.map((auth) => ({
        base: `${auth.gateway_url.replace(/\/+$/, "")}/${encodeURIComponent(auth.user_ns)}/${encodeURIComponent(auth.job_id)}`,
        token: auth.token
      }))
    )
  /** A request to the gateway, with its token (sent through the same error classes). */
  const sendGateway = (request: HttpClientRequest.HttpClientRequest, token: string, what: string, options?: CallOptions) =>
    wire.send(HttpClientRequest.bearerToken(request, token), what, options)

  return {
    config,
    capabilities: emulated ? emulatedCapabilities(PRIME_CAPABILITIES, { runsImages: false }) : PRIME_CAPABILITIES,
    emulated,
    pollMs: config.pollIntervalMs ?? (emulated ? 20 : 500),
    startTimeoutMs: config.startTimeoutMs ?? (emulated ? 60_000 : 300_000),
    fail: wire.fail,
    decode: wire.decode,
    send,
    api,
    sandboxPath,
    gateway,
    sendGateway
  }
}

export type PrimeContext = ReturnType<typeof makeContext>
