/**
 * Resource mapping (reference/providers.md §2.3): what a provider would really give for the requested
 * resources, or `undefined` when that is less than asked, beyond its ceiling, or nothing it offers fits
 * (eligibility turns that into a `resources` exclusion). Never less than asked: more is fine (a tier, a preset,
 * whole units), less is not — where the reference passes a provider's named size unchecked, it is checked here.
 *
 * - runloop: the first preset (vCPU / MiB / disk MiB) covering the request, or the `resource_size` option's.
 * - codesandbox: the first tier (vCPU / MiB) covering the request, always x86_64, or the `vm_tier` option's.
 * - vercel: whole vCPUs, 1 to 8, each with 2048 MB: enough of them for the requested vCPUs and memory;
 *   `provider_size` is `"<n> vCPU"`.
 * - prime: whole vCPUs, 1 to 16 (the request rounded up); memory rounded up to a 128 MiB step, at most 64 GiB;
 *   disk in whole GiB, 2 to 128 (5 when not asked); `provider_size` is null (Prime sizes directly).
 * - freestyle: whole vCPUs and whole GiB of memory and disk, never below a VM's base size (2 vCPU, 4 GiB, the
 *   16 GiB root filesystem: Freestyle only resizes upward) and at most its public ceiling (32 vCPU, 64 GiB of
 *   memory, 64 GiB of disk); `provider_size` is the snapshot (`provider_options.freestyle.snapshot_id`, else null
 *   here: the adapter reports the one it used).
 * - daytona: an environment is its default snapshot (1 vCPU, 1 GiB, 3 GiB); an image build whole vCPUs and GiB.
 * - e2b: an environment is the `base` template (2 vCPU, 512 MiB); a template is sized by itself.
 * - a `fixed` provider (Cloudflare) gives its one size, its declared `maxResources`.
 * - everyone else: arm64 only on modal and northflank; the request passes through unchanged and
 *   `provider_size` is `provider_options.<provider>.size` or null.
 *
 * Adapters report after create what they really got (daytona whole GiB, e2b the template's size, ...); routing
 * refuses a sandbox reported below the request (routing.ts).
 */
import type { SandboxRequest } from "../domain/Sandbox.ts"
import type { ProviderCapabilities, ProviderName, ResolvedResources, SizeLimits } from "./Provider.ts"

export type MappedResources = ResolvedResources

export const RUNLOOP_PRESETS: ReadonlyArray<{ readonly size: string; readonly vcpu: number; readonly memoryMb: number; readonly diskMb: number }> = [
  { size: "X_SMALL", vcpu: 0.5, memoryMb: 1024, diskMb: 4096 },
  { size: "SMALL", vcpu: 1, memoryMb: 2048, diskMb: 4096 },
  { size: "MEDIUM", vcpu: 2, memoryMb: 4096, diskMb: 8192 },
  { size: "LARGE", vcpu: 2, memoryMb: 8192, diskMb: 16384 },
  { size: "X_LARGE", vcpu: 4, memoryMb: 16384, diskMb: 16384 },
  { size: "XX_LARGE", vcpu: 8, memoryMb: 32768, diskMb: 16384 }
]

export const CODESANDBOX_TIERS: ReadonlyArray<{ readonly size: string; readonly vcpu: number; readonly memoryMb: number }> = [
  { size: "Pico", vcpu: 2, memoryMb: 1024 },
  { size: "Nano", vcpu: 2, memoryMb: 4096 },
  { size: "Micro", vcpu: 4, memoryMb: 8192 },
  { size: "Small", vcpu: 8, memoryMb: 16384 },
  { size: "Medium", vcpu: 16, memoryMb: 32768 },
  { size: "Large", vcpu: 32, memoryMb: 65536 },
  { size: "XLarge", vcpu: 64, memoryMb: 131072 }
]

/** Vercel Sandbox sizes: 1–8 vCPUs, 2048 MB of memory each. */
export const VERCEL_SIZING = { minVcpus: 1, maxVcpus: 8, mbPerVcpu: 2048 } as const

/** The vCPUs Vercel gives for a request: enough for its vCPUs and its memory; undefined above 8. */
export const vercelVcpus = (resources: { readonly vcpu: number; readonly memoryMb: number }): number | undefined => {
  const vcpus = Math.max(VERCEL_SIZING.minVcpus, Math.ceil(resources.vcpu - 1e-9), Math.ceil(resources.memoryMb / VERCEL_SIZING.mbPerVcpu - 1e-9))
  return vcpus > VERCEL_SIZING.maxVcpus ? undefined : vcpus
}

/** Prime sandboxes: 1–16 whole vCPUs, memory in 128 MiB steps up to 64 GiB, disk 2–128 GiB (default 5). */
export const PRIME_SIZING = { minVcpus: 1, maxVcpus: 16, memoryStepMb: 128, maxMemoryMb: 65_536, minDiskGib: 2, maxDiskGib: 128, defaultDiskGib: 5 } as const

/** What Prime gives for a request (vCPUs, MiB, disk GiB), or undefined when it is larger than Prime's largest. */
export const primeSize = (resources: { readonly vcpu: number; readonly memoryMb: number; readonly diskMb?: number | undefined }) => {
  const s = PRIME_SIZING
  const vcpu = Math.max(s.minVcpus, Math.ceil(resources.vcpu - 1e-9))
  const memoryMb = Math.max(s.memoryStepMb, Math.ceil(resources.memoryMb / s.memoryStepMb - 1e-9) * s.memoryStepMb)
  const diskGib = resources.diskMb === undefined ? s.defaultDiskGib : Math.max(s.minDiskGib, Math.ceil(resources.diskMb / 1024 - 1e-9))
  if (vcpu > s.maxVcpus || memoryMb > s.maxMemoryMb || diskGib > s.maxDiskGib) return undefined
  return { vcpu, memoryMb, diskGib }
}

/**
 * Freestyle VM sizes: a VM starts at its base size and can only grow (`POST /v5/vms/{id}/resize`), in whole vCPUs
 * and whole GiB, up to the public plans' ceiling.
 */
export const FREESTYLE_SIZING = {
  base: { vcpu: 2, memoryMb: 4096, diskMb: 16384 },
  max: { vcpu: 32, memoryMb: 65536, diskMb: 65536 }
} as const

/** What Freestyle gives for a request: whole units, at least the base size; undefined beyond the ceiling. */
export const freestyleSize = (resources: { readonly vcpu: number; readonly memoryMb: number; readonly diskMb?: number | undefined }) => {
  const { base, max } = FREESTYLE_SIZING
  const vcpu = Math.max(base.vcpu, Math.ceil(resources.vcpu - 1e-9))
  const memoryMb = Math.max(base.memoryMb, Math.ceil(resources.memoryMb / 1024 - 1e-9) * 1024)
  const diskMb = Math.max(base.diskMb, Math.ceil((resources.diskMb ?? 0) / 1024 - 1e-9) * 1024)
  if (vcpu > max.vcpu || memoryMb > max.memoryMb || diskMb > max.diskMb) return undefined
  return { vcpu, memoryMb, diskMb }
}

/**
 * Sandboxes from an `environment` source where nothing is sized at create: Daytona's default snapshot (resources
 * are sent only with an image build) and E2B's `base` template (a template carries its size; its disk is not
 * stated). A configured snapshot or template of another size is found out after the create (routing.ts checks
 * what the provider reports against the request).
 */
export const DAYTONA_DEFAULT_SIZE = { vcpu: 1, memoryMb: 1024, diskMb: 3072 } as const
export const E2B_BASE_SIZE = { vcpu: 2, memoryMb: 512, diskMb: null } as const

/** Providers with arm64 machines. */
export const ARM64_PROVIDERS: ReadonlySet<ProviderName> = new Set(["modal", "northflank"])

type ResourceRequest = Pick<SandboxRequest, "resources" | "provider_options"> & { readonly source?: SandboxRequest["source"] | undefined }

const optionOf = (req: ResourceRequest, provider: ProviderName, key: string): string | undefined => {
  const options = (req.provider_options as Readonly<Record<string, Readonly<Record<string, unknown>> | undefined>> | undefined)?.[provider]
  const value = options?.[key]
  return typeof value === "string" && value !== "" ? value : undefined
}

/** Whether `given` is at least what was asked on every dimension (a disk the provider does not state passes). */
export const coversRequest = (given: Pick<ResolvedResources, "vcpu" | "memoryMb" | "diskMb">, asked: SandboxRequest["resources"]): boolean =>
  given.vcpu + 1e-9 >= asked.vcpu && given.memoryMb >= asked.memory_mb && (asked.disk_mb === undefined || given.diskMb === null || given.diskMb >= asked.disk_mb)

/** Whether `size` is within the provider's ceiling (`maxResources`) on every dimension it states. */
export const withinCeiling = (size: Pick<ResolvedResources, "vcpu" | "memoryMb" | "diskMb">, max: SizeLimits | undefined): boolean =>
  (max?.vcpu === undefined || size.vcpu <= max.vcpu + 1e-9) &&
  (max?.memoryMb === undefined || size.memoryMb <= max.memoryMb) &&
  (max?.diskMb === undefined || size.diskMb === null || size.diskMb <= max.diskMb)

/** What the provider's own sizing gives for the request (before the never-less and ceiling checks). */
const mapped = (provider: ProviderName, req: ResourceRequest, capabilities: Pick<ProviderCapabilities, "sizing" | "maxResources"> | undefined): ResolvedResources | undefined => {
  const r = req.resources
  const architecture = r.architecture === "any" ? "x86_64" : r.architecture
  const environment = req.source === undefined || req.source.kind === "environment"
  if (provider === "runloop") {
    const named = optionOf(req, provider, "resource_size")
    const preset = named !== undefined
      ? RUNLOOP_PRESETS.find((p) => p.size === named)
      : RUNLOOP_PRESETS.find((p) => p.vcpu >= r.vcpu && p.memoryMb >= r.memory_mb && p.diskMb >= (r.disk_mb ?? 0))
    if (preset === undefined) return undefined
    return { vcpu: preset.vcpu, memoryMb: preset.memoryMb, diskMb: preset.diskMb, architecture, providerSize: preset.size }
  }
  if (provider === "codesandbox") {
    const named = optionOf(req, provider, "vm_tier")
    const tier = named !== undefined ? CODESANDBOX_TIERS.find((t) => t.size === named) : CODESANDBOX_TIERS.find((t) => t.vcpu >= r.vcpu && t.memoryMb >= r.memory_mb)
    if (tier === undefined) return undefined
    return { vcpu: tier.vcpu, memoryMb: tier.memoryMb, diskMb: r.disk_mb ?? null, architecture: "x86_64", providerSize: tier.size }
  }
  if (provider === "vercel") {
    const vcpus = vercelVcpus({ vcpu: r.vcpu, memoryMb: r.memory_mb })
    if (vcpus === undefined) return undefined
    return { vcpu: vcpus, memoryMb: vcpus * VERCEL_SIZING.mbPerVcpu, diskMb: r.disk_mb ?? null, architecture, providerSize: `${vcpus} vCPU` }
  }
  if (provider === "prime") {
    const size = primeSize({ vcpu: r.vcpu, memoryMb: r.memory_mb, diskMb: r.disk_mb })
    if (size === undefined) return undefined
    return { vcpu: size.vcpu, memoryMb: size.memoryMb, diskMb: size.diskGib * 1024, architecture, providerSize: null }
  }
  if (provider === "freestyle") {
    const size = freestyleSize({ vcpu: r.vcpu, memoryMb: r.memory_mb, diskMb: r.disk_mb })
    if (size === undefined) return undefined
    return { ...size, architecture, providerSize: optionOf(req, provider, "snapshot_id") ?? null }
  }
  if (provider === "daytona") {
    if (environment) return { ...DAYTONA_DEFAULT_SIZE, architecture, providerSize: null }
    // An image build: whole vCPUs and GiB.
    return {
      vcpu: Math.max(1, Math.ceil(r.vcpu - 1e-9)),
      memoryMb: Math.max(1, Math.ceil(r.memory_mb / 1024 - 1e-9)) * 1024,
      diskMb: r.disk_mb === undefined ? null : Math.max(1, Math.ceil(r.disk_mb / 1024 - 1e-9)) * 1024,
      architecture,
      providerSize: null
    }
  }
  if (provider === "e2b" && environment && optionOf(req, provider, "template_id") === undefined) return { ...E2B_BASE_SIZE, architecture, providerSize: null }
  // One size for every sandbox (Cloudflare: the bridge's instance type): its ceiling is its size.
  const max = capabilities?.maxResources
  if (capabilities?.sizing === "fixed" && max?.vcpu !== undefined && max.memoryMb !== undefined) {
    return { vcpu: max.vcpu, memoryMb: max.memoryMb, diskMb: max.diskMb ?? null, architecture, providerSize: optionOf(req, provider, "size") ?? null }
  }
  return { vcpu: r.vcpu, memoryMb: r.memory_mb, diskMb: r.disk_mb ?? null, architecture, providerSize: optionOf(req, provider, "size") ?? null }
}

/**
 * What the provider gives for the request, or undefined when that would be less than asked on any dimension,
 * more than its ceiling (`capabilities.maxResources`: for an emulated provider, also this host's), or nothing it
 * offers fits at all. Never less than asked: a size below the request is no size.
 */
export const resolveProviderResources = (
  provider: ProviderName,
  req: ResourceRequest,
  capabilities?: Pick<ProviderCapabilities, "sizing" | "maxResources">
): ResolvedResources | undefined => {
  if (req.resources.architecture === "arm64" && !ARM64_PROVIDERS.has(provider)) return undefined
  const size = mapped(provider, req, capabilities)
  if (size === undefined || !coversRequest(size, req.resources) || !withinCeiling(size, capabilities?.maxResources)) return undefined
  return size
}
