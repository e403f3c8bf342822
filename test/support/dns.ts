/**
 * A DNS server on loopback for tests: answers A and AAAA queries from a table the test sets, NXDOMAIN for any
 * other name. Every test server points WEBHOOK_DNS_SERVERS at it (support/server.ts), so a webhook host name
 * never becomes a query to a real resolver, and a test can answer a public address to one lookup and a private
 * one to the next (DNS rebinding).
 */
import * as dgram from "node:dgram"
import * as net from "node:net"

export interface TestDns {
  /** `127.0.0.1:<port>`, for WEBHOOK_DNS_SERVERS. */
  readonly server: string
  /** Answers these addresses (IPv4 and IPv6 mixed) for `name` from now on; an empty list removes it. */
  readonly set: (name: string, addresses: ReadonlyArray<string>) => void
  /** How many queries (A and AAAA each count) were made for `name`. */
  readonly queries: (name: string) => number
}

const ipv6Bytes = (address: string): Buffer => {
  const [head, tail] = address.split("::") as [string, string | undefined]
  const groups = (s: string | undefined) => (s === undefined || s === "" ? [] : s.split(":"))
  const h = groups(head)
  const t = groups(tail)
  const all = [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t]
  const out = Buffer.alloc(16)
  all.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2))
  return out
}

let shared: Promise<TestDns> | undefined

const start = async (): Promise<TestDns> => {
  const table = new Map<string, ReadonlyArray<string>>()
  const counts = new Map<string, number>()
  const socket = dgram.createSocket("udp4")
  socket.on("message", (message, remote) => {
    try {
      let offset = 12
      const labels: Array<string> = []
      while (message[offset] !== 0) {
        const length = message[offset]!
        labels.push(message.subarray(offset + 1, offset + 1 + length).toString("latin1"))
        offset += length + 1
      }
      offset += 1
      const type = message.readUInt16BE(offset)
      offset += 4
      const name = labels.join(".").toLowerCase()
      counts.set(name, (counts.get(name) ?? 0) + 1)
      const known = table.get(name)
      const wanted = (known ?? []).filter((a) => (type === 1 ? net.isIPv4(a) : type === 28 ? net.isIPv6(a) : false))
      const answers = wanted.map((address) => {
        const data = type === 1 ? Buffer.from(address.split(".").map(Number)) : ipv6Bytes(address)
        const record = Buffer.alloc(12)
        record.writeUInt16BE(0xc00c, 0) // the name: a pointer to the question's
        record.writeUInt16BE(type, 2)
        record.writeUInt16BE(1, 4)
        record.writeUInt32BE(0, 6) // TTL 0: no resolver may keep an answer for the next lookup
        record.writeUInt16BE(data.length, 10)
        return Buffer.concat([record, data])
      })
      const header = Buffer.alloc(12)
      header.writeUInt16BE(message.readUInt16BE(0), 0)
      header.writeUInt16BE(0x8180 | (known === undefined ? 3 : 0), 2) // a response; NXDOMAIN for unknown names
      header.writeUInt16BE(1, 4)
      header.writeUInt16BE(answers.length, 6)
      socket.send(Buffer.concat([header, message.subarray(12, offset), ...answers]), remote.port, remote.address)
    } catch {
      // A malformed query gets no answer.
    }
  })
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve))
  socket.unref()
  return {
    server: `127.0.0.1:${socket.address().port}`,
    set: (name, addresses) => {
      if (addresses.length === 0) table.delete(name.toLowerCase())
      else table.set(name.toLowerCase(), [...addresses])
    },
    queries: (name) => counts.get(name.toLowerCase()) ?? 0
  }
}

/** The test process's DNS server (started on first use). */
export const testDns = (): Promise<TestDns> => (shared ??= start())
