/**
 * E2B adapter (reference/providers.md §3.2 "e2b"), speaking E2B's wire API through `HttpClient`:
 *
 * - Control API (`X-API-Key`): `POST /sandboxes`, `GET /sandboxes/{id}`, `GET /v2/sandboxes?metadata=…` (reconcile
 *   by our `metal.sandbox_id`), `DELETE`, `POST …/pause`, `POST …/connect` (resumes a paused sandbox and returns
 *   a fresh envd access token).
 * - envd (port 49983; `E2b-Sandbox-Id`, `E2b-Sandbox-Port`, `X-Access-Token`): Connect protocol with the JSON
 *   codec. `process.Process/Start` and `/Connect` are server streams; `List`, `SendSignal` and the
 *   `filesystem.Filesystem` calls are unary; `GET/POST /files` move bytes (Range reads, octet-stream or multipart
 *   uploads by envd version).
 *
 * envd addressing: `sandboxUrl` is either one host for every sandbox (requests carry `E2b-Sandbox-Id`, as the SDK
 * does for `https://sandbox.e2b.app`) or a host pattern with `{port}` and `{sandboxId}`
 * (`https://{port}-{sandboxId}.e2b.app`). The headers are sent either way.
 *
 * Processes: each execution is started with our process id as its envd `tag`, so it can be found again.
 * envd keeps no output for a client that is not attached, so this adapter reads each stream in the background
 * into a small per-execution buffer, which `execEvents` drains (events the caller acknowledged by asking from a
 * later seq are dropped). After a gateway restart (or a broken stream: a pause drops every envd connection) the
 * adapter re-attaches with `process.Process/Connect {tag}`:
 * - real envd then streams only what comes next: output written while nobody was attached is lost, and new
 *   events continue the sequence where the caller left off;
 * - a process that ended while nobody was attached is unknown to envd (it forgets finished processes), so its
 *   exit status is lost: `execEvents` fails with kind `not_found` (or reports the exit as cancelled when this
 *   adapter had cancelled it);
 * - the built-in emulator replays a process's output from the start and says so with the response header
 *   `x-e2b-emulator-replay: start`; the adapter then skips what it had already handed out, so nothing is lost.
 *
 * Cancel: the reference lists no cancel for E2B, but envd has `SendSignal`: cancel sends SIGTERM, then SIGKILL
 * after a grace period, so this adapter declares `process.cancel`. Timeouts: `Connect-Timeout-Ms` on Start makes
 * envd kill the process when it expires, even with nobody attached. No HTTP endpoints (`unsupported`).
 * Cost: E2B's rate card (14 µUSD per vCPU-second + 4.5 µUSD per GiB-second) over the window.
 */
import { FetchHttpClient, HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Cause, Deferred, Duration, Effect, Either, Exit, Schema, Stream } from "effect"
import { DECLARED } from "../core/declared.ts"
import { kindOfStatus, providerFailure } from "../core/errors.ts"
import { withWorkspace } from "../core/workspace.ts"
import {
  type CreateInput,
  type InspectState,
  type ProviderCapabilities,
  type ProviderError,
  type ProviderErrorKind,
  type ProviderExecEvent,
  type ProviderFileEntry,
  type ProviderSandbox,
  type ResolvedResources,
  type SandboxProvider,
  unsupported
} from "../core/Provider.ts"
import {
  type ConnectCode,
  type ConnectErrorBody,
  encodeEnvelope,
  END_STREAM,
  type Envelope,
  EnvelopeDecoder,
  isConnectCode,
  STREAM_CONTENT_TYPE,
  trailerError
} from "./connect.ts"

const NAME = "e2b" as const
export const ENVD_PORT = 49983
/** Sent by the built-in emulator on `Connect` responses that replay the output from the start. */
export const REPLAY_HEADER = "x-e2b-emulator-replay"

export const E2B_RATE_CARD = { version: "e2b-2026-08-21", vcpuSecondMicrousd: 14, gibSecondMicrousd: 4.5 } as const

/** What the adapter really does: the declared E2B row, plus cancel (SendSignal) and the internet switch. */
export const E2B_CAPABILITIES: ProviderCapabilities = {
  ...DECLARED.e2b,
  process: { ...DECLARED.e2b.process!, cancel: true },
  network: { blockInternet: true, allowDomains: false, denyDomains: false }
}

/** envd versions that changed the wire (the SDK's own thresholds). */
const ENVD_STDIN_FLAG = "0.3.0"
const ENVD_DEFAULT_USER = "0.4.0"
const ENVD_OCTET_STREAM_UPLOAD = "0.5.7"
const DEFAULT_USER = "user"

const REQUEST_TIMEOUT = Duration.seconds(60)
const KILL_GRACE = Duration.seconds(5)
/** E2B's longest sandbox lifetime (Pro tier); longer runtime timeouts are capped to it. */
const MAX_SANDBOX_TIMEOUT_SECONDS = 86_400
/** E2B's own timer is a safety net behind the gateway's lifecycle timers, so it fires a little later. */
const TIMEOUT_MARGIN_SECONDS = 300
/** A detached execution is re-attached at most this often, and reported failing after this long. */
const REATTACH_BACKOFF_MS = 1_000
const REATTACH_GIVE_UP_MS = 5 * 60_000
/** Finished executions are forgotten this long after their exit was seen. */
const FORGET_AFTER_MS = 10 * 60_000

const fail = providerFailure(NAME)
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never
type EventWithoutSeq = DistributiveOmit<ProviderExecEvent, "seq">

// ---- wire shapes (only the fields used) ----

const WireSandbox = Schema.Struct({
  sandboxID: Schema.String,
  templateID: Schema.String,
  envdVersion: Schema.optional(Schema.String),
  envdAccessToken: Schema.optional(Schema.NullOr(Schema.String))
})
const WireSandboxDetail = Schema.Struct({
  ...WireSandbox.fields,
  state: Schema.String,
  cpuCount: Schema.Number,
  memoryMB: Schema.Number,
  diskSizeMB: Schema.optional(Schema.Number),
  startedAt: Schema.optional(Schema.String),
  endAt: Schema.optional(Schema.String)
})
type WireSandboxDetail = typeof WireSandboxDetail.Type
const WireListed = Schema.Array(Schema.Struct({ sandboxID: Schema.String, state: Schema.optional(Schema.String) }))
const ProcessList = Schema.Struct({
  processes: Schema.optionalWith(Schema.Array(Schema.Struct({ pid: Schema.optional(Schema.Number), tag: Schema.optional(Schema.String) })), {
    default: () => []
  })
})
const EntryInfo = Schema.Struct({
  path: Schema.String,
  type: Schema.optional(Schema.String),
  size: Schema.optional(Schema.Union(Schema.String, Schema.Number)),
  modifiedTime: Schema.optional(Schema.String)
})
type EntryInfo = typeof EntryInfo.Type
const StatResponse = Schema.Struct({ entry: EntryInfo })
const ListDirResponse = Schema.Struct({ entries: Schema.optionalWith(Schema.Array(EntryInfo), { default: () => [] }) })
const Empty = Schema.Struct({})

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

const connectKind = (code: ConnectCode): ProviderErrorKind =>
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

const connectFailure = (what: string, error: ConnectErrorBody) => fail(connectKind(error.code), `e2b ${what}: ${error.code}: ${error.message}`)

/** Capacity-like `error_code`s of the control API: nothing was placed, another provider may do. */
const CAPACITY_CODES = new Set(["sandbox_capacity_unavailable", "sandbox_placement_timeout", "sandbox_no_compatible_node"])

interface Execution {
  readonly key: string
  readonly selector: { readonly tag: string } | { readonly pid: number }
  /** Events the caller has not acknowledged yet; the first has seq `base`. */
  base: number
  events: Array<ProviderExecEvent>
  outputBytes: number
  truncated: boolean
  done: boolean
  cancelled: boolean
  attached: boolean
  failure: ProviderError | null
  retryAt: number
  failingSince: number | null
  readonly maxOutputBytes: number
  readonly startedAt: number | null
  readonly timeoutMs: number | null
}
const nextSeq = (x: Execution) => x.base + x.events.length

interface EnvdAccess {
  readonly token: string | null
  readonly envdVersion: string
}

export interface E2BProviderConfig {
  readonly apiUrl: string
  /** envd base: one host (header-routed), or a pattern with `{port}` and `{sandboxId}`. */
  readonly sandboxUrl: string
  readonly apiKey: string
  readonly mode: "remote" | "emulated"
  /** Template for `environment` sources (E2B_TEMPLATE_ID); default `base`. */
  readonly defaultTemplate?: string | undefined
  readonly capabilities?: ProviderCapabilities | undefined
  /** Defaults to the fetch client; tests pass a scripted one. */
  readonly httpClient?: HttpClient.HttpClient | undefined
  /**
   * Where the gateway's /workspace is at the provider: E2B's user cannot create /workspace, so by default
   * `/home/user` (its home, where commands start) remote, and `/workspace` in the emulator.
   */
  readonly workspaceDir?: string | undefined
}

const defaultClient = () => Effect.runSync(Effect.provide(HttpClient.HttpClient, FetchHttpClient.layer))

export const makeE2BProvider = (config: E2BProviderConfig): SandboxProvider => {
  const capabilities = config.capabilities ?? E2B_CAPABILITIES
  const client = config.httpClient ?? defaultClient()
  const apiUrl = config.apiUrl.replace(/\/+$/, "")
  /** Access tokens stay in memory (never in the gateway's database); a restart fetches them again. */
  const access = new Map<string, EnvdAccess>()
  const executions = new Map<string, Execution>()

  // ---- HTTP plumbing ----

  const errorOf = (response: HttpClientResponse.HttpClientResponse, what: string, creating: boolean) =>
    Effect.gen(function*() {
      const text = yield* Effect.orElseSucceed(response.text, () => "")
      let body: { code?: unknown; message?: unknown; error_code?: unknown } = {}
      try {
        body = JSON.parse(text) as typeof body
      } catch {
        // not JSON: a proxy's page; the status says enough
      }
      const message = typeof body.message === "string" ? body.message : text.slice(0, 300)
      const status = response.status
      const kind: ProviderErrorKind = isConnectCode(body.code)
        ? connectKind(body.code)
        : typeof body.error_code === "string" && CAPACITY_CODES.has(body.error_code)
        ? "capacity"
        : creating && (status === 500 || status === 502 || status === 504)
        // The create may have gone through: the caller reconciles by metadata.
        ? "unknown_outcome"
        : kindOfStatus(status)
      return fail(kind, `e2b ${what} answered ${status}: ${message}`, status)
    })

  const send = (
    request: HttpClientRequest.HttpClientRequest,
    what: string,
    options: { readonly mutating?: boolean; readonly creating?: boolean; readonly accept?: (status: number) => boolean } = {}
  ) =>
    client.execute(request).pipe(
      Effect.mapError((e) => fail(options.mutating ? "unknown_outcome" : "unavailable", `e2b ${what} failed: ${e.message}`)),
      Effect.timeoutFail({ duration: REQUEST_TIMEOUT, onTimeout: () => fail(options.mutating ? "unknown_outcome" : "unavailable", `e2b ${what} timed out`) }),
      Effect.flatMap((response) =>
        (response.status >= 200 && response.status < 300) || options.accept?.(response.status) === true
          ? Effect.succeed(response)
          : Effect.flatMap(errorOf(response, what, options.creating === true), Effect.fail)
      )
    )

  const decode = <A, I>(schema: Schema.Schema<A, I>, what: string) => (response: HttpClientResponse.HttpClientResponse) =>
    response.json.pipe(
      Effect.flatMap(Schema.decodeUnknown(schema)),
      Effect.mapError((e) => fail("unavailable", `e2b ${what} sent an unexpected body: ${e.message}`))
    )

  const api = (method: "GET" | "POST" | "DELETE", path: string, body?: unknown) => {
    const request = HttpClientRequest.make(method)(`${apiUrl}${path}`).pipe(
      HttpClientRequest.setHeader("x-api-key", config.apiKey),
      HttpClientRequest.acceptJson
    )
    return body === undefined ? request : HttpClientRequest.bodyUnsafeJson(request, body)
  }

  const getDetail = (sandboxId: string) =>
    send(api("GET", `/sandboxes/${encodeURIComponent(sandboxId)}`), "get sandbox").pipe(Effect.flatMap(decode(WireSandboxDetail, "get sandbox")))

  const remember = (s: { readonly sandboxID: string; readonly envdVersion?: string | undefined; readonly envdAccessToken?: string | null | undefined }) =>
    access.set(s.sandboxID, { token: s.envdAccessToken ?? null, envdVersion: s.envdVersion ?? "0.0.0" })

  /** The sandbox's envd token and version: from memory, else from the control API (E2B may rotate it on resume). */
  const refreshAccess = (sandbox: ProviderSandbox) =>
    Effect.map(getDetail(sandbox.resourceId), (detail) => {
      remember(detail)
      return access.get(sandbox.resourceId)!
    })
  const accessOf = (sandbox: ProviderSandbox) => Effect.suspend(() => {
    const known = access.get(sandbox.resourceId)
    return known === undefined ? refreshAccess(sandbox) : Effect.succeed(known)
  })

  /** envd wants a user only before 0.4.0 (later it has a default user). */
  const userHeader = (a: EnvdAccess): Record<string, string> =>
    envdAtLeast(a.envdVersion, ENVD_DEFAULT_USER) ? {} : { authorization: `Basic ${btoa(`${DEFAULT_USER}:`)}` }
  const userParam = (a: EnvdAccess) => (request: HttpClientRequest.HttpClientRequest) =>
    envdAtLeast(a.envdVersion, ENVD_DEFAULT_USER) ? request : HttpClientRequest.setUrlParam(request, "username", DEFAULT_USER)

  const envdRequest = (sandbox: ProviderSandbox, a: EnvdAccess, method: "GET" | "POST", path: string) =>
    HttpClientRequest.make(method)(`${envdBaseUrl(config.sandboxUrl, sandbox.resourceId)}${path}`).pipe(
      HttpClientRequest.setHeaders({
        "e2b-sandbox-id": sandbox.resourceId,
        "e2b-sandbox-port": String(ENVD_PORT),
        ...(a.token === null ? {} : { "x-access-token": a.token })
      })
    )

  /** One envd call; a 401 fetches the sandbox's current access token and tries once more. */
  const envd = (
    sandbox: ProviderSandbox,
    build: (a: EnvdAccess) => HttpClientRequest.HttpClientRequest,
    what: string,
    options: { readonly mutating?: boolean; readonly accept?: (status: number) => boolean } = {}
  ) =>
    Effect.flatMap(accessOf(sandbox), (a) => send(build(a), what, options)).pipe(
      Effect.catchIf(
        (e) => e.kind === "auth" && e.status === 401,
        () => Effect.flatMap(refreshAccess(sandbox), (a) => send(build(a), what, options))
      )
    )

  const unary = <A, I>(sandbox: ProviderSandbox, method: string, body: unknown, schema: Schema.Schema<A, I>, mutating = false) =>
    envd(
      sandbox,
      (a) =>
        envdRequest(sandbox, a, "POST", `/${method}`).pipe(
          HttpClientRequest.setHeaders({ "connect-protocol-version": "1", ...userHeader(a) }),
          HttpClientRequest.bodyUnsafeJson(body)
        ),
      method,
      { mutating }
    ).pipe(Effect.flatMap(decode(schema, method)))

  const statOrNull = (sandbox: ProviderSandbox, path: string) =>
    unary(sandbox, "filesystem.Filesystem/Stat", { path }, StatResponse).pipe(
      Effect.map((r): EntryInfo | null => r.entry),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
    )

  // ---- sandboxes ----

  const resolved = (s: WireSandboxDetail): ResolvedResources => ({
    vcpu: s.cpuCount,
    memoryMb: s.memoryMB,
    diskMb: s.diskSizeMB ?? null,
    architecture: "x86_64",
    providerSize: s.templateID
  })
  const toProviderSandbox = (s: { readonly sandboxID: string; readonly templateID: string; readonly envdVersion?: string | undefined }, resources: ResolvedResources, timeoutSeconds: number): ProviderSandbox => ({
    resourceId: s.sandboxID,
    resolvedResources: resources,
    metadata: { templateID: s.templateID, envdVersion: s.envdVersion ?? null, timeoutSeconds }
  })
  const lifetimeOf = (s: WireSandboxDetail) =>
    s.startedAt !== undefined && s.endAt !== undefined ? Math.max(60, Math.round((Date.parse(s.endAt) - Date.parse(s.startedAt)) / 1000)) : 3600

  const connectSandbox = (sandboxId: string, timeoutSeconds: number) =>
    send(api("POST", `/sandboxes/${encodeURIComponent(sandboxId)}/connect`, { timeout: timeoutSeconds }), "connect sandbox", { mutating: true }).pipe(
      Effect.flatMap(decode(WireSandbox, "connect sandbox")),
      Effect.tap(remember)
    )

  const reconcileCreate = (sandboxId: string) =>
    Effect.gen(function*() {
      const request = api("GET", "/v2/sandboxes").pipe(
        HttpClientRequest.setUrlParam("metadata", `${encodeURIComponent("metal.sandbox_id")}=${encodeURIComponent(sandboxId)}`),
        HttpClientRequest.setUrlParam("state", "running,paused")
      )
      const listed = yield* send(request, "list sandboxes").pipe(Effect.flatMap(decode(WireListed, "list sandboxes")))
      const found = listed[0]
      if (found === undefined) return null
      const detail = yield* getDetail(found.sandboxID).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))
      if (detail === null) return null
      remember(detail)
      return toProviderSandbox(detail, resolved(detail), lifetimeOf(detail))
    })

  const templateOf = (input: CreateInput) => {
    const option = input.providerOptions["template_id"]
    if (typeof option === "string" && option !== "") return option
    if (input.source.kind === "provider_template") return input.source.template
    return config.defaultTemplate ?? "base"
  }

  // ---- processes ----

  const executionKey = (sandbox: ProviderSandbox, executionId: string) => `${sandbox.resourceId}/${executionId}`
  /** `e2b:<tag>`; ids of the form `e2b:<digits>` (older adapter versions) select by pid. */
  const selectorOf = (executionId: string): Execution["selector"] => {
    const rest = executionId.replace(/^e2b:/, "")
    return /^\d+$/.test(rest) ? { pid: Number(rest) } : { tag: rest }
  }
  const newExecution = (key: string, selector: Execution["selector"], fields: Partial<Pick<Execution, "base" | "maxOutputBytes" | "startedAt" | "timeoutMs">> = {}): Execution => ({
    key,
    selector,
    base: fields.base ?? 0,
    events: [],
    outputBytes: 0,
    truncated: false,
    done: false,
    cancelled: false,
    attached: false,
    failure: null,
    retryAt: 0,
    failingSince: null,
    maxOutputBytes: fields.maxOutputBytes ?? capabilities.process?.maxOutputBytes ?? 100 * 1024 * 1024,
    startedAt: fields.startedAt ?? null,
    timeoutMs: fields.timeoutMs ?? null
  })

  const finish = (x: Execution, event: Extract<EventWithoutSeq, { type: "exit" }>, emit: (e: EventWithoutSeq) => void) => {
    emit(event)
    x.done = true
    setTimeout(() => {
      if (executions.get(x.key) === x) executions.delete(x.key)
    }, FORGET_AFTER_MS).unref()
  }

  /**
   * Reads one Start/Connect stream into the execution's buffer until it ends. `replay`: the server sends the
   * output from the start (the emulator), so events the buffer already had are skipped.
   */
  const pump = (x: Execution, response: HttpClientResponse.HttpClientResponse, replay: boolean, started: Deferred.Deferred<void, ProviderError>) => {
    const decoder = new EnvelopeDecoder()
    let seq = replay ? 0 : nextSeq(x)
    let bytes = replay ? 0 : x.outputBytes
    let truncated = replay ? false : x.truncated
    const emit = (event: EventWithoutSeq) => {
      if (seq >= nextSeq(x)) {
        x.events.push({ ...event, seq } as ProviderExecEvent)
        x.outputBytes = bytes
        x.truncated = truncated
      }
      seq += 1
    }
    const onEnvelope = (envelope: Envelope) => {
      if (x.done) return
      if ((envelope.flags & END_STREAM) !== 0) {
        const error = trailerError(envelope.message)
        if (error?.code === "deadline_exceeded" && x.timeoutMs !== null) {
          // envd's deadline (Connect-Timeout-Ms) ended the call as it killed the process, before the end event.
          finish(x, { type: "exit", exitCode: null, signal: "SIGKILL", cancelled: x.cancelled, timedOut: !x.cancelled, outputTruncated: truncated }, emit)
        } else if (error !== null) {
          x.failure = connectFailure("process stream", error)
        }
        return
      }
      const event = (envelope.message as { event?: Record<string, unknown> } | null)?.event ?? {}
      const start = event["start"] as { pid?: unknown } | undefined
      const data = event["data"] as { stdout?: unknown; stderr?: unknown } | undefined
      const end = event["end"] as { exitCode?: unknown; exited?: unknown; status?: unknown } | undefined
      if (start !== undefined) {
        Deferred.unsafeDone(started, Exit.void)
      } else if (data !== undefined) {
        const type = typeof data.stdout === "string" ? "stdout" : typeof data.stderr === "string" ? "stderr" : null
        if (type === null) return // pty output: never requested
        const raw = Buffer.from(String(data[type]), "base64")
        let chunk = new Uint8Array(raw.buffer, raw.byteOffset, raw.length) // a plain view, not a Buffer
        const room = Math.max(0, x.maxOutputBytes - bytes)
        if (chunk.length > room) {
          chunk = chunk.subarray(0, room)
          truncated = true
        }
        bytes += chunk.length
        if (chunk.length > 0) emit({ type, data: chunk })
      } else if (end !== undefined) {
        // Protobuf JSON leaves out defaults: no `exitCode` means 0, no `exited` means false.
        const exited = end.exited === true
        const signal = exited ? null : signalOfStatus(typeof end.status === "string" ? end.status : "")
        const timedOut = !x.cancelled && !exited && x.timeoutMs !== null && x.startedAt !== null && Date.now() - x.startedAt >= x.timeoutMs - 50
        finish(x, { type: "exit", exitCode: exited ? Number(end.exitCode ?? 0) : null, signal, cancelled: x.cancelled, timedOut, outputTruncated: truncated }, emit)
      }
      // keepalive: nothing to do
    }
    return response.stream.pipe(
      Stream.runForEach((chunk) => Effect.sync(() => decoder.push(chunk).forEach(onEnvelope))),
      Effect.catchAllCause((cause) =>
        Effect.sync(() => {
          const error = Cause.squash(cause)
          if (!x.done) x.failure = fail("unavailable", `the e2b process stream broke: ${error instanceof Error ? error.message : String(error)}`)
        })
      ),
      Effect.ensuring(Effect.sync(() => {
        x.attached = false
        Deferred.unsafeDone(started, Exit.fail(x.failure ?? fail("unavailable", "the process stream ended before the process started")))
      }))
    )
  }

  /** Opens a Start or Connect stream and checks it is one (a proxy may answer with a plain error page). */
  const openStream = (sandbox: ProviderSandbox, method: "Start" | "Connect", body: unknown, headers: Record<string, string>) =>
    envd(
      sandbox,
      (a) =>
        envdRequest(sandbox, a, "POST", `/process.Process/${method}`).pipe(
          HttpClientRequest.setHeaders({ "connect-protocol-version": "1", "keepalive-ping-interval": "50", ...userHeader(a), ...headers }),
          HttpClientRequest.bodyUint8Array(encodeEnvelope(body), STREAM_CONTENT_TYPE)
        ),
      `process.Process/${method}`,
      { mutating: method === "Start" }
    ).pipe(
      Effect.filterOrFail(
        (response) => (response.headers["content-type"] ?? "").startsWith(STREAM_CONTENT_TYPE),
        (response) => fail("unavailable", `e2b process.Process/${method} answered ${response.headers["content-type"] ?? "no content type"}, not a Connect stream`)
      )
    )

  /** Starts reading a stream in the background; resolves once the process's start event came. */
  const attach = (x: Execution, response: HttpClientResponse.HttpClientResponse) =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void, ProviderError>()
      yield* Effect.forkDaemon(pump(x, response, response.headers[REPLAY_HEADER] === "start", started))
      yield* Deferred.await(started).pipe(
        Effect.timeoutFail({ duration: REQUEST_TIMEOUT, onTimeout: () => fail("unavailable", "e2b sent no start event") })
      )
    })

  const reattach = (sandbox: ProviderSandbox, x: Execution) =>
    Effect.gen(function*() {
      x.attached = true
      x.failure = null
      const response = yield* openStream(sandbox, "Connect", { process: x.selector }, {})
      yield* attach(x, response)
    }).pipe(Effect.tapError(() => Effect.sync(() => {
      x.attached = false
    })))

  const signal = (sandbox: ProviderSandbox, x: Execution, name: "SIGNAL_SIGTERM" | "SIGNAL_SIGKILL") =>
    unary(sandbox, "process.Process/SendSignal", { process: x.selector, signal: name }, Empty, true)

  const lostMessage = (x: Execution) =>
    `the process ${JSON.stringify(x.selector)} is no longer known to envd: it ended while no client was attached (E2B keeps no record of finished processes), so its exit status and any output after event ${nextSeq(x)} are lost`

  // ---- files ----

  const entryType = (type: string | undefined): ProviderFileEntry["type"] =>
    type === "FILE_TYPE_DIRECTORY" ? "directory" : type === "FILE_TYPE_SYMLINK" ? "symlink" : type === "FILE_TYPE_FILE" ? "file" : "other"
  const parentOf = (path: string) => path.slice(0, path.lastIndexOf("/")) || "/"

  const provider: SandboxProvider = {
    name: NAME,
    capabilities,
    mode: config.mode,

    create: (input) =>
      Effect.gen(function*() {
        if (input.source.kind === "oci_image") return yield* unsupported(NAME, "OCI images (E2B sandboxes start from templates)")
        if (input.resources.architecture === "arm64") return yield* unsupported(NAME, "arm64")
        const existing = yield* reconcileCreate(input.sandboxId)
        if (existing !== null) {
          // create resolves with a running sandbox: one found paused is resumed.
          const state = yield* provider.inspect(existing)
          if (state === "paused") yield* provider.resume(existing)
          return existing
        }
        const timeoutSeconds = Math.min(input.lifecycle.runtimeTimeoutSeconds + TIMEOUT_MARGIN_SECONDS, MAX_SANDBOX_TIMEOUT_SECONDS)
        const created = yield* send(
          api("POST", "/sandboxes", {
            templateID: templateOf(input),
            timeout: timeoutSeconds,
            autoPause: false,
            secure: true,
            allow_internet_access: input.internetAccess,
            metadata: { ...input.metadata, "metal.sandbox_id": input.sandboxId, "metal.project_id": input.projectId, "metal.organization_id": input.organizationId },
            envVars: input.environment
          }),
          "create sandbox",
          { mutating: true, creating: true }
        ).pipe(Effect.flatMap(decode(WireSandbox, "create sandbox")))
        remember(created)
        // The create answer has no resources; the detail has the template's. Failing to read it must not lose the sandbox.
        const detail = yield* Effect.option(getDetail(created.sandboxID))
        const resources: ResolvedResources = detail._tag === "Some"
          ? resolved(detail.value)
          : { vcpu: input.resources.vcpu, memoryMb: input.resources.memoryMb, diskMb: null, architecture: "x86_64", providerSize: created.templateID }
        return toProviderSandbox(created, resources, timeoutSeconds)
      }),

    reconcileCreate,

    inspect: (sandbox) =>
      getDetail(sandbox.resourceId).pipe(
        Effect.map((s): InspectState => (s.state === "running" ? "running" : s.state === "paused" ? "paused" : "unknown")),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed<InspectState>("absent"))
      ),

    destroy: (sandbox) =>
      send(api("DELETE", `/sandboxes/${encodeURIComponent(sandbox.resourceId)}`), "kill sandbox", { mutating: true }).pipe(
        Effect.asVoid,
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.void),
        Effect.tap(() =>
          Effect.sync(() => {
            access.delete(sandbox.resourceId)
            for (const key of executions.keys()) if (key.startsWith(`${sandbox.resourceId}/`)) executions.delete(key)
          })
        )
      ),

    pause: (sandbox) =>
      send(api("POST", `/sandboxes/${encodeURIComponent(sandbox.resourceId)}/pause`, { memory: true }), "pause sandbox", { mutating: true }).pipe(
        Effect.asVoid,
        // 409: already paused (fine) or busy (say so).
        Effect.catchIf((e) => e.status === 409, (e) =>
          Effect.flatMap(provider.inspect(sandbox), (state) => (state === "paused" ? Effect.void : Effect.fail(e))))
      ),

    resume: (sandbox) => {
      const timeout = Number(sandbox.metadata["timeoutSeconds"] ?? 3600)
      // `/connect` resumes a paused sandbox (the legacy `/resume` is deprecated) and only ever extends its TTL.
      return connectSandbox(sandbox.resourceId, Number.isFinite(timeout) && timeout > 0 ? timeout : 3600).pipe(Effect.asVoid)
    },

    getCost: (sandbox, window) =>
      Effect.sync(() => {
        const seconds = Math.max(0, (Date.parse(window.to) - Date.parse(window.from)) / 1000)
        const r = sandbox.resolvedResources
        const perSecond = r.vcpu * E2B_RATE_CARD.vcpuSecondMicrousd + (r.memoryMb / 1024) * E2B_RATE_CARD.gibSecondMicrousd
        return {
          amountMicrousd: BigInt(Math.round(seconds * perSecond)),
          measuredThrough: window.to,
          provenance: "estimated_rate_card" as const,
          confidence: "medium" as const,
          rateCardVersion: E2B_RATE_CARD.version
        }
      }),

    exec: (sandbox, input) =>
      Effect.gen(function*() {
        const [cmd, ...args] = input.command
        if (cmd === undefined || cmd === "") return yield* fail("invalid_request", "the command is empty")
        const a = yield* accessOf(sandbox)
        const executionId = `e2b:${input.processId}`
        const key = executionKey(sandbox, executionId)
        const known = executions.get(key)
        if (known !== undefined && (known.attached || known.done)) return { executionId } // already started by this process
        const timeoutMs = input.timeoutSeconds > 0 ? input.timeoutSeconds * 1000 : null
        const x = newExecution(key, { tag: input.processId }, { maxOutputBytes: input.maxOutputBytes, startedAt: Date.now(), timeoutMs })
        // A retried exec (its first answer was lost) finds its process by tag and re-attaches instead of starting it twice.
        const listed = yield* unary(sandbox, "process.Process/List", {}, ProcessList)
        const running = listed.processes.some((p) => p.tag === input.processId)
        x.attached = true
        executions.set(key, x)
        const response = yield* (running
          ? openStream(sandbox, "Connect", { process: x.selector }, {})
          : openStream(
            sandbox,
            "Start",
            {
              process: { cmd, args, envs: input.environment ?? {}, ...(input.cwd === undefined ? {} : { cwd: input.cwd }) },
              tag: input.processId,
              ...(envdAtLeast(a.envdVersion, ENVD_STDIN_FLAG) ? { stdin: false } : {})
            },
            timeoutMs === null ? {} : { "connect-timeout-ms": String(timeoutMs) }
          )).pipe(Effect.tapError(() => Effect.sync(() => executions.delete(key))))
        yield* attach(x, response).pipe(Effect.tapError(() => Effect.sync(() => executions.delete(key))))
        return { executionId }
      }),

    execEvents: (sandbox, executionId, fromSeq) =>
      Effect.gen(function*() {
        const key = executionKey(sandbox, executionId)
        let x = executions.get(key)
        if (x === undefined) {
          // Not seen by this process (the gateway restarted): re-attach, continuing the caller's sequence.
          x = newExecution(key, selectorOf(executionId), { base: fromSeq })
          executions.set(key, x)
        }
        if (fromSeq < x.base || fromSeq > nextSeq(x)) {
          return yield* fail("invalid_request", `events from ${fromSeq} are not available (this execution has ${x.base}..${nextSeq(x)})`)
        }
        // Asking from `fromSeq` acknowledges everything before it.
        x.events.splice(0, fromSeq - x.base)
        x.base = fromSeq
        if (x.events.length === 0 && !x.done && !x.attached && Date.now() >= x.retryAt) {
          const attached = yield* Effect.either(reattach(sandbox, x))
          if (Either.isRight(attached)) {
            x.failingSince = null
          } else if (attached.left.kind === "not_found") {
            if (!x.cancelled) return yield* fail("not_found", lostMessage(x))
            // We cancelled it and it is gone: that is the outcome, only the signal is unknown.
            const current = x
            let seq = nextSeq(current)
            finish(current, { type: "exit", exitCode: null, signal: null, cancelled: true, timedOut: false, outputTruncated: current.truncated }, (e) => {
              current.events.push({ ...e, seq: seq++ } as ProviderExecEvent)
            })
          } else if (attached.left.kind === "unavailable") {
            // Paused or briefly unreachable: no events yet; try again shortly, and give up after a while.
            x.failingSince ??= Date.now()
            x.retryAt = Date.now() + REATTACH_BACKOFF_MS
            if (Date.now() - x.failingSince > REATTACH_GIVE_UP_MS) return yield* attached.left
          } else {
            return yield* attached.left
          }
        }
        return x.events.slice()
      }),

    cancelExec: (sandbox, executionId) =>
      Effect.gen(function*() {
        const key = executionKey(sandbox, executionId)
        let x = executions.get(key)
        if (x === undefined) {
          x = newExecution(key, selectorOf(executionId))
          executions.set(key, x)
        }
        if (x.done) return { cancelled: false }
        const before = x.cancelled
        x.cancelled = true // before the signal, so the exit that follows says so
        const current = x
        const sent = yield* signal(sandbox, current, "SIGNAL_SIGTERM").pipe(
          Effect.as(true),
          Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(false)),
          Effect.tapError(() => Effect.sync(() => {
            current.cancelled = before
          }))
        )
        if (!sent) {
          current.cancelled = before
          return { cancelled: false }
        }
        yield* Effect.forkDaemon(
          Effect.sleep(KILL_GRACE).pipe(Effect.zipRight(Effect.suspend(() => (current.done ? Effect.void : Effect.ignore(signal(sandbox, current, "SIGNAL_SIGKILL"))))))
        )
        return { cancelled: true }
      }),

    readFile: (sandbox, input) =>
      Effect.gen(function*() {
        if (input.maxBytes <= 0) {
          const entry = yield* statOrNull(sandbox, input.path)
          if (entry === null) return yield* fail("not_found", `${input.path} does not exist`)
          if (entry.type === "FILE_TYPE_DIRECTORY") return yield* fail("invalid_request", `${input.path} is a directory`)
          const size = Number(entry.size ?? 0)
          return { data: new Uint8Array(), offsetBytes: input.offsetBytes, sizeBytes: size, eof: input.offsetBytes >= size }
        }
        const response = yield* envd(
          sandbox,
          (a) =>
            envdRequest(sandbox, a, "GET", "/files").pipe(
              HttpClientRequest.setUrlParam("path", input.path),
              userParam(a),
              HttpClientRequest.setHeader("range", `bytes=${input.offsetBytes}-${input.offsetBytes + input.maxBytes - 1}`)
            ),
          "read file",
          { accept: (status) => status === 416 }
        )
        const range = response.headers["content-range"] ?? ""
        if (response.status === 416) {
          // Nothing at or after the offset (Go's ServeContent answers `bytes */<size>`).
          const size = Number(/^bytes \*\/(\d+)$/.exec(range)?.[1] ?? input.offsetBytes)
          return { data: new Uint8Array(), offsetBytes: input.offsetBytes, sizeBytes: size, eof: true }
        }
        const body = new Uint8Array(yield* Effect.mapError(response.arrayBuffer, (e) => fail("unavailable", `e2b read file: ${e.message}`)))
        if (response.status === 206) {
          const total = /^bytes \d+-\d+\/(\d+)$/.exec(range)?.[1]
          const size = total === undefined ? input.offsetBytes + body.length : Number(total)
          return { data: body, offsetBytes: input.offsetBytes, sizeBytes: size, eof: input.offsetBytes + body.length >= size }
        }
        // 200: the whole file (the Range was not honoured).
        const data = body.slice(input.offsetBytes, input.offsetBytes + input.maxBytes)
        return { data, offsetBytes: input.offsetBytes, sizeBytes: body.length, eof: input.offsetBytes + data.length >= body.length }
      }),

    writeFile: (sandbox, input) =>
      Effect.gen(function*() {
        if (input.mode === "append") return yield* unsupported(NAME, "appending to files")
        const existing = yield* statOrNull(sandbox, input.path)
        if (existing?.type === "FILE_TYPE_DIRECTORY") return yield* fail("invalid_request", `${input.path} is a directory`)
        // envd overwrites and creates parents unconditionally: `create` and "no parents" are checked first.
        if (input.mode === "create" && existing !== null) return yield* fail("customer", `${input.path} already exists`)
        if (!input.createParents) {
          const parent = yield* statOrNull(sandbox, parentOf(input.path))
          if (parent === null) return yield* fail("not_found", `the directory ${parentOf(input.path)} does not exist`)
          if (parent.type !== "FILE_TYPE_DIRECTORY") return yield* fail("invalid_request", `${parentOf(input.path)} is not a directory`)
        }
        yield* envd(
          sandbox,
          (a) => {
            const request = envdRequest(sandbox, a, "POST", "/files").pipe(HttpClientRequest.setUrlParam("path", input.path), userParam(a))
            if (envdAtLeast(a.envdVersion, ENVD_OCTET_STREAM_UPLOAD)) return HttpClientRequest.bodyUint8Array(request, input.data, "application/octet-stream")
            const form = new FormData()
            form.append("file", new Blob([input.data.slice()]), input.path)
            return HttpClientRequest.bodyFormData(request, form)
          },
          "write file",
          { mutating: true }
        ).pipe(Effect.tap((response) => Effect.ignore(response.text))) // read the small answer so the connection is free
        return { bytesWritten: input.data.length, created: existing === null }
      }),

    listFiles: (sandbox, input) =>
      unary(sandbox, "filesystem.Filesystem/ListDir", { path: input.path, depth: input.recursive ? 64 : 1 }, ListDirResponse).pipe(
        Effect.map((r) => ({
          entries: r.entries.slice(0, input.maxEntries).map((e): ProviderFileEntry => ({
            path: e.path,
            type: entryType(e.type),
            sizeBytes: Number(e.size ?? 0),
            modifiedAt: e.modifiedTime ?? new Date(0).toISOString()
          })),
          truncated: r.entries.length > input.maxEntries
        }))
      ),

    deleteFile: (sandbox, input) =>
      Effect.gen(function*() {
        // envd's Remove is `rm -rf` and succeeds on a missing path: whether there was something, and whether a
        // directory is empty, are checked first.
        const entry = yield* statOrNull(sandbox, input.path)
        if (entry === null) return { deleted: false }
        if (entry.type === "FILE_TYPE_DIRECTORY" && !input.recursive) {
          const listed = yield* unary(sandbox, "filesystem.Filesystem/ListDir", { path: input.path, depth: 1 }, ListDirResponse)
          if (listed.entries.length > 0) return yield* fail("customer", `${input.path} is a directory that is not empty`)
        }
        yield* unary(sandbox, "filesystem.Filesystem/Remove", { path: input.path }, Empty, true)
        return { deleted: true }
      }),

    exposeHttpEndpoint: () => Effect.fail(unsupported(NAME, "HTTP endpoints")),
    revokeHttpEndpoint: () => Effect.fail(unsupported(NAME, "HTTP endpoints"))
  }
  return withWorkspace(provider, config.workspaceDir ?? (config.mode === "emulated" ? "/workspace" : "/home/user"))
}
