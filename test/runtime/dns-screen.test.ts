/**
 * The DNS forwarder's screening of upstream answers (src/runtime/dns/dnsMessage.ts, `screenAnswer`), on hand-made
 * messages: the reply holds the CNAME chain from the asked name and that chain's addresses only, and the addresses
 * opened are exactly those (issue 22). The hostile half, from inside real sandboxes through glibc's resolver, is
 * test/hostile/domain-policy.test.ts ("CNAME chains").
 */
import { describe, expect, it } from "vitest"
import { chainAllowed, MAX_CNAME_CHAIN, parseQuery, type Question, RCODE, screenAnswer } from "../../src/runtime/dns/dnsMessage.ts"

const name = (n: string) => Buffer.concat([...n.split(".").filter((l) => l !== "").map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)])), Buffer.from([0])])
/** A pointer to offset `at` of the message (12: the question's name). */
const pointer = (at: number) => Buffer.from([0xc0 | (at >> 8), at & 0xff])

const query = (qname: string, type = 1, opt?: number) => {
  const header = Buffer.alloc(12)
  header.writeUInt16BE(0x4242, 0)
  header.writeUInt16BE(0x0100, 2)
  header.writeUInt16BE(1, 4)
  header.writeUInt16BE(opt === undefined ? 0 : 1, 10)
  const tail = Buffer.alloc(4)
  tail.writeUInt16BE(type, 0)
  tail.writeUInt16BE(1, 2)
  const optRecord = opt === undefined ? Buffer.alloc(0) : (() => {
    const r = Buffer.alloc(11)
    r.writeUInt16BE(41, 1)
    r.writeUInt16BE(opt, 3)
    return r
  })()
  return new Uint8Array(Buffer.concat([header, name(qname), tail, optRecord]))
}

type Owner = string | Buffer
const record = (owner: Owner, type: number, data: Buffer, ttl = 300) => {
  const fixed = Buffer.alloc(10)
  fixed.writeUInt16BE(type, 0)
  fixed.writeUInt16BE(1, 2)
  fixed.writeUInt32BE(ttl, 4)
  fixed.writeUInt16BE(data.length, 8)
  return Buffer.concat([typeof owner === "string" ? name(owner) : owner, fixed, data])
}
const a = (owner: Owner, address: string, ttl?: number) => record(owner, 1, Buffer.from(address.split(".").map(Number)), ttl)
const cname = (owner: Owner, target: string | Buffer) => record(owner, 5, typeof target === "string" ? name(target) : target)

/** The upstream's response to `q`: its question, then the sections' records. */
const response = (q: Uint8Array, sections: { answer?: Array<Buffer>; authority?: Array<Buffer>; additional?: Array<Buffer> }, rcode = 0) => {
  const question = parseQuery(q) as Question
  const header = Buffer.from(q.subarray(0, 12))
  header.writeUInt16BE(0x8180 | rcode, 2)
  header.writeUInt16BE(sections.answer?.length ?? 0, 6)
  header.writeUInt16BE(sections.authority?.length ?? 0, 8)
  header.writeUInt16BE(sections.additional?.length ?? 0, 10)
  return new Uint8Array(Buffer.concat([header, Buffer.from(q.subarray(12, question.end)), ...(sections.answer ?? []), ...(sections.authority ?? []), ...(sections.additional ?? [])]))
}

const anything = () => true
const screen = (q: Uint8Array, msg: Uint8Array, allowed: (n: string) => boolean = anything, limit = 4096) => {
  const question = parseQuery(q) as Question
  return screenAnswer(msg, question, q, allowed, limit)
}
const v4 = (s: ReturnType<typeof screen>) => s?.addresses.v4.map((x) => x.address)
const rcodeOf = (reply: Uint8Array) => reply[3]! & 0xf
const counts = (reply: Uint8Array) => [2, 3, 4, 5].map((i) => new DataView(reply.buffer, reply.byteOffset).getUint16(i * 2))

describe("screenAnswer", () => {
  it("passes a plain answer with its addresses, and opens exactly those", () => {
    const q = query("allowed.test")
    const s = screen(q, response(q, { answer: [a(pointer(12), "203.0.113.2", 30), a(pointer(12), "203.0.113.3")] }))
    expect(v4(s)).toEqual(["203.0.113.2", "203.0.113.3"])
    expect(s!.addresses.v4[0]!.ttl).toBe(30)
    expect(counts(s!.reply)).toEqual([1, 2, 0, 0])
  })

  it("follows the CNAME chain from the asked name (compressed names included) and keeps nothing off it", () => {
    const q = query("www.allowed.test")
    // www.allowed.test CNAME cdn.example (written at offset 12 + 18 + 4 + 12 = 46), cdn.example A …; plus an address
    // owned by the asked name (off the chain after its CNAME), another owner's, and glue in authority/additional.
    const answer = [cname(pointer(12), "cdn.example"), a(pointer(46), "203.0.113.7"), a(pointer(12), "203.0.113.66"), a("other.example", "203.0.113.67")]
    const s = screen(q, response(q, { answer, authority: [a("ns.example", "203.0.113.68")], additional: [a("cdn.example", "203.0.113.69")] }))
    expect(v4(s)).toEqual(["203.0.113.7"])
    expect(counts(s!.reply)).toEqual([1, 2, 0, 0])
    const text = Buffer.from(s!.reply).toString("latin1")
    for (const stray of ["\xcb\x00\x71\x42", "\xcb\x00\x71\x43", "\xcb\x00\x71\x44", "\xcb\x00\x71\x45"]) expect(text).not.toContain(stray)
    // The reply is itself a well-formed answer of the same chain: screened again, it is unchanged.
    const again = screen(q, s!.reply)
    expect(again!.reply).toEqual(s!.reply)
    expect(v4(again)).toEqual(["203.0.113.7"])
  })

  it("a chain through a name the policy refuses is NXDOMAIN with nothing opened (as chainAllowed decides per list)", () => {
    const q = query("cloak.test")
    const msg = response(q, { answer: [cname(pointer(12), "denied.test"), a("denied.test", "203.0.113.9")] })
    const deny = { mode: "deny" as const, domains: ["denied.test"] }
    const refused = screen(q, msg, (n) => chainAllowed(deny, n))
    expect(rcodeOf(refused!.reply)).toBe(RCODE.NXDOMAIN)
    expect(counts(refused!.reply)).toEqual([1, 0, 0, 0])
    expect(v4(refused)).toEqual([])
    // An allow list follows an allowed name's chain wherever it leads.
    const allow = { mode: "allow" as const, domains: ["cloak.test"] }
    expect(v4(screen(q, msg, (n) => chainAllowed(allow, n)))).toEqual(["203.0.113.9"])
  })

  it("a looping, too long or unreadable chain is SERVFAIL with nothing opened", () => {
    const q = query("loop.test")
    const loop = screen(q, response(q, { answer: [cname(pointer(12), "loop2.test"), cname("loop2.test", "loop.test"), a("loop.test", "203.0.113.9")] }))
    expect(rcodeOf(loop!.reply)).toBe(RCODE.SERVFAIL)
    expect(v4(loop)).toEqual([])
    const hops = Array.from({ length: MAX_CNAME_CHAIN + 1 }, (_, i) => cname(i === 0 ? pointer(12) : `h${i}.test`, `h${i + 1}.test`))
    const long = screen(q, response(q, { answer: [...hops, a(`h${MAX_CNAME_CHAIN + 1}.test`, "203.0.113.9")] }))
    expect(rcodeOf(long!.reply)).toBe(RCODE.SERVFAIL)
    expect(v4(long)).toEqual([])
    // A target with a dot inside a label ("a.b" as one label) is no plain name.
    const odd = Buffer.concat([Buffer.from([3]), Buffer.from("a.b"), name("test")])
    const unreadable = screen(q, response(q, { answer: [cname(pointer(12), odd), a(Buffer.concat([Buffer.from([1, 97, 1, 98]), name("test")]), "203.0.113.9")] }))
    expect(rcodeOf(unreadable!.reply)).toBe(RCODE.SERVFAIL)
    expect(v4(unreadable)).toEqual([])
    // A pointer loop is a malformed response: not an answer at all.
    // (loop.test is 11 bytes: the first answer starts at 12 + 11 + 4, and its owner points at itself.)
    expect(screen(q, response(q, { answer: [a(pointer(12 + 11 + 4), "203.0.113.9")] }))).toBeNull()
  })

  it("keeps the EDNS OPT record; a reply longer than the client takes over UDP is truncated, with nothing opened", () => {
    const q = query("many.test", 1, 1232)
    const opt = Buffer.alloc(11)
    opt.writeUInt16BE(41, 1)
    opt.writeUInt16BE(1232, 3)
    const answer = Array.from({ length: 40 }, (_, i) => a(pointer(12), `203.0.113.${i + 1}`))
    const full = screen(q, response(q, { answer, additional: [opt] }))
    expect(counts(full!.reply)).toEqual([1, 40, 0, 1])
    expect(v4(full)).toHaveLength(40)
    const short = screen(q, response(q, { answer, additional: [opt] }), anything, 512)
    expect((short!.reply[2]! & 0x02) !== 0).toBe(true)
    expect(counts(short!.reply)).toEqual([1, 0, 0, 0])
    expect(v4(short)).toEqual([])
  })

  it("questions of other types open nothing; their response goes as it came", () => {
    const q = query("mail.test", 15)
    const mx = record(pointer(12), 15, Buffer.concat([Buffer.from([0, 10]), pointer(12)]))
    const msg = response(q, { answer: [mx], additional: [a("mail.test", "203.0.113.9")] })
    const s = screen(q, msg)
    expect(s!.reply).toEqual(msg)
    expect(v4(s)).toEqual([])
  })

  it("refuses what is not a response to the question", () => {
    const q = query("allowed.test")
    const other = response(query("other.test"), { answer: [a(pointer(12), "203.0.113.9")] })
    expect(screen(q, other)).toBeNull()
    const wrongId = response(q, { answer: [a(pointer(12), "203.0.113.9")] })
    wrongId[0] = 0
    expect(screen(q, wrongId)).toBeNull()
  })
})
