/**
 * The DNS forwarder of a sandbox with a domain policy (DomainPolicy.ts). It is NOT part of the in-jail agent: it
 * runs on the host, one per such sandbox, as root with few capabilities. It listens (UDP and TCP) at 10.0.2.3:53
 * inside the jail's network namespace (entered with setns for its two listening sockets only; the runtime puts
 * 10.0.2.3 on the jail's loopback, so the sandbox's DNS never reaches slirp4netns), then keeps only
 * CAP_NET_ADMIN; its upstream queries leave from the host's namespace, as root, past the sandbox's filters.
 * For every query it:
 *   - refuses what is not one plain question of class IN with a name of letters, digits, `-` and `_`;
 *   - answers NXDOMAIN for a name the policy does not allow (nothing goes upstream);
 *   - forwards the rest to the upstream resolvers (the host's), and before answering puts every A / AAAA address
 *     of the answer into the sandbox's nftables sets, with the record's TTL (at least MIN_TTL): the sandbox may
 *     connect to those addresses and to no other (the egress filter still refuses private and host addresses,
 *     so a name that resolves there — DNS rebinding — gains nothing).
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

/** Skips a (possibly compressed) name; returns the offset after it, or -1. */
const skipName = (msg: Uint8Array, start: number): number => {
  let at = start
  for (let steps = 0; steps < 128; steps++) {
    const len = msg[at]
    if (len === undefined) return -1
    if (len === 0) return at + 1
    if ((len & 0xc0) === 0xc0) return at + 2 <= msg.length ? at + 2 : -1
    if ((len & 0xc0) !== 0) return -1
    at += 1 + len
  }
  return -1
}

const hex4 = (view: DataView, at: number) => view.getUint16(at).toString(16)

/**
 * The A and AAAA records of a response's answer section (to the question asked: checked by the caller), or null
 * when the response is not one to `question` (wrong id, not a response, malformed).
 */
export const answerAddresses = (msg: Uint8Array, question: Question, query: Uint8Array): Addresses | null => {
  if (msg.length < question.end) return null
  const view = new DataView(msg.buffer, msg.byteOffset, msg.byteLength)
  if (view.getUint16(0) !== question.id || (view.getUint16(2) & 0x8000) === 0 || view.getUint16(4) !== 1) return null
  // The same question, byte for byte but the letters' case.
  for (let i = 12; i < question.end; i++) if ((msg[i]! | 0x20) !== (query[i]! | 0x20)) return null
  const count = view.getUint16(6)
  const v4: Array<{ address: string; ttl: number }> = []
  const v6: Array<{ address: string; ttl: number }> = []
  let at = question.end
  for (let i = 0; i < count; i++) {
    at = skipName(msg, at)
    if (at < 0 || at + 10 > msg.length) return null
    const type = view.getUint16(at)
    const klass = view.getUint16(at + 2)
    const ttl = view.getUint32(at + 4)
    const length = view.getUint16(at + 8)
    at += 10
    if (at + length > msg.length) return null
    if (klass === 1 && type === 1 && length === 4) v4.push({ address: Array.from(msg.subarray(at, at + 4)).join("."), ttl })
    if (klass === 1 && type === 28 && length === 16) {
      v6.push({ address: Array.from({ length: 8 }, (_, k) => hex4(view, at + 2 * k)).join(":"), ttl })
    }
    at += length
  }
  return { v4, v6 }
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
    for (const upstream of config.upstreams) {
      let reply = viaTcp ? await tcpExchange(upstream, query) : await udpExchange(upstream, query)
      // Truncated over UDP: the sandbox's resolver retries over TCP itself.
      if (reply === null) continue
      const addresses = answerAddresses(reply, q, query)
      if (addresses === null) continue
      if (!(await admit(addresses))) reply = errorReply(query, RCODE.SERVFAIL, q.end)
      return reply
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
