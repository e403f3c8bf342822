/**
 * Domain policies (allow or deny lists of names) of sandboxes with internet, on top of the egress filter
 * (Egress.ts). For each such sandbox:
 *   - a DNS forwarder of its own (dns/dnsForwarder.ts), a host process listening at 10.0.2.3:53 inside the jail's
 *     network namespace, where the runtime puts 10.0.2.3 on the loopback: the sandbox's resolver (10.0.2.3, as
 *     with slirp4netns) reaches the forwarder and never slirp4netns. Names outside the policy get NXDOMAIN; the rest
 *     are forwarded to the host's resolvers (or RUNTIME_DNS_UPSTREAM), the answer is cut to what a resolver
 *     takes from it (the CNAME chain from the asked name and that chain's addresses; a deny list refuses a chain
 *     through a denied name), and exactly the addresses sent go into the sandbox's nftables sets for the
 *     record's TTL before the answer is sent;
 *   - an nftables table of its own (`sandbox_gateway_<base>_u<uid>`), hooked on output before the egress filter,
 *     that refuses every new connection of the sandbox's uid (slirp4netns) except to the addresses in its sets
 *     (so also any resolver asked directly). Both tables must accept a packet: an allowed name resolving to a private or host
 *     address (DNS rebinding) is still refused by the egress filter; a literal IP no allowed name resolved to
 *     is refused here. Established connections outlive the expiry of their address.
 * The table is installed before slirp4netns starts (fails closed: no table, no sandbox), removed with the jail,
 * and swept when its uid is no longer leased.
 */
import type { RuntimeDomainPolicy as DomainPolicy } from "./LocalRuntime.ts"
import { nftTablePresent } from "./NftTables.ts"

/**
 * A domain of a policy: a name of valid labels, optionally `*.` before it. The forwarder (dns/dnsForwarder.ts) has the
 * same rule; it is not imported from there because that file is shipped to the jail as text (agent/source.ts), and
 * a compiled binary cannot hold one module both as text and as code.
 */
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/
const validPattern = (pattern: string): boolean => {
  const p = pattern.toLowerCase().replace(/\.$/, "")
  const name = p.startsWith("*.") ? p.slice(2) : p
  return name.length > 0 && name.length <= 253 && name.split(".").every((l) => LABEL.test(l))
}

export const MAX_POLICY_DOMAINS = 256

/** A policy as the runtime takes it, or an error message. */
export const checkPolicy = (policy: unknown): string | null => {
  if (typeof policy !== "object" || policy === null) return "domains must be {mode, domains}"
  const { mode, domains } = policy as Partial<DomainPolicy>
  if (mode !== "allow" && mode !== "deny") return "domains.mode must be allow or deny"
  if (!Array.isArray(domains) || domains.length > MAX_POLICY_DOMAINS) return `domains.domains must be a list of at most ${MAX_POLICY_DOMAINS} names`
  const bad = domains.find((d) => typeof d !== "string" || !validPattern(d))
  if (bad !== undefined) return `not a domain name or *.domain pattern: ${String(bad).slice(0, 100)}`
  return null
}

/** Where the forwarder listens in the jail's network namespace: the address slirp4netns would serve DNS at. */
export const FORWARDER_ADDRESS = "10.0.2.3"

export const policyTableName = (base: number, hostUid: number) => `sandbox_gateway_${base}_u${hostUid}`
const TABLE = /^sandbox_gateway_(\d+)_u(\d+)$/

export const policyRuleset = (base: number, hostUid: number) => {
  const table = policyTableName(base, hostUid)
  return [
    `table inet ${table}`,
    `delete table inet ${table}`,
    `table inet ${table} {`,
    `  set allow4 { type ipv4_addr; flags timeout; }`,
    `  set allow6 { type ipv6_addr; flags timeout; }`,
    `  chain refuse {`,
    `    meta l4proto tcp reject with tcp reset`,
    `    reject with icmpx admin-prohibited`,
    `  }`,
    `  chain filter {`,
    `    ct state established,related accept`,
    `    ip daddr @allow4 accept`,
    `    ip6 daddr @allow6 accept`,
    `    jump refuse`,
    `  }`,
    `  chain output {`,
    `    type filter hook output priority filter - 1; policy accept;`,
    `    meta skuid ${hostUid} jump filter`,
    `  }`,
    `}`,
    ""
  ].join("\n")
}

/** Runs an nft script without holding up the event loop; an error message, or null. */
const nft = async (script: string): Promise<string | null> => {
  try {
    const child = Bun.spawn(["nft", "-f", "-"], { stdin: new TextEncoder().encode(script), stdout: "ignore", stderr: "pipe", env: { ...process.env } })
    const [code, stderr] = await Promise.all([child.exited, new Response(child.stderr).text()])
    if (code === 0) return null
    return stderr.trim().slice(0, 500) || `nft exited with ${code}`
  } catch (e) {
    return (e as Error).message
  }
}

/** Installs (atomically replaces: its sets start empty) the sandbox's table; an error message, or null. */
export const installPolicyTable = (base: number, hostUid: number): Promise<string | null> => nft(policyRuleset(base, hostUid))

/**
 * Removes the table of a uid if there is one. Only a sandbox with a policy makes one, and its destroy removes it;
 * a table can outlive its holder only when that holder's destroy never ran (its lease went stale, or its state was
 * lost), and those paths remove it before the uid is handed out again (JailLifecycle.ts, JailRemoval.ts). A table
 * left over would only refuse more: both tables must accept a packet.
 */
export const removePolicyTable = async (base: number, hostUid: number): Promise<void> => {
  const table = policyTableName(base, hostUid)
  await nft(`table inet ${table}\ndelete table inet ${table}\n`)
}

export const policyTablePresent = (base: number, hostUid: number): Promise<boolean> => nftTablePresent("inet", policyTableName(base, hostUid))

/** uids of this base that have a policy table now. */
export const policyTableUids = (base: number): Array<number> => {
  try {
    const out = Bun.spawnSync(["nft", "list", "tables", "inet"], { stdio: ["ignore", "pipe", "ignore"], env: { ...process.env } }).stdout.toString()
    return out.split("\n").flatMap((line) => {
      const m = TABLE.exec(line.trim().replace(/^table inet /, ""))
      return m !== null && Number(m[1]) === base ? [Number(m[2])] : []
    })
  } catch {
    return []
  }
}

/** `ip`, `ip:port`, `[v6]` or `[v6]:port` (default port 53), or undefined when it is none of these. */
export const parseUpstream = (text: string): { readonly host: string; readonly port: number } | undefined => {
  const m = /^\[([0-9a-fA-F:.]+)\](?::(\d{1,5}))?$/.exec(text) ?? /^(\d{1,3}(?:\.\d{1,3}){3})(?::(\d{1,5}))?$/.exec(text) ?? /^([0-9a-fA-F:]*:[0-9a-fA-F:]*)()$/.exec(text)
  if (m === null) return undefined
  const port = m[2] === undefined || m[2] === "" ? 53 : Number(m[2])
  if (!(port >= 1 && port <= 65535)) return undefined
  return { host: m[1]!, port }
}
