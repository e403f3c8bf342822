/**
 * Runloop's wire, as the adapter speaks it: the shapes it reads (only the fields used), the devbox statuses, the
 * resource presets and their prices, our execution ids, and the context every part of the adapter shares (config,
 * the HTTP client, API requests, the `wait_for_status` long-poll).
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Duration, Effect, Option, Schema } from "effect"
import * as os from "node:os"
import { emulatedCapabilities } from "../../../src/providers/Capabilities.ts"
import { DECLARED } from "../../core/declared.ts"
import { executionIdCodec, IdPart, positivePart } from "../../core/executionId.ts"
import { pollUntil } from "../../core/poll.ts"
import type { ExecEvent } from "../../../src/runtime/LocalRuntime.ts"
import type { InspectState, ProviderCapabilities } from "../../../src/providers/Provider.ts"
import { RUNLOOP_PRESETS } from "../../../src/providers/resources.ts"
import { makeWire, plainHttpClient } from "../../core/wire.ts"

export const NAME = "runloop" as const
export const DEFAULT_API_URL = "https://api.runloop.ai"

/** The declared Runloop row as is: suspend/resume, buffered output with kill, create/overwrite files, no endpoints. */
export const RUNLOOP_CAPABILITIES: ProviderCapabilities = DECLARED.runloop

/** Our sandbox id in the devbox's metadata: what create checks first and reconcile looks for. */
export const METADATA_SANDBOX_ID = "metal_sandbox_id"
export const devboxName = (sandboxId: string) => `metal-${sandboxId}`

/** Runloop's keep-alive ceiling (48 h); ours is the runtime timeout plus a margin, a safety net behind our timers. */
export const MAX_KEEP_ALIVE_SECONDS = 172_800
export const KEEP_ALIVE_MARGIN_SECONDS = 300

export const RESOURCE_SIZES: ReadonlyArray<string> = RUNLOOP_PRESETS.map((p) => p.size)
export const presetOf = (size: string) => RUNLOOP_PRESETS.find((p) => p.size === size)

/** Runloop's published hourly price of each preset, in micro-USD (reference §3.2). */
export const PRESET_HOURLY_MICROUSD: Readonly<Record<string, number>> = {
  X_SMALL: 80_600,
  SMALL: 159_800,
  MEDIUM: 319_500,
  LARGE: 423_100,
  X_LARGE: 840_700,
  XX_LARGE: 1_676_000
}
export const PRESET_RATE_CARD_VERSION = "runloop-presets-2026"

/** An OEM account's own per-component prices (USD per unit-hour), instead of the preset prices. */
export interface OemRates {
  readonly vcpuHourUsd: number
  readonly memoryGbHourUsd: number
  readonly diskGbHourUsd: number
}

export interface RunloopProviderConfig {
  /** The API, e.g. https://api.runloop.ai (paths start with /v1). */
  readonly apiUrl: string
  readonly apiKey: string
  readonly mode: "remote" | "emulated"
  /** Blueprint for environment sources (Runloop's default image when unset); `provider_options.runloop.blueprint_id` wins. */
  readonly blueprintId?: string | undefined
  /** The smallest preset to use (an account's floor); a request needing more gets the covering preset. */
  readonly resourceSize?: string | undefined
  readonly oemRates?: OemRates | undefined
  readonly httpClient?: HttpClient.HttpClient | undefined
  /** Pause between two long-polls that came back without the status (408). Default 250 ms remote, 10 ms emulated. */
  readonly pollIntervalMs?: number | undefined
  /** How long a devbox may take to start, suspend or resume. Default 10 min remote, 60 s emulated. */
  readonly lifecycleTimeoutMs?: number | undefined
  /** One request's deadline; above the 30 s a long-poll is held. Default 65 s. */
  readonly requestTimeoutMs?: number | undefined
}

// ---- shapes ----

const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })

export const WireDevbox = Schema.Struct({
  id: Schema.String,
  name: Schema.optional(Schema.NullOr(Schema.String)),
  status: Schema.String,
  metadata: Schema.optional(Schema.NullOr(StringMap)),
  launch_parameters: Schema.optional(Schema.NullOr(Schema.Struct({
    resource_size_request: Schema.optional(Schema.NullOr(Schema.String)),
    architecture: Schema.optional(Schema.NullOr(Schema.String)),
    keep_alive_time_seconds: Schema.optional(Schema.NullOr(Schema.Number))
  }))),
  create_time_ms: Schema.optional(Schema.NullOr(Schema.Number)),
  failure_reason: Schema.optional(Schema.NullOr(Schema.String))
})
export type WireDevbox = typeof WireDevbox.Type

export const WireDevboxList = Schema.Struct({ devboxes: Schema.Array(WireDevbox), has_more: Schema.Boolean })

export const WireExecution = Schema.Struct({
  execution_id: Schema.String,
  status: Schema.String,
  exit_status: Schema.optional(Schema.NullOr(Schema.Number)),
  stdout: Schema.optional(Schema.NullOr(Schema.String)),
  stderr: Schema.optional(Schema.NullOr(Schema.String)),
  stdout_truncated: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stderr_truncated: Schema.optional(Schema.NullOr(Schema.Boolean))
})
export type WireExecution = typeof WireExecution.Type

export const WireUsage = Schema.Struct({
  total_active_seconds: Schema.Number,
  vcpu_seconds: Schema.optional(Schema.NullOr(Schema.Number)),
  memory_gb_seconds: Schema.optional(Schema.NullOr(Schema.Number)),
  disk_gb_seconds: Schema.optional(Schema.NullOr(Schema.Number))
})
export type WireUsage = typeof WireUsage.Type

// ---- statuses ----

export const STARTING = new Set(["scheduled", "queued", "provisioning", "initializing", "resuming"])
export const SUSPENDED = new Set(["suspending", "suspended"])
/** What a devbox that can still be ours is in: the statuses reconcile lists, most likely first. */
export const LIVE_STATUSES = ["running", "provisioning", "initializing", "queued", "scheduled", "resuming", "suspending", "suspended"] as const
export const ENDED = new Set(["failure", "shutdown"])

export const inspectStateOf = (status: string): InspectState =>
  status === "running"
    ? "running"
    : STARTING.has(status)
    ? "starting"
    : SUSPENDED.has(status)
    ? "paused"
    : status === "failure"
    ? "failed"
    : status === "shutdown"
    ? "absent" // a shut-down devbox is gone for good; Runloop only keeps its record
    : "unknown"

// ---- execution ids and exits ----

/** `runloop:` + base64url(JSON [Runloop's execution id, max output bytes]): needs no memory, survives a restart. */
export const ExecutionRef = Schema.Struct({ executionId: IdPart, maxOutputBytes: positivePart(10 * 1024 * 1024) })
export type ExecutionRef = typeof ExecutionRef.Type
export const executionIds = executionIdCodec(NAME, "runloop", ExecutionRef)

const SIGNAL_NAMES = new Map(Object.entries(os.constants.signals).map(([name, n]) => [n, name]))

/**
 * The exit of a completed execution. Runloop reports the shell's status, so a command ended by a signal reads as
 * 128 + its number: that is reported as the signal, and SIGKILL / SIGTERM (what a kill sends) as cancelled — a
 * command that itself exits 137 or 143 reads the same. `killed`: this adapter killed it. A missing status is a
 * kill as well.
 */
export const exitOf = (status: number | null | undefined, killed: boolean) => {
  if (status === null || status === undefined) return { exitCode: null, signal: killed ? "SIGKILL" : null, cancelled: killed }
  const signal = status > 128 && status <= 128 + 64 ? SIGNAL_NAMES.get(status - 128) : undefined
  if (signal !== undefined) return { exitCode: null, signal, cancelled: killed || signal === "SIGKILL" || signal === "SIGTERM" }
  return { exitCode: status, signal: null, cancelled: false }
}


/** POSIX shell quoting. */
export const shellQuote = (s: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'"'"'`)}'`)

/**
 * The gateway's `/workspace` is the devbox user's home (Runloop's file paths are home-relative, and commands start
 * there); `withWorkspace` hands the adapter `~` for it. As a file path: `~/a` → `a`, `~` → `.`, others as given.
 */
export const HOME = "~"
export const filePath = (p: string) => (p === HOME ? "." : p.startsWith(`${HOME}/`) ? p.slice(HOME.length + 1) : p)
/** As a directory for `cd`: `~/a` → `"$HOME"/a`. */
export const shellDir = (p: string) => (p === HOME ? `"$HOME"` : p.startsWith(`${HOME}/`) ? `"$HOME"/${shellQuote(p.slice(HOME.length + 1))}` : shellQuote(p))

// ---- the context the adapter's parts share ----


export const makeContext = (config: RunloopProviderConfig) => {
  const emulated = config.mode === "emulated"
  const apiUrl = config.apiUrl.replace(/\/+$/, "")
  const wire = makeWire({ provider: NAME, client: config.httpClient ?? plainHttpClient(), timeout: `${config.requestTimeoutMs ?? 65_000} millis` })
  const send: typeof wire.send = (request, what, options) => wire.send(HttpClientRequest.bearerToken(request, config.apiKey), what, options)
  const api = (method: "GET" | "POST", path: string) => HttpClientRequest.make(method)(`${apiUrl}${path}`).pipe(HttpClientRequest.acceptJson)
  const devboxPath = (id: string, rest = "") => `/v1/devboxes/${encodeURIComponent(id)}${rest}`
  const pollMs = config.pollIntervalMs ?? (emulated ? 10 : 250)
  const lifecycleTimeoutMs = config.lifecycleTimeoutMs ?? (emulated ? 60_000 : 600_000)

  /**
   * Waits until the devbox is in one of `want`: `POST /v1/devboxes/{id}/wait_for_status` holds the request until
   * then (or answers 408 when its window passes: ask again). A devbox that fails or shuts down meanwhile is an
   * error, as is our deadline.
   */
  const waitForStatus = (id: string, want: ReadonlyArray<string>, what: string) => {
    const statuses = [...new Set([...want, ...ENDED])]
    const check = send(api("POST", devboxPath(id, "/wait_for_status")).pipe(HttpClientRequest.bodyUnsafeJson({ statuses })), "wait for status", {
      mutating: false,
      accept: (status) => status === 408
    }).pipe(
      Effect.flatMap((response) =>
        response.status === 408 ? Effect.succeed(Option.none<WireDevbox>()) : Effect.map(wire.decode(WireDevbox, "wait for status")(response), Option.some)
      ),
      Effect.flatMap((found) => {
        if (Option.isNone(found) || want.includes(found.value.status)) return Effect.succeed(found)
        if (ENDED.has(found.value.status)) {
          const reason = found.value.failure_reason ? ` (${found.value.failure_reason})` : ""
          return Effect.fail(wire.fail("unavailable", `runloop devbox ${id} is ${found.value.status}${reason} while ${what}`))
        }
        return Effect.succeed(Option.none<WireDevbox>())
      })
    )
    return pollUntil(check, {
      interval: Duration.millis(pollMs),
      timeout: Duration.millis(lifecycleTimeoutMs),
      onTimeout: () => wire.fail("unavailable", `runloop devbox ${id} is not ${want.join(" or ")} after ${lifecycleTimeoutMs} ms ${what}`)
    })
  }

  return {
    config,
    capabilities: emulated ? emulatedCapabilities(RUNLOOP_CAPABILITIES, { runsImages: false }) : RUNLOOP_CAPABILITIES,
    emulated,
    fail: wire.fail,
    decode: wire.decode,
    send,
    api,
    devboxPath,
    waitForStatus
  }
}

export type RunloopContext = ReturnType<typeof makeContext>
