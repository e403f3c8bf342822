/**
 * Declared capabilities of the eleven providers, as reference/providers.md §3.1 lists them. Emulators advertise
 * exactly these (an emulated CodeSandbox sandbox still has no process API); an adapter may start from its row
 * and add what its real API verifiably does more, saying why next to it (for example Daytona's pause/resume and
 * internet switch in providers/daytona/adapter/sandboxes.ts, E2B's SendSignal cancel).
 *
 * Ceilings: 10 MiB or 100 MiB of output, 10 MiB per file (Prime 16 MiB), 10k list entries, 86,400 s leases.
 * Process timeouts: the API's ceiling of 3,600 s, except Cloudflare (30 s bridge request timeout), Freestyle
 * (`exec-await` ≤ 300 s) and Vercel (5 h). `network` is null everywhere here: the reference declares it for no
 * provider. `cost`: Cloudflare reports cost only with an account id and an analytics token, so its base row
 * says false (its adapter turns it on when those are configured).
 *
 * `maxResources`, the largest sandbox (resources.ts holds each provider's sizes): Runloop's XX_LARGE, CodeSandbox's
 * XLarge, Vercel's 8 vCPU, Prime's and Freestyle's public ceilings, Northflank's largest plan, Daytona's and E2B's
 * per-sandbox limits, Cloudflare's one size (the `standard-2` instance type of the bridge's wrangler.toml); Blaxel
 * and Modal state none.
 */
import { SCREENSHOT_MAX_BYTES } from "../../src/domain/Computer.ts"
import type { ComputerCapabilities, ProviderCapabilities, ProviderName } from "../../src/providers/Provider.ts"

export const MiB = 1024 * 1024

type Files = NonNullable<ProviderCapabilities["files"]>
type Process = NonNullable<ProviderCapabilities["process"]>

const files = (
  writeModes: Files["writeModes"],
  flags: { readonly parents: boolean; readonly list: boolean; readonly del: boolean },
  maxBytes = 10 * MiB
): Files => ({
  read: true,
  write: true,
  writeModes,
  createParents: flags.parents,
  list: flags.list,
  delete: flags.del,
  maxReadBytes: maxBytes,
  maxWriteBytes: maxBytes,
  maxListEntries: 10_000
})

const proc = (streams: boolean, cancel: boolean, maxOutputBytes: number, maxTimeoutSeconds = 3600): Process => ({
  execute: true,
  streams,
  cancel,
  maxOutputBytes,
  maxTimeoutSeconds
})

const base = { version: "1", cost: true, network: null, computer: null } as const
/**
 * Computer use, declared where the adapter drives the provider's own desktop: Daytona (its toolbox's computer-use
 * API, "native computer use" in reference §3.1) and E2B (its `desktop` template, driven through envd commands as
 * E2B's Desktop SDK does: xdotool, scrot, and ffmpeg for recordings). The others have no desktop, so
 * `features.computer_use` never places a sandbox there.
 */
const desktop: ComputerCapabilities = {
  implementation: "native",
  actions: ["mouse_move", "mouse_click", "mouse_drag", "mouse_scroll", "keyboard_type", "keyboard_key", "keyboard_hotkey"],
  screenshot: { formats: ["png", "jpeg"], maxBytes: SCREENSHOT_MAX_BYTES },
  recording: { formats: ["mp4"] }
}
const lease = { expose: true, revoke: true, maxLeaseSeconds: 86_400 } as const
const ALL_MODES = ["create", "overwrite", "append"] as const

export const DECLARED: Readonly<Record<ProviderName, ProviderCapabilities>> = {
  blaxel: {
    ...base,
    sources: ["environment", "oci_image"],
    sizing: "direct",
    pause: false,
    resume: false,
    architectures: ["x86_64"],
    isolation: "microvm",
    // Standard input: the runtime's `stdin: true` and `POST /process/{id}/stdin`, as Blaxel's SDK writes it.
    process: { ...proc(false, true, 10 * MiB), stdin: true },
    files: files(ALL_MODES, { parents: true, list: true, del: true }),
    httpEndpoints: lease
  },
  cloudflare: {
    ...base,
    maxResources: { vcpu: 1, memoryMb: 6144, diskMb: 12_288 },
    cost: false,
    sources: ["environment"],
    sizing: "fixed",
    pause: false,
    resume: false,
    architectures: ["x86_64"],
    isolation: "container",
    process: proc(true, false, 10 * MiB, 30),
    files: files(ALL_MODES, { parents: false, list: false, del: false }),
    httpEndpoints: null
  },
  codesandbox: {
    ...base,
    maxResources: { vcpu: 64, memoryMb: 131_072 },
    sources: ["environment", "provider_template"],
    sizing: "tier",
    pause: true,
    resume: true,
    architectures: ["x86_64"],
    isolation: null,
    process: null,
    files: null,
    httpEndpoints: null
  },
  // Pause is an option upstream (DAYTONA_PAUSE_SUPPORTED, default off) and there is no resume: the base row
  // says so. The Daytona adapter declares both (stop/start); see providers/daytona/adapter/sandboxes.ts.
  daytona: {
    ...base,
    maxResources: { vcpu: 4, memoryMb: 8192, diskMb: 10_240 },
    sources: ["environment", "oci_image"],
    sizing: "template",
    pause: false,
    resume: false,
    architectures: ["x86_64"],
    isolation: null,
    // Standard input: a session command's input route (`…/command/{id}/input`).
    process: { ...proc(false, true, 100 * MiB), stdin: true },
    files: files(["create", "overwrite"], { parents: true, list: true, del: true }),
    httpEndpoints: lease,
    computer: desktop
  },
  e2b: {
    ...base,
    maxResources: { vcpu: 8, memoryMb: 8192 },
    sources: ["environment", "provider_template"],
    sizing: "template",
    pause: true,
    resume: true,
    architectures: ["x86_64"],
    isolation: "microvm",
    process: proc(true, false, 100 * MiB),
    files: files(["create", "overwrite"], { parents: true, list: true, del: true }),
    httpEndpoints: null,
    computer: desktop
  },
  freestyle: {
    ...base,
    maxResources: { vcpu: 32, memoryMb: 65_536, diskMb: 65_536 },
    sources: ["environment", "provider_template"],
    sizing: "template",
    pause: true,
    resume: true,
    architectures: ["x86_64"],
    isolation: "vm",
    process: proc(false, false, 10 * MiB, 300),
    files: files(["overwrite"], { parents: true, list: true, del: true }),
    httpEndpoints: null
  },
  modal: {
    ...base,
    sources: ["environment", "oci_image"],
    sizing: "direct",
    pause: false,
    resume: false,
    architectures: ["x86_64", "arm64"],
    isolation: null,
    process: proc(true, false, 100 * MiB),
    files: files(["create", "overwrite"], { parents: true, list: true, del: true }),
    httpEndpoints: null
  },
  northflank: {
    ...base,
    maxResources: { vcpu: 16, memoryMb: 65_536 },
    sources: ["environment", "oci_image"],
    sizing: "tier",
    pause: true,
    resume: true,
    architectures: ["x86_64", "arm64"],
    isolation: null,
    process: null,
    files: null,
    httpEndpoints: null
  },
  prime: {
    ...base,
    maxResources: { vcpu: 16, memoryMb: 65_536, diskMb: 131_072 },
    sources: ["environment", "oci_image", "provider_template"],
    sizing: "direct",
    pause: false,
    resume: false,
    architectures: ["x86_64"],
    isolation: null,
    process: proc(false, false, 10 * MiB),
    files: files(["overwrite"], { parents: false, list: false, del: false }, 16 * MiB),
    httpEndpoints: null
  },
  runloop: {
    ...base,
    maxResources: { vcpu: 8, memoryMb: 32_768, diskMb: 16_384 },
    sources: ["environment", "provider_template"],
    sizing: "tier",
    pause: true,
    resume: true,
    architectures: ["x86_64"],
    isolation: "microvm",
    process: proc(false, true, 10 * MiB),
    files: files(["create", "overwrite"], { parents: false, list: false, del: false }),
    httpEndpoints: null
  },
  vercel: {
    ...base,
    maxResources: { vcpu: 8, memoryMb: 16_384 },
    sources: ["environment", "oci_image"],
    sizing: "fixed",
    pause: false,
    resume: false,
    architectures: ["x86_64"],
    isolation: "microvm",
    process: proc(true, false, 10 * MiB, 18_000),
    files: files(["create", "overwrite"], { parents: true, list: false, del: false }),
    httpEndpoints: null
  }
}
