/**
 * The egress filter of sandboxes with internet access (ARCHITECTURE.md §5). Their traffic leaves the host from
 * slirp4netns, which runs as the sandbox's own host uid (UidLeases.ts), so one host-global nftables table can
 * match it by socket owner (`meta skuid`) in the output hook, with no per-sandbox rules. For every sandbox uid it
 * refuses (TCP reset, else ICMP admin-prohibited, so a client fails at once rather than timing out):
 *   - every address of this host (`fib daddr type local`), loopback, broadcast and multicast;
 *   - link-local (169.254.0.0/16, fe80::/10) and the cloud metadata addresses;
 *   - private ranges (RFC 1918, carrier-grade NAT, benchmarking, unique local IPv6), for uids of the strict
 *     sub-range only: a gateway with RUNTIME_ALLOW_PRIVATE_EGRESS=true hands out uids of the other sub-range.
 * DNS (port 53) to exactly the host's resolvers from /etc/resolv.conf is allowed first: slirp4netns forwards the
 * sandbox's 10.0.2.3 there, and they are often private addresses.
 *
 * The table's content depends only on the uid base and the host's resolvers, so every gateway of this host
 * installs the same table: the install is an atomic replace (one nft transaction), idempotent, and fails closed
 * (no table, no internet sandbox: see LocalRuntimeLive).
 */
import * as fs from "node:fs"
import { allRange, strictRange } from "./UidLeases.ts"
import { nftTablePresent } from "./NftTables.ts"

export const tableName = (base: number) => `sandbox_gateway_${base}`

const BLOCKED_V4 = ["0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4", "100.100.100.200/32"]
const BLOCKED_V6 = ["::/128", "::1/128", "fe80::/10", "ff00::/8", "fd00:ec2::254/128", "64:ff9b::/96"]
const PRIVATE_V4 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "198.18.0.0/15", "192.0.0.0/24"]
const PRIVATE_V6 = ["fc00::/7", "fec0::/10"]

/** The nameservers of /etc/resolv.conf, split by family. */
export const hostResolvers = (resolvConf = "/etc/resolv.conf") => {
  let text = ""
  try {
    text = fs.readFileSync(resolvConf, "utf8")
  } catch {}
  const v4: Array<string> = []
  const v6: Array<string> = []
  for (const line of text.split("\n")) {
    const address = /^\s*nameserver\s+(\S+)/.exec(line)?.[1]?.replace(/%.*$/, "")
    if (address === undefined) continue
    if (/^\d{1,3}(\.\d{1,3}){3}$/.test(address)) v4.push(address)
    else if (/^[0-9a-fA-F:]+$/.test(address) && address.includes(":")) v6.push(address)
  }
  return { v4, v6 }
}

export const ruleset = (base: number, resolvers = hostResolvers()) => {
  const all = allRange(base)
  const strict = strictRange(base)
  const set = (items: ReadonlyArray<string>) => `{ ${items.join(", ")} }`
  const table = tableName(base)
  return [
    `table inet ${table}`,
    `delete table inet ${table}`,
    `table inet ${table} {`,
    `  chain refuse {`,
    `    meta l4proto tcp reject with tcp reset`,
    `    reject with icmpx admin-prohibited`,
    `  }`,
    `  chain sandbox {`,
    ...(resolvers.v4.length > 0 ? [`    ip daddr ${set(resolvers.v4)} meta l4proto { tcp, udp } th dport 53 accept`] : []),
    ...(resolvers.v6.length > 0 ? [`    ip6 daddr ${set(resolvers.v6)} meta l4proto { tcp, udp } th dport 53 accept`] : []),
    `    fib daddr type { local, broadcast, multicast, anycast } jump refuse`,
    `    ip daddr ${set(BLOCKED_V4)} jump refuse`,
    `    ip6 daddr ${set(BLOCKED_V6)} jump refuse`,
    `    meta skuid ${strict.first}-${strict.last} ip daddr ${set(PRIVATE_V4)} jump refuse`,
    `    meta skuid ${strict.first}-${strict.last} ip6 daddr ${set(PRIVATE_V6)} jump refuse`,
    `  }`,
    `  chain output {`,
    `    type filter hook output priority filter; policy accept;`,
    // Only packets of a socket owned by a sandbox uid (a reset the kernel sends has no socket: not matched).
    `    meta skuid ${all.first}-${all.last} jump sandbox`,
    `  }`,
    `}`,
    ""
  ].join("\n")
}

/** Installs (atomically replaces) the table; returns an error message, or null when it is in place. */
export const installEgressFilter = (base: number): string | null => {
  try {
    // The gateway's environment as it is now (Bun would otherwise look nft up in the PATH it started with).
    const result = Bun.spawnSync(["nft", "-f", "-"], { stdin: new TextEncoder().encode(ruleset(base)), stdout: "ignore", stderr: "pipe", env: { ...process.env } })
    if (result.exitCode === 0) return null
    return result.stderr.toString().trim().slice(0, 500) || `nft exited with ${result.exitCode}`
  } catch (e) {
    return (e as Error).message
  }
}

/** Whether the table is installed now (an operator may have flushed the ruleset since). */
export const egressFilterPresent = (base: number): Promise<boolean> => nftTablePresent("inet", tableName(base))
