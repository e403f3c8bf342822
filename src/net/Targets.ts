/**
 * The one address policy of every outbound request the gateway makes for a tenant (webhooks, image registries): a
 * URL's host is resolved once, every address it resolves to must be allowed (src/domain/Addresses.ts), and the
 * request then connects to exactly that address (Fetch.ts), so DNS cannot answer one address to the check and
 * another to the connection. Redirects are requests too: each hop is checked again (Fetch.ts `fetchChecked`).
 *
 * Allowed by default: public unicast addresses only. An operator may open loopback, private, shared and link-local
 * addresses (each caller names its setting: WEBHOOK_ALLOW_PRIVATE_TARGETS, REGISTRY_ALLOW_PRIVATE), for every
 * host or for a list of hosts; metadata and unroutable addresses stay refused whatever the setting. The URL parser
 * has already turned decimal, octal and hex IPv4 spellings (`2130706433`, `0177.0.0.1`, `0x7f.1`) into dotted form.
 */
import { Effect } from "effect"
import * as dns from "node:dns"
import { classifyAddress, classifyName, parseIpv4, type Refusal } from "../domain/Addresses.ts"

// Resolution -------------------------------------------------------------------------------------------------

export interface ResolvedAddress {
  readonly address: string
  readonly family: 4 | 6
}

export class ResolveError {
  readonly _tag = "ResolveError"
  constructor(readonly message: string) {}
}

/** How hosts are resolved (tests give their own answers, or a test DNS server). */
export interface Resolver {
  readonly resolve: (host: string) => Effect.Effect<ReadonlyArray<ResolvedAddress>, ResolveError>
}

const RESOLVE_TIMEOUT = "5 seconds"

const describeDnsError = (host: string, e: unknown) => {
  const code = (e as { code?: unknown })?.code
  return new ResolveError(`${host} does not resolve (${typeof code === "string" ? code : "lookup failed"})`)
}

/** The system resolver (getaddrinfo: /etc/hosts, then DNS) when `dnsServers` is empty, else those servers only (`ip` or `ip:port`). */
export const makeResolver = (dnsServers: ReadonlyArray<string>): Resolver => {
  if (dnsServers.length === 0) {
    return {
      resolve: (host) =>
        Effect.tryPromise({
          try: () => dns.promises.lookup(host, { all: true, verbatim: true }),
          catch: (e) => describeDnsError(host, e)
        }).pipe(
          Effect.map((answers) => answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 as const : 4 as const }))),
          Effect.timeoutFail({ duration: RESOLVE_TIMEOUT, onTimeout: () => new ResolveError(`${host} did not resolve in time`) })
        )
    }
  }
  const resolver = new dns.promises.Resolver({ timeout: 2000, tries: 2 })
  resolver.setServers([...dnsServers])
  const settle = (p: Promise<ReadonlyArray<string>>) => p.then((a) => ({ ok: a }), (e: unknown) => ({ error: e }))
  return {
    resolve: (host) =>
      Effect.tryPromise({
        try: async () => {
          const [a, aaaa] = await Promise.all([settle(resolver.resolve4(host)), settle(resolver.resolve6(host))])
          const answers = [
            ...("ok" in a ? a.ok.map((address) => ({ address, family: 4 as const })) : []),
            ...("ok" in aaaa ? aaaa.ok.map((address) => ({ address, family: 6 as const })) : [])
          ]
          if (answers.length === 0) throw "error" in a ? a.error : new Error("no address")
          return answers
        },
        catch: (e) => describeDnsError(host, e)
      }).pipe(Effect.timeoutFail({ duration: RESOLVE_TIMEOUT, onTimeout: () => new ResolveError(`${host} did not resolve in time`) }))
  }
}

// The check ----------------------------------------------------------------------------------------------------

export interface AddressPolicy {
  /** Loopback, private, shared and link-local addresses are allowed too (never metadata or unroutable ones). */
  readonly allowPrivate: boolean
  /**
   * Hosts (`name`, `name:port`, `[v6]:port`) that may be on such addresses even without `allowPrivate`: a
   * registry the operator runs inside its network, not every private address a tenant could name.
   */
  readonly privateHosts?: ReadonlyArray<string> | undefined
  /** Who is refused, for messages: "webhooks" → "…, which webhooks may not target". */
  readonly purpose: string
  /** The setting that opens private addresses, named in refusals it would lift. */
  readonly setting: string
  readonly resolver: Resolver
}

/** A URL that may be requested, and the one address the request connects to. */
export interface Target {
  readonly url: URL
  /** The host as written in the URL (sent as Host and as the TLS server name). */
  readonly hostname: string
  readonly address: ResolvedAddress
}

export type TargetCheck =
  | { readonly _tag: "Allowed"; readonly target: Target }
  | { readonly _tag: "Refused"; readonly reason: string }
  | { readonly _tag: "Unresolved"; readonly reason: string }

/** Whether `url` names one of `hosts` (an entry without a port names every port of its host). */
export const namesHost = (hosts: ReadonlyArray<string>, url: URL): boolean => {
  const port = url.port !== "" ? url.port : url.protocol === "https:" ? "443" : "80"
  const hostname = url.hostname.toLowerCase().replace(/\.$/, "")
  return hosts.some((entry) => {
    const m = /^(\[[^\]]+\]|[^:]+)(?::(\d{1,5}))?$/.exec(entry.trim().toLowerCase())
    if (m === null) return false
    let entryHost = m[1]!
    // The URL parser's form of the entry's host (IPv6 compressed, IPv4 dotted).
    try {
      entryHost = new URL(`http://${entryHost}/`).hostname
    } catch {
      return false
    }
    return entryHost.replace(/\.$/, "") === hostname && (m[2] === undefined || Number(m[2]) === Number(port))
  })
}

/** `lead` says what was found: "the host 127.0.0.1 is" or "hooks.example.com resolves to 10.0.0.5,". */
const refusedMessage = (lead: string, refusal: Refusal, policy: AddressPolicy, allowPrivate: boolean) =>
  `${lead} ${/^[aeiou]/.test(refusal.rule) ? "an" : "a"} ${refusal.rule}, which ${policy.purpose} may not target` +
  (refusal.private && !allowPrivate ? ` (an operator can allow private networks with ${policy.setting}=true)` : "")

/** The policy (see the top of this file) for one URL; resolves its host once. */
export const checkUrl = (raw: string | URL, policy: AddressPolicy): Effect.Effect<TargetCheck> =>
  Effect.gen(function*() {
    let url: URL
    try {
      url = new URL(raw)
    } catch {
      return { _tag: "Refused", reason: "the URL cannot be parsed" } as const
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return { _tag: "Refused", reason: "the URL must use http or https" } as const
    if (url.username !== "" || url.password !== "") return { _tag: "Refused", reason: "the URL must not contain credentials" } as const
    const allowPrivate = policy.allowPrivate || namesHost(policy.privateHosts ?? [], url)
    const refuses = (refusal: Refusal | undefined) => refusal !== undefined && (!refusal.private || !allowPrivate)
    const refused = (lead: string, refusal: Refusal) => ({ _tag: "Refused", reason: refusedMessage(lead, refusal, policy, allowPrivate) } as const)
    const host = url.hostname.toLowerCase()
    if (host.startsWith("[")) {
      const refusal = classifyAddress(host)
      if (refuses(refusal)) return refused(`the host ${host} is`, refusal!)
      return { _tag: "Allowed", target: { url, hostname: host, address: { address: host.slice(1, -1), family: 6 } } } as const
    }
    if (parseIpv4(host) !== undefined) {
      const refusal = classifyAddress(host)
      if (refuses(refusal)) return refused(`the host ${host} is`, refusal!)
      return { _tag: "Allowed", target: { url, hostname: host, address: { address: host, family: 4 } } } as const
    }
    const name = host.endsWith(".") ? host.slice(0, -1) : host
    const byName = classifyName(name)
    if (refuses(byName)) return refused(`the host ${name} is`, byName!)
    const resolved = yield* Effect.either(policy.resolver.resolve(name))
    if (resolved._tag === "Left") return { _tag: "Unresolved", reason: resolved.left.message } as const
    // Every answer must be allowed: otherwise which one a client picks would decide.
    for (const answer of resolved.right) {
      const refusal = classifyAddress(answer.address)
      if (refuses(refusal)) return refused(`${name} resolves to ${answer.address},`, refusal!)
    }
    const address = resolved.right.find((a) => a.family === 4) ?? resolved.right[0]
    if (address === undefined) return { _tag: "Unresolved", reason: `${name} does not resolve` } as const
    return { _tag: "Allowed", target: { url, hostname: name, address } } as const
  })
