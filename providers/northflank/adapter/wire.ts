/**
 * Northflank's REST wire as the adapter speaks it: answers wrapped in `{data}`, errors as `{error: {status,
 * message}}`, the service shapes read (only the fields used), the service name derived from our sandbox id, the
 * deployment plans it knows, hourly billing, and the context the adapter shares.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Schema } from "effect"
import { createHash } from "node:crypto"
import { DECLARED } from "../../core/declared.ts"
import type { ProviderCapabilities } from "../../../src/providers/Provider.ts"
import { type Classified, type ErrorAnswer, makeWire, plainHttpClient, snippet } from "../../core/wire.ts"

export const NAME = "northflank" as const
export const DEFAULT_API_URL = "https://api.northflank.com/v1"
export const DEFAULT_PLAN = "nf-compute-200"
/** The image environment sources run. */
export const DEFAULT_IMAGE = "ubuntu:22.04"
export const DEFAULT_EPHEMERAL_STORAGE_MB = 2048
/** What every service runs unless an OCI source names its own command: nothing but staying up. */
export const IDLE_COMMAND = "sleep infinity"
/** Service expiry bounds (seconds). */
export const EXPIRY_BOUNDS = { min: 300, max: 604_800 } as const

/**
 * The Northflank row of reference §3.1 as is: environment and OCI sources, plan ("tier") sizing, x86_64 and arm64,
 * pause/resume (instances 0 / 1), cost. No process, files or endpoints: a container's shell is reached only through
 * Northflank's exec websocket (`@northflank/js-client`'s `exec`, over `ws`), which the gateway does not speak.
 */
export const NORTHFLANK_CAPABILITIES: ProviderCapabilities = DECLARED.northflank
export const RUNTIME_UNSUPPORTED_REASON = "its containers' commands and files are reached only through Northflank's exec websocket"

/**
 * Deployment plans this adapter knows the size and hourly price of (Northflank's published compute prices,
 * $0.01667 per vCPU-hour and $0.00833 per GB-hour of memory). The list is used to size a sandbox and by the
 * emulator to bill it; a plan not listed is sent as is and reported with the request's size.
 */
export const PLANS: ReadonlyArray<{ readonly plan: string; readonly vcpu: number; readonly memoryMb: number }> = [
  { plan: "nf-compute-10", vcpu: 0.1, memoryMb: 256 },
  { plan: "nf-compute-20", vcpu: 0.2, memoryMb: 512 },
  { plan: "nf-compute-50", vcpu: 0.5, memoryMb: 1024 },
  { plan: "nf-compute-100-1", vcpu: 1, memoryMb: 1024 },
  { plan: "nf-compute-100-2", vcpu: 1, memoryMb: 2048 },
  { plan: "nf-compute-100-4", vcpu: 1, memoryMb: 4096 },
  { plan: "nf-compute-200", vcpu: 2, memoryMb: 4096 },
  { plan: "nf-compute-200-8", vcpu: 2, memoryMb: 8192 },
  { plan: "nf-compute-400", vcpu: 4, memoryMb: 8192 },
  { plan: "nf-compute-400-16", vcpu: 4, memoryMb: 16_384 },
  { plan: "nf-compute-800-16", vcpu: 8, memoryMb: 16_384 },
  { plan: "nf-compute-800-32", vcpu: 8, memoryMb: 32_768 },
  { plan: "nf-compute-1600-32", vcpu: 16, memoryMb: 32_768 },
  { plan: "nf-compute-1600-64", vcpu: 16, memoryMb: 65_536 }
]
export const planSize = (plan: string) => PLANS.find((p) => p.plan === plan)
/** A plan's price per hour in cents (fractional). */
export const planCentsPerHour = (plan: { readonly vcpu: number; readonly memoryMb: number }) => plan.vcpu * 1.667 + (plan.memoryMb / 1024) * 0.833

/** The service's name (and so its id): `metal-` + 20 hex of the sha256 of our sandbox id. */
export const serviceName = (sandboxId: string) => `metal-${createHash("sha256").update(sandboxId).digest("hex").slice(0, 20)}`
const DESCRIPTION = "metal sandbox "
/** Our sandbox id, in the service's description (checked on reconcile). */
export const describe = (sandboxId: string) => `${DESCRIPTION}${sandboxId}`
/** Our sandbox id from a service's description (the emulator labels the service's jail with it). */
export const sandboxIdOfDescription = (description: string | null | undefined) =>
  description?.startsWith(DESCRIPTION) === true ? description.slice(DESCRIPTION.length) : undefined

// ---- shapes ----

export const DeploymentStatus = Schema.Literal("PENDING", "IN_PROGRESS", "COMPLETED", "FAILED")
export const WireService = Schema.Struct({
  data: Schema.Struct({
    id: Schema.String,
    description: Schema.optional(Schema.NullOr(Schema.String)),
    servicePaused: Schema.optional(Schema.Boolean),
    billing: Schema.optional(Schema.Struct({ deploymentPlan: Schema.String })),
    status: Schema.optional(Schema.Struct({
      deployment: Schema.optional(Schema.Struct({ status: DeploymentStatus, reason: Schema.optional(Schema.String) }))
    }))
  })
})
export type WireService = typeof WireService.Type
export const WireCreated = Schema.Struct({ data: Schema.Struct({ id: Schema.String }) })
export const WireUsage = Schema.Struct({
  data: Schema.Struct({
    usage: Schema.Array(Schema.Struct({ startTime: Schema.String, endTime: Schema.String, price: Schema.Struct({ total: Schema.Number }) }))
  })
})

// ---- errors ----

/** `{error: {status, message}}`. */
export const classify = (answer: ErrorAnswer): Classified => {
  const error = (answer.json as { error?: { message?: unknown } } | undefined)?.error
  return { message: typeof error?.message === "string" ? error.message : snippet(answer.text) }
}

// ---- config and context ----

export interface NorthflankProviderConfig {
  /** Default https://api.northflank.com/v1. */
  readonly apiUrl: string
  readonly apiToken: string
  readonly projectId: string
  /** When set, paths are `/teams/{team}/projects/{project}`. */
  readonly teamId?: string | undefined
  readonly mode: "remote" | "emulated"
  readonly deploymentPlan?: string | undefined
  readonly defaultImage?: string | undefined
  readonly ephemeralStorageMb?: number | undefined
  /** Architectures the target has (the emulator: the host's only). Default: the declared ones. */
  readonly architectures?: ProviderCapabilities["architectures"] | undefined
  readonly httpClient?: HttpClient.HttpClient | undefined
  /** Status polls while a service deploys, pauses or resumes. Default 2 s remote, 50 ms emulated. */
  readonly pollIntervalMs?: number | undefined
  /** How long a deployment may take. Default 10 min remote, 90 s emulated. */
  readonly lifecycleTimeoutMs?: number | undefined
}


export const makeContext = (config: NorthflankProviderConfig) => {
  const emulated = config.mode === "emulated"
  const apiUrl = config.apiUrl.replace(/\/+$/, "")
  const wire = makeWire({ provider: NAME, client: config.httpClient ?? plainHttpClient(), timeout: "60 seconds", classify })
  const project = `${config.teamId === undefined ? "" : `/teams/${encodeURIComponent(config.teamId)}`}/projects/${encodeURIComponent(config.projectId)}`
  const api = (method: "GET" | "POST" | "DELETE", path: string) =>
    HttpClientRequest.make(method)(`${apiUrl}${path}`).pipe(HttpClientRequest.acceptJson, HttpClientRequest.bearerToken(config.apiToken))
  return {
    config,
    capabilities: config.architectures === undefined ? NORTHFLANK_CAPABILITIES : { ...NORTHFLANK_CAPABILITIES, architectures: config.architectures },
    plan: config.deploymentPlan ?? DEFAULT_PLAN,
    image: config.defaultImage ?? DEFAULT_IMAGE,
    storageMb: config.ephemeralStorageMb ?? DEFAULT_EPHEMERAL_STORAGE_MB,
    pollMs: config.pollIntervalMs ?? (emulated ? 50 : 2000),
    lifecycleTimeoutMs: config.lifecycleTimeoutMs ?? (emulated ? 90_000 : 600_000),
    service: (id: string, rest = "") => `${project}/services/${encodeURIComponent(id)}${rest}`,
    project,
    api,
    ...wire
  }
}
export type NorthflankContext = ReturnType<typeof makeContext>
