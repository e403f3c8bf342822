/**
 * Whether an IP address or host name is a public unicast target: the one address policy of every outbound request
 * the gateway makes for a tenant (webhooks, image registries; src/net/Targets.ts applies it after DNS resolution).
 *
 * Not public: loopback, private, shared (CGNAT), link-local, unspecified, multicast, broadcast, documentation,
 * benchmarking and other reserved ranges, in IPv4 and IPv6 forms (IPv4-mapped, IPv4-compatible, NAT64 and 6to4
 * addresses are judged by the IPv4 address inside), names such as `localhost`, and cloud metadata addresses. Each
 * refusal names its rule and whether it is `private` (what an operator's allow-private setting may open; metadata
 * and unroutable addresses never are).
 */

/** Why an address is not public: the rule named in errors. `private` rules are what an allow-private setting opens. */
export interface Refusal {
  readonly rule: string
  readonly private: boolean
}

/** Dotted-quad IPv4 (what the URL parser and resolvers produce) as a 32-bit number. */
export const parseIpv4 = (text: string): number | undefined => {
  const parts = text.split(".")
  if (parts.length !== 4) return undefined
  let n = 0
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return undefined
    n = n * 256 + Number(part)
  }
  return n
}

const v4 = (a: number, b: number, c: number, d: number) => ((a << 24) >>> 0) + (b << 16) + (c << 8) + d

interface V4Range {
  readonly base: number
  readonly bits: number
  readonly rule: string
  readonly private: boolean
}

const range4 = (cidr: string, rule: string, isPrivate: boolean): V4Range => {
  const [address, bits] = cidr.split("/") as [string, string]
  return { base: parseIpv4(address)!, bits: Number(bits), rule, private: isPrivate }
}

/** Cloud metadata services: never a target. */
const METADATA_V4 = new Set([v4(169, 254, 169, 254), v4(169, 254, 170, 2), v4(169, 254, 170, 23), v4(100, 100, 100, 200), v4(168, 63, 129, 16)])

/** Most specific first is not needed: the ranges do not overlap. */
const V4_RANGES: ReadonlyArray<V4Range> = [
  range4("0.0.0.0/8", "unspecified address (0.0.0.0/8)", false),
  range4("10.0.0.0/8", "private address (10.0.0.0/8)", true),
  range4("100.64.0.0/10", "shared address space (100.64.0.0/10)", true),
  range4("127.0.0.0/8", "loopback address (127.0.0.0/8)", true),
  range4("169.254.0.0/16", "link-local address (169.254.0.0/16)", true),
  range4("172.16.0.0/12", "private address (172.16.0.0/12)", true),
  range4("192.0.0.0/24", "reserved address (192.0.0.0/24)", false),
  range4("192.0.2.0/24", "documentation address (192.0.2.0/24)", false),
  range4("192.88.99.0/24", "reserved address (192.88.99.0/24)", false),
  range4("192.168.0.0/16", "private address (192.168.0.0/16)", true),
  range4("198.18.0.0/15", "benchmarking address (198.18.0.0/15)", false),
  range4("198.51.100.0/24", "documentation address (198.51.100.0/24)", false),
  range4("203.0.113.0/24", "documentation address (203.0.113.0/24)", false),
  range4("224.0.0.0/4", "multicast address (224.0.0.0/4)", false),
  range4("240.0.0.0/4", "reserved address (240.0.0.0/4, broadcast included)", false)
]

/** IPv6 text (brackets, a trailing dotted IPv4 and `::` allowed; no zone) as eight 16-bit groups. */
export const parseIpv6 = (text: string): ReadonlyArray<number> | undefined => {
  let s = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text
  if (s.includes("%") || !/^[0-9a-fA-F:.]+$/.test(s)) return undefined
  const lastColon = s.lastIndexOf(":")
  if (lastColon < 0) return undefined
  let tail: Array<number> = []
  if (s.slice(lastColon + 1).includes(".")) {
    const embedded = parseIpv4(s.slice(lastColon + 1))
    if (embedded === undefined) return undefined
    tail = [embedded >>> 16, embedded & 0xffff]
    s = s.slice(0, lastColon + 1)
    if (!s.endsWith("::")) s = s.slice(0, -1)
  }
  const halves = s.split("::")
  if (halves.length > 2) return undefined
  const groups = (part: string) => (part === "" ? [] : part.split(":"))
  const head = groups(halves[0]!)
  const rest = halves.length === 2 ? groups(halves[1]!) : []
  if (![...head, ...rest].every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return undefined
  const given = head.length + rest.length + tail.length
  if (halves.length === 1 ? given !== 8 : given > 7) return undefined
  const zeros = halves.length === 2 ? 8 - given : 0
  return [...head.map((g) => parseInt(g, 16)), ...Array<number>(zeros).fill(0), ...rest.map((g) => parseInt(g, 16)), ...tail]
}

const classifyV4 = (n: number): Refusal | undefined => {
  if (METADATA_V4.has(n)) return { rule: "cloud metadata address", private: false }
  for (const r of V4_RANGES) {
    const mask = r.bits === 0 ? 0 : (~0 << (32 - r.bits)) >>> 0
    if (((n & mask) >>> 0) === r.base) return { rule: r.rule, private: r.private }
  }
  return undefined
}

const embeddedV4 = (g: ReadonlyArray<number>, from: number) => ((g[from]! << 16) >>> 0) + g[from + 1]!

const classifyV6 = (g: ReadonlyArray<number>): Refusal | undefined => {
  const zeroUpTo = (n: number) => g.slice(0, n).every((x) => x === 0)
  if (zeroUpTo(8)) return { rule: "unspecified address (::)", private: false }
  if (zeroUpTo(7) && g[7] === 1) return { rule: "loopback address (::1)", private: true }
  // IPv4-mapped ::ffff:a.b.c.d and the deprecated IPv4-compatible ::a.b.c.d: the IPv4 address decides.
  if (zeroUpTo(5) && g[5] === 0xffff) {
    const inner = classifyV4(embeddedV4(g, 6))
    return inner && { ...inner, rule: `${inner.rule} in an IPv4-mapped IPv6 address` }
  }
  if (zeroUpTo(6)) return classifyV4(embeddedV4(g, 6)) ?? { rule: "IPv4-compatible IPv6 address (::/96)", private: false }
  // NAT64 (64:ff9b::/96) reaches the IPv4 address inside; 64:ff9b:1::/48 is for local use.
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) {
    const inner = classifyV4(embeddedV4(g, 6))
    return inner && { ...inner, rule: `${inner.rule} behind NAT64` }
  }
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return { rule: "local-use NAT64 address (64:ff9b:1::/48)", private: true }
  // 6to4 (2002::/16) carries an IPv4 address in its next 32 bits.
  if (g[0] === 0x2002) {
    const inner = classifyV4(embeddedV4(g, 1))
    return inner && { ...inner, rule: `${inner.rule} inside a 6to4 address` }
  }
  if (g[0] === 0xfd00 && g[1] === 0x0ec2 && g.slice(2, 7).every((x) => x === 0) && g[7] === 0x254) return { rule: "cloud metadata address", private: false }
  if ((g[0]! & 0xfe00) === 0xfc00) return { rule: "unique local address (fc00::/7)", private: true }
  if ((g[0]! & 0xffc0) === 0xfe80) return { rule: "link-local address (fe80::/10)", private: true }
  if ((g[0]! & 0xffc0) === 0xfec0) return { rule: "site-local address (fec0::/10)", private: true }
  if ((g[0]! & 0xff00) === 0xff00) return { rule: "multicast address (ff00::/8)", private: false }
  if (g[0] === 0x2001 && g[1] === 0x0db8) return { rule: "documentation address (2001:db8::/32)", private: false }
  if (g[0] === 0x2001 && g[1]! < 0x0200) return { rule: "reserved address (2001::/23)", private: false }
  if (g[0] === 0x0100 && g.slice(1, 4).every((x) => x === 0)) return { rule: "discard address (100::/64)", private: false }
  // Global unicast is 2000::/3; everything else is unassigned or reserved.
  if ((g[0]! & 0xe000) !== 0x2000) return { rule: "reserved address (outside 2000::/3)", private: false }
  return undefined
}

/** Why an IP address (v4 dotted, or v6) is not a public unicast address; undefined when it is. */
export const classifyAddress = (address: string): Refusal | undefined => {
  const four = parseIpv4(address)
  if (four !== undefined) return classifyV4(four)
  const six = parseIpv6(address)
  if (six !== undefined) return classifyV6(six)
  return { rule: "address that cannot be parsed", private: false }
}

/** Names refused before any lookup. */
export const classifyName = (host: string): Refusal | undefined => {
  if (host === "localhost" || host.endsWith(".localhost")) return { rule: "loopback name (localhost)", private: true }
  if (host === "metadata" || host === "metadata.google.internal" || host === "metadata.goog" || host === "instance-data" || host.endsWith(".metadata.google.internal")) {
    return { rule: "cloud metadata name", private: false }
  }
  return undefined
}
