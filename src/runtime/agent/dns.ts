/**
 * The DNS forwarder of a sandbox with a domain policy (DomainPolicy.ts). It is NOT part of the in-jail agent: it
 * runs on the host, one per such sandbox, as root with few capabilities. It listens (UDP and TCP) at 10.0.2.3:53
 * inside the jail's network namespace (entered with setns for its two listening sockets only; the runtime puts
 * 10.0.2.3 on the jail's loopback, so the sandbox's DNS never reaches slirp4netns), then keeps only
 * CAP_NET_ADMIN; its upstream queries leave from the host's namespace, as root, past the sandbox's filters.
 * For every query it:
 *   - refuses what is not one plain question of class IN with a name of letters, digits, `-` and `_`;
 *   - answers NXDOMAIN for a name the policy does not allow (nothing goes upstream);
 *   - forwards the rest to the upstream resolvers (the host's), keeps of the response only what a resolver takes
 *     from it (the CNAME chain from the asked name, then that chain's addresses: `screenAnswer`; a chain through
 *     a name the policy refuses is NXDOMAIN), and before answering puts exactly the A / AAAA addresses it sends
 *     into the sandbox's nftables sets, with the record's TTL (at least MIN_TTL): the sandbox may connect to
 *     those addresses and to no other (the egress filter still refuses private and host addresses, so a name
 *     that resolves there — DNS rebinding — gains nothing).
 * It exits when the jail it serves is gone. Shipped as text with the agent's modules (the tools tmpfs holds it,
 * agent/source.ts) and run with the same bun; node builtins only. The parsing functions are exported for tests.
 */
import { dlopen, FFIType, ptr } from "bun:ffi"
import * as dgram from "node:dgram"
import * as fs from "node:fs"
import * as net from "node:net"

export interface DomainPolicy {
  /** allow: only these names resolve; deny: every name but these. */
  readonly mode: "allow" | "deny"
  /** `example.com` (that name only) or `*.example.com` (its subdomains, at any depth, not the name itself). */
  readonly domains: ReadonlyArray<string>
}

/** Lowercase, without the root's trailing dot. */
export const normalizeName = (name: string) => name.toLowerCase().replace(/\.$/, "")

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/

/** A domain of a policy: a name of valid labels, optionally `*.` before it. */
export const validPattern = (pattern: string): boolean => {
  const p = normalizeName(pattern)
  const name = p.startsWith("*.") ? p.slice(2) : p
  return name.length > 0 && name.length <= 253 && name.split(".").every((l) => LABEL.test(l))
}

export const patternMatches = (pattern: string, name: string): boolean => {
  const p = normalizeName(pattern)
  return p.startsWith("*.") ? name.endsWith(p.slice(1)) && name.length > p.length - 1 : name === p
}

/** Whether `name` (normalized) may be resolved under `policy`. */
export const nameAllowed = (policy: DomainPolicy, name: string): boolean => {
  const hit = policy.domains.some((p) => patternMatches(p, normalizeName(name)))
  return policy.mode === "allow" ? hit : !hit
}

/**
 * Whether a CNAME chain may pass through `name` (not the asked name: nameAllowed decides that one). A deny list
 * refuses a chain through a name it denies (what it names must not be reached by another name's alias); an allow
 * list follows an allowed name's chain wherever it leads (a CDN's name, say), as it takes that name's addresses:
 * the allowed name's owner chooses both.
 */
export const chainAllowed = (policy: DomainPolicy, name: string): boolean => policy.mode === "allow" || nameAllowed(policy, name)

export const RCODE = { FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const

export interface Question {
  readonly id: number
  readonly name: string
  readonly type: number
  /** Bytes of the header and the question: what a reply of ours repeats. */
  readonly end: number
}

/**
 * The one question of a query, or a response code to refuse it with (null: not even a header, drop it). Names
 * are read without compression (a question has none) and only of the plain alphabet: a label holding a dot or
 * any other byte could be matched as another name than the one resolved upstream.
 */
export const parseQuery = (msg: Uint8Array): Question | { readonly refuse: number; readonly id: number } | null => {
  if (msg.length < 12 || msg.length > 4096) return null
  const view = new DataView(msg.buffer, msg.byteOffset, msg.byteLength)
  const id = view.getUint16(0)
  const flags = view.getUint16(2)
  if ((flags & 0x8000) !== 0) return null
  if (((flags >> 11) & 0xf) !== 0) return { refuse: RCODE.NOTIMP, id }
  if (view.getUint16(4) !== 1 || view.getUint16(6) !== 0 || view.getUint16(8) !== 0) return { refuse: RCODE.FORMERR, id }
  const labels: Array<string> = []
  let at = 12
  for (;;) {
    const len = msg[at]
    if (len === undefined || len > 63) return { refuse: RCODE.FORMERR, id }
    at++
    if (len === 0) break
    if (at + len > msg.length) return { refuse: RCODE.FORMERR, id }
    const label = new TextDecoder().decode(msg.subarray(at, at + len)).toLowerCase()
    if (!/^[a-z0-9_-]+$/.test(label)) return { refuse: RCODE.REFUSED, id }
    labels.push(label)
    at += len
  }
  if (at + 4 > msg.length) return { refuse: RCODE.FORMERR, id }
  const type = view.getUint16(at)
  const klass = view.getUint16(at + 2)
  if (klass !== 1) return { refuse: RCODE.REFUSED, id }
  const name = labels.join(".")
  if (name.length > 253) return { refuse: RCODE.FORMERR, id }
  return { id, name, type, end: at + 4 }
}

/** A reply with only the header (and the question, when there is one) and this response code. */
export const errorReply = (query: Uint8Array, rcode: number, questionEnd?: number): Uint8Array => {
  const question = questionEnd === undefined ? new Uint8Array(0) : query.subarray(12, questionEnd)
  const out = new Uint8Array(12 + question.length)
  out.set(query.subarray(0, 4), 0)
  // QR, the query's opcode and RD, RA; the response code.
  out[2] = 0x80 | ((query[2] ?? 0) & 0x79)
  out[3] = 0x80 | (rcode & 0xf)
  out[5] = questionEnd === undefined ? 0 : 1
  out.set(question, 12)
  return out
}

export interface Addresses {
  readonly v4: ReadonlyArray<{ readonly address: string; readonly ttl: number }>
  readonly v6: ReadonlyArray<{ readonly address: string; readonly ttl: number }>
}

/**
 * A (possibly compressed) name at `start`: lowercase, without the root's dot, and the offset after it where it is
 * written; `name` is null when a label holds anything but letters, digits, `-` and `_` (so it can never equal a
 * name of the chain, nor be matched as another name than the one a resolver sees). Null when malformed (a pointer
 * loop, past the end).
 */
const readName = (msg: Uint8Array, start: number): { readonly name: string | null; readonly next: number } | null => {
  const labels: Array<string> = []
  let plain = true
  let at = start
  let next = -1
  for (let steps = 0; steps < 128; steps++) {
    const len = msg[at]
    if (len === undefined) return null
    if (len === 0) return { name: plain ? labels.join(".") : null, next: next < 0 ? at + 1 : next }
    if ((len & 0xc0) === 0xc0) {
      const low = msg[at + 1]
      if (low === undefined) return null
      if (next < 0) next = at + 2
      at = ((len & 0x3f) << 8) | low
      continue
    }
    if ((len & 0xc0) !== 0 || at + 1 + len > msg.length) return null
    const label = new TextDecoder().decode(msg.subarray(at + 1, at + 1 + len)).toLowerCase()
    if (!/^[a-z0-9_-]+$/.test(label)) plain = false
    labels.push(label)
    at += 1 + len
  }
  return null
}

/** A name written out uncompressed (a plain one: readName's). */
const writeName = (name: string): Uint8Array => {
  const parts = name === "" ? [] : name.split(".")
  const out = new Uint8Array(parts.reduce((n, l) => n + 1 + l.length, 1))
  let at = 0
  for (const label of parts) {
    out[at++] = label.length
    out.set(new TextEncoder().encode(label), at)
    at += label.length
  }
  return out
}

const hex4 = (view: DataView, at: number) => view.getUint16(at).toString(16)

/** One record of a response, its names read out. */
interface ResourceRecord {
  /** Null: not a plain name (readName). */
  readonly owner: string | null
  readonly type: number
  readonly klass: number
  readonly ttl: number
  /** The record's data as sent (for A and AAAA: the address's bytes). */
  readonly data: Uint8Array
  /** A CNAME's target (null: not a plain name). */
  readonly target?: string | null
  /** Where the record's bytes are in the message (an OPT record is passed on as it is). */
  readonly start: number
  readonly end: number
}

const TYPE = { A: 1, CNAME: 5, AAAA: 28, OPT: 41 } as const
/** At most this many CNAMEs are followed from the question's name (resolvers stop at about as many). */
export const MAX_CNAME_CHAIN = 16

/** The records of a response, every section, in order; null when malformed. */
const readRecords = (msg: Uint8Array, view: DataView, from: number, count: number): Array<ResourceRecord> | null => {
  const records: Array<ResourceRecord> = []
  let at = from
  for (let i = 0; i < count; i++) {
    const start = at
    const owner = readName(msg, at)
    if (owner === null || owner.next + 10 > msg.length) return null
    at = owner.next
    const type = view.getUint16(at)
    const length = view.getUint16(at + 8)
    const dataAt = at + 10
    if (dataAt + length > msg.length) return null
    const target = type === TYPE.CNAME ? readName(msg, dataAt) : undefined
    if (target === null) return null
    records.push({
      owner: owner.name,
      type,
      klass: view.getUint16(at + 2),
      ttl: view.getUint32(at + 4),
      data: msg.subarray(dataAt, dataAt + length),
      ...(target === undefined ? {} : { target: target.name }),
      start,
      end: dataAt + length
    })
    at = dataAt + length
  }
  return records
}

/** What the sandbox is sent for one response, and the addresses its filter opens: the same ones. */
export interface Screened {
  readonly reply: Uint8Array
  readonly addresses: Addresses
}

/**
 * The answer the sandbox gets for an upstream response `msg` to its `query`, and the addresses to open; null when
 * `msg` is not a response to `question` (wrong id, not a response, another question, malformed).
 *
 * Only what a resolver would take from it passes: from the question's name, the chain of CNAMEs in the answer
 * section (at most MAX_CNAME_CHAIN), then the records of the asked type owned by the chain's last name. Every other
 * record (another owner's addresses, the authority and additional sections but the EDNS OPT record) is left out
 * of the reply, so the addresses the filter opens — those records', for an A or AAAA question — are exactly the ones
 * the sandbox is given. A chain through a name `allowed` refuses (chainAllowed) is NXDOMAIN, as that name asked
 * directly: nothing of it is sent or opened; a chain too long, looping or through a name of other bytes than a
 * plain name's is SERVFAIL. Questions of other types open nothing and their response goes as it came (their
 * records may hold compressed names), after the same chain check.
 */
export const screenAnswer = (msg: Uint8Array, question: Question, query: Uint8Array, allowed: (name: string) => boolean, limit: number): Screened | null => {
  if (msg.length < question.end) return null
  const view = new DataView(msg.buffer, msg.byteOffset, msg.byteLength)
  if (view.getUint16(0) !== question.id || (view.getUint16(2) & 0x8000) === 0 || view.getUint16(4) !== 1) return null
  // The same question, byte for byte but the letters' case.
  for (let i = 12; i < question.end; i++) if ((msg[i]! | 0x20) !== (query[i]! | 0x20)) return null
  const answers = readRecords(msg, view, question.end, view.getUint16(6))
  if (answers === null) return null
  const rest = readRecords(msg, view, answers.length === 0 ? question.end : answers[answers.length - 1]!.end, view.getUint16(8) + view.getUint16(10))
  if (rest === null) return null

  const none: Addresses = { v4: [], v6: [] }
  const kept: Array<ResourceRecord> = []
  let name = question.name
  const seen = new Set([name])
  for (;;) {
    const alias = answers.find((r) => r.klass === 1 && r.type === TYPE.CNAME && r.owner === name)
    if (alias === undefined) break
    const target = alias.target
    // A chain too long, looping or through a name no resolver would follow: no answer, nothing opened.
    if (target === undefined || target === null || kept.length >= MAX_CNAME_CHAIN || seen.has(target)) return { reply: errorReply(query, RCODE.SERVFAIL, question.end), addresses: none }
    if (!allowed(target)) return { reply: errorReply(query, RCODE.NXDOMAIN, question.end), addresses: none }
    kept.push(alias)
    name = target
    seen.add(name)
  }
  // Other questions open nothing, and their records may hold compressed names: the response goes as it came.
  if (question.type !== TYPE.A && question.type !== TYPE.AAAA && question.type !== TYPE.CNAME) return { reply: msg, addresses: none }
  const final = answers.filter((r) => r.klass === 1 && r.type === question.type && r.owner === name)
  kept.push(...final)
  const v4 = question.type === TYPE.A ? final.filter((r) => r.data.length === 4).map((r) => ({ address: Array.from(r.data).join("."), ttl: r.ttl })) : []
  const v6 = question.type === TYPE.AAAA
    ? final.filter((r) => r.data.length === 16).map((r) => {
      const data = new DataView(r.data.buffer, r.data.byteOffset, 16)
      return { address: Array.from({ length: 8 }, (_, k) => hex4(data, 2 * k)).join(":"), ttl: r.ttl }
    })
    : []
  const opt = rest.find((r) => r.type === TYPE.OPT && r.owner === "")

  // The reply: the response's header, the question as the client wrote it, the kept records (names written out),
  // the OPT record.
  const parts: Array<Uint8Array> = [msg.subarray(0, 12), query.subarray(12, question.end)]
  for (const r of kept) {
    const fixed = new Uint8Array(10)
    const f = new DataView(fixed.buffer)
    const data = typeof r.target === "string" ? writeName(r.target) : r.data
    f.setUint16(0, r.type)
    f.setUint16(2, r.klass)
    f.setUint32(4, r.ttl)
    f.setUint16(8, data.length)
    parts.push(writeName(r.owner!), fixed, data)
  }
  if (opt !== undefined) parts.push(msg.subarray(opt.start, opt.end))
  const reply = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    reply.set(p, at)
    at += p.length
  }
  const out = new DataView(reply.buffer)
  out.setUint16(6, kept.length)
  out.setUint16(8, 0)
  out.setUint16(10, opt === undefined ? 0 : 1)
  // Longer than the client takes over UDP: truncated (it asks again over TCP), and nothing opened.
  if (reply.length > limit) {
    const truncated = errorReply(query, view.getUint16(2) & 0xf, question.end)
    truncated[2] = truncated[2]! | 0x02
    return { reply: truncated, addresses: none }
  }
  return { reply, addresses: { v4, v6 } }
}

/** The largest reply the client of `query` takes over UDP: 512 bytes, or what its EDNS OPT record says. */
export const udpLimit = (query: Uint8Array, question: Question): number => {
  const view = new DataView(query.buffer, query.byteOffset, query.byteLength)
  // One OPT record right after the question: its owner the root (one zero byte), its class the payload size.
  if (view.getUint16(10) === 1 && query[question.end] === 0 && question.end + 5 <= query.length && view.getUint16(question.end + 1) === TYPE.OPT) {
    return Math.max(512, view.getUint16(question.end + 3))
  }
  return 512
}

/** An address stays in the sets at least this long (a client may connect a little after it resolved), at most a day. */
export const MIN_TTL = 60
export const MAX_TTL = 86_400

/** The nft commands that put `addresses` into the sets (re-added, so a later expiry replaces an earlier one). */
export const setCommands = (table: string, addresses: Addresses): string => {
  const lines: Array<string> = []
  for (const [set, list] of [["allow4", addresses.v4], ["allow6", addresses.v6]] as const) {
    if (list.length === 0) continue
    const timed = list.map((a) => `${a.address} timeout ${Math.min(MAX_TTL, Math.max(MIN_TTL, a.ttl))}s`).join(", ")
    const bare = list.map((a) => a.address).join(", ")
    lines.push(`add element inet ${table} ${set} { ${timed} }`, `delete element inet ${table} ${set} { ${bare} }`, `add element inet ${table} ${set} { ${timed} }`)
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`
}

export interface ForwarderConfig {
  readonly listen: string
  readonly upstreams: ReadonlyArray<{ readonly host: string; readonly port: number }>
  readonly table: string
  readonly policy: DomainPolicy
  /** The jail served: the forwarder exits once this process (with this start time) is gone. */
  readonly watch: { readonly pid: number; readonly start: string | null }
}

const UPSTREAM_TIMEOUT_MS = 3000

const udpExchange = (upstream: ForwarderConfig["upstreams"][number], query: Uint8Array) =>
  new Promise<Uint8Array | null>((resolve) => {
    const socket = dgram.createSocket(net.isIPv6(upstream.host) ? "udp6" : "udp4")
    const timer = setTimeout(() => done(null), UPSTREAM_TIMEOUT_MS)
    const done = (answer: Uint8Array | null) => {
      clearTimeout(timer)
      socket.close()
      resolve(answer)
    }
    socket.on("error", () => done(null))
    socket.on("message", (msg, from) => {
      if (from.port === upstream.port && from.address === upstream.host) done(new Uint8Array(msg))
    })
    socket.send(query, upstream.port, upstream.host)
  })

const tcpExchange = (upstream: ForwarderConfig["upstreams"][number], query: Uint8Array) =>
  new Promise<Uint8Array | null>((resolve) => {
    const socket = net.connect({ host: upstream.host, port: upstream.port })
    let got = Buffer.alloc(0)
    const timer = setTimeout(() => done(null), UPSTREAM_TIMEOUT_MS)
    const done = (answer: Uint8Array | null) => {
      clearTimeout(timer)
      socket.destroy()
      resolve(answer)
    }
    socket.on("error", () => done(null))
    socket.on("connect", () => {
      const frame = Buffer.alloc(2 + query.length)
      frame.writeUInt16BE(query.length, 0)
      frame.set(query, 2)
      socket.write(frame)
    })
    socket.on("data", (chunk: Buffer) => {
      got = Buffer.concat([got, chunk])
      if (got.length > 2 + 65_535) return done(null)
      if (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) done(new Uint8Array(got.subarray(2, 2 + got.readUInt16BE(0))))
    })
  })

/** `netnsFd`: an open network namespace to listen in (the jail's), or none (the caller's, for tests). */
export const startForwarder = async (config: ForwarderConfig, netnsFd?: number) => {
  /** Address → when its set element expires (ms): an answer that expires no later needs no nft call. */
  const expiries = new Map<string, number>()

  const admit = async (addresses: Addresses): Promise<boolean> => {
    const now = Date.now()
    const fresh = (list: Addresses["v4"]) =>
      list.filter((a) => (expiries.get(a.address) ?? 0) < now + Math.min(MAX_TTL, Math.max(MIN_TTL, a.ttl)) * 1000 - 5000)
    const needed: Addresses = { v4: fresh(addresses.v4), v6: fresh(addresses.v6) }
    const script = setCommands(config.table, needed)
    if (script === "") return true
    const nft = Bun.spawn(["nft", "-f", "-"], { stdin: new TextEncoder().encode(script), stdout: "ignore", stderr: "ignore" })
    if ((await nft.exited) !== 0) return false
    for (const a of [...needed.v4, ...needed.v6]) expiries.set(a.address, now + Math.min(MAX_TTL, Math.max(MIN_TTL, a.ttl)) * 1000)
    return true
  }

  /** The reply to one query from the sandbox (null: none). */
  const answer = async (query: Uint8Array, viaTcp: boolean): Promise<Uint8Array | null> => {
    const q = parseQuery(query)
    if (q === null) return null
    if ("refuse" in q) return errorReply(query, q.refuse)
    if (!nameAllowed(config.policy, q.name)) return errorReply(query, RCODE.NXDOMAIN, q.end)
    const limit = viaTcp ? 65_535 : udpLimit(query, q)
    for (const upstream of config.upstreams) {
      const response = viaTcp ? await tcpExchange(upstream, query) : await udpExchange(upstream, query)
      // Truncated over UDP: the sandbox's resolver retries over TCP itself.
      if (response === null) continue
      const screened = screenAnswer(response, q, query, (name) => chainAllowed(config.policy, name), limit)
      if (screened === null) continue
      return (await admit(screened.addresses)) ? screened.reply : errorReply(query, RCODE.SERVFAIL, q.end)
    }
    return errorReply(query, RCODE.SERVFAIL, q.end)
  }

  const libc = netnsFd === undefined ? undefined : dlopen("libc.so.6", { setns: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 } })
  const home = fs.openSync("/proc/self/ns/net", "r")
  // CLONE_NEWNET. Only the listening sockets are made there: every other socket stays in the host's namespace.
  if (libc !== undefined && netnsFd !== undefined && libc.symbols.setns(netnsFd, 0x40000000) !== 0) throw new Error("setns into the jail's network failed")
  const udp = dgram.createSocket("udp4")
  udp.on("message", (msg, from) => {
    void answer(new Uint8Array(msg), false).then((reply) => {
      if (reply !== null) udp.send(reply, from.port, from.address)
    }, () => undefined)
  })
  const tcp = net.createServer((socket) => {
    let got = Buffer.alloc(0)
    socket.setTimeout(10_000, () => socket.destroy())
    socket.on("error", () => socket.destroy())
    socket.on("data", (chunk: Buffer) => {
      got = Buffer.concat([got, chunk])
      if (got.length > 2 + 4096) return socket.destroy()
      while (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) {
        const query = new Uint8Array(got.subarray(2, 2 + got.readUInt16BE(0)))
        got = got.subarray(2 + query.length)
        void answer(query, true).then((reply) => {
          if (reply === null || socket.destroyed) return
          const frame = Buffer.alloc(2 + reply.length)
          frame.writeUInt16BE(reply.length, 0)
          frame.set(reply, 2)
          socket.write(frame)
        }, () => undefined)
      }
    })
  })
  try {
    await new Promise<void>((resolve, reject) => {
      udp.once("error", reject)
      udp.bind(53, config.listen, () => {
        tcp.once("error", reject)
        tcp.listen(53, config.listen, () => resolve())
      })
    })
  } finally {
    if (libc !== undefined && libc.symbols.setns(home, 0x40000000) !== 0) process.exit(1)
    fs.closeSync(home)
  }
}

/** Keeps only CAP_NET_ADMIN (for nft) in this process's capability sets (capset, version 3). */
const keepOnlyNetAdmin = () => {
  const libc = dlopen("libc.so.6", { capset: { args: [FFIType.ptr, FFIType.ptr], returns: FFIType.i32 } })
  const header = new Uint32Array([0x20080522, 0])
  const CAP_NET_ADMIN = 12
  // {effective, permitted, inheritable} for capabilities 0-31, then 32-63.
  const data = new Uint32Array([1 << CAP_NET_ADMIN, 1 << CAP_NET_ADMIN, 0, 0, 0, 0])
  if (libc.symbols.capset(ptr(header), ptr(data)) !== 0) throw new Error("capset failed")
}

/** The start time of a process (field 22 of /proc/<pid>/stat), or null when it is gone. */
const procStart = (pid: number): string | null => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null
  } catch {
    return null
  }
}

if (import.meta.main) {
  const config = JSON.parse(process.argv[2] ?? "{}") as ForwarderConfig
  // fd 3: the jail's network namespace (JailLifecycle.ts).
  startForwarder(config, 3).then(() => {
    keepOnlyNetAdmin()
    fs.closeSync(3)
    // The runtime waits for this line before it starts slirp4netns.
    process.stdout.write("ready\n")
    setInterval(() => {
      const start = procStart(config.watch.pid)
      if (start === null || (config.watch.start !== null && start !== config.watch.start)) process.exit(0)
    }, 2000)
  }, (e: unknown) => {
    process.stderr.write(`dns forwarder: ${e instanceof Error ? e.message : String(e)}\n`)
    process.exit(1)
  })
}
