/**
 * Modal's wire as the adapter sees it (index.ts): the names and defaults, the capabilities declared, the rate card
 * and cost, the name a sandbox gets, and how a ModalApi failure becomes a ProviderError.
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { DECLARED } from "../../core/declared.ts"
import { type CreateInput, type ProviderCapabilities, type ProviderCredentials, ProviderError, type ProviderErrorKind } from "../../../src/providers/Provider.ts"
import { type ModalApi, ModalApiError, type ModalApiErrorCode, type ModalResourceUsage } from "./api.ts"



export const NAME = "modal" as const
export const DEFAULT_APP_NAME = "metal-sandboxes"
export const DEFAULT_IMAGE = "node:22-slim"
export const PYTHON_IMAGE = "python:3.13-slim"
export const WORKSPACE = "/workspace"
export const TAG_SANDBOX_ID = "metal.sandbox_id"

/**
 * The reference's Modal row (§3.1: env + OCI, direct sizing, x86_64 and arm64, streamed exec without cancel, c/o
 * files with parents, list and delete, no pause, no endpoints), plus the internet switch, which Modal verifiably
 * has: the SDK's `blockNetwork` at create (`SandboxCreateParams`) keeps a sandbox off the network. Its domain and
 * CIDR allow lists are not claimed (the gateway asks for none here).
 */
export const MODAL_CAPABILITIES: ProviderCapabilities = {
  ...DECLARED.modal,
  network: { blockInternet: true, allowDomains: false, denyDomains: false }
}

/** Modal's published prices (reference §3.2), in micro-USD. */
export const RATE_CARD = { version: "modal-2026-09-11", coreHourMicrousd: 141_912, gibHourMicrousd: 24_012 } as const

const NANOS_PER_HOUR = 3600 * 1e9

/** The cost of metered usage at the rate card, in micro-USD (not yet rounded). */
export const usageCostMicrousd = (usage: Pick<ModalResourceUsage, "cpuCoreNanosecs" | "memGibNanosecs">) =>
  (usage.cpuCoreNanosecs / NANOS_PER_HOUR) * RATE_CARD.coreHourMicrousd + (usage.memGibNanosecs / NANOS_PER_HOUR) * RATE_CARD.gibHourMicrousd

/** Modal's cpu for a request: physical cores, two vCPUs each. */
export const cpuFor = (vcpu: number) => vcpu / 2

/** `metal-<id>` in Modal's name alphabet (letters, digits, `-`, `_`, `.`; at most 64), a hash when too long. */
export const sandboxName = (sandboxId: string) => {
  const norm = `metal-${sandboxId.replace(/[^A-Za-z0-9._-]+/g, "-")}`
  if (norm.length <= 64) return norm
  return `${norm.slice(0, 53)}-${createHash("sha256").update(sandboxId).digest("hex").slice(0, 10)}`
}

export const imageFor = (source: CreateInput["source"]) =>
  source.kind === "oci_image" ? source.image : source.kind === "environment" && source.environment === "metal/python" ? PYTHON_IMAGE : DEFAULT_IMAGE

export interface ModalProviderConfig {
  readonly api: ModalApi
  /** The app sandboxes are created in (MODAL_APP_NAME). */
  readonly appName: string
  readonly mode: "remote" | "emulated"
  /** BYOK: the same adapter on the organization's token id, secret and environment. Absent: no BYOK. */
  readonly apiFor?: ((credentials: ProviderCredentials) => ModalApi) | undefined
  /** How long readiness may take. Default 5 min remote, 60 s emulated. */
  readonly readyTimeoutMs?: number | undefined
  /** Between readiness attempts. Default 1 s remote, 50 ms emulated. */
  readonly readyPollMs?: number | undefined
  /** How long `execEvents` waits for new output of a running command. Default 1 s remote, 100 ms emulated. */
  readonly eventsWaitMs?: number | undefined
}

const KINDS: Readonly<Record<ModalApiErrorCode, ProviderErrorKind>> = {
  not_found: "not_found",
  already_exists: "customer",
  auth: "auth",
  invalid: "invalid_request",
  resource_exhausted: "capacity",
  unavailable: "unavailable",
  conflict: "not_found",
  is_directory: "invalid_request",
  not_a_directory: "invalid_request",
  directory_not_empty: "customer",
  file_too_large: "invalid_request",
  permission_denied: "customer",
  internal: "unavailable"
}

export const fail = (kind: ProviderErrorKind, message: string) =>
  new ProviderError({ provider: NAME, kind, message, retryable: kind === "unavailable" || kind === "capacity" || kind === "unknown_outcome" })

/** The ProviderError for a ModalApi failure; `mutating` calls that failed in transit have an unknown outcome. */
export const errorOf = (e: unknown, what: string, options: { readonly mutating?: boolean } = {}): ProviderError => {
  const code: ModalApiErrorCode = e instanceof ModalApiError ? e.code : "internal"
  const message = e instanceof Error ? e.message : String(e)
  const kind = options.mutating === true && (code === "unavailable" || code === "internal") ? "unknown_outcome" : KINDS[code]
  return fail(kind, `modal ${what}: ${message}`)
}

export const call = <A>(what: string, run: () => Promise<A>, options: { readonly mutating?: boolean } = {}) =>
  Effect.tryPromise({ try: run, catch: (e) => errorOf(e, what, options) })

/** A call whose `not_found` is an answer (undefined), not a failure. */
export const orAbsent = <A>(effect: Effect.Effect<A, ProviderError>) =>
  effect.pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(undefined)))
