/**
 * E2B's wire, as the adapter speaks it: constants of the service and of envd's versions, the shapes read (only
 * the fields used), Go's signal names, envd addressing, and how error answers (control API JSON, Connect codes,
 * capacity codes) become `ProviderError` kinds.
 */
import { Schema } from "effect"
import type { RateCard } from "../../core/cost.ts"
import { DECLARED } from "../../core/declared.ts"
import type { ProviderCapabilities, ProviderErrorKind } from "../../../src/providers/Provider.ts"
import { type CallOptions, type Classified, type ErrorAnswer, messageOf } from "../../core/wire.ts"
import { type ConnectCode, isConnectCode } from "../connect.ts"

export const NAME = "e2b" as const
export const ENVD_PORT = 49983
/** Sent by the built-in emulator on `Connect` responses that replay the output from the start. */
/** The metadata key our sandbox id is kept under (reconcile looks it up; the emulator labels the jail with it). */
export const METADATA_SANDBOX_ID = "metal.sandbox_id"
export const REPLAY_HEADER = "x-e2b-emulator-replay"

export const E2B_RATE_CARD = { version: "e2b-2026-08-21", vcpuSecondMicrousd: 14, gibSecondMicrousd: 4.5, confidence: "medium" } as const satisfies RateCard

/**
 * What the adapter really does: the declared E2B row, plus cancel (SendSignal), terminals (envd's `pty` on Start,
 * `SendInput` of pty bytes, `Update` of its size: what the E2B SDK's `sandbox.pty` uses) and the internet switch.
 */
export const E2B_CAPABILITIES: ProviderCapabilities = {
  ...DECLARED.e2b,
  process: { ...DECLARED.e2b.process!, cancel: true, terminal: true },
  // E2B's `network.allowOut` takes domain names (with `*.` wildcards) beside `denyOut: ["0.0.0.0/0"]`; its
  // `denyOut` takes only IPs and CIDRs, so a domain deny list cannot be sent.
  network: { blockInternet: true, allowDomains: true, denyDomains: false }
}

/** envd versions that changed the wire (the SDK's own thresholds). */
export const ENVD_STDIN_FLAG = "0.3.0"
export const ENVD_DEFAULT_USER = "0.4.0"
export const ENVD_OCTET_STREAM_UPLOAD = "0.5.7"
export const DEFAULT_USER = "user"
/** E2B's Desktop template (the `@e2b/desktop` SDK's default): X, xfce4, xdotool, scrot, ffmpeg. */
export const DESKTOP_TEMPLATE = "desktop"

// ---- shapes ----

export const WireSandbox = Schema.Struct({
  sandboxID: Schema.String,
  templateID: Schema.String,
  envdVersion: Schema.optional(Schema.String),
  envdAccessToken: Schema.optional(Schema.NullOr(Schema.String))
})
export const WireSandboxDetail = Schema.Struct({
  ...WireSandbox.fields,
  state: Schema.String,
  cpuCount: Schema.Number,
  memoryMB: Schema.Number,
  diskSizeMB: Schema.optional(Schema.Number),
  startedAt: Schema.optional(Schema.String),
  endAt: Schema.optional(Schema.String)
})
export type WireSandboxDetail = typeof WireSandboxDetail.Type
/** `GET /sandboxes/{id}/metrics`: samples every few seconds, oldest first (empty before the first). */
export const WireMetrics = Schema.Array(Schema.Struct({
  timestamp: Schema.String,
  cpuCount: Schema.Number,
  cpuUsedPct: Schema.Number,
  memUsed: Schema.Number,
  memTotal: Schema.Number,
  diskUsed: Schema.optional(Schema.Number),
  diskTotal: Schema.optional(Schema.Number)
}))
export const WireListed = Schema.Array(Schema.Struct({ sandboxID: Schema.String, state: Schema.optional(Schema.String) }))
export const ProcessList = Schema.Struct({
  processes: Schema.optionalWith(Schema.Array(Schema.Struct({ pid: Schema.optional(Schema.Number), tag: Schema.optional(Schema.String) })), {
    default: () => []
  })
})
export const EntryInfo = Schema.Struct({
  path: Schema.String,
  type: Schema.optional(Schema.String),
  size: Schema.optional(Schema.Union(Schema.String, Schema.Number)),
  modifiedTime: Schema.optional(Schema.String)
})
export type EntryInfo = typeof EntryInfo.Type
export const StatResponse = Schema.Struct({ entry: EntryInfo })
export const ListDirResponse = Schema.Struct({ entries: Schema.optionalWith(Schema.Array(EntryInfo), { default: () => [] }) })
export const Empty = Schema.Struct({})

// ---- signals ----

/** Go's `ProcessState.String()` names signals in words ("signal: killed"); map them back to SIG names. */
export const GO_SIGNAL_NAMES: Readonly<Record<string, string>> = {
  SIGHUP: "hangup",
  SIGINT: "interrupt",
  SIGQUIT: "quit",
  SIGILL: "illegal instruction",
  SIGTRAP: "trace/breakpoint trap",
  SIGABRT: "aborted",
  SIGBUS: "bus error",
  SIGFPE: "floating point exception",
  SIGKILL: "killed",
  SIGUSR1: "user defined signal 1",
  SIGSEGV: "segmentation fault",
  SIGUSR2: "user defined signal 2",
  SIGPIPE: "broken pipe",
  SIGALRM: "alarm clock",
  SIGTERM: "terminated"
}
const SIGNAL_BY_GO_NAME = new Map(Object.entries(GO_SIGNAL_NAMES).map(([sig, words]) => [words, sig]))
export const signalOfStatus = (status: string): string | null => {
  const words = /^signal: (.+?)(?: \(core dumped\))?$/.exec(status)?.[1]
  return words === undefined ? null : SIGNAL_BY_GO_NAME.get(words) ?? words.toUpperCase()
}

// ---- envd ----

/** True when `version` >= `min` (dotted numbers; an unparsable version counts as new). */
export const envdAtLeast = (version: string, min: string): boolean => {
  const a = version.replace(/^v/, "").split(/[.+-]/).map(Number)
  const b = min.split(".").map(Number)
  for (let i = 0; i < 3; i++) {
    const x = a[i] ?? 0
    const y = b[i] ?? 0
    if (Number.isNaN(x)) return true
    if (x !== y) return x > y
  }
  return true
}

/** The envd base URL of one sandbox: the shared host, or the host pattern filled in. */
export const envdBaseUrl = (sandboxUrl: string, sandboxId: string): string =>
  sandboxUrl.replaceAll("{sandboxId}", sandboxId).replaceAll("{port}", String(ENVD_PORT)).replace(/\/+$/, "")

// ---- errors ----

export const connectKind = (code: ConnectCode): ProviderErrorKind =>
  code === "not_found"
    ? "not_found"
    : code === "unauthenticated" || code === "permission_denied"
    ? "auth"
    : code === "invalid_argument" || code === "failed_precondition" || code === "out_of_range"
    ? "invalid_request"
    : code === "already_exists" || code === "aborted"
    ? "customer"
    : code === "resource_exhausted"
    ? "capacity"
    : code === "unimplemented"
    ? "unsupported"
    : "unavailable"

/** Capacity-like `error_code`s of the control API: nothing was placed, another provider may do. */
const CAPACITY_CODES = new Set(["sandbox_capacity_unavailable", "sandbox_placement_timeout", "sandbox_no_compatible_node"])

/** A Connect code in the body wins; then a capacity `error_code`; else the status decides (see src/providers/errors.ts). */
export const classify = (answer: ErrorAnswer, _call: CallOptions): Classified => {
  const body = (answer.json ?? {}) as { code?: unknown; error_code?: unknown }
  const kind = isConnectCode(body.code)
    ? connectKind(body.code)
    : typeof body.error_code === "string" && CAPACITY_CODES.has(body.error_code)
    ? "capacity"
    : undefined
  return { message: messageOf(answer), kind }
}
