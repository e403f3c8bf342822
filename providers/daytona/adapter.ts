/**
 * Daytona adapter (reference/providers.md §3.2 "daytona"), speaking Daytona's REST API through `HttpClient`
 * with a Bearer key. Wire facts are from Daytona's API client and daemon (v0.190).
 *
 * Control API (`baseUrl`, e.g. https://app.daytona.io/api):
 * - `POST /sandbox` {name: "metal-<sandbox id>", labels (ours: metal.sandbox_id / metal.project_id /
 *   metal.organization_id, plus the request's metadata), env, public: false, networkBlockAll, autoStopInterval: 0
 *   (never stop on idle: the gateway runs its own timers), autoDeleteInterval: -1, target?}. Environment sources
 *   use a snapshot (`DAYTONA_SNAPSHOT`, else Daytona's default) and send no resources: the snapshot sizes the
 *   sandbox. OCI images use a declarative build (`buildInfo.dockerfileContent: "FROM <image>"`) with cpu,
 *   memory (GiB) and disk (GiB) rounded up to whole units. The answer is polled (`GET /sandbox/{id}`) until
 *   `started`; `build_failed`/`error` destroy it and fail as `customer`.
 *   Not `ephemeral`: upstream that means autoDeleteInterval 0, i.e. deleted on stop, and stop is our pause.
 * - `GET /sandbox?labels={"metal.sandbox_id":…}` finds the resource after an unknown outcome; `GET` and
 *   `DELETE /sandbox/{id}`; `POST /sandbox/{id}/stop` and `/start` are pause and resume (polled until
 *   `stopped` / `started`).
 * - `GET /sandbox/{id}/ports/{port}/signed-preview-url?expiresInSeconds=` gives {token, url}; the lease id is
 *   `<port>:<token>`; `POST …/signed-preview-url/{token}/expire` revokes it (Daytona answers 200 whether or not
 *   the token was live).
 *
 * Toolbox (`<toolboxProxyUrl>/<sandbox id>`):
 * - exec: one session per process (`POST /process/session {sessionId: "metal-<process id>"}`), one async command
 *   in it (`POST /process/session/{s}/exec {command, runAsync: true}` → {cmdId}). Create is idempotent: an
 *   existing session's command is reused. The execution id is `daytona:` + base64url(JSON [session, command,
 *   max output bytes]), so `execEvents` needs no memory and works after a gateway restart.
 * - events: `GET …/command/{c}` (exitCode once done) and `GET …/command/{c}/logs` with
 *   `X-Daytona-Split-Output: true` and no SDK version header, which makes the daemon answer the raw log: each
 *   piece of output prefixed by \x01\x01\x01 (stdout) or \x02\x02\x02 (stderr), in the order written. Events are
 *   those pieces in order — a pure function of the log, so every call (and every restart) numbers them the
 *   same. While the command runs, a last piece is handed out only once complete (it ends in a newline — the
 *   daemon writes whole lines — or another piece follows). A JSON {stdout, stderr} answer (newer daemons with an
 *   SDK header) is accepted too: stdout then stderr, after the exit. Output beyond the process's
 *   max_output_bytes is dropped and the exit says `outputTruncated`. Logs are re-read at most every
 *   `logPollMs` while running.
 * - cancel: `DELETE /process/session/{s}` (the daemon sends SIGTERM, then SIGKILL, to the whole group). The
 *   session is then gone, so the exit is reported as cancelled (exit code null) at the caller's position. A
 *   command that already exited is not cancelled (its real exit is kept).
 * - timeout: Daytona's sessions have none, and wrapping the command in `timeout` would move it out of the
 *   process group that a cancel signals (and make exit 124 ambiguous), so the caller's deadline applies: the
 *   gateway cancels a process at its timeout, also after a restart.
 * - files: `GET /files/info`, `GET /files/download` (with Range), multipart `POST /files/upload`,
 *   `POST /files/folder`, `GET /files`, `DELETE /files?recursive=`. Daytona's upload creates parents itself, so
 *   `createParents: false` checks the parent first. Append is not offered (read-modify-write would race).
 *
 * Paths: the gateway's `/workspace` is where sandboxes keep their work. A Daytona sandbox's user cannot write
 * `/workspace`, so in `remote` mode `/workspace/…` maps to the home-relative `workspace/…` (as the reference
 * does; `withWorkspace` rewrites paths and working directories both ways) and commands start there; the
 * emulator's sandboxes really have `/workspace`, so `emulated` maps nothing.
 *
 * Capabilities: the Daytona row of reference §3.1 plus pause/resume and the internet switch. Pause is off by
 * default upstream because stop/start is not a memory-preserving pause: stop ends every process (and session)
 * and keeps the filesystem, start boots it again. We declare both anyway — the filesystem survives, which is
 * what the API's pause/resume promises, and auto routing needs a provider that can pause — and the emulator
 * does what Daytona does (processes end at stop). `networkBlockAll` keeps a sandbox off the internet.
 *
 * Cost: an estimate from Daytona's published per-second prices (DAYTONA_RATE_CARD: 14 µUSD per vCPU-second,
 * 4.5 µUSD per GiB-second of memory, 0.03 µUSD per GiB-second of disk beyond the 5 free GiB) over the window,
 * provenance `estimated_rate_card`, confidence low (stopped time is counted as running).
 */
import { FetchHttpClient, HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Duration, Effect, Schema } from "effect"
import { DECLARED } from "../core/declared.ts"
import { withWorkspace } from "../core/workspace.ts"
import { kindOfStatus, kindOfTransportFailure, providerFailure } from "../core/errors.ts"
import {
  type CreateInput,
  type InspectState,
  type ProviderCapabilities,
  type ProviderError,
  type ProviderErrorKind,
  type ProviderExecEvent,
  type ProviderFileEntry,
  type ProviderSandbox,
  type SandboxProvider,
  unsupported
} from "../core/Provider.ts"

const NAME = "daytona" as const

export const DAYTONA_CAPABILITIES: ProviderCapabilities = {
  ...DECLARED.daytona,
  pause: true,
  resume: true,
  network: { blockInternet: true, allowDomains: false, denyDomains: false }
}

export const DAYTONA_RATE_CARD = {
  version: "daytona-2025-per-second",
  vcpuSecondMicrousd: 14,
  gibSecondMicrousd: 4.5,
  diskGibSecondMicrousd: 0.03,
  freeDiskGib: 5
} as const

/** Markers of the daemon's multiplexed log (common-go/pkg/log). */
export const STDOUT_MARKER = new Uint8Array([1, 1, 1])
export const STDERR_MARKER = new Uint8Array([2, 2, 2])

export const LABEL_SANDBOX_ID = "metal.sandbox_id"
export const sandboxName = (sandboxId: string) => `metal-${sandboxId}`
export const sessionName = (processId: string) => `metal-${processId}`

export interface DaytonaProviderConfig {
  /** The control API base, e.g. https://app.daytona.io/api (no trailing slash needed). */
  readonly baseUrl: string
  readonly apiKey: string
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
}

// ---- wire shapes (only the fields we read; others are ignored) ----

const WireSandbox = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  state: Schema.optional(Schema.String),
  labels: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  cpu: Schema.Number,
  memory: Schema.Number,
  disk: Schema.Number,
  snapshot: Schema.optional(Schema.NullOr(Schema.String)),
  errorReason: Schema.optional(Schema.NullOr(Schema.String)),
  toolboxProxyUrl: Schema.optional(Schema.String)
})
type WireSandbox = typeof WireSandbox.Type
// Newer APIs page the list ({items, nextCursor}); older ones answer an array.
const WireSandboxList = Schema.Union(
  Schema.Array(WireSandbox),
  Schema.Struct({ items: Schema.Array(WireSandbox), nextCursor: Schema.optional(Schema.NullOr(Schema.String)) })
)
const WireCommand = Schema.Struct({ id: Schema.String, exitCode: Schema.optional(Schema.NullOr(Schema.Number)) })
const WireSession = Schema.Struct({ sessionId: Schema.String, commands: Schema.optional(Schema.NullOr(Schema.Array(WireCommand))) })
const WireExec = Schema.Struct({ cmdId: Schema.String })
const WireLogs = Schema.Struct({ stdout: Schema.String, stderr: Schema.String })
const WireFileInfo = Schema.Struct({
  name: Schema.String,
  size: Schema.Number,
  isDir: Schema.Boolean,
  mode: Schema.optional(Schema.String),
  modTime: Schema.optional(Schema.String),
  modifiedAt: Schema.optional(Schema.String)
})
type WireFileInfo = typeof WireFileInfo.Type
const WirePreview = Schema.Struct({ token: Schema.String, url: Schema.String })
const WireProxyUrl = Schema.Struct({ url: Schema.String })
const WireError = Schema.Struct({ message: Schema.optional(Schema.Union(Schema.String, Schema.Array(Schema.String))), code: Schema.optional(Schema.String) })

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

const STARTING_STATES = new Set(["creating", "restoring", "starting", "pending_build", "building_snapshot", "pulling_snapshot", "resuming", "unknown"])
const FAILED_STATES = new Set(["error", "build_failed"])
const GONE_STATES = new Set(["destroyed", "destroying"])

const inspectStateOf = (state: string | undefined): InspectState =>
  state === "started"
    ? "running"
    : state === "stopped" || state === "stopping" || state === "archived" || state === "archiving" || state === "paused" || state === "pausing"
    ? "paused"
    : state !== undefined && STARTING_STATES.has(state)
    ? "starting"
    : state !== undefined && FAILED_STATES.has(state)
    ? "failed"
    : state !== undefined && GONE_STATES.has(state)
    ? "absent"
    : "unknown"

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
): Array<ProviderExecEvent> => {
  const complete = options.exit !== null ? pieces : pieces.filter((p, i) => i < pieces.length - 1 || p.data.at(-1) === 0x0a)
  const events: Array<ProviderExecEvent> = []
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

interface ExecutionRef {
  readonly sessionId: string
  readonly commandId: string
  readonly maxOutputBytes: number
}

export const encodeExecutionId = (ref: ExecutionRef) =>
  `daytona:${Buffer.from(JSON.stringify([ref.sessionId, ref.commandId, ref.maxOutputBytes])).toString("base64url")}`

export const decodeExecutionId = (executionId: string): ExecutionRef | undefined => {
  if (!executionId.startsWith("daytona:")) return undefined
  try {
    const parsed: unknown = JSON.parse(Buffer.from(executionId.slice("daytona:".length), "base64url").toString("utf8"))
    if (!Array.isArray(parsed) || typeof parsed[0] !== "string" || typeof parsed[1] !== "string") return undefined
    const max = typeof parsed[2] === "number" && Number.isSafeInteger(parsed[2]) && parsed[2] > 0 ? parsed[2] : 100 * 1024 * 1024
    return { sessionId: parsed[0], commandId: parsed[1], maxOutputBytes: max }
  } catch {
    return undefined
  }
}

const defaultClient = () => Effect.runSync(Effect.provide(HttpClient.HttpClient, FetchHttpClient.layer))

export const makeDaytonaProvider = (config: DaytonaProviderConfig): SandboxProvider => {
  const capabilities = config.capabilities ?? DAYTONA_CAPABILITIES
  const client = config.httpClient ?? defaultClient()
  const baseUrl = config.baseUrl.replace(/\/+$/, "")
  const emulated = config.mode === "emulated"
  const workspaceDir = (config.workspaceDir ?? (emulated ? "/workspace" : "workspace")).replace(/\/+$/, "")
  const pollMs = config.pollIntervalMs ?? (emulated ? 50 : 1000)
  const lifecycleTimeoutMs = config.lifecycleTimeoutMs ?? (emulated ? 60_000 : 600_000)
  const logPollMs = config.logPollMs ?? (emulated ? 0 : 250)
  const requestTimeout = Duration.millis(config.requestTimeoutMs ?? 60_000)
  const fail = providerFailure(NAME)
  /** Last log read per running execution, to bound how often a busy poller downloads the log. */
  const logCache = new Map<string, { readonly at: number; readonly events: ReadonlyArray<ProviderExecEvent> }>()

  // ---- HTTP plumbing ----

  const errorOf = (response: HttpClientResponse.HttpClientResponse, what: string, options: { readonly ambiguous: boolean; readonly toolbox: boolean }) =>
    Effect.gen(function*() {
      const text = yield* Effect.orElseSucceed(response.text, () => "")
      let body: typeof WireError.Type = {}
      try {
        body = Schema.decodeUnknownSync(WireError)(JSON.parse(text))
      } catch {
        // not our JSON (a proxy's page): the status says enough
      }
      const message = Array.isArray(body.message) ? body.message.join(", ") : body.message ?? text.slice(0, 300)
      // The proxy's codes (sandbox not started / not found behind the proxy) only mean "unavailable" on toolbox
      // calls; on the control API a 404 is simply absent.
      const byCode = body.code === undefined || (PROXY_CODES.has(body.code) && !options.toolbox) ? undefined : CODE_KINDS[body.code]
      const kind = byCode ?? kindOfStatus(response.status, { ambiguous: options.ambiguous })
      return fail(kind, `daytona ${what} answered ${response.status}${body.code ? ` ${body.code}` : ""}: ${message}`, response.status)
    })

  const send = (
    request: HttpClientRequest.HttpClientRequest,
    what: string,
    options: { readonly mutating?: boolean; readonly ambiguous?: boolean; readonly toolbox?: boolean } = {}
  ): Effect.Effect<HttpClientResponse.HttpClientResponse, ProviderError> => {
    const mutating = options.mutating ?? request.method !== "GET"
    return client.execute(HttpClientRequest.bearerToken(request, config.apiKey)).pipe(
      Effect.mapError((e) => fail(kindOfTransportFailure(e, { mutating }), `daytona ${what} failed: ${e.message}`)),
      Effect.timeoutFail({ duration: requestTimeout, onTimeout: () => fail(kindOfTransportFailure("timeout", { mutating }), `daytona ${what} timed out`) }),
      Effect.flatMap((response) =>
        response.status >= 200 && response.status < 300
          ? Effect.succeed(response)
          : Effect.flatMap(errorOf(response, what, { ambiguous: options.ambiguous === true, toolbox: options.toolbox === true }), Effect.fail)
      )
    )
  }

  const decode = <A, I>(schema: Schema.Schema<A, I>, what: string) => (response: HttpClientResponse.HttpClientResponse) =>
    response.json.pipe(
      Effect.flatMap(Schema.decodeUnknown(schema)),
      Effect.mapError((e) => fail("unavailable", `daytona ${what} sent an unexpected body: ${e.message}`))
    )

  const api = (method: "GET" | "POST" | "DELETE", path: string) =>
    HttpClientRequest.make(method)(`${baseUrl}${path}`).pipe(HttpClientRequest.acceptJson)

  const toolboxBase = (sandbox: ProviderSandbox): Effect.Effect<string, ProviderError> => {
    const url = sandbox.metadata["toolboxProxyUrl"]
    if (typeof url === "string" && url !== "") return Effect.succeed(`${url.replace(/\/+$/, "")}/${sandbox.resourceId}`)
    return send(api("GET", `/sandbox/${encodeURIComponent(sandbox.resourceId)}/toolbox-proxy-url`), "toolbox url").pipe(
      Effect.flatMap(decode(WireProxyUrl, "toolbox url")),
      Effect.map((p) => `${p.url.replace(/\/+$/, "")}/${sandbox.resourceId}`)
    )
  }
  const toolbox = (sandbox: ProviderSandbox, method: "GET" | "POST" | "DELETE", path: string, build: (r: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest = (r) => r) =>
    Effect.map(toolboxBase(sandbox), (base) => build(HttpClientRequest.make(method)(`${base}${path}`)))
  const callToolbox = (
    sandbox: ProviderSandbox,
    method: "GET" | "POST" | "DELETE",
    path: string,
    what: string,
    build?: (r: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest
  ) => Effect.flatMap(toolbox(sandbox, method, path, build), (request) => send(request, what, { toolbox: true }))

  // Paths arrive already at the provider (withWorkspace, below, rewrites /workspace on the way in and out).
  const withPath = (p: string) => HttpClientRequest.setUrlParam("path", p)

  // ---- sandboxes ----

  const toProviderSandbox = (s: WireSandbox, sent?: { readonly vcpu: number; readonly memoryGib: number; readonly diskGib: number | undefined }): ProviderSandbox => ({
    resourceId: s.id,
    resolvedResources: {
      vcpu: sent?.vcpu ?? s.cpu,
      memoryMb: Math.round((sent?.memoryGib ?? s.memory) * 1024),
      diskMb: Math.round((sent?.diskGib ?? s.disk) * 1024),
      architecture: "x86_64",
      providerSize: s.snapshot ?? null
    },
    metadata: { name: s.name, ...(s.toolboxProxyUrl === undefined ? {} : { toolboxProxyUrl: s.toolboxProxyUrl }) }
  })

  const getSandbox = (idOrName: string) =>
    send(api("GET", `/sandbox/${encodeURIComponent(idOrName)}`), "get sandbox").pipe(Effect.flatMap(decode(WireSandbox, "get sandbox")))
  const findSandbox = (idOrName: string) =>
    getSandbox(idOrName).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))

  /** Polls until the sandbox reaches `want`; a failed or vanished sandbox, or the deadline, is an error. */
  const waitFor = (id: string, want: "started" | "stopped", what: string) =>
    Effect.gen(function*() {
      const deadline = Date.now() + lifecycleTimeoutMs
      while (true) {
        const s = yield* findSandbox(id)
        if (s === null || GONE_STATES.has(s.state ?? "")) return yield* fail("unavailable", `daytona sandbox ${id} disappeared while ${what}`)
        if (s.state === want) return s
        if (FAILED_STATES.has(s.state ?? "")) {
          return yield* fail(s.state === "build_failed" ? "customer" : "unavailable", `daytona sandbox ${id} is ${s.state} while ${what}: ${s.errorReason ?? "no reason given"}`)
        }
        if (Date.now() > deadline) return yield* fail("unavailable", `daytona sandbox ${id} still ${s.state ?? "unknown"} after ${lifecycleTimeoutMs} ms ${what}`)
        yield* Effect.sleep(Duration.millis(pollMs))
      }
    })

  const byLabel = (sandboxId: string) =>
    send(
      api("GET", "/sandbox").pipe(HttpClientRequest.setUrlParams({ labels: JSON.stringify({ [LABEL_SANDBOX_ID]: sandboxId }), limit: "10" })),
      "list sandboxes"
    ).pipe(
      Effect.flatMap(decode(WireSandboxList, "list sandboxes")),
      Effect.map((list) => ("items" in list ? list.items : list)),
      // The filter is the provider's; check it ourselves, and skip what is being destroyed.
      Effect.map((items) => items.find((s) => s.labels?.[LABEL_SANDBOX_ID] === sandboxId && !GONE_STATES.has(s.state ?? "")) ?? null)
    )

  const destroyQuietly = (id: string) => Effect.ignore(send(api("DELETE", `/sandbox/${encodeURIComponent(id)}`), "delete sandbox"))

  /** A found resource, ready: a failed one is removed (and reported absent), a starting one is waited for. */
  const settle = (s: WireSandbox, sent?: Parameters<typeof toProviderSandbox>[1]) =>
    Effect.gen(function*() {
      if (FAILED_STATES.has(s.state ?? "")) {
        yield* destroyQuietly(s.id)
        return yield* fail(s.state === "build_failed" ? "customer" : "unavailable", `daytona sandbox ${s.id} is ${s.state}: ${s.errorReason ?? "no reason given"}`)
      }
      const ready = s.state === "started" ? s : yield* waitFor(s.id, "started", "starting").pipe(
        Effect.tapError((e) => (e.kind === "customer" ? destroyQuietly(s.id) : Effect.void))
      )
      return toProviderSandbox(ready, sent)
    })

  const create = (input: CreateInput) =>
    Effect.gen(function*() {
      if (input.source.kind === "provider_template") return yield* unsupported(NAME, "provider templates")
      if (input.resources.architecture === "arm64") return yield* unsupported(NAME, "arm64")
      const name = sandboxName(input.sandboxId)
      const existing = yield* findSandbox(name)
      if (existing !== null && !GONE_STATES.has(existing.state ?? "")) return yield* settle(existing)
      const oci = input.source.kind === "oci_image" ? input.source.image : undefined
      const sent = oci === undefined
        ? undefined
        : {
          vcpu: Math.max(1, Math.ceil(input.resources.vcpu)),
          memoryGib: Math.max(1, Math.ceil(input.resources.memoryMb / 1024)),
          diskGib: input.resources.diskMb === undefined ? undefined : Math.max(1, Math.ceil(input.resources.diskMb / 1024))
        }
      const body = {
        name,
        labels: {
          ...input.metadata,
          [LABEL_SANDBOX_ID]: input.sandboxId,
          "metal.project_id": input.projectId,
          "metal.organization_id": input.organizationId
        },
        env: input.environment,
        public: false,
        networkBlockAll: !input.internetAccess,
        autoStopInterval: 0,
        autoDeleteInterval: -1,
        ...(config.target === undefined ? {} : { target: config.target }),
        ...(oci === undefined
          ? config.snapshot === undefined ? {} : { snapshot: config.snapshot }
          : {
            buildInfo: { dockerfileContent: `FROM ${oci}\n` },
            cpu: sent!.vcpu,
            memory: sent!.memoryGib,
            ...(sent!.diskGib === undefined ? {} : { disk: sent!.diskGib })
          })
      }
      const created = yield* send(api("POST", "/sandbox").pipe(HttpClientRequest.bodyUnsafeJson(body)), "create sandbox", { ambiguous: true }).pipe(
        Effect.flatMap(decode(WireSandbox, "create sandbox")),
        // The name is taken: a create of ours (a retry, or one whose answer was lost) got there first.
        Effect.catchIf((e) => e.status === 409, (e) =>
          Effect.flatMap(findSandbox(name), (s) => (s === null ? Effect.fail(fail("unknown_outcome", `${e.message}, yet ${name} is not found`)) : Effect.succeed(s))))
      )
      return yield* settle(created, sent)
    })

  const reconcileCreate = (sandboxId: string) =>
    Effect.gen(function*() {
      const found = (yield* byLabel(sandboxId)) ?? (yield* findSandbox(sandboxName(sandboxId)))
      if (found === null || GONE_STATES.has(found.state ?? "")) return null
      return yield* settle(found).pipe(Effect.catchIf((e) => e.kind === "customer", () => Effect.succeed(null)))
    })

  const transition = (sandbox: ProviderSandbox, to: "stopped" | "started") =>
    Effect.gen(function*() {
      const s = yield* getSandbox(sandbox.resourceId).pipe(
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.fail(fail("not_found", `daytona sandbox ${sandbox.resourceId} does not exist`)))
      )
      if (s.state === to) return
      const settling = to === "stopped" ? s.state === "stopping" : s.state !== undefined && STARTING_STATES.has(s.state)
      if (!settling) yield* send(api("POST", `/sandbox/${encodeURIComponent(sandbox.resourceId)}/${to === "stopped" ? "stop" : "start"}`), to === "stopped" ? "stop sandbox" : "start sandbox")
      yield* waitFor(sandbox.resourceId, to, to === "stopped" ? "stopping" : "starting")
    })

  // ---- processes ----

  const readLog = (sandbox: ProviderSandbox, ref: ExecutionRef, exit: null | { readonly exitCode: number }) =>
    Effect.gen(function*() {
      const response = yield* callToolbox(
        sandbox,
        "GET",
        `/process/session/${encodeURIComponent(ref.sessionId)}/command/${encodeURIComponent(ref.commandId)}/logs`,
        "command logs",
        HttpClientRequest.setHeader("x-daytona-split-output", "true")
      )
      const isJson = (response.headers["content-type"] ?? "").includes("application/json")
      if (isJson) {
        // Separate stdout/stderr without their order: usable once the command is over.
        if (exit === null) return eventsFromPieces([], { maxOutputBytes: ref.maxOutputBytes, exit })
        const logs = yield* decode(WireLogs, "command logs")(response)
        const pieces = [
          { type: "stdout" as const, data: new TextEncoder().encode(logs.stdout) },
          { type: "stderr" as const, data: new TextEncoder().encode(logs.stderr) }
        ]
        return eventsFromPieces(pieces, { maxOutputBytes: ref.maxOutputBytes, exit })
      }
      const bytes = new Uint8Array(yield* Effect.mapError(response.arrayBuffer, (e) => fail("unavailable", `daytona command logs could not be read: ${e.message}`)))
      return eventsFromPieces(demuxLog(bytes), { maxOutputBytes: ref.maxOutputBytes, exit })
    })

  const execEvents = (sandbox: ProviderSandbox, executionId: string, fromSeq: number) =>
    Effect.gen(function*() {
      const ref = decodeExecutionId(executionId)
      if (ref === undefined) return yield* fail("invalid_request", `${executionId} is not a Daytona execution id`)
      const command = yield* callToolbox(
        sandbox,
        "GET",
        `/process/session/${encodeURIComponent(ref.sessionId)}/command/${encodeURIComponent(ref.commandId)}`,
        "command status"
      ).pipe(
        Effect.flatMap(decode(WireCommand, "command status")),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
      )
      if (command === null) {
        // The session is gone: cancelled (or ended with its sandbox's stop). Its output went with it.
        logCache.delete(executionId)
        return [{ seq: fromSeq, type: "exit", exitCode: null, signal: "SIGTERM", cancelled: true, timedOut: false, outputTruncated: false }] satisfies Array<ProviderExecEvent>
      }
      const exitCode = command.exitCode ?? null
      let events: ReadonlyArray<ProviderExecEvent>
      if (exitCode === null) {
        const cached = logCache.get(executionId)
        if (cached !== undefined && Date.now() - cached.at < logPollMs) {
          events = cached.events
        } else {
          events = yield* readLog(sandbox, ref, null)
          logCache.set(executionId, { at: Date.now(), events })
          if (logCache.size > 512) logCache.delete(logCache.keys().next().value!)
        }
      } else {
        logCache.delete(executionId)
        events = yield* readLog(sandbox, ref, { exitCode })
      }
      return events.slice(fromSeq)
    })

  const exec = (sandbox: ProviderSandbox, input: Parameters<SandboxProvider["exec"]>[1]) =>
    Effect.gen(function*() {
      if (capabilities.process === null) return yield* unsupported(NAME, "processes")
      const sessionId = sessionName(input.processId)
      const sessionPath = `/process/session/${encodeURIComponent(sessionId)}`
      const maxOutputBytes = Math.min(input.maxOutputBytes, capabilities.process.maxOutputBytes)
      const existed = yield* callToolbox(sandbox, "POST", "/process/session", "create session", HttpClientRequest.bodyUnsafeJson({ sessionId })).pipe(
        Effect.as(false),
        // It exists: a retry of this exec. Its command (if it got that far) is the one to follow.
        Effect.catchIf((e) => e.status === 409, () => Effect.succeed(true))
      )
      if (existed) {
        const session = yield* callToolbox(sandbox, "GET", sessionPath, "get session").pipe(Effect.flatMap(decode(WireSession, "get session")))
        const started = session.commands?.[0]
        if (started !== undefined) return { executionId: encodeExecutionId({ sessionId, commandId: started.id, maxOutputBytes }) }
      }
      const env = Object.entries(input.environment ?? {}).map(([k, v]) => shellQuote(`${k}=${v}`))
      const argv = input.command.map(shellQuote).join(" ")
      const run = `${env.length > 0 ? `env -- ${env.join(" ")} ` : ""}${argv}`
      const cwd = input.cwd ?? workspaceDir
      // A subshell: the session's own shell must survive (`exec` there would replace it).
      const command = [
        `(`,
        // Upstream the home-relative workspace may not exist yet; the emulator's sandboxes always have /workspace.
        cwd === workspaceDir && !emulated ? `mkdir -p -- ${shellQuote(cwd)} 2>/dev/null;` : "",
        `cd -- ${shellQuote(cwd)} || exit 1;`,
        `exec ${run}`,
        `)`
      ].filter((s) => s !== "").join(" ")
      const { cmdId } = yield* callToolbox(sandbox, "POST", `${sessionPath}/exec`, "exec", HttpClientRequest.bodyUnsafeJson({ command, runAsync: true })).pipe(
        Effect.flatMap(decode(WireExec, "exec"))
      )
      return { executionId: encodeExecutionId({ sessionId, commandId: cmdId, maxOutputBytes }) }
    })

  const cancelExec = (sandbox: ProviderSandbox, executionId: string) =>
    Effect.gen(function*() {
      if (capabilities.process?.cancel !== true) return yield* unsupported(NAME, "cancelling processes")
      const ref = decodeExecutionId(executionId)
      if (ref === undefined) return yield* fail("invalid_request", `${executionId} is not a Daytona execution id`)
      const command = yield* callToolbox(sandbox, "GET", `/process/session/${encodeURIComponent(ref.sessionId)}/command/${encodeURIComponent(ref.commandId)}`, "command status").pipe(
        Effect.flatMap(decode(WireCommand, "command status")),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
      )
      // Already over (or already cancelled): keep its real exit.
      if (command === null || (command.exitCode ?? null) !== null) return { cancelled: false }
      return yield* callToolbox(sandbox, "DELETE", `/process/session/${encodeURIComponent(ref.sessionId)}`, "delete session").pipe(
        Effect.as({ cancelled: true }),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed({ cancelled: false }))
      )
    })

  // ---- files ----

  const files = capabilities.files
  const fileInfo = (sandbox: ProviderSandbox, p: string) =>
    callToolbox(sandbox, "GET", "/files/info", "file info", withPath(p)).pipe(Effect.flatMap(decode(WireFileInfo, "file info")))
  const fileInfoOrNull = (sandbox: ProviderSandbox, p: string) =>
    fileInfo(sandbox, p).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))

  const parentOf = (p: string) => p.slice(0, p.lastIndexOf("/")) || "/"
  const modifiedAtOf = (f: WireFileInfo) => {
    const iso = f.modifiedAt ?? f.modTime
    const ms = iso === undefined ? Number.NaN : Date.parse(iso.replace(/ [+-]\d{4} \w+$/, "").replace(" m=", ""))
    return Number.isNaN(ms) ? new Date(0).toISOString() : new Date(ms).toISOString()
  }
  const typeOf = (f: WireFileInfo): ProviderFileEntry["type"] =>
    f.isDir ? "directory" : f.mode === undefined || f.mode.startsWith("-") ? "file" : f.mode.startsWith("L") ? "symlink" : "other"

  const readFile: SandboxProvider["readFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.read) return yield* unsupported(NAME, "reading files")
      const info = yield* fileInfo(sandbox, input.path)
      if (info.isDir) return yield* fail("invalid_request", `${input.path} is a directory`)
      const size = info.size
      const end = Math.min(size, input.offsetBytes + Math.min(input.maxBytes, files.maxReadBytes))
      if (end <= input.offsetBytes) return { data: new Uint8Array(), offsetBytes: input.offsetBytes, sizeBytes: size, eof: input.offsetBytes >= size }
      const response = yield* callToolbox(sandbox, "GET", "/files/download", "download", (r) =>
        r.pipe(withPath(input.path), HttpClientRequest.setHeader("range", `bytes=${input.offsetBytes}-${end - 1}`)))
      const body = new Uint8Array(yield* Effect.mapError(response.arrayBuffer, (e) => fail("unavailable", `daytona download could not be read: ${e.message}`)))
      // 206 is the range; a 200 is the whole file (no Range support on the way).
      const data = response.status === 206 ? body.slice(0, end - input.offsetBytes) : body.slice(input.offsetBytes, end)
      return { data, offsetBytes: input.offsetBytes, sizeBytes: size, eof: input.offsetBytes + data.length >= size }
    })

  const writeFile: SandboxProvider["writeFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.write) return yield* unsupported(NAME, "writing files")
      if (!files.writeModes.includes(input.mode)) return yield* unsupported(NAME, `the ${input.mode} write mode`)
      if (input.data.length > files.maxWriteBytes) return yield* fail("invalid_request", `daytona takes at most ${files.maxWriteBytes} bytes per write`)
      const existing = yield* fileInfoOrNull(sandbox, input.path)
      if (existing?.isDir === true) return yield* fail("invalid_request", `${input.path} is a directory`)
      if (input.mode === "create" && existing !== null) return yield* fail("customer", `${input.path} already exists`)
      const parent = parentOf(input.path)
      if (input.createParents) {
        yield* callToolbox(sandbox, "POST", "/files/folder", "create folder", (r) => r.pipe(withPath(parent), HttpClientRequest.setUrlParam("mode", "755")))
      } else if (existing === null) {
        // Daytona's upload would create the parents: refuse as a missing parent would.
        const dir = yield* fileInfoOrNull(sandbox, parent)
        if (dir === null) return yield* fail("not_found", `${parent} does not exist`)
        if (!dir.isDir) return yield* fail("invalid_request", `${parent} is not a directory`)
      }
      const form = new FormData()
      form.append("file", new Blob([input.data.slice()]), input.path.slice(input.path.lastIndexOf("/") + 1) || "file")
      yield* callToolbox(sandbox, "POST", "/files/upload", "upload", (r) => r.pipe(withPath(input.path), HttpClientRequest.bodyFormData(form)))
      return { bytesWritten: input.data.length, created: existing === null }
    })

  const listFiles: SandboxProvider["listFiles"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.list) return yield* unsupported(NAME, "listing files")
      const limit = Math.min(input.maxEntries, files.maxListEntries)
      const entries: Array<ProviderFileEntry> = []
      let truncated = false
      const walk = (dir: string): Effect.Effect<void, ProviderError> =>
        Effect.gen(function*() {
          const list = yield* callToolbox(sandbox, "GET", "/files", "list files", withPath(dir)).pipe(
            Effect.flatMap(decode(Schema.Array(WireFileInfo), "list files"))
          )
          for (const item of [...list].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
            if (entries.length >= limit) {
              truncated = true
              return
            }
            const p = `${dir === "/" ? "" : dir}/${item.name}`
            entries.push({ path: p, type: typeOf(item), sizeBytes: item.size, modifiedAt: modifiedAtOf(item) })
            if (input.recursive && item.isDir) yield* walk(p)
            if (truncated) return
          }
        })
      const root = input.path.length > 1 ? input.path.replace(/\/+$/, "") : input.path
      yield* walk(root)
      return { entries, truncated }
    })

  const deleteFile: SandboxProvider["deleteFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.delete) return yield* unsupported(NAME, "deleting files")
      return yield* callToolbox(sandbox, "DELETE", "/files", "delete file", (r) =>
        r.pipe(withPath(input.path), HttpClientRequest.setUrlParam("recursive", String(input.recursive)))).pipe(
          Effect.as({ deleted: true }),
          Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed({ deleted: false }))
        )
    })

  // ---- endpoints ----

  const exposeHttpEndpoint: SandboxProvider["exposeHttpEndpoint"] = (sandbox, input) =>
    Effect.gen(function*() {
      const endpoints = capabilities.httpEndpoints
      if (endpoints === null || !endpoints.expose) return yield* unsupported(NAME, "HTTP endpoints")
      if (!Number.isInteger(input.port) || input.port < 1 || input.port > 65_535) return yield* fail("invalid_request", `port ${input.port} is out of range`)
      if (!Number.isInteger(input.leaseSeconds) || input.leaseSeconds < 1 || input.leaseSeconds > endpoints.maxLeaseSeconds) {
        return yield* fail("invalid_request", `leases last 1 to ${endpoints.maxLeaseSeconds} seconds`)
      }
      const preview = yield* send(
        api("GET", `/sandbox/${encodeURIComponent(sandbox.resourceId)}/ports/${input.port}/signed-preview-url`).pipe(
          HttpClientRequest.setUrlParam("expiresInSeconds", String(input.leaseSeconds))
        ),
        "signed preview url",
        { mutating: true }
      ).pipe(Effect.flatMap(decode(WirePreview, "signed preview url")))
      return { leaseId: `${input.port}:${preview.token}`, url: preview.url, expiresAt: new Date(Date.now() + input.leaseSeconds * 1000).toISOString() }
    })

  const revokeHttpEndpoint: SandboxProvider["revokeHttpEndpoint"] = (sandbox, leaseId) =>
    Effect.gen(function*() {
      if (capabilities.httpEndpoints?.revoke !== true) return yield* unsupported(NAME, "HTTP endpoints")
      const match = /^(\d{1,5}):([A-Za-z0-9_-]+)$/.exec(leaseId)
      if (match === null) return yield* fail("invalid_request", `${leaseId} is not a Daytona lease id`)
      return yield* send(
        api("POST", `/sandbox/${encodeURIComponent(sandbox.resourceId)}/ports/${match[1]}/signed-preview-url/${match[2]}/expire`),
        "expire preview url"
      ).pipe(
        Effect.as({ revoked: true }),
        // The sandbox is gone, and its previews with it.
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed({ revoked: false }))
      )
    })

  return withWorkspace({
    name: NAME,
    capabilities,
    mode: config.mode,
    create,
    reconcileCreate,
    inspect: (sandbox) =>
      findSandbox(sandbox.resourceId).pipe(Effect.map((s) => (s === null ? "absent" : inspectStateOf(s.state)))),
    destroy: (sandbox) =>
      send(api("DELETE", `/sandbox/${encodeURIComponent(sandbox.resourceId)}`), "delete sandbox").pipe(
        Effect.asVoid,
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.void),
        // A state change in progress: fine if it is the destroy itself.
        Effect.catchIf((e) => e.status === 409, (e) =>
          Effect.flatMap(findSandbox(sandbox.resourceId), (s) =>
            s === null || GONE_STATES.has(s.state ?? "") ? Effect.void : Effect.fail(fail("unavailable", e.message, 409))))
      ),
    pause: (sandbox) => (capabilities.pause ? transition(sandbox, "stopped") : Effect.fail(unsupported(NAME, "pause"))),
    resume: (sandbox) => (capabilities.resume ? transition(sandbox, "started") : Effect.fail(unsupported(NAME, "resume"))),
    getCost: (sandbox, window) =>
      Effect.sync(() => {
        const seconds = Math.max(0, (Date.parse(window.to) - Date.parse(window.from)) / 1000)
        const r = sandbox.resolvedResources
        const disk = Math.max(0, (r.diskMb ?? 0) / 1024 - DAYTONA_RATE_CARD.freeDiskGib)
        const perSecond = r.vcpu * DAYTONA_RATE_CARD.vcpuSecondMicrousd + (r.memoryMb / 1024) * DAYTONA_RATE_CARD.gibSecondMicrousd + disk * DAYTONA_RATE_CARD.diskGibSecondMicrousd
        return {
          amountMicrousd: BigInt(Math.round(seconds * perSecond)),
          measuredThrough: window.to,
          provenance: "estimated_rate_card" as const,
          confidence: "low" as const,
          rateCardVersion: DAYTONA_RATE_CARD.version
        }
      }),
    exec,
    execEvents,
    cancelExec,
    readFile,
    writeFile,
    listFiles,
    deleteFile,
    exposeHttpEndpoint,
    revokeHttpEndpoint
  }, workspaceDir)
}
