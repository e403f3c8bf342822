/**
 * Eligibility (reference/providers.md §2.4): what keeps a provider from serving a request, checked in the
 * reference's order. An empty list means eligible.
 *
 * 1. source kind (and a provider template names this provider); 2. managed billing needs cost evidence;
 * 3. resources (resources.ts); 4. isolation; 5. network and regions; 6. pty (terminals);
 * 7. pause_resume, public_ports; 8. process and filesystem features — under `auto` routing exec and file
 * read/write are required even when not asked for; 9. computer use and recording.
 *
 * Network: absent means unconstrained (network.ts) — a request that says nothing of the internet is placed on any
 * provider and gets its default. An explicit `internet_access` needs a provider with an off switch
 * (`network.blockInternet`) or whose default is what was asked (`internetByDefault`: an emulated provider's is the
 * local runtime's); domain lists need `allowDomains` / `denyDomains`. No provider states its regions, so
 * any region requirement excludes all.
 */
import type { SandboxRequest } from "../domain/Sandbox.ts"
import type { ProviderCapabilities, ProviderName } from "./Provider.ts"
import { resolveProviderResources } from "./resources.ts"

export interface Unmet {
  readonly requirement: string
  readonly message: string
}

export interface EligibilityOptions {
  /** The gateway bills this sandbox from the provider's cost (managed billing): the provider must report cost. */
  readonly managedBilling: boolean
  /** `auto` routing (no explicit provider): exec and file read/write become requirements. */
  readonly auto: boolean
}

export const unmetRequirements = (
  provider: { readonly name: ProviderName; readonly capabilities: ProviderCapabilities },
  req: SandboxRequest,
  options: EligibilityOptions
): Array<Unmet> => {
  const caps = provider.capabilities
  const unmet: Array<Unmet> = []
  const need = (ok: boolean, requirement: string, message: string) => {
    if (!ok) unmet.push({ requirement, message: `${provider.name} ${message}` })
  }

  // 1. source
  need(caps.sources.includes(req.source.kind), "source", `does not take ${req.source.kind} sources`)
  if (req.source.kind === "provider_template") {
    need(req.source.provider === provider.name, "source", `cannot use a template of ${req.source.provider}`)
  }
  // 2. billing
  if (options.managedBilling) need(caps.cost, "billing", "reports no cost, so it cannot be billed as managed")
  // 3. resources
  const arch = req.resources.architecture
  if (arch !== "any") need(caps.architectures.includes(arch), "resources", `has no ${arch} machines`)
  if (arch === "any" || caps.architectures.includes(arch)) {
    const max = caps.maxResources
    const ceiling = [max?.vcpu === undefined ? "" : `${max.vcpu} vCPU`, max?.memoryMb === undefined ? "" : `${max.memoryMb} MB of memory`, max?.diskMb === undefined ? "" : `${max.diskMb} MB of disk`]
      .filter(Boolean).join(", ")
    need(
      resolveProviderResources(provider.name, req, caps) !== undefined,
      "resources",
      `has no size that covers the requested resources${ceiling === "" ? "" : ` (at most ${ceiling})`}`
    )
  }
  // 4. isolation
  const isolation = req.features?.isolation
  if (isolation !== undefined) {
    need(caps.isolation !== null && isolation.includes(caps.isolation), "isolation", `isolation is ${caps.isolation ?? "not stated"}, not ${isolation.join(" or ")}`)
  }
  // 5. network and regions
  const network = req.network
  // Without an off switch a provider gives every sandbox its default (internetByDefault), whatever was asked.
  const switchable = caps.network?.blockInternet === true
  const byDefault = caps.internetByDefault ?? true
  if (network?.internet_access === false) need(switchable || !byDefault, "network", "cannot keep a sandbox off the internet")
  if (network?.internet_access === true) need(switchable || byDefault, "network", "cannot give a sandbox the internet")
  if (network?.allow_domains !== undefined) need(caps.network?.allowDomains === true, "network", "cannot enforce a domain allow list")
  if (network?.deny_domains !== undefined) need(caps.network?.denyDomains === true, "network", "cannot enforce a domain deny list")
  if (req.regions !== undefined && req.regions.length > 0) need(false, "regions", "states no regions")
  // 6. pty
  if (req.features?.pty === true) need(caps.process?.terminal === true, "pty", "offers no terminals")
  // 7. lifecycle and ports
  if (req.features?.pause_resume === true) need(caps.pause && caps.resume, "pause_resume", "cannot pause and resume")
  // A lifecycle that pauses on a timeout asks for pause as surely as the feature does (else the timeout would fail).
  else if (pausesOnTimeout(req)) need(caps.pause && caps.resume, "pause_resume", "cannot pause, and the lifecycle pauses the sandbox on a timeout")
  if ((req.features?.public_ports?.length ?? 0) > 0) {
    need(caps.httpEndpoints?.expose === true && caps.httpEndpoints.revoke, "public_ports", "cannot expose and revoke ports")
  }
  // 8. process and filesystem
  const p = req.features?.process
  const f = req.features?.filesystem
  if (options.auto || p?.execute === true) need(caps.process?.execute === true, "process.execute", "cannot run processes")
  if (p?.ordered_output === true) need(caps.process?.streams === true, "process.ordered_output", "does not stream ordered output")
  if (p?.cancel === true) need(caps.process?.cancel === true, "process.cancel", "cannot cancel processes")
  if (options.auto || f?.read === true) need(caps.files?.read === true, "filesystem.read", "cannot read files")
  if (options.auto || f?.write === true) need(caps.files?.write === true, "filesystem.write", "cannot write files")
  for (const mode of f?.write_modes ?? []) need(caps.files?.writeModes.includes(mode) === true, "filesystem.write_modes", `cannot ${mode} files`)
  if (f?.create_parents === true) need(caps.files?.createParents === true, "filesystem.create_parents", "cannot create parent directories")
  if (f?.list === true) need(caps.files?.list === true, "filesystem.list", "cannot list files")
  if (f?.delete === true) need(caps.files?.delete === true, "filesystem.delete", "cannot delete files")
  // 9. computer use
  const computer = caps.computer ?? null
  if (req.features?.computer_use === true) {
    need(computer !== null && computer.screenshot !== null && computer.actions.length > 0, "computer_use", "offers no computer use")
  }
  const recording = req.features?.recording
  if (recording !== undefined) {
    need(computer?.recording?.formats.includes(recording.format) === true, "recording", `cannot record ${recording.format}`)
  }
  return unmet
}

/** The request's lifecycle pauses the sandbox when a timeout fires (an idle timeout counts only when one is set). */
const pausesOnTimeout = (req: SandboxRequest) =>
  req.lifecycle.on_runtime_timeout === "pause" || (req.lifecycle.on_idle_timeout === "pause" && req.lifecycle.idle_timeout_seconds !== undefined)
