/** Resource mapping (reference/providers.md §2.3): presets, tiers, named sizes and the arm64 rule. */
import { describe, expect, it } from "vitest"
import type { SandboxRequest } from "../../src/domain/Sandbox.ts"
import { ProviderNames } from "../../src/providers/Provider.ts"
import { resolveProviderResources } from "../../src/providers/resources.ts"

const req = (
  resources: Partial<SandboxRequest["resources"]>,
  provider_options?: Record<string, Record<string, unknown>>
): Pick<SandboxRequest, "resources" | "provider_options"> => ({
  resources: { vcpu: 1, memory_mb: 512, architecture: "any", ...resources },
  provider_options: provider_options as SandboxRequest["provider_options"]
})

describe("resolveProviderResources", () => {
  it("runloop takes the first preset covering vCPU, memory and disk", () => {
    expect(resolveProviderResources("runloop", req({ vcpu: 0.5, memory_mb: 1024 }))).toEqual({ vcpu: 0.5, memoryMb: 1024, diskMb: 4096, architecture: "x86_64", providerSize: "X_SMALL" })
    expect(resolveProviderResources("runloop", req({ vcpu: 1.5, memory_mb: 3000 }))?.providerSize).toBe("MEDIUM")
    // Memory alone can push the preset up: 2 vCPU / 8 GiB is LARGE, not MEDIUM.
    expect(resolveProviderResources("runloop", req({ vcpu: 2, memory_mb: 5000 }))?.providerSize).toBe("LARGE")
    // Disk too: 1 vCPU with 6 GiB of disk needs MEDIUM (8 GiB).
    expect(resolveProviderResources("runloop", req({ vcpu: 1, memory_mb: 512, disk_mb: 6000 }))).toMatchObject({ providerSize: "MEDIUM", diskMb: 8192 })
    expect(resolveProviderResources("runloop", req({ vcpu: 8, memory_mb: 32768, disk_mb: 16384 }))?.providerSize).toBe("XX_LARGE")
    expect(resolveProviderResources("runloop", req({ vcpu: 16 }))).toBeUndefined()
    expect(resolveProviderResources("runloop", req({ disk_mb: 20_000 }))).toBeUndefined()
  })

  it("runloop's resource_size option names the size, which must cover the request (never less than asked)", () => {
    expect(resolveProviderResources("runloop", req({ vcpu: 1 }, { runloop: { resource_size: "XX_LARGE" } }))).toMatchObject({ vcpu: 8, memoryMb: 32768, providerSize: "XX_LARGE" })
    expect(resolveProviderResources("runloop", req({ vcpu: 4 }, { runloop: { resource_size: "SMALL" } }))).toBeUndefined()
    expect(resolveProviderResources("codesandbox", req({ vcpu: 4 }, { codesandbox: { vm_tier: "Pico" } }))).toBeUndefined()
  })

  it("never less than asked: template sizes (Daytona's snapshot, E2B's base) and fixed sizes are checked against the request", () => {
    const env = { kind: "environment" as const, environment: "metal/base", version: "latest" }
    expect(resolveProviderResources("daytona", { ...req({ vcpu: 1, memory_mb: 512, disk_mb: 256 }), source: env })).toMatchObject({ vcpu: 1, memoryMb: 1024, diskMb: 3072 })
    expect(resolveProviderResources("daytona", { ...req({ vcpu: 64, memory_mb: 1_048_576 }), source: env })).toBeUndefined()
    expect(resolveProviderResources("daytona", { ...req({ vcpu: 1, memory_mb: 512, disk_mb: 4096 }), source: env })).toBeUndefined()
    expect(resolveProviderResources("e2b", { ...req({ vcpu: 1, memory_mb: 512 }), source: env })).toMatchObject({ vcpu: 2, memoryMb: 512 })
    expect(resolveProviderResources("e2b", { ...req({ vcpu: 1, memory_mb: 1024 }), source: env })).toBeUndefined()
    const fixed = { sizing: "fixed" as const, maxResources: { vcpu: 1, memoryMb: 6144, diskMb: 12_288 } }
    expect(resolveProviderResources("cloudflare", req({ vcpu: 0.5, memory_mb: 512 }), fixed)).toMatchObject({ vcpu: 1, memoryMb: 6144, diskMb: 12_288 })
    expect(resolveProviderResources("cloudflare", req({ vcpu: 2 }), fixed)).toBeUndefined()
    // A ceiling (an emulated provider's: this host's) bounds what passes through.
    expect(resolveProviderResources("modal", req({ vcpu: 64, memory_mb: 512 }), { sizing: "direct", maxResources: { vcpu: 2 } })).toBeUndefined()
    expect(resolveProviderResources("modal", req({ vcpu: 2, memory_mb: 512 }), { sizing: "direct", maxResources: { vcpu: 2 } })).toMatchObject({ vcpu: 2 })
  })

  it("codesandbox takes the first tier covering vCPU and memory, always x86_64", () => {
    expect(resolveProviderResources("codesandbox", req({ vcpu: 1, memory_mb: 512 }))).toEqual({ vcpu: 2, memoryMb: 1024, diskMb: null, architecture: "x86_64", providerSize: "Pico" })
    expect(resolveProviderResources("codesandbox", req({ vcpu: 2, memory_mb: 2048 }))?.providerSize).toBe("Nano")
    expect(resolveProviderResources("codesandbox", req({ vcpu: 3, memory_mb: 1024 }))?.providerSize).toBe("Micro")
    expect(resolveProviderResources("codesandbox", req({ vcpu: 64, memory_mb: 131072, disk_mb: 100 }))).toMatchObject({ providerSize: "XLarge", diskMb: 100 })
    expect(resolveProviderResources("codesandbox", req({ vcpu: 65 }))).toBeUndefined()
    expect(resolveProviderResources("codesandbox", req({ vcpu: 1 }, { codesandbox: { vm_tier: "Large" } }))?.providerSize).toBe("Large")
  })

  it("vercel gives whole vCPUs (1–8) with 2048 MB each, enough for the vCPUs and the memory asked for", () => {
    expect(resolveProviderResources("vercel", req({ vcpu: 0.5, memory_mb: 512 }))).toEqual({ vcpu: 1, memoryMb: 2048, diskMb: null, architecture: "x86_64", providerSize: "1 vCPU" })
    expect(resolveProviderResources("vercel", req({ vcpu: 1.5, memory_mb: 1024 }))).toMatchObject({ vcpu: 2, memoryMb: 4096 })
    // Memory alone can push the vCPUs up: 1 vCPU with 5000 MB needs 3 (6144 MB).
    expect(resolveProviderResources("vercel", req({ vcpu: 1, memory_mb: 5000 }))).toMatchObject({ vcpu: 3, memoryMb: 6144, providerSize: "3 vCPU" })
    expect(resolveProviderResources("vercel", req({ vcpu: 8, memory_mb: 16384 }))).toMatchObject({ vcpu: 8, memoryMb: 16384 })
    expect(resolveProviderResources("vercel", req({ vcpu: 9 }))).toBeUndefined()
    expect(resolveProviderResources("vercel", req({ vcpu: 2, memory_mb: 16385 }))).toBeUndefined()
  })

  it("prime gives whole vCPUs (1–16), memory in 128 MiB steps up to 64 GiB, disk in whole GiB 2–128 (default 5)", () => {
    expect(resolveProviderResources("prime", req({ vcpu: 0.5, memory_mb: 500 }))).toEqual({ vcpu: 1, memoryMb: 512, diskMb: 5120, architecture: "x86_64", providerSize: null })
    expect(resolveProviderResources("prime", req({ vcpu: 2.5, memory_mb: 4096, disk_mb: 1000 }))).toMatchObject({ vcpu: 3, memoryMb: 4096, diskMb: 2048 })
    expect(resolveProviderResources("prime", req({ vcpu: 16, memory_mb: 65_536, disk_mb: 131_072 }))).toMatchObject({ vcpu: 16, memoryMb: 65_536, diskMb: 131_072 })
    expect(resolveProviderResources("prime", req({ vcpu: 17 }))).toBeUndefined()
    expect(resolveProviderResources("prime", req({ memory_mb: 65_537 }))).toBeUndefined()
    expect(resolveProviderResources("prime", req({ disk_mb: 131_073 }))).toBeUndefined()
  })

  it("freestyle gives whole vCPUs and GiB, never below its base VM (2 vCPU, 4 GiB, 16 GiB disk), at most 32 vCPU / 64 GiB / 64 GiB", () => {
    expect(resolveProviderResources("freestyle", req({ vcpu: 1, memory_mb: 512 }))).toEqual({ vcpu: 2, memoryMb: 4096, diskMb: 16384, architecture: "x86_64", providerSize: null })
    expect(resolveProviderResources("freestyle", req({ vcpu: 2.5, memory_mb: 5000, disk_mb: 20_000 }))).toMatchObject({ vcpu: 3, memoryMb: 5120, diskMb: 20480 })
    expect(resolveProviderResources("freestyle", req({ vcpu: 1 }, { freestyle: { snapshot_id: "snap-1" } }))?.providerSize).toBe("snap-1")
    expect(resolveProviderResources("freestyle", req({ vcpu: 33 }))).toBeUndefined()
    expect(resolveProviderResources("freestyle", req({ memory_mb: 65537 }))).toBeUndefined()
  })

  it("arm64 only on modal and northflank; everyone else passes the request through", () => {
    for (const name of ProviderNames) {
      const arm = resolveProviderResources(name, req({ architecture: "arm64" }))
      if (name === "modal" || name === "northflank") expect(arm?.architecture, name).toBe("arm64")
      else expect(arm, name).toBeUndefined()
    }
    expect(resolveProviderResources("blaxel", req({ vcpu: 3.5, memory_mb: 3000, disk_mb: 9000 }))).toEqual({ vcpu: 3.5, memoryMb: 3000, diskMb: 9000, architecture: "x86_64", providerSize: null })
    // Daytona builds images in whole vCPUs and GiB.
    expect(resolveProviderResources("daytona", { ...req({ vcpu: 3.5, memory_mb: 3000, disk_mb: 9000 }), source: { kind: "oci_image", image: "x" } }))
      .toEqual({ vcpu: 4, memoryMb: 3072, diskMb: 9216, architecture: "x86_64", providerSize: null })
    expect(resolveProviderResources("e2b", req({ architecture: "x86_64" }))?.architecture).toBe("x86_64")
    expect(resolveProviderResources("modal", req({}, { modal: { size: "gpu-small" } }))?.providerSize).toBe("gpu-small")
    // A non-string size option is ignored rather than reported.
    expect(resolveProviderResources("modal", req({}, { modal: { size: 3 } }))?.providerSize).toBeNull()
  })
})
