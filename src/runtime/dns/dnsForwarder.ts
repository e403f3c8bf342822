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
 * It exits when the jail it serves is gone. Shipped as text beside the agent's modules (the tools tmpfs holds it,
 * dns/source.ts) and run with the same bun; node builtins only. Its messages and policy are dnsMessage.ts.
 */
import { dlopen, FFIType, ptr } from "bun:ffi"
import * as dgram from "node:dgram"
import * as fs from "node:fs"
import * as net from "node:net"
import { type Addresses, chainAllowed, type DomainPolicy, errorReply, MAX_TTL, MIN_TTL, nameAllowed, parseQuery, RCODE, screenAnswer, setCommands, udpLimit } from "./dnsMessage.ts"

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
  // fd 3: the jail's network namespace (JailNetwork.ts).
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
