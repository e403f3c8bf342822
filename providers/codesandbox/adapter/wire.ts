/**
 * CodeSandbox's REST wire as the adapter speaks it: every answer wrapped in `{success, data, errors}`, the shapes
 * read (only the fields used), the tag that names our sandbox, the tiers and their credits, the error bodies, and
 * the context the adapter's parts share.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Schema } from "effect"
import { DECLARED } from "../../core/declared.ts"
import type { ProviderCapabilities, ProviderCost } from "../../../src/providers/Provider.ts"
import { CODESANDBOX_TIERS } from "../../../src/providers/resources.ts"
import { type Classified, type ErrorAnswer, makeWire, plainHttpClient, snippet } from "../../core/wire.ts"

export const NAME = "codesandbox" as const
export const DEFAULT_API_URL = "https://api.codesandbox.io"
/** The template forked for environment sources (CodeSandbox's universal template). */
export const DEFAULT_TEMPLATE_ID = "pcz35m"
export const DEFAULT_VM_TIER: Tier = "Nano"
/** µUSD per credit (reference §3.2: $0.01486). */
export const DEFAULT_CREDIT_RATE_MICROUSD = 14_860

/**
 * The CodeSandbox row of reference §3.1 as is: environment and template sources, tier sizing, pause (hibernate) and
 * resume (start), cost. No process, files or endpoints: a VM's commands and files are reached only through the SDK's
 * pitcher websocket (`@codesandbox/sdk` 2.4.2 hard-codes `isPint = false`, so even its REST "pint" client is never
 * used), which the gateway does not speak. The emulator claims exactly this.
 */
export const CODESANDBOX_CAPABILITIES: ProviderCapabilities = DECLARED.codesandbox
export const RUNTIME_UNSUPPORTED_REASON = "its VMs' commands and files are reached only through the CodeSandbox SDK's websocket"

export const TIERS = ["Pico", "Nano", "Micro", "Small", "Medium", "Large", "XLarge"] as const
export type Tier = (typeof TIERS)[number]
export const Tier = Schema.Literal(...TIERS)
export const isTier = (s: unknown): s is Tier => typeof s === "string" && (TIERS as ReadonlyArray<string>).includes(s)

/** Credits per hour of a running VM, by tier (reference §3.2). */
export const TIER_CREDITS_PER_HOUR: Readonly<Record<Tier, number>> = { Pico: 5, Nano: 10, Micro: 20, Small: 40, Medium: 80, Large: 160, XLarge: 320 }
export const tierSize = (tier: Tier) => CODESANDBOX_TIERS.find((t) => t.size === tier)!

const SANDBOX_TAG = "metal-sandbox-"
/** The tag our sandbox id puts on the fork: create and reconcile find the sandbox by it. */
export const sandboxTag = (sandboxId: string) => `${SANDBOX_TAG}${sandboxId}`
/** Our sandbox id from a fork's tags (the emulator labels the VM's jail with it); undefined when none is there. */
export const sandboxIdOfTags = (tags: ReadonlyArray<string>) => tags.find((t) => t.startsWith(SANDBOX_TAG))?.slice(SANDBOX_TAG.length)

/** The tier, kept as a second tag, so a reconcile knows what was started. */
export const tierTag = (tier: Tier) => `metal-tier-${tier.toLowerCase()}`

/** Hibernation timeouts CodeSandbox takes. */
export const HIBERNATION_BOUNDS = { min: 60, max: 86_400 } as const

// ---- shapes ----

const Errors = Schema.optional(Schema.NullOr(Schema.Array(Schema.Unknown)))
/** `{success, data, errors}` with `data` of the given shape. */
export const envelope = <A, I>(data: Schema.Schema<A, I>) => Schema.Struct({ success: Schema.optional(Schema.Boolean), data, errors: Errors })

export const WireSandbox = Schema.Struct({ id: Schema.String, tags: Schema.Array(Schema.String), title: Schema.optional(Schema.NullOr(Schema.String)) })
export type WireSandbox = typeof WireSandbox.Type
export const WireSandboxList = envelope(Schema.Struct({ sandboxes: Schema.Array(WireSandbox) }))
export const WireSandboxGet = envelope(WireSandbox)
export const WireFork = envelope(Schema.Struct({ id: Schema.String }))
export const WireRunning = envelope(Schema.Struct({
  concurrent_vm_count: Schema.Number,
  concurrent_vm_limit: Schema.Number,
  vms: Schema.Array(Schema.Struct({ id: Schema.optional(Schema.String) }))
}))
export const WireStart = envelope(Schema.Struct({ id: Schema.String }))
export const WireAny = Schema.Struct({ success: Schema.optional(Schema.Boolean), data: Schema.optional(Schema.Unknown), errors: Errors })

// ---- errors ----

/** `{success: false, errors: [...]}`: the errors (strings or objects) joined make the message. */
export const classify = (answer: ErrorAnswer): Classified => {
  const errors = (answer.json as { errors?: unknown } | undefined)?.errors
  if (Array.isArray(errors) && errors.length > 0) {
    const message = errors.map((e) => (typeof e === "string" ? e : JSON.stringify(e))).join("; ")
    return { message: snippet(message) }
  }
  return { message: snippet(answer.text) }
}

// ---- cost ----

/**
 * An estimate: the tier's credits per hour × the credit rate, counted in whole minutes (begun minutes count).
 * Hibernated time is not told apart (low confidence).
 */
export const tierCost = (tier: Tier, creditRateMicrousd: number, window: { readonly from: string; readonly to: string }): ProviderCost => {
  const minutes = Math.ceil(Math.max(0, Date.parse(window.to) - Date.parse(window.from)) / 60_000)
  return {
    amountMicrousd: BigInt(Math.round((TIER_CREDITS_PER_HOUR[tier] * creditRateMicrousd * minutes) / 60)),
    measuredThrough: window.to,
    provenance: "estimated_rate_card",
    confidence: "low",
    rateCardVersion: `codesandbox-credits-${creditRateMicrousd}`
  }
}

// ---- config and context ----

export interface CodeSandboxProviderConfig {
  /** The API origin, default https://api.codesandbox.io. */
  readonly apiUrl: string
  readonly apiKey: string
  readonly mode: "remote" | "emulated"
  /** The template forked for environment sources (default `pcz35m`). */
  readonly templateId?: string | undefined
  /** The smallest tier started (default Nano); a request that needs more gets the first tier covering it. */
  readonly vmTier?: Tier | undefined
  /** Recorded with each sandbox (the API key is already scoped to its workspace). */
  readonly workspaceId?: string | undefined
  /** µUSD per credit (default 14,860). */
  readonly creditRateMicrousd?: number | undefined
  readonly httpClient?: HttpClient.HttpClient | undefined
  /** One request's deadline (a VM start is held until the VM runs). Default 120 s. */
  readonly requestTimeoutMs?: number | undefined
}


export const makeContext = (config: CodeSandboxProviderConfig) => {
  const apiUrl = config.apiUrl.replace(/\/+$/, "")
  const wire = makeWire({ provider: NAME, client: config.httpClient ?? plainHttpClient(), timeout: `${config.requestTimeoutMs ?? 120_000} millis`, classify })
  const api = (method: "GET" | "POST" | "DELETE", path: string) =>
    HttpClientRequest.make(method)(`${apiUrl}${path}`).pipe(HttpClientRequest.acceptJson, HttpClientRequest.bearerToken(config.apiKey))
  return {
    config,
    capabilities: CODESANDBOX_CAPABILITIES,
    templateId: config.templateId ?? DEFAULT_TEMPLATE_ID,
    vmTier: config.vmTier ?? DEFAULT_VM_TIER,
    creditRateMicrousd: config.creditRateMicrousd ?? DEFAULT_CREDIT_RATE_MICROUSD,
    api,
    ...wire
  }
}
export type CodeSandboxContext = ReturnType<typeof makeContext>
