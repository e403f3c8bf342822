/**
 * Freestyle's wire, as the adapter speaks it — the public API under `/v5` as Freestyle's SDK (`freestyle` 0.2.17)
 * sends and reads it: the shapes it reads (only the fields used), the VM states, the deterministic VM slug, the rate
 * card, the error bodies (`{code: "SCREAMING_CODE", message}`), our execution ids, and the context every part of
 * the adapter shares (config, the HTTP client, the authorised `/v5` requests).
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Schema } from "effect"
import { createHash } from "node:crypto"
import { emulatedCapabilities } from "../../../src/providers/Capabilities.ts"
import type { RateCard } from "../../core/cost.ts"
import { DECLARED } from "../../core/declared.ts"
import { executionIdCodec, IdPart, positivePart } from "../../core/executionId.ts"
import type { InspectState, ProviderCapabilities, ProviderErrorKind } from "../../../src/providers/Provider.ts"
import { type CallOptions, type Classified, type ErrorAnswer, makeWire, plainHttpClient, snippet } from "../../core/wire.ts"

export const NAME = "freestyle" as const
export const DEFAULT_API_URL = "https://api.freestyle.sh"
/** The snapshot environment sources start from when neither the request nor the config names one. */
export const DEFAULT_SNAPSHOT_ID = "freestyle/ubuntu-sm"
/** `exec-await` holds a command at most this long (Freestyle's cap). */
export const MAX_EXEC_SECONDS = 300
/** `exec-await` takes stdin as base64 of at most this many bytes. */
export const MAX_STDIN_BYTES = 1024 * 1024

/**
 * The Freestyle row of reference §3.1 — VMs from snapshots (environment and template sources), pause/resume,
 * buffered `exec-await` (no stream, no cancel; at most 300 s, the limit of VMs without Freestyle's native exec
 * agent), files in overwrite mode with parents, list and delete, no endpoints (Freestyle's domains are mapped at
 * create and have no lease to revoke) — plus the internet switch its API has: a VM gets no network but what its
 * create's `firewall` rules allow, so an offline VM is one created with `{rules: []}`.
 */
export const FREESTYLE_CAPABILITIES: ProviderCapabilities = {
  ...DECLARED.freestyle,
  network: { blockInternet: true, allowDomains: false, denyDomains: false }
}

// ---- names ----

/** Our ids in the VM's metadata (checked on reconcile when Freestyle reports them). */
export const METADATA_SANDBOX_ID = "metal_sandbox_id"

/**
 * The VM's name, derived from our sandbox id only, so a retry or a reconcile finds the VM made for it:
 * `metal-<normalised id>-<first 10 hex of its sha256>`, a DNS label of at most 63 characters.
 */
export const vmSlug = (sandboxId: string) => {
  const hash = createHash("sha256").update(sandboxId).digest("hex").slice(0, 10)
  const norm = sandboxId.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "")
  const room = 63 - "metal-".length - hash.length - 1
  const head = norm.slice(0, room).replace(/-+$/, "")
  return head === "" ? `metal-${hash}` : `metal-${head}-${hash}`
}

// ---- shapes ----

const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })

export const VmState = Schema.Literal("starting", "running", "pausing", "paused", "stopped")
export type VmState = typeof VmState.Type

export const WireVm = Schema.Struct({
  id: Schema.String,
  slug: Schema.optional(Schema.NullOr(Schema.String)),
  state: VmState,
  metadata: Schema.optional(Schema.NullOr(StringMap)),
  snapshotId: Schema.optional(Schema.NullOr(Schema.String)),
  /** vCPUs, memory and disk in MiB. */
  resources: Schema.optional(Schema.NullOr(Schema.Struct({ cpu: Schema.Number, memory: Schema.Number, storage: Schema.Number }))),
  ttlSeconds: Schema.optional(Schema.NullOr(Schema.Number)),
  createdAt: Schema.optional(Schema.NullOr(Schema.String))
})
export type WireVm = typeof WireVm.Type

export const WireExecResult = Schema.Struct({
  stdout: Schema.optional(Schema.NullOr(Schema.String)),
  stderr: Schema.optional(Schema.NullOr(Schema.String)),
  statusCode: Schema.optional(Schema.NullOr(Schema.Number))
})
export type WireExecResult = typeof WireExecResult.Type

export const WireStat = Schema.Struct({
  size: Schema.Number,
  isFile: Schema.Boolean,
  isDirectory: Schema.Boolean,
  isSymlink: Schema.Boolean,
  modified: Schema.optional(Schema.NullOr(Schema.String))
})
export type WireStat = typeof WireStat.Type
export const WireDir = Schema.Struct({ entries: Schema.Array(Schema.Struct({ name: Schema.String, kind: Schema.String })) })
export const WireExists = Schema.Struct({ exists: Schema.Boolean })

// ---- states ----

export const STARTING: ReadonlySet<VmState> = new Set(["starting"])
export const PAUSED: ReadonlySet<VmState> = new Set(["pausing", "paused"])

export const inspectStateOf = (vm: WireVm): InspectState =>
  vm.state === "running" ? "running" : STARTING.has(vm.state) ? "starting" : PAUSED.has(vm.state) ? "paused" : "stopped"

// ---- errors ----

/** Freestyle's codes that say more than their status. */
const CODE_KINDS: Readonly<Record<string, ProviderErrorKind>> = {
  UNAUTHORIZED: "auth",
  NOT_VM_OWNER: "auth",
  ACCESS_DENIED: "auth",
  QUOTA_EXCEEDED: "quota",
  VM_LIMIT_EXCEEDED: "quota",
  PAYMENT_REQUIRED: "quota",
  RATE_LIMITED: "capacity",
  NO_CAPACITY: "capacity",
  VM_NOT_FOUND: "not_found",
  FILE_NOT_FOUND: "not_found",
  PARENT_NOT_FOUND: "not_found",
  VM_NOT_RUNNING: "customer",
  VM_NAME_TAKEN: "customer",
  SLUG_TAKEN: "customer",
  RESIZE_DOWN_NOT_ALLOWED: "invalid_request",
  CHECKSUM_MISMATCH: "unavailable",
  SNAPSHOT_NOT_FOUND: "invalid_request"
}

export const classify = (answer: ErrorAnswer, _call: CallOptions): Classified => {
  const body = answer.json as { code?: unknown; error?: unknown; message?: unknown } | undefined
  const code = typeof body?.code === "string" ? body.code : typeof body?.error === "string" ? body.error : undefined
  const message = typeof body?.message === "string" && body.message !== "" ? body.message : snippet(answer.text)
  return { message, code, kind: code === undefined ? undefined : CODE_KINDS[code] }
}

// ---- execution ids ----

/** `freestyle:` + base64url(JSON [VM id, our key]). The outcome itself lives only in this instance (exec-await is one call). */
export const ExecutionRef = Schema.Struct({ vmId: IdPart, key: IdPart })
export type ExecutionRef = typeof ExecutionRef.Type
export const executionIds = executionIdCodec(NAME, "freestyle", ExecutionRef)

// ---- shell ----

export const shellQuote = (s: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`)

// ---- cost ----

/**
 * Freestyle's published VM prices (reference §3.2, rate card 2026-09-10; the same on its pricing page): $0.04032 per
 * vCPU-hour, $0.0129 per GiB-hour of memory, $0.000086 per GiB-hour of storage. Low confidence: Freestyle bills a
 * suspended VM's storage only and its own free allowance is not known here.
 */
export const RATE_CARD: RateCard = {
  version: "freestyle-2026-09-10",
  vcpuSecondMicrousd: 40_320 / 3600,
  gibSecondMicrousd: 12_900 / 3600,
  diskGibSecondMicrousd: 86 / 3600,
  confidence: "low"
}

// ---- config and context ----

export interface FreestyleProviderConfig {
  /** The API origin, default https://api.freestyle.sh (paths start with /v5). */
  readonly apiUrl: string
  readonly apiKey: string
  readonly mode: "remote" | "emulated"
  /** The snapshot environment sources start from; `provider_options.freestyle.snapshot_id` wins. */
  readonly snapshotId?: string | undefined
  /**
   * What a sandbox whose request leaves the internet unsaid gets. Freestyle has no default (a create's firewall is
   * required), so the gateway picks: the public internet (default), or, emulated, the local runtime's default.
   */
  readonly internetByDefault?: boolean | undefined
  readonly httpClient?: HttpClient.HttpClient | undefined
  /** State polls while a VM starts, pauses, resumes or a 202 is resolved. Default 200 ms remote, 20 ms emulated. */
  readonly pollIntervalMs?: number | undefined
  /** How long a VM may take to start, pause or resume (or a 202 to resolve). Default 5 min remote, 60 s emulated. */
  readonly lifecycleTimeoutMs?: number | undefined
  /** One request's deadline (not `exec-await`, which is held for its command). Default 65 s. */
  readonly requestTimeoutMs?: number | undefined
}


export const makeContext = (config: FreestyleProviderConfig) => {
  const emulated = config.mode === "emulated"
  const apiUrl = config.apiUrl.replace(/\/+$/, "")
  const client = config.httpClient ?? plainHttpClient()
  const wire = makeWire({ provider: NAME, client, timeout: `${config.requestTimeoutMs ?? 65_000} millis`, classify })
  /** `exec-await` is held until its command ends: its own deadline is the command's cap plus a margin. */
  const execWire = makeWire({ provider: NAME, client, timeout: `${MAX_EXEC_SECONDS + 30} seconds`, classify })
  const authorised = (request: HttpClientRequest.HttpClientRequest) => request.pipe(HttpClientRequest.bearerToken(config.apiKey))
  const send: typeof wire.send = (request, what, options) => wire.send(authorised(request), what, options)
  const sendExec: typeof wire.send = (request, what, options) => execWire.send(authorised(request), what, options)
  const api = (method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string) =>
    HttpClientRequest.make(method)(`${apiUrl}/v5${path}`).pipe(HttpClientRequest.acceptJson)
  const vmPath = (id: string, rest = "") => `/vms/${encodeURIComponent(id)}${rest}`

  return {
    config,
    capabilities: {
      ...(emulated ? emulatedCapabilities(FREESTYLE_CAPABILITIES, { runsImages: false }) : FREESTYLE_CAPABILITIES),
      internetByDefault: config.internetByDefault ?? true
    },
    emulated,
    pollMs: config.pollIntervalMs ?? (emulated ? 20 : 200),
    lifecycleTimeoutMs: config.lifecycleTimeoutMs ?? (emulated ? 60_000 : 300_000),
    fail: wire.fail,
    decode: wire.decode,
    send,
    sendExec,
    api,
    vmPath
  }
}

export type FreestyleContext = ReturnType<typeof makeContext>
