/** Eligibility (reference/providers.md §2.4) against the declared capabilities of the eleven providers. */
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { SandboxRequest } from "../../src/domain/Sandbox.ts"
import { DECLARED } from "../../providers/core/declared.ts"
import { unmetRequirements } from "../../src/providers/eligibility.ts"
import { type ProviderCapabilities, type ProviderName, ProviderNames } from "../../src/providers/Provider.ts"

const request = (patch: Record<string, unknown> = {}) =>
  Schema.decodeUnknownSync(SandboxRequest)({
    source: { kind: "environment", environment: "metal/base" },
    resources: { vcpu: 1, memory_mb: 512 },
    lifecycle: { runtime_timeout_seconds: 60 },
    network: { internet_access: true },
    ...patch
  })

const offline: ProviderCapabilities["network"] = { blockInternet: true, allowDomains: false, denyDomains: false }

const unmet = (
  name: ProviderName,
  req = request(),
  options: { auto?: boolean; managedBilling?: boolean; caps?: Partial<ProviderCapabilities> } = {}
) =>
  unmetRequirements({ name, capabilities: { ...DECLARED[name], ...options.caps } }, req, { auto: options.auto ?? true, managedBilling: options.managedBilling ?? false })
    .map((u) => u.requirement)

describe("unmetRequirements", () => {
  it("under auto routing, exactly the providers with exec and file read/write are eligible for a plain request", () => {
    const eligible = ProviderNames.filter((n) => unmet(n).length === 0)
    expect(eligible).toEqual(["blaxel", "cloudflare", "daytona", "e2b", "freestyle", "modal", "prime", "runloop", "vercel"])
    expect(unmet("codesandbox")).toEqual(["process.execute", "filesystem.read", "filesystem.write"])
    expect(unmet("northflank")).toEqual(["process.execute", "filesystem.read", "filesystem.write"])
  })

  it("explicit routing checks only what was asked", () => {
    expect(unmet("codesandbox", request({ provider: "codesandbox" }), { auto: false })).toEqual([])
    expect(unmet("codesandbox", request({ provider: "codesandbox", features: { process: { execute: true } } }), { auto: false })).toEqual(["process.execute"])
  })

  it("1. source kind, and a template must be this provider's", () => {
    expect(unmet("e2b", request({ source: { kind: "oci_image", image: "alpine" } }))).toEqual(["source"])
    expect(unmet("daytona", request({ source: { kind: "oci_image", image: "alpine" } }))).toEqual([])
    const template = request({ provider: "e2b", source: { kind: "provider_template", provider: "e2b", template: "base" } })
    expect(unmet("e2b", template, { auto: false })).toEqual([])
    expect(unmet("freestyle", template, { auto: false })).toEqual(["source"])
  })

  it("2. managed billing needs a provider that reports cost", () => {
    expect(unmet("cloudflare", request(), { managedBilling: true })).toEqual(["billing"])
    expect(unmet("cloudflare", request(), { managedBilling: false })).toEqual([])
    expect(unmet("daytona", request(), { managedBilling: true })).toEqual([])
  })

  it("3. resources: architecture and sizes", () => {
    expect(unmet("daytona", request({ resources: { vcpu: 1, memory_mb: 512, architecture: "arm64" } }))).toEqual(["resources"])
    expect(unmet("modal", request({ resources: { vcpu: 1, memory_mb: 512, architecture: "arm64" } }))).toEqual([])
    expect(unmet("runloop", request({ resources: { vcpu: 16, memory_mb: 512 } }))).toEqual(["resources"])
    // Reported once, not once per reason.
    expect(unmet("runloop", request({ resources: { vcpu: 16, memory_mb: 512, architecture: "arm64" } }))).toEqual(["resources"])
  })

  it("4. isolation must be claimed and requested", () => {
    expect(unmet("e2b", request({ features: { isolation: ["microvm"] } }))).toEqual([])
    expect(unmet("e2b", request({ features: { isolation: ["vm"] } }))).toEqual(["isolation"])
    expect(unmet("daytona", request({ features: { isolation: ["container", "vm", "microvm"] } }))).toEqual(["isolation"])
  })

  it("5. network: absent is unconstrained; off the internet and domain lists need an enforcing provider; regions exclude everyone here", () => {
    expect(unmet("daytona", request({ network: { internet_access: false } }))).toEqual(["network"])
    // Absent means unconstrained: every provider takes a request that says nothing of the network.
    for (const name of ["blaxel", "cloudflare", "codesandbox", "daytona", "freestyle", "northflank", "prime", "runloop"] as const) {
      expect(unmet(name, request({ network: undefined })).filter((r) => r === "network"), name).toEqual([])
      expect(unmet(name, request({ network: {} })).filter((r) => r === "network"), name).toEqual([])
      expect(unmet(name, request({ network: { internet_access: true } })).filter((r) => r === "network"), name).toEqual([])
    }
    // Without an off switch the default is what a sandbox gets: an emulated provider whose runtime keeps sandboxes
    // offline can keep one offline, and cannot give the internet.
    const offlineByDefault = { internetByDefault: false }
    expect(unmet("blaxel", request({ network: { internet_access: false } }), { caps: offlineByDefault }).filter((r) => r === "network")).toEqual([])
    expect(unmet("blaxel", request({ network: { internet_access: true } }), { caps: offlineByDefault }).filter((r) => r === "network")).toEqual(["network"])
    expect(unmet("blaxel", request({ network: undefined }), { caps: offlineByDefault }).filter((r) => r === "network")).toEqual([])
    // A domain list without internet_access still needs a provider that enforces it.
    expect(unmet("daytona", request({ network: { allow_domains: ["x.com"] } }))).toEqual(["network"])
    expect(unmet("daytona", request({ network: { internet_access: false } }), { caps: { network: offline } })).toEqual([])
    expect(unmet("daytona", request({ network: { internet_access: true, allow_domains: [] } }), { caps: { network: offline } })).toEqual(["network"])
    expect(unmet("daytona", request({ network: { internet_access: true, deny_domains: ["x.com"] } }), { caps: { network: offline } })).toEqual(["network"])
    expect(unmet("daytona", request({ regions: ["eu"] }))).toEqual(["regions"])
    expect(unmet("daytona", request({ regions: [] }))).toEqual([])
  })

  it("6. pty only where the adapter has terminals; 7. pause_resume and public_ports", () => {
    expect(unmet("daytona", request({ features: { pty: true } }))).toEqual(["pty"])
    expect(unmet("e2b", request({ features: { pty: true } }), { caps: { process: { ...DECLARED.e2b.process!, terminal: true } } })).toEqual([])
    expect(unmet("e2b", request({ features: { pty: false } }))).toEqual([])
    expect(unmet("e2b", request({ features: { pause_resume: true } }))).toEqual([])
    expect(unmet("blaxel", request({ features: { pause_resume: true } }))).toEqual(["pause_resume"])
    // A lifecycle that pauses on a timeout needs pause too; an idle action without an idle timeout never fires.
    expect(unmet("blaxel", request({ lifecycle: { runtime_timeout_seconds: 60, on_runtime_timeout: "pause" } }))).toEqual(["pause_resume"])
    expect(unmet("blaxel", request({ lifecycle: { runtime_timeout_seconds: 60, idle_timeout_seconds: 600, on_idle_timeout: "pause" } }))).toEqual(["pause_resume"])
    expect(unmet("blaxel", request({ lifecycle: { runtime_timeout_seconds: 60, on_idle_timeout: "pause" } }))).toEqual([])
    expect(unmet("e2b", request({ lifecycle: { runtime_timeout_seconds: 60, idle_timeout_seconds: 600, on_idle_timeout: "pause" } }))).toEqual([])
    expect(unmet("daytona", request({ features: { public_ports: [8080] } }))).toEqual([])
    expect(unmet("e2b", request({ features: { public_ports: [8080] } }))).toEqual(["public_ports"])
  })

  it("8. process and filesystem features one by one", () => {
    expect(unmet("e2b", request({ features: { process: { ordered_output: true, cancel: true } } }))).toEqual(["process.cancel"])
    expect(unmet("daytona", request({ features: { process: { ordered_output: true, cancel: true } } }))).toEqual(["process.ordered_output"])
    expect(unmet("daytona", request({ features: { filesystem: { write_modes: ["create", "append"] } } }))).toEqual(["filesystem.write_modes"])
    expect(unmet("blaxel", request({ features: { filesystem: { write_modes: ["create", "append"] } } }))).toEqual([])
    expect(unmet("runloop", request({ features: { filesystem: { create_parents: true, list: true, delete: true } } }))).toEqual([
      "filesystem.create_parents",
      "filesystem.list",
      "filesystem.delete"
    ])
  })

  it("9. computer use and recording need a declared computer", () => {
    expect(unmet("blaxel", request({ features: { computer_use: true } }))).toEqual(["computer_use"])
    expect(unmet("blaxel", request({ features: { recording: {} } }))).toEqual(["recording"])
    const computer = { implementation: "native", actions: ["mouse_move"], screenshot: { formats: ["png"], maxBytes: 1 }, recording: { formats: ["mp4"] } }
    expect(unmet("daytona", request({ features: { computer_use: true, recording: { format: "mp4" } } }), { caps: { computer } })).toEqual([])
    expect(unmet("daytona", request({ features: { computer_use: true } }), { caps: { computer: { ...computer, actions: [] } } })).toEqual(["computer_use"])
  })

  it("messages name the provider and keep the reference's order", () => {
    const all = unmetRequirements(
      { name: "codesandbox", capabilities: DECLARED.codesandbox },
      request({ source: { kind: "oci_image", image: "x" }, features: { pty: true }, regions: ["us"], network: { internet_access: false } }),
      { auto: true, managedBilling: false }
    )
    expect(all.map((u) => u.requirement)).toEqual(["source", "network", "regions", "pty", "process.execute", "filesystem.read", "filesystem.write"])
    expect(all[0]?.message).toBe("codesandbox does not take oci_image sources")
  })
})
