/**
 * What the DNS forwarder (dnsForwarder.ts) reads and writes: a sandbox's domain policy, DNS messages parsed and
 * written by hand (one plain question of class IN; answers screened to the CNAME chain from the asked name and that
 * chain's addresses, `screenAnswer`), and the nft commands that admit the addresses it answers with. Node builtins
 * only: it runs with the forwarder, outside the gateway's process. The functions are exported for tests.
 */
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

