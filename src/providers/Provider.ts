/**
 * The provider plug-in contract (reference/providers.md §2), in Effect form. Every adapter speaks its
 * provider's real wire API through `HttpClient`; in `emulated` mode it is pointed at an in-process emulator
 * that serves that same wire subset over the local runtime.
 */
import { Context, Data, Effect } from "effect"

/** The one list of providers (spec a..k) lives with the API's contract; here under the kit's names. */
import { Provider, PROVIDERS } from "../domain/Sandbox.ts"
import type { ExecEvent, RuntimeMetrics } from "../runtime/LocalRuntime.ts"
import type { ComputerAction } from "../domain/Computer.ts"
import type { ProviderCapabilities } from "./ProviderCapabilities.ts"

// The contract's parts in files of their own, named here too (what an adapter declares; executions' helpers).
export type { ComputerCapabilities, ProviderCapabilities, SizeLimits } from "./ProviderCapabilities.ts"
export { bufferedEvents, FOLLOWED_EXECUTIONS, reattachFailed, type UnnumberedExecEvent } from "./Executions.ts"
export const ProviderNames = PROVIDERS
export const ProviderName = Provider
export type ProviderName = Provider

export type ProviderErrorKind =
  | "auth"
  | "quota"
  | "capacity"
  | "unavailable"
  | "timeout_absent"
  | "unknown_outcome"
  | "invalid_request"
  | "unsupported"
  | "customer"
  /** The resource does not exist (any longer) at the provider. */
  | "not_found"

/** Safe to try the next candidate: nothing was created. `unsupported` counts too (the code lets it; we agree). */
export const FALLBACK_SAFE: ReadonlySet<ProviderErrorKind> = new Set(["capacity", "unavailable", "timeout_absent", "unsupported"])

export class ProviderError extends Data.TaggedError("ProviderError")<{
  readonly provider: ProviderName
  readonly kind: ProviderErrorKind
  readonly message: string
  readonly retryable: boolean
  readonly status?: number | undefined
  /** Set when the call ran on an organization's own provider account (BYOK): an `auth` failure is then theirs. */
  readonly account?: "organization" | undefined
}> {}

export interface CreateInput {
  /** Our sandbox id: every adapter names or tags the resource with it, so create is idempotent. */
  readonly sandboxId: string
  /**
   * No earlier create of this sandbox can have reached the provider (its provision job's first attempt): an adapter
   * that looks for the resource by `sandboxId` before creating it (a retried create whose answer was lost) may skip
   * that call.
   */
  readonly firstCreate?: boolean | undefined
  readonly organizationId: string
  readonly projectId: string
  readonly source:
    | { readonly kind: "environment"; readonly environment: string; readonly version: string }
    | { readonly kind: "oci_image"; readonly image: string; readonly command?: ReadonlyArray<string> | undefined }
    | { readonly kind: "provider_template"; readonly provider: string; readonly template: string }
  readonly resources: {
    readonly vcpu: number
    readonly memoryMb: number
    readonly diskMb?: number | undefined
    readonly architecture: "x86_64" | "arm64" | "any"
  }
  readonly lifecycle: {
    readonly runtimeTimeoutSeconds: number
    readonly idleTimeoutSeconds?: number | undefined
    readonly onRuntimeTimeout: "destroy" | "pause"
    readonly onIdleTimeout: "destroy" | "pause"
  }
  /**
   * `network.internet_access` as asked; undefined when the request leaves it unsaid: the adapter then sends nothing
   * about it, and the sandbox gets the provider's default (`capabilities.internetByDefault`).
   */
  readonly internetAccess?: boolean | undefined
  /**
   * `features.computer_use`: the sandbox gets a desktop before it is ready (`computer.start`); a provider that
   * cannot give it one fails the create as `unsupported` with the reason, after removing what it made.
   */
  readonly computerUse?: boolean | undefined
  /**
   * `network.allow_domains` (mode allow) or `deny_domains` (mode deny), only with internet access; absent: none.
   * Eligibility sends it only to providers declaring `network.allowDomains` / `denyDomains`.
   */
  readonly domainPolicy?: { readonly mode: "allow" | "deny"; readonly domains: ReadonlyArray<string> } | undefined
  /** This provider's slice of `provider_options` only. */
  readonly providerOptions: Readonly<Record<string, unknown>>
  readonly environment: Readonly<Record<string, string>>
  readonly metadata: Readonly<Record<string, string>>
}

export interface ResolvedResources {
  readonly vcpu: number
  readonly memoryMb: number
  readonly diskMb: number | null
  readonly architecture: string
  readonly providerSize: string | null
}

export interface ProviderSandbox {
  readonly resourceId: string
  readonly resolvedResources: ResolvedResources
  /** Opaque adapter data kept with the sandbox (JSON-serialisable). */
  readonly metadata: Readonly<Record<string, unknown>>
}

export type InspectState = "starting" | "running" | "paused" | "stopped" | "failed" | "absent" | "unknown"

export interface ExecInput {
  readonly command: ReadonlyArray<string>
  readonly cwd?: string | undefined
  readonly environment?: Readonly<Record<string, string>> | undefined
  readonly timeoutSeconds: number
  readonly maxOutputBytes: number
  /** Our process id; adapters use it to make exec idempotent where the provider allows. */
  readonly processId: string
  /**
   * No earlier attempt can have started this process (its job's first claim): an adapter that looks for the process
   * by `processId` before starting it (a retried start whose first answer was lost) may skip that call.
   */
  readonly firstAttempt?: boolean | undefined
  /** Keep the process's standard input open for `sendInput` (else it reads end-of-file). Needs `sendInput`. */
  readonly stdin?: boolean | undefined
  /**
   * Run the command on a pseudo-terminal of this size (needs `capabilities.process.terminal`): its output comes
   * as `stdout` events, `sendInput` types into the terminal (`eof` sends ^D), `resizeTerminal` resizes it.
   */
  readonly pty?: { readonly cols: number; readonly rows: number } | undefined
}

/** A computer action as the API accepted it (defaults applied). */
export type ComputerActionInput = ComputerAction

export interface ScreenshotInput {
  readonly format: "png" | "jpeg"
  readonly showCursor: boolean
  /** JPEG quality 1–100. */
  readonly quality: number
  /** 0.1–1. */
  readonly scale: number
  readonly region?: { readonly x: number; readonly y: number; readonly width: number; readonly height: number } | undefined
}

/** A recording at the provider. */
export interface ProviderRecording {
  readonly recordingId: string
  readonly state: "starting" | "recording" | "stopping" | "stopped" | "failed"
  readonly durationSeconds: number | null
}

/**
 * The desktop of a sandbox (computer use). Present exactly when `capabilities.computer` is declared. Screenshots
 * and recordings come from the sandbox: the driver bounds what it reads (`maxBytes`) and checks that an image is
 * the format asked for.
 */
export interface ComputerDriver {
  /** Starts the sandbox's desktop (idempotent); create calls it when the request asks for computer use. */
  readonly start: (sandbox: ProviderSandbox) => PE<void>
  /** One input action; answers the pointer's position after it where the provider says. */
  readonly action: (sandbox: ProviderSandbox, action: ComputerActionInput) => PE<{ readonly cursor: { readonly x: number; readonly y: number } | null }>
  readonly screenshot: (
    sandbox: ProviderSandbox,
    input: ScreenshotInput
  ) => PE<{ readonly format: "png" | "jpeg"; readonly data: Uint8Array; readonly cursor: { readonly x: number; readonly y: number } | null }>
  readonly startRecording: (sandbox: ProviderSandbox, input: { readonly label?: string | undefined }) => PE<ProviderRecording>
  readonly getRecording: (sandbox: ProviderSandbox, recordingId: string) => PE<ProviderRecording>
  readonly stopRecording: (sandbox: ProviderSandbox, recordingId: string) => PE<ProviderRecording>
  /** A stopped recording's mp4, whole; more than `maxBytes` fails (`invalid_request`) without reading on. */
  readonly downloadRecording: (sandbox: ProviderSandbox, recordingId: string, maxBytes: number) => PE<Uint8Array>
}

export interface ProviderFileEntry {
  readonly path: string
  readonly type: "file" | "directory" | "symlink" | "other"
  readonly sizeBytes: number
  readonly modifiedAt: string
}

export interface ProviderCost {
  /** Cumulative since the sandbox became ready, in micro-USD. */
  readonly amountMicrousd: bigint
  readonly measuredThrough: string
  readonly provenance: "provider_reported" | "provider_metered" | "estimated_rate_card"
  readonly confidence: "high" | "medium" | "low"
  readonly rateCardVersion: string | null
}

/**
 * What a sandbox consumes, as far as the source knows it: null for what it does not report. `local_runtime`:
 * read from the sandbox's cgroups on this host (emulated providers; the runtime's own figures); `provider`: the
 * provider's metrics API.
 */
export interface ProviderMetrics extends RuntimeMetrics {
  readonly source: "local_runtime" | "provider"
  /** Recent CPU use as a percentage of the sandbox's CPUs (providers that sample it). */
  readonly cpuUsedPercent: number | null
}

type PE<A> = Effect.Effect<A, ProviderError>

/** The longest a quiet command's job waits between two polls of its provider (src/services/sandboxes/Processes.ts). */
export const QUIET_POLL_MS = 250
/** What an `execNews` that cannot wait for news here waits instead: as long as a quiet command's poll would. */
export const waitAsPoll = (maxMs: number): Effect.Effect<void> => Effect.sleep(Math.min(maxMs, QUIET_POLL_MS))

export interface SandboxProvider {
  readonly name: ProviderName
  readonly capabilities: ProviderCapabilities
  /** `remote` (real credentials) or `emulated` (pointed at the built-in emulator). */
  readonly mode: "remote" | "emulated"

  /** Idempotent per `sandboxId`. Resolves only when the sandbox is running (the adapter polls). */
  readonly create: (input: CreateInput) => PE<ProviderSandbox>
  /** Find the resource created for `sandboxId` after an unknown outcome; None if it does not exist. */
  readonly reconcileCreate: (sandboxId: string) => PE<ProviderSandbox | null>
  readonly inspect: (sandbox: ProviderSandbox) => PE<InspectState>
  /** Idempotent: an absent resource is success. */
  readonly destroy: (sandbox: ProviderSandbox) => PE<void>
  readonly pause: (sandbox: ProviderSandbox) => PE<void>
  readonly resume: (sandbox: ProviderSandbox) => PE<void>
  readonly getCost: (sandbox: ProviderSandbox, window: { readonly from: string; readonly to: string }) => PE<ProviderCost | null>
  /**
   * For a provider that ends a sandbox on its own after a lifetime set at create (E2B): end it no earlier than
   * `seconds` from now (the gateway's runtime deadline moved). Absent: the provider keeps no such timer.
   */
  readonly extendLifetime?: ((sandbox: ProviderSandbox, seconds: number) => PE<void>) | undefined

  /**
   * Current consumption (also while paused). Absent: neither the provider's API nor the local runtime reports it
   * for this adapter (remote providers without a metrics API).
   */
  readonly metrics?: ((sandbox: ProviderSandbox) => PE<ProviderMetrics>) | undefined

  /** Starts a command; returns the provider's execution id. */
  readonly exec: (sandbox: ProviderSandbox, input: ExecInput) => PE<{ readonly executionId: string }>
  /**
   * Events with seq >= fromSeq, in order; an empty array when none are available yet. Must work again after a
   * gateway restart for executions still running (or finished) at the provider.
   */
  readonly execEvents: (sandbox: ProviderSandbox, executionId: string, fromSeq: number) => PE<ReadonlyArray<ExecEvent>>
  readonly cancelExec: (sandbox: ProviderSandbox, executionId: string) => PE<{ readonly cancelled: boolean }>
  /**
   * Push, where the provider has it: completes once the execution may have news for `execEvents` (output, its
   * end) since the last time it completed, or after `maxMs`. A quiet command's job waits on it instead of polling
   * (src/services/sandboxes/Processes.ts). Never fails: a watch that breaks is news (the job polls, and asks again).
   * Absent: the job polls on a timer.
   */
  readonly execNews?: ((sandbox: ProviderSandbox, executionId: string, maxMs: number) => Effect.Effect<void>) | undefined
  /**
   * How long a command must have been quiet before its job waits on `execNews` rather than polling. Absent: a
   * second, where a wait opens a connection of its own (not worth it for a short command); 0 where the news is in
   * memory already (the adapter reads the command's stream as it comes), so not even a short command is polled.
   */
  readonly execNewsAfterMs?: number | undefined
  /**
   * Writes to the standard input of a process started with `stdin: true`, in call order; `eof` closes it after
   * the data. Absent: the provider cannot take input (a process asking for stdin is refused before it starts).
   */
  readonly sendInput?: ((sandbox: ProviderSandbox, executionId: string, data: Uint8Array, eof: boolean) => PE<void>) | undefined
  /** Resizes the terminal of an execution started with `pty`. Present exactly when `capabilities.process.terminal`. */
  readonly resizeTerminal?:
    | ((sandbox: ProviderSandbox, executionId: string, size: { readonly cols: number; readonly rows: number }) => PE<void>)
    | undefined

  /**
   * Reads `length` bytes from `offsetBytes` as one streamed download (the provider's wire sends a range as it is
   * read), held to exactly that length (`exactBody`): the gateway passes it on as it comes, instead of asking
   * piece by piece. The range lies within a file the caller has just stat'ed. Absent: reads go through `readFile`.
   */
  readonly readFileStream?:
    | ((sandbox: ProviderSandbox, input: { readonly path: string; readonly offsetBytes: number; readonly length: number }) => PE<ReadableStream<Uint8Array>>)
    | undefined
  readonly readFile: (
    sandbox: ProviderSandbox,
    input: { readonly path: string; readonly offsetBytes: number; readonly maxBytes: number }
  ) => PE<{ readonly data: Uint8Array; readonly offsetBytes: number; readonly sizeBytes: number; readonly eof: boolean }>
  readonly writeFile: (
    sandbox: ProviderSandbox,
    input: {
      readonly path: string
      readonly data: Uint8Array
      readonly mode: "create" | "overwrite" | "append"
      readonly createParents: boolean
    }
  ) => PE<{ readonly bytesWritten: number; readonly created: boolean }>
  /**
   * Writes a body as it comes, whatever its size (the gateway's raw write limit, 1 GiB by default, is enforced by
   * the caller on the stream): the provider's wire streams it, and a body that breaks off leaves the file as it
   * was. The body is handed to the wire as it is, not read here (no byte passes through JavaScript on the way
   * where the wire takes a stream as is), so what was written is what the caller sent: only `created` comes back.
   * Absent: writes go whole through `writeFile`, at most `capabilities.files.maxWriteBytes`.
   */
  readonly writeFileStream?:
    | ((
      sandbox: ProviderSandbox,
      input: {
        readonly path: string
        readonly body: ReadableStream<Uint8Array>
        readonly mode: "create" | "overwrite" | "append"
        readonly createParents: boolean
      }
    ) => PE<{ readonly created: boolean }>)
    | undefined
  readonly listFiles: (
    sandbox: ProviderSandbox,
    input: { readonly path: string; readonly recursive: boolean; readonly maxEntries: number }
  ) => PE<{ readonly entries: ReadonlyArray<ProviderFileEntry>; readonly truncated: boolean }>
  readonly deleteFile: (sandbox: ProviderSandbox, input: { readonly path: string; readonly recursive: boolean }) => PE<{ readonly deleted: boolean }>

  /** Returns the provider's URL for the port and a lease id to revoke it with. */
  readonly exposeHttpEndpoint: (
    sandbox: ProviderSandbox,
    input: { readonly port: number; readonly leaseSeconds: number }
  ) => PE<{ readonly leaseId: string; readonly url: string; readonly expiresAt: string }>
  readonly revokeHttpEndpoint: (sandbox: ProviderSandbox, leaseId: string) => PE<{ readonly revoked: boolean }>

  /** The sandbox's desktop (computer use). Present exactly when `capabilities.computer` is declared. */
  readonly computer?: ComputerDriver | undefined

  /**
   * The same adapter on an organization's own provider account (BYOK), built from the credential fields it
   * stored (`src/domain/ProviderCredentials.ts` names them per provider). Absent: the provider cannot run on a
   * customer's account. The registry builds one instance per credential set and caches it.
   */
  readonly withCredentials?: ((credentials: ProviderCredentials) => SandboxProvider) | undefined
}

/** Credential fields as an organization stored them (`api_key`, `team_id`, …). */
export type ProviderCredentials = Readonly<Record<string, string>>

/**
 * A capability the provider lacks: its methods fail with kind `unsupported` (use `unsupported(...)`), and the
 * declared capabilities say so, so eligibility never routes such a request there.
 */
export const unsupported = (provider: ProviderName, what: string) =>
  new ProviderError({ provider, kind: "unsupported", message: `${provider} does not support ${what}`, retryable: false })

/** The set of configured providers, in registry order. */
export class ProviderRegistry extends Context.Tag("app/ProviderRegistry")<ProviderRegistry, {
  readonly all: ReadonlyArray<SandboxProvider>
  /** By identifier; undefined for a provider that is not configured (or not a provider at all). */
  readonly get: (name: string) => SandboxProvider | undefined
  /**
   * The provider on an organization's own account: cached per credential set (a rotated credential is a new
   * set, so it takes effect at the next call); undefined when the provider is not configured or has no BYOK.
   * Every failure of that instance carries `account: "organization"`.
   */
  readonly withCredentials: (name: string, credentials: ProviderCredentials) => SandboxProvider | undefined
}>() {}
