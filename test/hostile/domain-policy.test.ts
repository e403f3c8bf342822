/**
 * Domain policies of sandboxes with internet (issue 14 item 2, src/runtime/DomainPolicy.ts), attacked from inside
 * real sandboxes against a test network made here (test/support/testnet.ts: a network namespace, test hosts, a
 * test DNS upstream; never an outside address):
 *   - allow list: an allowed name resolves and is reachable; another name is NXDOMAIN (never asked upstream) and
 *     its address unreachable; a literal IP that no allowed name resolved to is refused; `*.x` allows subdomains
 *     only; an allowed name resolving to a private address (DNS rebinding) is still refused;
 *   - deny list: the denied name is NXDOMAIN, other names resolve, literal IPs are still refused;
 *   - asking another resolver directly gets nothing; the addresses carry the answer's TTL; destroy leaves nothing;
 *   - CNAME chains (issue 22): only the addresses a resolver takes from an answer (the chain's, from the asked
 *     name) are sent and opened, never a record off the chain; an allowed name's chain is followed (a CDN); in a
 *     deny list a chain through a denied name is NXDOMAIN and opens nothing.
 */
import * as fs from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { policyTableName, policyTablePresent } from "../../src/runtime/DomainPolicy.ts"
import { alive } from "../../src/runtime/Jail.ts"
import { DEFAULT_HOST_UID } from "../../src/runtime/Jail.ts"
import { POOL_DISK_MB } from "../../src/runtime/LocalRuntimeLive.ts"
import { failure, newRuntime, run, sh, stateOf, type TestRuntime, waitFor } from "../runtime/support.ts"
import { makeTestNet, type TestNet } from "../support/testnet.ts"

let net: TestNet
let main: TestRuntime

beforeAll(async () => {
  net = await makeTestNet({
    "allowed.test": "public1",
    "other.test": "public2",
    "denied.test": "public2",
    "wild.test": "public2",
    "api.wild.test": "public1",
    "deep.api.wild.test": "public1",
    "rebind.test": "private",
    // An alias whose address record is off its chain (owned by the alias, not by the CNAME's target): a resolver
    // takes no address from it.
    "stray.test": [{ cname: "elsewhere.test" }, { a: "public2" }],
    // An alias of a CDN's name, as most hosted names are.
    "cdn-alias.test": [{ cname: "cdn.test" }, { owner: "cdn.test", a: "public1" }],
    // An alias of a denied name, with that name's address.
    "cloak.test": [{ cname: "denied.test" }, { owner: "denied.test", a: "public2" }]
  })
  main = newRuntime("policy", { dnsUpstreams: [net.dns] })
}, 60_000)

afterAll(async () => {
  await main?.cleanup()
  net?.cleanup()
})

/**
 * From inside the sandbox, per target (a name or an address): `nxdomain`, `refused`, `CONNECTED <body>`, or what
 * else failed. Names resolve through the sandbox's resolver (glibc, /etc/resolv.conf).
 */
const probe = async (id: string, targets: ReadonlyArray<string>, port: number, rt = main.rt) => {
  const r = await sh(rt, id, `python3 - <<'EOF'
import socket
for target in ${JSON.stringify(targets)}:
    try:
        address = socket.getaddrinfo(target, ${port}, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror as e:
        print(target, "nxdomain" if e.errno == socket.EAI_NONAME else "resolve-failed " + str(e)); continue
    s = socket.socket(); s.settimeout(5)
    try:
        s.connect((address, ${port})); s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        answer = b""
        while True:
            chunk = s.recv(4096)
            if not chunk: break
            answer += chunk
        print(target, "CONNECTED", answer.decode(errors="replace").split("\\r\\n\\r\\n")[-1])
    except Exception as e:
        print(target, "refused", address, type(e).__name__)
EOF`, { timeoutMs: 60_000 })
  expect(r.exit.exitCode, r.stderr).toBe(0)
  return Object.fromEntries(r.stdout.trim().split("\n").map((line) => [line.split(" ")[0]!, line.split(" ").slice(1).join(" ")]))
}

/** The response code of a raw DNS query for `name` sent to `server` from inside the sandbox (or `timeout`). */
const rcode = async (id: string, name: string, server = "10.0.2.3") => {
  const r = await sh(main.rt, id, `python3 - <<'EOF'
import socket, struct
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in ${JSON.stringify(name)}.split(".")) + b"\\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
try:
    s.sendto(q, (${JSON.stringify(server)}, 53)); a = s.recv(4096)
    print(a[3] & 15, struct.unpack(">H", a[6:8])[0])
except Exception as e:
    print("timeout")
EOF`)
  return r.stdout.trim()
}

describe("allow_domains", () => {
  beforeAll(async () => {
    await run(main.rt.create({ id: "allow", vcpu: 1, memoryMb: 256, diskMb: 128, internet: true, domains: { mode: "allow", domains: ["allowed.test", "*.wild.test", "rebind.test"] } }))
  }, 60_000)

  it("the test hosts are reachable from the host itself (so a refusal below is the policy)", async () => {
    for (const address of [net.public1, net.public2, net.private]) {
      expect(await fetch(`http://${address}:${net.port}/`).then((r) => r.text())).toBe(`test host ${address}`)
    }
  })

  it("a literal IP no allowed name resolved to is refused, before and after any resolution", async () => {
    const before = await probe("allow", [net.public1, net.public2], net.port)
    expect(before[net.public1]).toMatch(/^refused/)
    expect(before[net.public2]).toMatch(/^refused/)
    // allowed.test → public1: that address opens; public2 (another host of the same network) stays refused.
    const after = await probe("allow", ["allowed.test", net.public2], net.port)
    expect(after["allowed.test"]).toBe(`CONNECTED test host ${net.public1}`)
    expect(after[net.public2]).toMatch(/^refused/)
  }, 60_000)

  it("an allowed name resolves and is reachable; another name is NXDOMAIN, never asked upstream, and unreachable", async () => {
    const seen = await probe("allow", ["allowed.test", "other.test", "denied.test"], net.port)
    expect(seen["allowed.test"]).toBe(`CONNECTED test host ${net.public1}`)
    expect(seen["other.test"]).toBe("nxdomain")
    expect(seen["denied.test"]).toBe("nxdomain")
    expect(await rcode("allow", "other.test")).toBe("3 0")
    expect(await rcode("allow", "allowed.test")).toBe("0 1")
    expect(net.asked()).toContain("allowed.test")
    expect(net.asked()).not.toContain("other.test")
    expect(net.asked()).not.toContain("denied.test")
    // other.test's address (public2) was never admitted.
    expect((await probe("allow", [net.public2], net.port))[net.public2]).toMatch(/^refused/)
  }, 60_000)

  it("*.wild.test allows its subdomains at any depth, not wild.test itself", async () => {
    const seen = await probe("allow", ["api.wild.test", "deep.api.wild.test", "wild.test", "notwild.test"], net.port)
    expect(seen["api.wild.test"]).toBe(`CONNECTED test host ${net.public1}`)
    expect(seen["deep.api.wild.test"]).toBe(`CONNECTED test host ${net.public1}`)
    expect(seen["wild.test"]).toBe("nxdomain")
    expect(seen["notwild.test"]).toBe("nxdomain")
  }, 60_000)

  it("DNS rebinding: an allowed name resolving to a private address resolves, but the address stays refused", async () => {
    const seen = await probe("allow", ["rebind.test"], net.port)
    expect(seen["rebind.test"]).toBe(`refused ${net.private} ConnectionRefusedError`)
  }, 60_000)

  it("no other resolver: the test DNS server asked directly does not answer; addresses carry the answer's TTL", async () => {
    expect(await rcode("allow", "other.test", net.dns)).toBe("timeout")
    const state = stateOf(main.dataDir, "allow")
    const set = Bun.spawnSync(["nft", "list", "set", "inet", policyTableName(DEFAULT_HOST_UID, state.hostUid), "allow4"], { stdout: "pipe" }).stdout.toString()
    // TTL 300 from the test server: the element's timeout is 5 minutes.
    expect(set).toContain(`${net.public1} timeout 5m`)
    expect(set).not.toContain(net.public2)
  }, 60_000)
})

describe("deny_domains", () => {
  it("the denied name is NXDOMAIN; other names resolve and are reachable; literal IPs are still refused", async () => {
    await run(main.rt.create({ id: "deny", vcpu: 1, memoryMb: 256, diskMb: 128, internet: true, domains: { mode: "deny", domains: ["denied.test"] } }))
    const before = await probe("deny", [net.public2], net.port)
    expect(before[net.public2]).toMatch(/^refused/)
    const seen = await probe("deny", ["denied.test", "other.test", "allowed.test", "rebind.test"], net.port)
    expect(seen["denied.test"]).toBe("nxdomain")
    expect(seen["other.test"]).toBe(`CONNECTED test host ${net.public2}`)
    expect(seen["allowed.test"]).toBe(`CONNECTED test host ${net.public1}`)
    expect(seen["rebind.test"]).toMatch(/^refused/)
  }, 60_000)
})

/** The addresses in a sandbox's allow4 set. */
const opened = (id: string) => {
  const state = stateOf(main.dataDir, id)
  return Bun.spawnSync(["nft", "list", "set", "inet", policyTableName(DEFAULT_HOST_UID, state.hostUid), "allow4"], { stdout: "pipe" }).stdout.toString()
}

describe("CNAME chains: the filter opens exactly the addresses the sandbox is given", () => {
  it("an address record off the alias's chain is neither given nor opened; an allowed name's chain is followed", async () => {
    await run(main.rt.create({ id: "chain", vcpu: 1, memoryMb: 256, diskMb: 128, internet: true, domains: { mode: "allow", domains: ["stray.test", "cdn-alias.test"] } }))
    const seen = await probe("chain", ["stray.test", "cdn-alias.test", net.public2], net.port)
    // stray.test's answer: CNAME elsewhere.test plus an address owned by stray.test itself, which no resolver takes.
    expect(seen["stray.test"]).not.toMatch(/CONNECTED/)
    expect(seen[net.public2]).toMatch(/^refused/)
    expect(opened("chain")).not.toContain(net.public2)
    // The CDN's name is not in the allow list, but it is where the allowed name points: followed.
    expect(seen["cdn-alias.test"]).toBe(`CONNECTED test host ${net.public1}`)
    expect(opened("chain")).toContain(net.public1)
    await run(main.rt.destroy("chain"))
  }, 60_000)

  it("in a deny list, an alias of a denied name is NXDOMAIN and its address stays refused; other chains resolve", async () => {
    await run(main.rt.create({ id: "deny-chain", vcpu: 1, memoryMb: 256, diskMb: 128, internet: true, domains: { mode: "deny", domains: ["denied.test"] } }))
    const seen = await probe("deny-chain", ["cloak.test", net.public2, "cdn-alias.test"], net.port)
    expect(seen["cloak.test"]).toBe("nxdomain")
    expect(await rcode("deny-chain", "cloak.test")).toBe("3 0")
    expect(seen[net.public2]).toMatch(/^refused/)
    expect(opened("deny-chain")).not.toContain(net.public2)
    expect(seen["cdn-alias.test"]).toBe(`CONNECTED test host ${net.public1}`)
    await run(main.rt.destroy("deny-chain"))
  }, 60_000)
})

describe("lifecycle", () => {
  it("a bad policy is refused; destroy leaves neither the forwarder nor the table", async () => {
    const bad = await failure(main.rt.create({ id: "bad", vcpu: 1, memoryMb: 128, diskMb: 64, internet: true, domains: { mode: "allow", domains: ["no spaces.test"] } }))
    expect(bad).toMatchObject({ kind: "invalid" })
    await run(main.rt.create({ id: "gone", vcpu: 1, memoryMb: 128, diskMb: 64, internet: true, domains: { mode: "allow", domains: ["allowed.test"] } }))
    const state = stateOf(main.dataDir, "gone")
    expect(state.dnsPid).toBeGreaterThan(0)
    expect(alive(state.dnsPid!, state.dnsStart ?? null)).toBe(true)
    expect(await policyTablePresent(DEFAULT_HOST_UID, state.hostUid)).toBe(true)
    // The forwarder listens in the jail's own network (nowhere on the host) and keeps only CAP_NET_ADMIN.
    const status = fs.readFileSync(`/proc/${state.dnsPid}/status`, "utf8")
    expect(/CapEff:\s+([0-9a-f]+)/.exec(status)?.[1]).toBe((1n << 12n).toString(16).padStart(16, "0"))
    expect(/CapPrm:\s+([0-9a-f]+)/.exec(status)?.[1]).toBe((1n << 12n).toString(16).padStart(16, "0"))
    const inJail = Bun.spawnSync(["nsenter", `--net=/proc/${state.childPid}/ns/net`, "ss", "-ulnp"], { stdout: "pipe" }).stdout.toString()
    expect(inJail).toContain("10.0.2.3:53")
    expect(Bun.spawnSync(["ss", "-ulnp"], { stdout: "pipe" }).stdout.toString()).not.toContain(`pid=${state.dnsPid},`)
    await run(main.rt.destroy("gone"))
    expect(alive(state.dnsPid!, state.dnsStart ?? null)).toBe(false)
    expect(await policyTablePresent(DEFAULT_HOST_UID, state.hostUid)).toBe(false)
  }, 60_000)

  it("a sandbox with internet but no policy keeps the plain egress filter (no table of its own)", async () => {
    await run(main.rt.create({ id: "open", vcpu: 1, memoryMb: 128, diskMb: 64, internet: true }))
    const state = stateOf(main.dataDir, "open")
    expect(await policyTablePresent(DEFAULT_HOST_UID, state.hostUid)).toBe(false)
    expect((await probe("open", [net.public2], net.port))[net.public2]).toBe(`CONNECTED test host ${net.public2}`)
    await run(main.rt.destroy("open"))
  }, 60_000)
})

describe("a warm jail whose network started ahead", () => {
  it("gets the policy before the sandbox's first command: other names are NXDOMAIN, other addresses refused", async () => {
    const warm = newRuntime("policy-warm", { dnsUpstreams: [net.dns], warmPool: 1 })
    try {
      // The pool's jail has its slirp4netns running (the runtime's default is internet) before any create.
      const sandboxes = `${warm.dataDir}/sandboxes`
      await waitFor("a warm jail with its network", () =>
        fs.readdirSync(sandboxes).filter((id) => id.startsWith("pool-")).some((id) => {
          const state = stateOf(warm.dataDir, id)
          return alive(state.slirpPid ?? 0, state.slirpStart) && fs.readFileSync(`/proc/${state.childPid}/net/route`, "utf8").includes("tap0")
        }), 30_000)
      const pooled = fs.readdirSync(sandboxes).find((id) => id.startsWith("pool-"))!
      const before = stateOf(warm.dataDir, pooled)
      await run(warm.rt.create({ id: "ahead", vcpu: 1, memoryMb: 256, diskMb: POOL_DISK_MB, internet: true, domains: { mode: "allow", domains: ["allowed.test"] } }))
      // The warm jail's network, not a new one: what was running before the policy existed.
      expect(stateOf(warm.dataDir, "ahead").slirpPid).toBe(before.slirpPid)
      // The first thing the sandbox does: a literal address, then names.
      const seen = await probe("ahead", [net.public2, "other.test", "allowed.test"], net.port, warm.rt)
      expect(seen[net.public2]).toMatch(/^refused/)
      expect(seen["other.test"]).toBe("nxdomain")
      expect(seen["allowed.test"]).toBe(`CONNECTED test host ${net.public1}`)
    } finally {
      await warm.cleanup()
    }
  }, 90_000)
})
