/**
 * Resource mapping (reference/providers.md §2.3): what a provider would really give for the requested
 * resources, or `undefined` when nothing it offers fits (eligibility turns that into a `resources` exclusion).
 *
 * - runloop: the first preset (vCPU / MiB / disk MiB) covering the request; `provider_size` is the
 *   `resource_size` option when given (not checked against the request, as upstream), else the preset.
 * - codesandbox: the first tier (vCPU / MiB) covering the request, always x86_64; `provider_size` is the
 *   `vm_tier` option when given, else the tier.
 * - vercel: whole vCPUs, 1 to 8, each with 2048 MB: enough of them for the requested vCPUs and memory;
 *   `provider_size` is `"<n> vCPU"`.
 * - prime: whole vCPUs, 1 to 16 (the request rounded up); memory rounded up to a 128 MiB step, at most 64 GiB;
 *   disk in whole GiB, 2 to 128 (5 when not asked); `provider_size` is null (Prime sizes directly).
 * - freestyle: whole vCPUs and whole GiB of memory and disk, never below a VM's base size (2 vCPU, 4 GiB, the
 *   16 GiB root filesystem: Freestyle only resizes upward) and at most its public ceiling (32 vCPU, 64 GiB of
 *   memory, 64 GiB of disk); `provider_size` is the snapshot (`provider_options.freestyle.snapshot_id`, else null
 *   here: the adapter reports the one it used).
 * - everyone else: arm64 only on modal and northflank; the request passes through unchanged and
 *   `provider_size` is `provider_options.<provider>.size` or null.
 *
 * Adapters may override after create with what they really sent (daytona reports whole GiB, e2b the
 * template's size, ...).
 */
import type { SandboxRequest } from "../../src/domain/Sandbox.ts"
import type { ProviderName, ResolvedResources } from "./Provider.ts"

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

/** Providers with arm64 machines. */
export const ARM64_PROVIDERS: ReadonlySet<ProviderName> = new Set(["modal", "northflank"])

type ResourceRequest = Pick<SandboxRequest, "resources" | "provider_options">

const optionOf = (req: ResourceRequest, provider: ProviderName, key: string): string | undefined => {
  const options = (req.provider_options as Readonly<Record<string, Readonly<Record<string, unknown>> | undefined>> | undefined)?.[provider]
  const value = options?.[key]
  return typeof value === "string" && value !== "" ? value : undefined
}

export const resolveProviderResources = (provider: ProviderName, req: ResourceRequest): ResolvedResources | undefined => {
  const r = req.resources
  if (r.architecture === "arm64" && !ARM64_PROVIDERS.has(provider)) return undefined
  const architecture = r.architecture === "any" ? "x86_64" : r.architecture
  if (provider === "runloop") {
    const preset = RUNLOOP_PRESETS.find((p) => p.vcpu >= r.vcpu && p.memoryMb >= r.memory_mb && p.diskMb >= (r.disk_mb ?? 0))
    if (preset === undefined) return undefined
    return { vcpu: preset.vcpu, memoryMb: preset.memoryMb, diskMb: preset.diskMb, architecture, providerSize: optionOf(req, provider, "resource_size") ?? preset.size }
  }
  if (provider === "codesandbox") {
    const tier = CODESANDBOX_TIERS.find((t) => t.vcpu >= r.vcpu && t.memoryMb >= r.memory_mb)
    if (tier === undefined) return undefined
    return { vcpu: tier.vcpu, memoryMb: tier.memoryMb, diskMb: r.disk_mb ?? null, architecture: "x86_64", providerSize: optionOf(req, provider, "vm_tier") ?? tier.size }
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
  return { vcpu: r.vcpu, memoryMb: r.memory_mb, diskMb: r.disk_mb ?? null, architecture, providerSize: optionOf(req, provider, "size") ?? null }
}
