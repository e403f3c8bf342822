/**
 * A test network for egress tests (never an outside address): a network namespace made here, joined to the host by
 * a veth pair, with "public" test hosts (TEST-NET-3, 203.0.113.0/24) and a private one (10.214.0.0/16), an HTTP
 * server on each answering `test host <address>`, and a test DNS server (UDP) that answers fixed records (A, or
 * CNAMEs and A records of any owner) with a TTL of 300 and NXDOMAIN for every other name, logging each name it is
 * asked.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

export interface TestNet {
  /** Addresses in the namespace: two public hosts, a private one, and the DNS server (public too, no name's). */
  readonly public1: string
  readonly public2: string
  readonly private: string
  readonly dns: string
  readonly port: number
  /** Names the DNS server was asked, in order (lowercase). */
  readonly asked: () => Array<string>
  readonly cleanup: () => void
}

const ip = (...args: Array<string>) => {
  const r = Bun.spawnSync(["ip", ...args], { stderr: "pipe" })
  if (r.exitCode !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr.toString()}`)
}

const DNS_SERVER = String.raw`
import socket, struct, sys, json
addr, records, log = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
def enc(n): return b"".join(bytes([len(l)]) + l.encode() for l in n.split(".")) + b"\0"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, 53))
while True:
    q, a = s.recvfrom(4096)
    try:
        qid = struct.unpack(">H", q[:2])[0]; i = 12; labels = []
        while q[i]:
            labels.append(q[i + 1:i + 1 + q[i]].decode()); i += 1 + q[i]
        qtype = struct.unpack(">H", q[i + 1:i + 3])[0]; qend = i + 5
        name = ".".join(labels).lower()
        with open(log, "a") as f: f.write(name + "\n")
        rec = records.get(name)
        if rec is None:
            s.sendto(struct.pack(">HHHHHH", qid, 0x8183, 1, 0, 0, 0) + q[12:qend], a)
            continue
        out = []
        # [owner or None for the question's name, "A" or "CNAME", address or target]; CNAMEs for any type.
        for owner, kind, value in (rec if isinstance(rec, list) else [[None, "A", rec]]):
            o = b"\xc0\x0c" if owner is None else enc(owner)
            if kind == "CNAME":
                out.append(o + struct.pack(">HHIH", 5, 1, 300, len(enc(value))) + enc(value))
            elif qtype == 1:
                out.append(o + struct.pack(">HHIH", 1, 1, 300, 4) + socket.inet_aton(value))
        s.sendto(struct.pack(">HHHHHH", qid, 0x8180, 1, len(out), 0, 0) + q[12:qend] + b"".join(out), a)
    except Exception:
        pass
`

const HTTP_SERVER = (port: number) => String.raw`
import http.server as h
class H(h.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(("test host " + self.connection.getsockname()[0]).encode())
    def log_message(self, *a): pass
h.ThreadingHTTPServer(("0.0.0.0", ${port}), H).serve_forever()`

type TestHost = "public1" | "public2" | "private"
/** One record of an answer: owned by the name asked unless `owner` says otherwise. */
export type TestRecord = { readonly owner?: string; readonly cname: string } | { readonly owner?: string; readonly a: TestHost }

/** `records`: name → which test host it resolves to, or the records of its answer. */
export const makeTestNet = async (records: Record<string, TestHost | ReadonlyArray<TestRecord>>): Promise<TestNet> => {
  const tag = crypto.randomUUID().slice(0, 6)
  const ns = `sgwd-${tag}`
  const hostIf = `sgdh${tag}`
  const peerIf = `sgdp${tag}`
  const j = Math.floor(Math.random() * 31)
  const k = 1 + Math.floor(Math.random() * 250)
  const host = { public: `203.0.113.${8 * j + 1}`, private: `10.214.${k}.1` }
  const net = { public1: `203.0.113.${8 * j + 2}`, public2: `203.0.113.${8 * j + 3}`, private: `10.214.${k}.2` }
  const dns = `203.0.113.${8 * j + 4}`
  const port = 19000 + Math.floor(Math.random() * 1000)
  const log = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sgw-dns-")), "asked")
  fs.writeFileSync(log, "")
  const cleanups: Array<() => void> = [() => fs.rmSync(path.dirname(log), { recursive: true, force: true })]
  const cleanup = () => {
    for (const c of cleanups.reverse()) {
      try {
        c()
      } catch {}
    }
  }
  try {
    ip("netns", "add", ns)
    cleanups.push(() => void Bun.spawnSync(["ip", "netns", "del", ns]))
    ip("link", "add", hostIf, "type", "veth", "peer", "name", peerIf)
    cleanups.push(() => void Bun.spawnSync(["ip", "link", "del", hostIf]))
    ip("link", "set", peerIf, "netns", ns)
    ip("addr", "add", `${host.public}/29`, "dev", hostIf)
    ip("addr", "add", `${host.private}/24`, "dev", hostIf)
    ip("link", "set", hostIf, "up")
    ip("netns", "exec", ns, "ip", "addr", "add", `${net.public1}/29`, "dev", peerIf)
    ip("netns", "exec", ns, "ip", "addr", "add", `${net.public2}/29`, "dev", peerIf)
    ip("netns", "exec", ns, "ip", "addr", "add", `${dns}/29`, "dev", peerIf)
    ip("netns", "exec", ns, "ip", "addr", "add", `${net.private}/24`, "dev", peerIf)
    ip("netns", "exec", ns, "ip", "link", "set", peerIf, "up")
    ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
    const resolved = Object.fromEntries(Object.entries(records).map(([name, answer]) => [
      name,
      typeof answer === "string"
        ? net[answer]
        : answer.map((r) => ("cname" in r ? [r.owner ?? null, "CNAME", r.cname] : [r.owner ?? null, "A", net[r.a]]))
    ]))
    const procs = [
      Bun.spawn(["ip", "netns", "exec", ns, "python3", "-c", DNS_SERVER, dns, JSON.stringify(resolved), log], { stdout: "ignore", stderr: "ignore" }),
      Bun.spawn(["ip", "netns", "exec", ns, "python3", "-c", HTTP_SERVER(port)], { stdout: "ignore", stderr: "ignore" })
    ]
    for (const p of procs) cleanups.push(() => p.kill("SIGKILL"))
    const deadline = Date.now() + 15_000
    while ((await fetch(`http://${net.public2}:${port}/`).then((r) => r.text(), () => "")) !== `test host ${net.public2}`) {
      if (Date.now() > deadline) throw new Error("the test hosts did not come up")
      await Bun.sleep(50)
    }
  } catch (e) {
    cleanup()
    throw e
  }
  return {
    ...net,
    dns,
    port,
    asked: () => fs.readFileSync(log, "utf8").split("\n").filter((l) => l !== ""),
    cleanup
  }
}
