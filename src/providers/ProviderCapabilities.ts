/** What a provider declares it can do: the capability manifest every adapter states (ARCHITECTURE.md §4). */

/** Capabilities (reference/providers.md §2.2), as declared by the adapter. */
export interface ProviderCapabilities {
  readonly version: string
  readonly sources: ReadonlyArray<"environment" | "oci_image" | "provider_template">
  readonly sizing: "direct" | "tier" | "template" | "fixed"
  readonly pause: boolean
  readonly resume: boolean
  readonly cost: boolean
  readonly architectures: ReadonlyArray<"x86_64" | "arm64">
  readonly isolation: "microvm" | "vm" | "container" | null
  readonly process: null | {
    readonly execute: boolean
    readonly streams: boolean
    readonly cancel: boolean
    readonly maxOutputBytes: number
    readonly maxTimeoutSeconds: number
    /**
     * Commands on a pseudo-terminal (`ExecInput.pty`, `sendInput` types into it, `resizeTerminal`). Absent: no
     * terminals; a request with `features.pty` is never placed there.
     */
    readonly terminal?: boolean | undefined
    /**
     * Standard input of plain processes (`ExecInput.stdin`). Absent: exactly when `sendInput` is present; false
     * where `sendInput` serves terminals only (Daytona: its session commands take no input, its PTYs do).
     */
    readonly stdin?: boolean | undefined
  }
  readonly files: null | {
    readonly read: boolean
    readonly write: boolean
    readonly writeModes: ReadonlyArray<"create" | "overwrite" | "append">
    readonly createParents: boolean
    readonly list: boolean
    readonly delete: boolean
    readonly maxReadBytes: number
    readonly maxWriteBytes: number
    readonly maxListEntries: number
  }
  readonly httpEndpoints: null | { readonly expose: boolean; readonly revoke: boolean; readonly maxLeaseSeconds: number }
  /** What the provider can enforce: an internet off switch, domain allow or deny lists (the local runtime can). */
  readonly network: null | { readonly blockInternet: boolean; readonly allowDomains: boolean; readonly denyDomains: boolean }
  /**
   * Whether a sandbox reaches the internet when the request leaves `network.internet_access` unsaid (the provider's
   * default). Absent: true, as every provider of the reference gives internet by default; an emulated provider
   * says what the local runtime gives (`RUNTIME_DEFAULT_INTERNET`).
   */
  readonly internetByDefault?: boolean | undefined
  /**
   * The largest sandbox the provider gives, per dimension (absent: it states no ceiling there, and the request
   * passes as asked). An emulated provider is also held to what this host can give (the local runtime's limits).
   */
  readonly maxResources?: SizeLimits | undefined
  /**
   * Computer use (spec §2.8 `computer`). Absent or null: none; eligibility checks it for `features.computer_use`
   * and `recording`. Declared exactly where the adapter has a `computer` driver (declared.ts says which).
   */
  readonly computer?: ComputerCapabilities | null | undefined
}

export interface SizeLimits {
  readonly vcpu?: number | undefined
  readonly memoryMb?: number | undefined
  readonly diskMb?: number | undefined
}

export interface ComputerCapabilities {
  /** e.g. "native" */
  readonly implementation: string
  /** e.g. "mouse_move", "keyboard_type" */
  readonly actions: ReadonlyArray<string>
  readonly screenshot: null | { readonly formats: ReadonlyArray<string>; readonly maxBytes: number }
  readonly recording: null | { readonly formats: ReadonlyArray<string> }
}
