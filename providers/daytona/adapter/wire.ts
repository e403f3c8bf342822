/**
 * Daytona's wire, as the adapter speaks it: the shapes it reads (only the fields used), the upstream error codes
 * that say more than a status, the sandbox states, the daemon's multiplexed log, our execution ids, and the
 * context every part of the adapter shares (config, the HTTP client, the control API and toolbox requests).
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Schema } from "effect"
import { emulatedCapabilities } from "../../../src/providers/Capabilities.ts"
import type { RateCard } from "../../core/cost.ts"
import { DECLARED } from "../../core/declared.ts"
import { executionIdCodec, IdPart, positivePart } from "../../core/executionId.ts"
import type { ExecEvent } from "../../../src/runtime/LocalRuntime.ts"
import type { InspectState, ProviderCapabilities, ProviderErrorKind, ProviderSandbox } from "../../../src/providers/Provider.ts"
import { type CallOptions, type Classified, type ErrorAnswer, makeWire, plainHttpClient, messageOf } from "../../core/wire.ts"

export const NAME = "daytona" as const

export const DAYTONA_CAPABILITIES: ProviderCapabilities = {
  ...DECLARED.daytona,
  pause: true,
  resume: true,
  // Terminals through PTY sessions (terminals.ts); standard input through a session command's input route (processes.ts).
  process: { ...DECLARED.daytona.process!, terminal: true },
  // Daytona's network limits: `networkBlockAll`, and `domainAllowList` (names and `*.` wildcards, comma-separated;
  // docs: daytona.io/docs/en/network-limits). No deny list of names.
  network: { blockInternet: true, allowDomains: true, denyDomains: false }
}

/** Daytona's published per-second prices; stopped time is counted as running, hence `low`. */
export const DAYTONA_RATE_CARD = {
  version: "daytona-2025-per-second",
  vcpuSecondMicrousd: 14,
  gibSecondMicrousd: 4.5,
  diskGibSecondMicrousd: 0.03,
  freeDiskGib: 5,
  confidence: "low"
} as const satisfies RateCard

export const LABEL_SANDBOX_ID = "metal.sandbox_id"
export const sandboxName = (sandboxId: string) => `metal-${sandboxId}`
export const sessionName = (processId: string) => `metal-${processId}`
/** ProviderSandbox metadata: the sandbox runs an OCI image (its processes start in the image's WorkingDir). */
export const IMAGE_METADATA = "image"
export const isImageSandbox = (sandbox: ProviderSandbox) => sandbox.metadata[IMAGE_METADATA] === true

/**
 * The shell words that put a process where it starts: its `cwd`; without one, an environment sandbox's workspace
 * (made first remotely, where it may not exist yet), and nothing for an image sandbox, whose processes start where
 * its image says (its WorkingDir), as they would at Daytona without the gateway.
 */
export const startIn = (ctx: { readonly workspaceDir: string; readonly emulated: boolean }, sandbox: ProviderSandbox, cwd: string | undefined): string => {
  const dir = cwd ?? (isImageSandbox(sandbox) ? undefined : ctx.workspaceDir)
  if (dir === undefined) return ""
  return `${dir === ctx.workspaceDir && !ctx.emulated ? `mkdir -p -- ${shellQuote(dir)} 2>/dev/null; ` : ""}cd -- ${shellQuote(dir)} || exit 1; `
}

export interface DaytonaProviderConfig {
  /** The control API base, e.g. https://app.daytona.io/api (no trailing slash needed). */
  readonly baseUrl: string
  readonly apiKey: string
  /** For a key of several Daytona organizations: which one (`X-Daytona-Organization-ID`). */
  readonly organizationId?: string | undefined
  readonly mode: "remote" | "emulated"
  readonly capabilities?: ProviderCapabilities | undefined
  readonly httpClient?: HttpClient.HttpClient | undefined
  /** DAYTONA_TARGET: the region to create in (Daytona's default when unset). */
  readonly target?: string | undefined
  /** Snapshot for `environment` sources (Daytona's default snapshot when unset). */
  readonly snapshot?: string | undefined
  /** Where the gateway's /workspace lives at the provider; default `workspace` (home-relative) remote, `/workspace` emulated. */
  readonly workspaceDir?: string | undefined
  /** State polls (create, stop, start). Default 1 s remote, 50 ms emulated. */
  readonly pollIntervalMs?: number | undefined
  /** How long create (incl. an image build), stop and start may take. Default 10 min remote, 60 s emulated. */
  readonly lifecycleTimeoutMs?: number | undefined
  /** Least time between two log reads of a running command. Default 250 ms remote, 0 emulated. */
  readonly logPollMs?: number | undefined
  readonly requestTimeoutMs?: number | undefined
  /** Opens a WebSocket (a PTY's connect); default Bun's client, which sends `headers` with the upgrade. */
  readonly openSocket?: ((url: string, headers: Readonly<Record<string, string>>) => WebSocket) | undefined
}

// ---- shapes ----

export const WireSandbox = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  state: Schema.optional(Schema.String),
  labels: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  cpu: Schema.Number,
  memory: Schema.Number,
  disk: Schema.Number,
  snapshot: Schema.optional(Schema.NullOr(Schema.String)),
  errorReason: Schema.optional(Schema.NullOr(Schema.String)),
  toolboxProxyUrl: Schema.optional(Schema.String),
  /** Present when the sandbox was built from a Dockerfile (ours: `FROM <image>`): an image sandbox. */
  buildInfo: Schema.optional(Schema.NullOr(Schema.Unknown))
})
export type WireSandbox = typeof WireSandbox.Type
/** A page of the list (`GET /sandbox`): its items, and the cursor of the next page. */
export const WireSandboxList = Schema.Struct({ items: Schema.Array(WireSandbox), nextCursor: Schema.optional(Schema.NullOr(Schema.String)) })
export const WireCommand = Schema.Struct({ id: Schema.String, exitCode: Schema.optional(Schema.NullOr(Schema.Number)) })
export const WireSession = Schema.Struct({ sessionId: Schema.String, commands: Schema.optional(Schema.NullOr(Schema.Array(WireCommand))) })
export const WireExec = Schema.Struct({ cmdId: Schema.String })
export const WireLogs = Schema.Struct({ stdout: Schema.String, stderr: Schema.String })
export const WireFileInfo = Schema.Struct({
  name: Schema.String,
  size: Schema.Number,
  isDir: Schema.Boolean,
  mode: Schema.optional(Schema.String),
  modTime: Schema.optional(Schema.String),
  modifiedAt: Schema.optional(Schema.String)
})
export type WireFileInfo = typeof WireFileInfo.Type
export const WirePreview = Schema.Struct({ token: Schema.String, url: Schema.String })
export const WireProxyUrl = Schema.Struct({ url: Schema.String })
/** A PTY session's info (the daemon's PtySessionInfo; only the fields used). */
export const WirePtySession = Schema.Struct({ id: Schema.String, active: Schema.Boolean, lazyStart: Schema.optional(Schema.Boolean) })

// ---- errors ----

/** Upstream error codes that say more than the status (api-error-code.enum.ts, proxy-error-code.ts). */
const CODE_KINDS: Readonly<Record<string, ProviderErrorKind>> = {
  ORGANIZATION_QUOTA_EXCEEDED: "quota",
  ORGANIZATION_SUSPENDED: "auth",
  API_KEY_EXPIRED: "auth",
  NO_AVAILABLE_RUNNERS: "capacity",
  SANDBOX_STATE_CHANGE_IN_PROGRESS: "unavailable",
  SANDBOX_OPERATION_NOT_SUPPORTED: "unsupported",
  SANDBOX_NOT_STARTED: "unavailable",
  SANDBOX_NOT_FOUND: "unavailable",
  RUNNER_UNREACHABLE: "unavailable"
}
const PROXY_CODES = new Set(["SANDBOX_NOT_STARTED", "SANDBOX_NOT_FOUND", "RUNNER_UNREACHABLE"])

/** A toolbox call goes through Daytona's proxy, whose codes mean something else than the control API's. */
export interface DaytonaCall extends CallOptions {
  readonly toolbox?: boolean | undefined
}

const classify = (answer: ErrorAnswer, call: DaytonaCall): Classified => {
  const raw = (answer.json as { code?: unknown } | null | undefined)?.code
  const code = typeof raw === "string" ? raw : undefined
  // The proxy's codes (sandbox not started / not found behind the proxy) only mean "unavailable" on toolbox
  // calls; on the control API a 404 is simply absent.
  const kind = code === undefined || (PROXY_CODES.has(code) && call.toolbox !== true) ? undefined : CODE_KINDS[code]
  return { message: messageOf(answer), kind, code }
}

// ---- states ----

export const STARTING_STATES = new Set(["creating", "restoring", "starting", "pending_build", "building_snapshot", "pulling_snapshot", "resuming", "unknown"])
export const FAILED_STATES = new Set(["error", "build_failed"])
export const GONE_STATES = new Set(["destroyed", "destroying"])
const PAUSED_STATES = new Set(["stopped", "stopping", "archived", "archiving", "paused", "pausing"])

export const inspectStateOf = (state: string | undefined): InspectState =>
  state === "started"
    ? "running"
    : state === undefined
    ? "unknown"
    : PAUSED_STATES.has(state)
    ? "paused"
    : STARTING_STATES.has(state)
    ? "starting"
    : FAILED_STATES.has(state)
    ? "failed"
    : GONE_STATES.has(state)
    ? "absent"
    : "unknown"

// ---- the daemon's log and our execution ids ----

/** Markers of the daemon's multiplexed log (common-go/pkg/log). */
export const STDOUT_MARKER = new Uint8Array([1, 1, 1])
export const STDERR_MARKER = new Uint8Array([2, 2, 2])

/** POSIX shell quoting. */
export const shellQuote = (s: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'"'"'`)}'`)

const indexOfMarker = (data: Uint8Array, from: number) => {
  for (let i = from; i + 3 <= data.length; i++) {
    const b = data[i]
    if ((b === 1 || b === 2) && data[i + 1] === b && data[i + 2] === b) return i
  }
  return -1
}

/** The daemon's multiplexed log as ordered pieces; bytes before the first marker (none in practice) are dropped. */
export const demuxLog = (log: Uint8Array): Array<{ readonly type: "stdout" | "stderr"; readonly data: Uint8Array }> => {
  const pieces: Array<{ type: "stdout" | "stderr"; data: Uint8Array }> = []
  let at = indexOfMarker(log, 0)
  while (at !== -1) {
    const type = log[at] === 1 ? "stdout" : "stderr"
    const next = indexOfMarker(log, at + 3)
    const end = next === -1 ? log.length : next
    pieces.push({ type, data: log.subarray(at + 3, end) })
    at = next
  }
  return pieces
}

/**
 * Events from the log pieces: the pieces in order (only complete ones while running), cut at `maxOutputBytes`,
 * then the exit when known. Deterministic in its inputs.
 */
export const eventsFromPieces = (
  pieces: ReadonlyArray<{ readonly type: "stdout" | "stderr"; readonly data: Uint8Array }>,
  options: { readonly maxOutputBytes: number; readonly exit: null | { readonly exitCode: number } }
): Array<ExecEvent> => {
  const complete = options.exit !== null ? pieces : pieces.filter((p, i) => i < pieces.length - 1 || p.data.at(-1) === 0x0a)
  const events: Array<ExecEvent> = []
  let budget = options.maxOutputBytes
  let truncated = false
  for (const piece of complete) {
    if (piece.data.length === 0) continue
    if (budget <= 0) {
      truncated = true
      break
    }
    const data = piece.data.length > budget ? piece.data.slice(0, budget) : piece.data.slice()
    if (data.length < piece.data.length) truncated = true
    budget -= data.length
    events.push({ seq: events.length, type: piece.type, data })
  }
  if (options.exit !== null) {
    events.push({ seq: events.length, type: "exit", exitCode: options.exit.exitCode, signal: null, cancelled: false, timedOut: false, outputTruncated: truncated })
  }
  return events
}

/** A terminal's execution id: `daytona-pty:` + base64url(JSON [PTY session, max output bytes]). */
export const TerminalRef = Schema.Struct({ sessionId: IdPart, maxOutputBytes: positivePart(100 * 1024 * 1024) })
export type TerminalRef = typeof TerminalRef.Type
export const terminalIds = executionIdCodec(NAME, "daytona-pty", TerminalRef)

/** `daytona:` + base64url(JSON [session, command, max output bytes]): needs no memory, survives a restart. */
export const ExecutionRef = Schema.Struct({ sessionId: Schema.String, commandId: Schema.String, maxOutputBytes: positivePart(100 * 1024 * 1024) })
export type ExecutionRef = typeof ExecutionRef.Type
export const executionIds = executionIdCodec(NAME, "daytona", ExecutionRef)

// ---- the context the adapter's parts share ----


export const makeContext = (config: DaytonaProviderConfig) => {
  const emulated = config.mode === "emulated"
  const baseUrl = config.baseUrl.replace(/\/+$/, "")
  const wire = makeWire<DaytonaCall>({
    provider: NAME,
    client: config.httpClient ?? plainHttpClient(),
    timeout: `${config.requestTimeoutMs ?? 60_000} millis`,
    classify
  })
  const authHeaders: Readonly<Record<string, string>> = {
    authorization: `Bearer ${config.apiKey}`,
    ...(config.organizationId === undefined ? {} : { "x-daytona-organization-id": config.organizationId })
  }
  const authorize = (request: HttpClientRequest.HttpClientRequest) => HttpClientRequest.setHeaders(request, authHeaders)
  const send: typeof wire.send = (request, what, options) => wire.send(authorize(request), what, options)
  const api = (method: "GET" | "POST" | "DELETE", path: string) =>
    HttpClientRequest.make(method)(`${baseUrl}${path}`).pipe(HttpClientRequest.acceptJson)

  /** The sandbox's toolbox base: from its metadata, else asked of the control API. */
  const toolboxBase = (sandbox: ProviderSandbox) => {
    const url = sandbox.metadata["toolboxProxyUrl"]
    if (typeof url === "string" && url !== "") return Effect.succeed(`${url.replace(/\/+$/, "")}/${sandbox.resourceId}`)
    return send(api("GET", `/sandbox/${encodeURIComponent(sandbox.resourceId)}/toolbox-proxy-url`), "toolbox url").pipe(
      Effect.flatMap(wire.decode(WireProxyUrl, "toolbox url")),
      Effect.map((p) => `${p.url.replace(/\/+$/, "")}/${sandbox.resourceId}`)
    )
  }
  /** One toolbox call. */
  const toolbox = (
    sandbox: ProviderSandbox,
    method: "GET" | "POST" | "DELETE",
    path: string,
    what: string,
    build: (r: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest = (r) => r,
    call: Omit<DaytonaCall, "toolbox"> = {}
  ) => Effect.flatMap(toolboxBase(sandbox), (base) => send(build(HttpClientRequest.make(method)(`${base}${path}`)), what, { ...call, toolbox: true }))
  // No permessage-deflate: a terminal's output is bounded by the bytes that came, never inflated (as plainHttpClient).
  const open = config.openSocket ?? ((url, headers) => new WebSocket(url, { headers, perMessageDeflate: false } as unknown as Array<string>))
  /** The `ws(s)://` address of a toolbox path. */
  const toolboxSocketUrl = (sandbox: ProviderSandbox, path: string) => Effect.map(toolboxBase(sandbox), (base) => `${base.replace(/^http/, "ws")}${path}`)
  /** Opens a WebSocket with the same credentials as every call (set its handlers at once, in the same tick). */
  const openSocket = (url: string) => open(url, authHeaders)

  return {
    config,
    capabilities: config.capabilities ?? (emulated ? emulatedCapabilities(DAYTONA_CAPABILITIES, { runsImages: true }) : DAYTONA_CAPABILITIES),
    emulated,
    workspaceDir: (config.workspaceDir ?? (emulated ? "/workspace" : "workspace")).replace(/\/+$/, ""),
    pollMs: config.pollIntervalMs ?? (emulated ? 50 : 1000),
    lifecycleTimeoutMs: config.lifecycleTimeoutMs ?? (emulated ? 60_000 : 600_000),
    logPollMs: config.logPollMs ?? (emulated ? 0 : 250),
    fail: wire.fail,
    decode: wire.decode,
    send,
    api,
    toolbox,
    toolboxSocketUrl,
    openSocket
  }
}

export type DaytonaContext = ReturnType<typeof makeContext>
