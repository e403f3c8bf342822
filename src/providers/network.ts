/**
 * The network a request asks for and the network a sandbox gets (ARCHITECTURE.md §4, DESIGN §5). Absent means
 * unconstrained: a request that leaves `internet_access` unsaid gets the provider's default (`internetByDefault`),
 * and only an explicit `internet_access: false` or a domain list needs a provider that enforces it (eligibility).
 * A domain list without `internet_access` asks for the internet, limited to the list; with `internet_access:
 * false` the sandbox has no network at all and the list changes nothing.
 */
import type { SandboxRequest } from "../domain/Sandbox.ts"
import type { CreateInput, ProviderCapabilities } from "./Provider.ts"

type NetworkRequest = Pick<SandboxRequest, "network">

/** The internet as asked: true or false, or undefined when the request leaves it to the provider. */
export const requestedInternet = (req: NetworkRequest): boolean | undefined => {
  const network = req.network
  if (network?.internet_access !== undefined) return network.internet_access
  return network?.allow_domains !== undefined || network?.deny_domains !== undefined ? true : undefined
}

/** The network part of a provider's create input. */
export const networkInput = (req: NetworkRequest): Pick<CreateInput, "internetAccess" | "domainPolicy"> => {
  const internet = requestedInternet(req)
  const network = req.network
  return {
    internetAccess: internet,
    ...(internet === true && network?.allow_domains !== undefined
      ? { domainPolicy: { mode: "allow" as const, domains: network.allow_domains } }
      : internet === true && network?.deny_domains !== undefined
      ? { domainPolicy: { mode: "deny" as const, domains: network.deny_domains } }
      : {})
  }
}

export interface ResolvedNetwork {
  readonly internet_access: boolean
  /** `requested`: as the request said; `provider_default`: the request left it unsaid. */
  readonly source: "requested" | "provider_default"
  /** The names the sandbox may reach (enforced), or null when no allow list applies. */
  readonly allow_domains: ReadonlyArray<string> | null
  /** The names the sandbox may not reach (enforced), or null when no deny list applies. */
  readonly deny_domains: ReadonlyArray<string> | null
}

/**
 * What a sandbox placed on a provider with these capabilities gets. A list is reported only where it applies
 * (with internet): eligibility placed it on a provider that enforces it.
 */
export const resolvedNetwork = (capabilities: Pick<ProviderCapabilities, "internetByDefault">, req: NetworkRequest): ResolvedNetwork => {
  const asked = requestedInternet(req)
  const internet = asked ?? capabilities.internetByDefault ?? true
  return {
    internet_access: internet,
    source: asked === undefined ? "provider_default" : "requested",
    allow_domains: internet && req.network?.allow_domains !== undefined ? [...req.network.allow_domains] : null,
    deny_domains: internet && req.network?.deny_domains !== undefined ? [...req.network.deny_domains] : null
  }
}
