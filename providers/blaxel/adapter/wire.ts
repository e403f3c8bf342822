/**
 * Blaxel's wire, as the adapter speaks it: the shapes it reads (only the fields used), the error bodies, the
 * sandbox statuses, names and execution ids, and the context every part of the adapter shares (config, the HTTP
 * client, control-API and sandbox-runtime requests).
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Schema } from "effect"
import { emulatedCapabilities } from "../../../src/providers/Capabilities.ts"
import { createHash } from "node:crypto"
import { DECLARED } from "../../core/declared.ts"
import { executionIdCodec, IdPart, positivePart } from "../../core/executionId.ts"
import type { InspectState, ProviderCapabilities, ProviderErrorKind, ProviderSandbox } from "../../../src/providers/Provider.ts"
import { type CallOptions, type Classified, type ErrorAnswer, makeWire, plainHttpClient, snippet } from "../../core/wire.ts"

export const NAME = "blaxel" as const
/** The API version this adapter speaks (`Blaxel-Version`): lists are paged from it on. */
export const API_VERSION = "2026-04-28"
export const DEFAULT_IMAGE = "blaxel/base-image:latest"
/** Blaxel sizes a sandbox by memory: one vCPU per 2048 MB. */
export const MB_PER_VCPU = 2048
/** Upload part size, as Blaxel's SDK cuts files. */
export const PART_BYTES = 5 * 1024 * 1024

/** The declared Blaxel row as is: no pause (Blaxel's standby is automatic), no internet switch, no streams. */
export const BLAXEL_CAPABILITIES: ProviderCapabilities = DECLARED.blaxel

export const LABEL_SANDBOX_ID = "metal.sandbox_id"

/** `metal-<id>` in Blaxel's name alphabet (lowercase, digits, hyphens; at most 49), a hash when it is too long. */
export const sandboxName = (sandboxId: string) => {
  const norm = `metal-${sandboxId.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`.replace(/-+$/, "")
  if (norm.length <= 49) return norm
  const hash = createHash("sha256").update(sandboxId).digest("hex").slice(0, 10)
  return `${norm.slice(0, 38).replace(/-+$/, "")}-${hash}`
}
export const processName = (processId: string) => `metal-${processId}`

export interface BlaxelProviderConfig {
  /** The control API, e.g. https://api.blaxel.ai/v0. */
  readonly apiUrl: string
  readonly apiKey: string
  readonly workspace: string
  /** For cost: the account whose metrics to read; otherwise asked of the workspace. */
  readonly accountId?: string | undefined
  readonly region?: string | undefined
  readonly defaultImage?: string | undefined
  readonly defaultMemoryMb?: number | undefined
  readonly mode: "remote" | "emulated"
  readonly httpClient?: HttpClient.HttpClient | undefined
  /** Status polls while a sandbox deploys and while a process runs. Default 1 s remote, 20 ms emulated. */
  readonly pollIntervalMs?: number | undefined
  /** How long a deploy may take. Default 5 min remote, 60 s emulated. */
  readonly deployTimeoutMs?: number | undefined
  readonly requestTimeoutMs?: number | undefined
}

// ---- shapes ----

const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })

export const WireSandbox = Schema.Struct({
  metadata: Schema.Struct({
    name: Schema.String,
    url: Schema.optional(Schema.String),
    workspace: Schema.optional(Schema.String),
    labels: Schema.optional(Schema.NullOr(StringMap)),
    createdAt: Schema.optional(Schema.String)
  }),
  spec: Schema.optional(Schema.Struct({
    region: Schema.optional(Schema.String),
    runtime: Schema.optional(Schema.Struct({ image: Schema.optional(Schema.String), memory: Schema.optional(Schema.Number) }))
  })),
  status: Schema.optional(Schema.String),
  state: Schema.optional(Schema.String)
})
export type WireSandbox = typeof WireSandbox.Type

export const WireProcess = Schema.Struct({
  pid: Schema.String,
  name: Schema.String,
  status: Schema.Literal("failed", "killed", "stopped", "running", "completed"),
  exitCode: Schema.optional(Schema.NullOr(Schema.Number))
})
export type WireProcess = typeof WireProcess.Type
export const WireLogs = Schema.Struct({ stdout: Schema.String, stderr: Schema.String })

const WireFile = Schema.Struct({ path: Schema.String, name: Schema.String, size: Schema.Number, lastModified: Schema.optional(Schema.String) })
export const WireDirectory = Schema.Struct({
  path: Schema.String,
  files: Schema.NullOr(Schema.Array(WireFile)),
  subdirectories: Schema.NullOr(Schema.Array(Schema.Struct({ path: Schema.String, name: Schema.String })))
})
export type WireDirectory = typeof WireDirectory.Type
/** A GET of a file without `Accept: application/octet-stream` answers its content as JSON. */
export const WireDirectoryOrFile = Schema.Union(WireDirectory, Schema.Struct({ path: Schema.String, content: Schema.String }))

export const WireUpload = Schema.Struct({ uploadId: Schema.String })
export const WirePart = Schema.Struct({ partNumber: Schema.Number, etag: Schema.String })
export const WirePreview = Schema.Struct({ metadata: Schema.Struct({ name: Schema.String }), spec: Schema.Struct({ url: Schema.String }) })
export const WireWorkspace = Schema.Struct({ accountId: Schema.String })
export const WireMetrics = Schema.Struct({ summary: Schema.Struct({ totalCost: Schema.Number }), data: Schema.Array(Schema.Unknown) })

// ---- errors ----

/**
 * The control API answers `{error, message, code}` (create failures: `{code: "QUOTA_EXCEEDED", message}`); the
 * sandbox runtime `{error}`. The codes that say more than the status are Blaxel's creation codes.
 */
const CODE_KINDS: Readonly<Record<string, ProviderErrorKind>> = {
  QUOTA_EXCEEDED: "quota",
  INVALID_IMAGE: "invalid_request"
}

export const classify = (answer: ErrorAnswer, _call: CallOptions): Classified => {
  const body = (answer.json ?? {}) as { message?: unknown; error?: unknown; code?: unknown }
  const message = typeof body.message === "string" && body.message !== ""
    ? body.message
    : typeof body.error === "string"
    ? body.error
    : snippet(answer.text)
  const code = typeof body.code === "string" ? body.code : undefined
  return { message, code, kind: code === undefined ? undefined : CODE_KINDS[code] }
}

// ---- statuses ----

const STARTING = new Set(["DEPLOYING", "BUILDING", "UPLOADING", "BUILT"])
export const GONE = new Set(["DELETING", "TERMINATED"])

export const inspectStateOf = (status: string | undefined): InspectState =>
  status === "DEPLOYED"
    ? "running" // STANDBY is a detail of a deployed sandbox: the next request wakes it
    : status === undefined
    ? "unknown"
    : STARTING.has(status)
    ? "starting"
    : status === "FAILED"
    ? "failed"
    : GONE.has(status)
    ? "absent"
    : status === "DEACTIVATED" || status === "DEACTIVATING"
    ? "stopped"
    : "unknown"

// ---- execution ids ----

/** `blaxel:` + base64url(JSON [process name, max output bytes]): needs no memory, survives a restart. */
export const ExecutionRef = Schema.Struct({ name: IdPart, maxOutputBytes: positivePart(10 * 1024 * 1024) })
export type ExecutionRef = typeof ExecutionRef.Type
export const executionIds = executionIdCodec(NAME, "blaxel", ExecutionRef)

/** POSIX shell quoting. */
/**
 * Whether a sandbox runs an image of the user's own (kept in its metadata at create), not one of Blaxel's
 * (`blaxel/…`): a process without a directory is then left where the sandbox starts it — the image's WorkingDir,
 * as a container runtime applies it — rather than taken to /workspace.
 */
export const isUserImage = (sandbox: { readonly metadata: Readonly<Record<string, unknown>> }) => {
  const image = sandbox.metadata["image"]
  return typeof image === "string" && !image.startsWith("blaxel/")
}

export const shellQuote = (s: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'"'"'`)}'`)

/** An absolute path as Blaxel's runtime takes it: one escaped segment (its `%2F` marks it absolute). */
export const runtimePath = (p: string) => encodeURIComponent(p)

// ---- the context the adapter's parts share ----


export const makeContext = (config: BlaxelProviderConfig) => {
  const emulated = config.mode === "emulated"
  const apiUrl = config.apiUrl.replace(/\/+$/, "")
  const wire = makeWire({ provider: NAME, client: config.httpClient ?? plainHttpClient(), timeout: `${config.requestTimeoutMs ?? 65_000} millis`, classify })
  const authorize = (request: HttpClientRequest.HttpClientRequest) =>
    request.pipe(HttpClientRequest.bearerToken(config.apiKey), HttpClientRequest.setHeader("x-blaxel-workspace", config.workspace))
  const send: typeof wire.send = (request, what, options) => wire.send(authorize(request), what, options)
  const api = (method: "GET" | "POST" | "PUT" | "DELETE", path: string) =>
    HttpClientRequest.make(method)(`${apiUrl}${path}`).pipe(HttpClientRequest.acceptJson, HttpClientRequest.setHeader("blaxel-version", API_VERSION))

  /** The sandbox's runtime (`metadata.url`): from what create kept, else asked of the control API. */
  const runtimeBase = (sandbox: ProviderSandbox) => {
    const url = sandbox.metadata["url"]
    if (typeof url === "string" && url !== "") return Effect.succeed(url.replace(/\/+$/, ""))
    return send(api("GET", `/sandboxes/${encodeURIComponent(sandbox.resourceId)}`), "get sandbox").pipe(
      Effect.flatMap(wire.decode(WireSandbox, "get sandbox")),
      Effect.flatMap((s) =>
        s.metadata.url === undefined || s.metadata.url === ""
          ? Effect.fail(wire.fail("unavailable", `blaxel sandbox ${sandbox.resourceId} has no runtime URL yet`))
          : Effect.succeed(s.metadata.url.replace(/\/+$/, ""))
      )
    )
  }
  /** One call to the sandbox's runtime. */
  const runtime = (
    sandbox: ProviderSandbox,
    method: "GET" | "POST" | "PUT" | "DELETE",
    path: string,
    what: string,
    build: (r: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest = (r) => r,
    options?: CallOptions
  ) => Effect.flatMap(runtimeBase(sandbox), (base) => send(build(HttpClientRequest.make(method)(`${base}${path}`)), what, options))

  return {
    config,
    capabilities: emulated ? emulatedCapabilities(BLAXEL_CAPABILITIES, { runsImages: true }) : BLAXEL_CAPABILITIES,
    emulated,
    pollMs: config.pollIntervalMs ?? (emulated ? 20 : 1000),
    deployTimeoutMs: config.deployTimeoutMs ?? (emulated ? 60_000 : 300_000),
    fail: wire.fail,
    decode: wire.decode,
    send,
    api,
    runtime
  }
}

export type BlaxelContext = ReturnType<typeof makeContext>
