/**
 * A sandbox is hostile (issue 7, ARCHITECTURE.md §5): every attack here is performed from inside real sandboxes, and
 * each test fails if the defence it stands for is removed. Sandbox "b" stands for organization B (the victim);
 * the attackers are organization A's sandboxes. The gateway side is this process (the runtime in it).
 *   - the agent channel: sockets replaced by symlinks to B's sockets or to a root-only socket of the host;
 *   - a fake agent: an endless body, bytes that are not HTTP, a slow drip, JSON that is not JSON, wrong shapes, gzip
 *     bombs;
 *   - the disk limit (and /dev/shm), with the freed blocks given back to the host;
 *   - egress with internet: the host's own addresses, link-local and private test hosts in a network
 *     namespace made here (veth pair), and a "public" test host that must stay reachable;
 *   - host hygiene: DATA_DIR unreadable by other users, no host path in the jail's mounts, no host file a sandbox
 *     can grow; per-sandbox uids (inotify instances, process counts); leftovers swept.
 */
import { ConfigProvider, Effect } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { appConfig } from "../../src/Config.ts"
import { INVALID, NOT_ANSWERING, TOO_LARGE, TOO_SLOW } from "../../src/runtime/AgentChannel.ts"
import { ruleset } from "../../src/runtime/Egress.ts"
import { diskImage, jailDir } from "../../src/runtime/Jail.ts"
import { RuntimeError } from "../../src/runtime/LocalRuntime.ts"
import { makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { gzipBomb } from "../support/bombs.ts"
import { collect, failure, inJail, leasesOf, newRuntime, run, sh, stateOf, type TestRuntime, waitFor } from "../runtime/support.ts"

const main = newRuntime("hostile", { agentTimeoutMs: 2000 })
const { dataDir, rt } = main
const others: Array<TestRuntime> = []
const cleanups: Array<() => void> = []
const TAKEOVER = fs.readFileSync(path.join(import.meta.dirname, "fixtures", "takeover.js"))
const B_SECRET = `organization B's secret ${crypto.randomUUID()}`

const error = async (effect: Parameters<typeof failure>[0]) => (await failure(effect)) as RuntimeError
const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`

/** Runs the takeover script inside `id` (it stops the sandbox's own agent) and waits until it is done. */
const takeOver = async (id: string, args: ReadonlyArray<string>) => {
  await run(rt.writeFile(id, "/workspace/takeover.js", TAKEOVER, { mode: "overwrite", createParents: false }))
  // setsid -f: out of this command's process group (the agent kills the group when the command ends); the
  // command ends only once the child is in its own session (it has written "escaped").
  await sh(rt, id, `setsid -f sh -c 'touch /workspace/escaped; exec /opt/agent/bun /workspace/takeover.js "$@"' takeover ${args.map(quote).join(" ")} </dev/null >/workspace/takeover.log 2>&1
while [ ! -e /workspace/escaped ]; do sleep 0.02; done`)
  await waitFor("the takeover", () => fs.existsSync(inJail(dataDir, id, "root", "workspace", "takeover-ready")), 30_000)
}

/** Bytes from a port of a sandbox through the runtime's port bridge (an HTTP/1.0 GET). */
const httpThroughBridge = async (runtime: TestRuntime["rt"], id: string, port: number) => {
  const socket = await run(runtime.connectPort(id, port))
  return new Promise<string>((resolve) => {
    let body = ""
    socket.on("data", (c: Buffer) => (body += c.toString()))
    socket.on("close", () => resolve(body))
    socket.write("GET / HTTP/1.0\r\nHost: x\r\n\r\n")
    socket.resume()
  })
}

beforeAll(async () => {
  await run(rt.create({ id: "b", vcpu: 1, memoryMb: 256, diskMb: 256, internet: false }))
  await run(rt.writeFile("b", "/workspace/b-secret", new TextEncoder().encode(B_SECRET), { mode: "overwrite", createParents: false }))
  await run(rt.writeFile("b", "/workspace/www/index.html", new TextEncoder().encode("I am B"), { mode: "overwrite", createParents: true }))
  await run(rt.exec("b", { command: ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/workspace/www"], maxOutputBytes: 1 << 16 }))
  // B's bridge socket is adopted by its first use.
  await waitFor("B's web server", async () => (await httpThroughBridge(rt, "b", 8000).catch(() => "")).includes("I am B"))
}, 60_000)

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) cleanup()
  for (const other of others) await other.cleanup()
  await main.cleanup()
})

/** B still works, and nothing of A's reached it. */
const expectBUntouched = async () => {
  expect((await sh(rt, "b", "echo fine; ls /workspace")).stdout).toBe("fine\nb-secret\nwww\n")
  expect(await httpThroughBridge(rt, "b", 8000)).toContain("I am B")
}

describe("the agent channel cannot be redirected", () => {
  it("A's agent and bridge sockets symlinked to B's: A's calls fail, B's agent and ports are never reached", async () => {
    await run(rt.create({ id: "a1", vcpu: 1, memoryMb: 256, diskMb: 128, internet: false }))
    await takeOver("a1", ["symlink", inJail(dataDir, "b", "ctl", "agent.sock"), inJail(dataDir, "b", "ctl", "bridge.sock")])
    const read = await error(rt.readFile("a1", "/workspace/b-secret", 0, 1000))
    expect(read).toMatchObject({ kind: "unavailable", message: NOT_ANSWERING })
    expect(await error(rt.exec("a1", { command: ["sh", "-c", "echo pwned > /workspace/pwned-by-a"], maxOutputBytes: 100 }))).toMatchObject({ kind: "unavailable" })
    expect(await error(rt.connectPort("a1", 8000))).toMatchObject({ kind: "unavailable" })
    // What A put there was moved out of its run directory and removed, never followed.
    expect(fs.readdirSync(inJail(dataDir, "a1", "ctl"))).toEqual([])
    expect(fs.existsSync(inJail(dataDir, "b", "root", "workspace", "pwned-by-a"))).toBe(false)
    await expectBUntouched()
  })

  it("A's sockets symlinked to a root-only socket of the host: the gateway never connects to it", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-rootonly-"))
    fs.chmodSync(dir, 0o700)
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    let connections = 0
    const server = net.createServer((s) => {
      connections++
      s.end("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
    })
    await new Promise<void>((resolve) => server.listen(path.join(dir, "root.sock"), resolve))
    cleanups.push(() => server.close())
    await run(rt.create({ id: "a2", vcpu: 1, memoryMb: 256, diskMb: 128, internet: false }))
    await takeOver("a2", ["symlink", path.join(dir, "root.sock"), path.join(dir, "root.sock")])
    expect(await error(rt.exec("a2", { command: ["id"], maxOutputBytes: 100 }))).toMatchObject({ kind: "unavailable", message: NOT_ANSWERING })
    expect(await error(rt.statFile("a2", "/etc/passwd"))).toMatchObject({ kind: "unavailable" })
    expect(await error(rt.connectPort("a2", 22))).toMatchObject({ kind: "unavailable" })
    expect(connections).toBe(0)
  })
})

describe("a misbehaving agent fails only its own sandbox's calls, with a clear error", () => {
  const mode = (m: string) => fs.writeFileSync(inJail(dataDir, "a3", "root", "workspace", "mode"), m)
  const messages = new Set<string>()
  const expectFails = async (effect: Parameters<typeof failure>[0], message: string) => {
    const e = await error(effect)
    expect(e.kind, e.message).toBe("unavailable")
    expect(e.message).toBe(message)
    messages.add(e.message)
  }

  beforeAll(async () => {
    await run(rt.create({ id: "a3", vcpu: 1, memoryMb: 256, diskMb: 128, internet: false }))
    await run(rt.writeFile("a3", "/workspace/mode", new TextEncoder().encode("endless"), { mode: "overwrite", createParents: false }))
    await run(rt.writeFile("a3", "/workspace/bomb.gz", await gzipBomb(), { mode: "overwrite", createParents: false }))
    await takeOver("a3", ["fake"])
  }, 60_000)

  /** A streamed read's failure: when it is opened, or while its bytes are read. */
  const streamFails = async (message: string) => {
    const opened = await Effect.runPromise(Effect.either(rt.readFileStream("a3", "/workspace/x", 0, 8 * 1024 * 1024)))
    let e: unknown = opened._tag === "Left" ? opened.left : undefined
    if (opened._tag === "Right") await new Response(opened.right.stream).arrayBuffer().catch((thrown) => (e = thrown))
    expect(e, "the stream was read without an error").toBeInstanceOf(RuntimeError)
    expect((e as RuntimeError).message).toBe(message)
  }

  it("a streamed read takes exactly the length the answer states: not a byte more, not fewer, never stalled forever", async () => {
    mode("endless")
    await streamFails(TOO_LARGE)
    mode("short")
    await streamFails(INVALID)
    mode("stall")
    const started = Date.now()
    await streamFails(TOO_SLOW)
    // The idle limit is the runtime's call time limit (2 s here), not the whole transfer's 30 minutes.
    expect(Date.now() - started).toBeLessThan(10_000)
    mode("shapes")
    await streamFails(INVALID)
    // A stated length is held by HTTP framing (the body is then passed on as fetch gives it): a body that ends
    // short errors the stream; bytes past it are never read.
    mode("shortcl")
    const short = await run(rt.readFileStream("a3", "/workspace/x", 0, 8 * 1024 * 1024))
    expect(short.length).toBe(100)
    expect(await new Response(short.stream).arrayBuffer().then(() => "read whole", () => "errored")).toBe("errored")
    mode("longcl")
    const long = await run(rt.readFileStream("a3", "/workspace/x", 0, 8 * 1024 * 1024))
    expect(Buffer.from(await new Response(long.stream).arrayBuffer()).toString()).toBe("a".repeat(100))
  }, 30_000)

  it("an endless body: each call stops at its byte cap, the gateway's memory stays bounded, B keeps working", async () => {
    mode("endless")
    Bun.gc(true)
    const before = process.memoryUsage().rss
    let peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5)
    try {
      const calls = Promise.all([
        expectFails(rt.readFile("a3", "/workspace/x", 0, 8 * 1024 * 1024), TOO_LARGE),
        expectFails(rt.execEvents("a3", "exec_1", 0, 0), TOO_LARGE),
        expectFails(rt.listFiles("a3", "/workspace", { recursive: true, maxEntries: 10_000 }), TOO_LARGE),
        expectFails(rt.exec("a3", { command: ["true"], maxOutputBytes: 10 }), TOO_LARGE),
        expectFails(rt.getExec("a3", "exec_1"), TOO_LARGE)
      ])
      // Meanwhile B, another organization's sandbox, is served as usual.
      const b = sh(rt, "b", "echo still here")
      await calls
      expect((await b).stdout).toBe("still here\n")
    } finally {
      clearInterval(sampler)
    }
    // Before the caps one such read took the gateway from 152 MB to 4.1 GB in 7 s.
    console.log(`gateway RSS during the endless-body calls: ${Math.round(before / 1e6)} MB -> peak ${Math.round(peak / 1e6)} MB`)
    expect(peak - before).toBeLessThan(256 * 1024 * 1024)
  }, 30_000)

  it("bytes that are not HTTP, a slow drip, a body that is not JSON: clear errors, within the time limit", async () => {
    mode("garbage")
    await expectFails(rt.exec("a3", { command: ["true"], maxOutputBytes: 10 }), NOT_ANSWERING)
    mode("drip")
    const started = Date.now()
    await expectFails(rt.statFile("a3", "/workspace"), TOO_SLOW)
    await expectFails(rt.execEvents("a3", "exec_1", 0, 500), TOO_SLOW)
    // The agent time limit here is 2 s (4.5 s for both calls, the long poll's wait included), not forever.
    expect(Date.now() - started).toBeLessThan(15_000)
    mode("junkjson")
    await expectFails(rt.execEvents("a3", "exec_1", 0, 0), INVALID)
  }, 30_000)

  it("a gzip bomb on every route (0.9 MB declared with its length, 900 MiB inflated): refused unread, memory flat", async () => {
    mode("gzip")
    Bun.gc(true)
    const before = process.memoryUsage().rss
    let peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5)
    try {
      await expectFails(rt.readFile("a3", "/workspace/x", 0, 8 * 1024 * 1024), INVALID)
      await streamFails(INVALID)
      await expectFails(rt.execEvents("a3", "exec_1", 0, 0), INVALID)
      await expectFails(rt.listFiles("a3", "/workspace", { recursive: true, maxEntries: 10_000 }), INVALID)
      await expectFails(rt.exec("a3", { command: ["true"], maxOutputBytes: 10 }), INVALID)
    } finally {
      clearInterval(sampler)
    }
    console.log(`gateway RSS during the gzip bombs: ${Math.round(before / 1e6)} MB -> peak ${Math.round(peak / 1e6)} MB`)
    expect(peak - before).toBeLessThan(50 * 1024 * 1024)
  }, 60_000)

  it("answers of the wrong shape: every call fails as an invalid answer, never with a JavaScript fragment", async () => {
    mode("shapes")
    await expectFails(rt.exec("a3", { command: ["true"], maxOutputBytes: 10 }), INVALID)
    await expectFails(rt.execEvents("a3", "exec_1", 0, 0), INVALID)
    await expectFails(rt.getExec("a3", "exec_1"), INVALID)
    await expectFails(rt.statFile("a3", "/workspace"), INVALID)
    await expectFails(rt.listFiles("a3", "/workspace", { recursive: false, maxEntries: 10 }), INVALID)
    await expectFails(rt.readFile("a3", "/workspace/x", 0, 10), INVALID)
    await expectFails(rt.writeFile("a3", "/workspace/x", new Uint8Array([1]), { mode: "overwrite", createParents: false }), INVALID)
    for (const message of messages) {
      expect(message).not.toMatch(/undefined|evaluating|is not an object|TypeError|\/proc|sandbox-gateway/)
      expect(message).not.toContain(dataDir)
    }
    await expectBUntouched()
  }, 30_000)

  it("answers of the right shape but outside the protocol's bounds (AgentProtocol.ts): each call fails as an invalid answer", async () => {
    mode("nearmiss")
    await expectFails(rt.exec("a3", { command: ["true"], maxOutputBytes: 10 }), INVALID)
    await expectFails(rt.execEvents("a3", "exec_1", 0, 0), INVALID)
    await expectFails(rt.getExec("a3", "exec_1"), INVALID)
    await expectFails(rt.statFile("a3", "/workspace/x"), INVALID)
    await expectFails(rt.listFiles("a3", "/workspace", { recursive: false, maxEntries: 10 }), INVALID)
    await expectFails(rt.readFile("a3", "/workspace/x", 0, 10), INVALID)
    await expectFails(rt.writeFile("a3", "/workspace/x", new Uint8Array([1]), { mode: "overwrite", createParents: false }), INVALID)
    await expectFails(rt.deleteFile("a3", "/workspace/x", { recursive: false }), INVALID)
    await expectFails(rt.makeDir("a3", "/workspace/d", { parents: false }), INVALID)
    await expectBUntouched()
  }, 30_000)
})

describe("the disk limit", () => {
  it("a write past disk_mb fails with ENOSPC inside; the host holds at most disk_mb; freed blocks go back to the host", async () => {
    await run(rt.create({ id: "d", vcpu: 1, memoryMb: 128, diskMb: 64, internet: false }))
    const image = diskImage(jailDir(dataDir, "d"))
    const allocated = () => fs.statSync(image).blocks * 512
    const fill = await sh(rt, "d", "dd if=/dev/urandom of=/workspace/fill bs=1M count=300 2>&1; echo exit=$?; df -m / | tail -1")
    expect(fill.stdout).toContain("No space left on device")
    expect(fill.stdout).not.toContain("exit=0")
    // The sandbox wrote up to its 64 MB; the host holds no more than that for it, and nothing else.
    expect(allocated()).toBeLessThanOrEqual(64 * 1024 * 1024)
    expect(allocated()).toBeGreaterThan(40 * 1024 * 1024)
    expect(fs.readdirSync(jailDir(dataDir, "d")).sort()).toEqual(["disk.img", "state.json"])
    // A full disk still answers file calls; deleting frees it, and (discard) the image shrinks on the host.
    expect(await run(rt.deleteFile("d", "/workspace/fill", { recursive: false }))).toBe(true)
    await waitFor("the freed blocks to go back to the host", () => allocated() < 16 * 1024 * 1024, 20_000)
    expect((await sh(rt, "d", "echo works again")).stdout).toBe("works again\n")
    // /dev/shm is memory: half the sandbox's memory at most (and charged to it), never the host's.
    const shm = await sh(rt, "d", "dd if=/dev/zero of=/dev/shm/big bs=1M count=400 2>&1; echo exit=$?; df -m /dev/shm | tail -1; rm -f /dev/shm/big")
    expect(shm.stdout).toContain("No space left on device")
    expect(shm.stdout).toMatch(/tmpfs +64 +64 /)
    await run(rt.destroy("d"))
    expect(fs.existsSync(image)).toBe(false)
  }, 60_000)

  it("an exec whose output cannot be kept on a full disk still ends, with its exit and its output (held in memory)", async () => {
    await run(rt.create({ id: "d2", vcpu: 1, memoryMb: 128, diskMb: 48, internet: false }))
    // Every block taken (the last ones in 512-byte writes): nothing more can be written to the events file.
    const exec = await run(rt.exec("d2", { command: ["sh", "-c", "cat /dev/zero > /workspace/fill 2>/dev/null; dd if=/dev/zero of=/workspace/f2 bs=512 2>/dev/null; seq 1 1000; exit 3"], maxOutputBytes: 1 << 20 }))
    const done = await collect(rt, "d2", exec.execId)
    expect(done.exit).toMatchObject({ exitCode: 3, outputTruncated: false })
    expect(done.stdout).toBe(Array.from({ length: 1000 }, (_, i) => `${i + 1}\n`).join(""))
    expect(fs.statSync(inJail(dataDir, "d2", "run", "execs", exec.execId, "events")).size).toBe(0)
    // On the full disk a new command gets no directory of its own at all: it runs, its events in memory.
    const next = await sh(rt, "d2", "echo still runs; exit 4")
    expect(next.stdout).toBe("still runs\n")
    expect(next.exit).toMatchObject({ exitCode: 4 })
    await run(rt.destroy("d2"))
  }, 60_000)
})

describe("the shell that waits for a sandbox's next command", () => {
  // Run inside the sandbox: waits for the waiting shell spawned after this command started (its command line
  // still reads its line), then does `act` to it and prints what it did.
  const attack = (act: string) =>
    `while :; do for p in /proc/[0-9]*; do n=\${p#/proc/}; if [ "$n" != "$$" ] && grep -q 'read -r go' $p/cmdline 2>/dev/null; then ${act} $n && settled $n && echo done && exit 0; fi; done; sleep 0.01; done`
  // A signal is sent at once but acted on when its target next runs: "done" only once the shell is stopped or gone,
  // so the next command meets what the attack did (on a loaded machine the shell could still look waiting).
  const settled = `settled() { while s=$(cut -d' ' -f3 /proc/$1/stat 2>/dev/null) && [ "$s" != T ] && [ "$s" != Z ]; do sleep 0.01; done; }; `

  it("stopped or killed by the sandbox: the next command still runs as asked, in the command cgroups, not lost", async () => {
    await run(rt.create({ id: "standby", vcpu: 1, memoryMb: 128, internet: false }))
    for (const act of ["kill -STOP", "kill -KILL"]) {
      expect((await sh(rt, "standby", settled + attack(act), { timeoutMs: 10_000 })).stdout).toBe("done\n")
      // A stopped shell would never read its line: the command would wait for ever (here, for its timeout).
      const next = await sh(rt, "standby", "echo ran; cat /proc/self/cgroup", { timeoutMs: 5000 })
      expect(next.exit).toMatchObject({ exitCode: 0, timedOut: false })
      expect(next.stdout).toMatch(/^ran\n/)
      expect(next.stdout).toMatch(/pids:\/work/)
    }
    await run(rt.destroy("standby"))
  }, 60_000)
})

describe("egress with internet access", () => {
  const k = 1 + Math.floor(Math.random() * 250)
  const j = Math.floor(Math.random() * 63)
  const tag = crypto.randomUUID().slice(0, 6)
  const ns = `sgwt-${tag}`
  const hostIf = `sgwh${tag}`
  const peerIf = `sgwp${tag}`
  const hostSide = { private: `10.213.${k}.1`, link: `169.254.${k}.1`, public: `198.51.100.${4 * j + 1}` }
  const target = { private: `10.213.${k}.2`, link: `169.254.${k}.2`, public: `198.51.100.${4 * j + 2}` }
  const port = 18000 + Math.floor(Math.random() * 1000)
  let hostServer: ReturnType<typeof Bun.serve> | undefined
  let testHost: ReturnType<typeof Bun.spawn> | undefined
  const eth = Object.values(os.networkInterfaces()).flat().find((a) => a?.family === "IPv4" && !a.internal && !a.address.startsWith("10.213."))?.address
  const ip = (...args: Array<string>) => {
    const r = Bun.spawnSync(["ip", ...args], { stderr: "pipe" })
    if (r.exitCode !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr.toString()}`)
  }

  beforeAll(async () => {
    ip("netns", "add", ns)
    cleanups.push(() => void Bun.spawnSync(["ip", "netns", "del", ns]))
    ip("link", "add", hostIf, "type", "veth", "peer", "name", peerIf)
    cleanups.push(() => void Bun.spawnSync(["ip", "link", "del", hostIf]))
    ip("link", "set", peerIf, "netns", ns)
    for (const [name, address] of Object.entries(hostSide)) ip("addr", "add", `${address}/${name === "public" ? 30 : 24}`, "dev", hostIf)
    ip("link", "set", hostIf, "up")
    for (const [name, address] of Object.entries(target)) ip("netns", "exec", ns, "ip", "addr", "add", `${address}/${name === "public" ? 30 : 24}`, "dev", peerIf)
    ip("netns", "exec", ns, "ip", "link", "set", peerIf, "up")
    ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
    // The test hosts: one server in the namespace on every address of it; one on the host on every address.
    testHost = Bun.spawn(["ip", "netns", "exec", ns, "python3", "-c", `import http.server as h
class H(h.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"test host")
    def log_message(self, *a): pass
h.ThreadingHTTPServer(("0.0.0.0", ${port}), H).serve_forever()`], { stdout: "ignore", stderr: "ignore" })
    cleanups.push(() => testHost?.kill())
    hostServer = Bun.serve({ port: 0, hostname: "0.0.0.0", fetch: () => new Response("the host itself") })
    cleanups.push(() => hostServer?.stop(true))
    await waitFor("the test host", async () => (await fetch(`http://${target.public}:${port}/`).then((r) => r.text(), () => "")) === "test host")
  }, 30_000)

  /** From inside the sandbox: CONNECTED (and the first bytes of the answer) or refused, per target. */
  const probe = async (runtime: TestRuntime["rt"], id: string, targets: ReadonlyArray<readonly [string, number]>) => {
    const r = await sh(runtime, id, `python3 - <<'EOF'
import socket
for host, port in ${JSON.stringify(targets)}:
    s = socket.socket(); s.settimeout(5)
    try:
        s.connect((host, port)); s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        answer = b""
        while len(answer) < 4096:
            chunk = s.recv(4096)
            if not chunk: break
            answer += chunk
        body = answer.decode(errors="replace").split("\\r\\n\\r\\n")[-1]
        print(host, "CONNECTED", body)
    except Exception as e:
        print(host, "refused", type(e).__name__, getattr(e, "errno", ""))
EOF`, { timeoutMs: 60_000 })
    return Object.fromEntries(r.stdout.trim().split("\n").map((line) => [line.split(" ")[0]!, line.split(" ").slice(1).join(" ")]))
  }
  /** The host itself reaches each target: the sandbox failing to is the filter, not the test set-up. */
  const hostReaches = async (address: string, p: number) => (await fetch(`http://${address}:${p}/`).then((r) => r.ok, () => false))

  it("strict (default): the public test host is reachable; private and link-local test hosts and every host address are not", async () => {
    await run(rt.create({ id: "n", vcpu: 1, memoryMb: 256, diskMb: 128, internet: true }))
    const hostPort = hostServer!.port!
    const hostAddresses = [hostSide.public, hostSide.private, hostSide.link, ...(eth ? [eth] : [])]
    for (const address of [target.public, target.private, target.link]) expect(await hostReaches(address, port), address).toBe(true)
    for (const address of hostAddresses) expect(await hostReaches(address, hostPort), address).toBe(true)
    const seen = await probe(rt, "n", [
      [target.public, port],
      [target.private, port],
      [target.link, port],
      ...hostAddresses.map((a) => [a, hostPort] as const),
      ["10.0.2.2", hostPort]
    ])
    expect(seen[target.public]).toBe("CONNECTED test host")
    for (const address of [target.private, target.link, ...hostAddresses, "10.0.2.2"]) expect(seen[address], address).toMatch(/^refused/)
  }, 60_000)

  it("RUNTIME_ALLOW_PRIVATE_EGRESS=true: the private test host becomes reachable, link-local and the host never", async () => {
    const allowing = newRuntime("hostile-private", { allowPrivateEgress: true })
    others.push(allowing)
    await run(allowing.rt.create({ id: "p", vcpu: 1, memoryMb: 256, diskMb: 128, internet: true }))
    const hostPort = hostServer!.port!
    const hostAddresses = [hostSide.public, hostSide.private, hostSide.link, ...(eth ? [eth] : [])]
    const seen = await probe(allowing.rt, "p", [[target.public, port], [target.private, port], [target.link, port], ...hostAddresses.map((a) => [a, hostPort] as const)])
    expect(seen[target.public]).toBe("CONNECTED test host")
    expect(seen[target.private]).toBe("CONNECTED test host")
    for (const address of [target.link, ...hostAddresses]) expect(seen[address], address).toMatch(/^refused/)
    // The two policies are told apart by the sandbox's uid range alone.
    expect(stateOf(allowing.dataDir, "p").hostUid).not.toBe(stateOf(dataDir, "n").hostUid)
  }, 60_000)

  it("fails closed: without an egress filter no sandbox with internet is created, one without still is", async () => {
    const fake = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-nonft-"))
    cleanups.push(() => fs.rmSync(fake, { recursive: true, force: true }))
    fs.writeFileSync(path.join(fake, "nft"), "#!/bin/sh\necho 'nft: the kernel refused' >&2\nexit 1\n", { mode: 0o755 })
    const saved = process.env["PATH"]
    process.env["PATH"] = `${fake}:${saved}`
    try {
      // Another uid base: its filter was never installed by this process.
      const broken = newRuntime("hostile-nonft", { hostUid: 1_200_000_000 })
      others.push(broken)
      const e = await error(broken.rt.create({ id: "x", vcpu: 1, memoryMb: 128, diskMb: 64, internet: true }))
      expect(e).toMatchObject({ kind: "unavailable", message: "internet access is not available on this host: its egress filter could not be installed" })
      expect(fs.existsSync(path.join(broken.dataDir, "sandboxes", "x"))).toBe(false)
      expect((await run(broken.rt.create({ id: "y", vcpu: 1, memoryMb: 128, diskMb: 64, internet: false }))).state).toBe("running")
    } finally {
      process.env["PATH"] = saved
    }
  }, 60_000)

  it("DNS goes to exactly the host's resolvers, before anything is refused", () => {
    const rules = ruleset(1_000_000, { v4: ["10.9.8.7"], v6: ["fd00::53"] })
    const dns = rules.indexOf("ip daddr { 10.9.8.7 } meta l4proto { tcp, udp } th dport 53 accept")
    expect(dns).toBeGreaterThan(0)
    expect(rules.indexOf("ip6 daddr { fd00::53 } meta l4proto { tcp, udp } th dport 53 accept")).toBeGreaterThan(0)
    expect(dns).toBeLessThan(rules.indexOf("fib daddr type"))
  })
})

describe("host hygiene", () => {
  const asNobody = (...argv: Array<string>) => Bun.spawnSync(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", ...argv], { stdout: "pipe", stderr: "pipe" })

  it("a shared directory (/tmp, /) is refused as DATA_DIR and left as it was", async () => {
    const shared = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-shared-"))
    cleanups.push(() => fs.rmSync(shared, { recursive: true, force: true }))
    fs.chmodSync(shared, 0o1777)
    fs.writeFileSync(path.join(shared, "someone-elses"), "x", { mode: 0o644 })
    for (const dir of [shared, "/", ""]) {
      const result = await Effect.runPromise(Effect.either(appConfig.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["DATA_DIR", dir]]))))))
      expect(result._tag).toBe("Left")
      expect(String(result._tag === "Left" ? result.left : "")).toMatch(/DATA_DIR/)
    }
    expect(fs.statSync(shared).mode & 0o7777).toBe(0o1777)
    expect(fs.statSync(path.join(shared, "someone-elses")).mode & 0o777).toBe(0o644)
  })

  it("DATA_DIR is 0700 and its files 0600 after start, fixed for an existing folder: another user reads nothing", async () => {
    const dir = path.join(os.tmpdir(), `sgw-perms-${crypto.randomUUID()}`)
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    // As an earlier version left it: world-readable.
    fs.mkdirSync(path.join(dir, "emulators", "daytona"), { recursive: true, mode: 0o755 })
    fs.chmodSync(dir, 0o755)
    fs.writeFileSync(path.join(dir, "gateway.sqlite"), "process output, file contents, emails", { mode: 0o644 })
    fs.writeFileSync(path.join(dir, "gateway.sqlite-wal"), "wal", { mode: 0o644 })
    fs.writeFileSync(path.join(dir, "emulators", "daytona", "state.json"), "{}", { mode: 0o644 })
    expect(asNobody("cat", path.join(dir, "gateway.sqlite")).exitCode).toBe(0)
    await Effect.runPromise(appConfig.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["DATA_DIR", dir]])))))
    const mode = (p: string) => fs.statSync(path.join(dir, p)).mode & 0o7777
    expect(mode(".")).toBe(0o700)
    expect([mode("gateway.sqlite"), mode("gateway.sqlite-wal"), mode("emulators/daytona/state.json")]).toEqual([0o600, 0o600, 0o600])
    expect([mode("emulators"), mode("emulators/daytona")]).toEqual([0o700, 0o700])
    const read = asNobody("cat", path.join(dir, "gateway.sqlite"))
    expect(read.exitCode).not.toBe(0)
    expect(read.stderr.toString()).toContain("Permission denied")
    // A fresh folder gets its database file 0600 before SQLite creates it (its WAL and SHM take that mode).
    const fresh = path.join(os.tmpdir(), `sgw-perms-${crypto.randomUUID()}`)
    cleanups.push(() => fs.rmSync(fresh, { recursive: true, force: true }))
    await Effect.runPromise(appConfig.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["DATA_DIR", fresh]])))))
    expect(fs.statSync(fresh).mode & 0o7777).toBe(0o700)
    expect(fs.statSync(path.join(fresh, "gateway.sqlite")).mode & 0o7777).toBe(0o600)
  })

  it("a running sandbox's disk and files are out of another user's reach", () => {
    expect(fs.statSync(path.join(dataDir, "sandboxes")).mode & 0o7777).toBe(0o700)
    expect(fs.statSync(jailDir(dataDir, "b")).mode & 0o7777).toBe(0o700)
    expect(fs.statSync(diskImage(jailDir(dataDir, "b"))).mode & 0o7777).toBe(0o600)
    for (const target of [diskImage(jailDir(dataDir, "b")), inJail(dataDir, "b", "root", "workspace", "b-secret")]) {
      const read = asNobody("cat", target)
      expect(read.exitCode, target).not.toBe(0)
      expect(read.stdout.toString()).not.toContain(B_SECRET)
    }
  })

  it("the jail's mounts name no host path: not DATA_DIR, not bun's install, not the runtime's directories", async () => {
    const mounts = (await sh(rt, "b", "cat /proc/self/mountinfo")).stdout
    expect(mounts).toContain(" /opt/agent/bun ")
    expect(mounts).not.toContain(dataDir)
    expect(mounts).not.toContain(path.dirname(fs.realpathSync(process.execPath)))
    expect(mounts).not.toContain("sandbox-gateway")
  })

  it("the jail's init names no host path either, and its lifeline is out of the sandbox's reach", async () => {
    // bwrap's init holds the jail's lifeline (Lifeline.ts): a pipe, whose link names nothing of the host, and which
    // the sandbox cannot open (to write into it, or to hold it open).
    const r = await sh(rt, "b", "for fd in /proc/1/fd/*; do echo \"$fd $(readlink $fd)\"; done; for fd in /proc/1/fd/*; do case $(readlink $fd) in pipe:*) echo x > $fd && echo \"wrote $fd\"; cat $fd > /dev/null && echo \"read $fd\";; esac; done; true")
    expect(r.stdout).toMatch(/ pipe:\[\d+\]\n/)
    expect(r.stdout).not.toContain(dataDir)
    expect(r.stdout).not.toContain("sandbox-gateway")
    expect(r.stdout).not.toMatch(/wrote|read /)
    expect(r.stderr).toContain("Permission denied")
  })

  it("no host file grows with what a sandbox writes to its processes' stderr (the launcher's pipe is closed)", async () => {
    const before = fs.statSync(diskImage(jailDir(dataDir, "b"))).blocks
    // The jail's init still holds the launcher's pipe (closed by the gateway once the jail started), the agent's
    // shell loop /dev/null: neither is a host file.
    const r = await sh(rt, "b", "dd if=/dev/zero of=/proc/1/fd/2 bs=64k count=200 2>/dev/null && echo wrote; readlink /proc/1/fd/2 /proc/2/fd/2")
    expect(r.stdout).toMatch(/^(pipe|socket):\[\d+\]\n\/dev\/null\n$/)
    expect(fs.readdirSync(jailDir(dataDir, "b")).sort()).toEqual(["disk.img", "state.json"])
    expect(fs.statSync(diskImage(jailDir(dataDir, "b"))).blocks - before).toBeLessThan(256)
  })
})

describe("terminals", () => {
  it("a sandbox's terminal is its own: it sees and reaches no terminal of the host or of another sandbox", async () => {
    // A terminal of the host (a `cat` on a pseudo-terminal, as an operator's shell would be) and one of B.
    let hostSaw = ""
    const host = Bun.spawn(["cat"], { terminal: { cols: 80, rows: 24, data: (_t, d) => void (hostSaw += Buffer.from(d).toString()) } })
    const hostTty = fs.readlinkSync(`/proc/${host.pid}/fd/0`)
    const victim = await run(rt.exec("b", { command: ["cat"], maxOutputBytes: 10_000, pty: { cols: 80, rows: 24 } }))
    await run(rt.create({ id: "tty-a", vcpu: 1, memoryMb: 256, internet: false }))
    try {
      // From A's own terminal: write to every terminal it can find, and to the host's by its path.
      const attack = await run(rt.exec("tty-a", {
        command: ["sh", "-c", `ls -1 /dev/pts; for f in /dev/pts/* ${hostTty}; do [ "$f" = "$(tty)" ] || { printf INJECTED > "$f"; } 2>/dev/null; done; echo done`],
        maxOutputBytes: 10_000,
        pty: { cols: 80, rows: 24 }
      }))
      const r = await collect(rt, "tty-a", attack.execId)
      // Its own devpts: its own terminal and the multiplexer, nothing else.
      expect(r.stdout.replace(/\r/g, "")).toMatch(/^0\nptmx\ndone\n$/)
      await Bun.sleep(200)
      expect(hostSaw).not.toContain("INJECTED")
      const seen = (await run(rt.execEvents("b", victim.execId, 0))).flatMap((e) => (e.type === "stdout" ? [Buffer.from(e.data).toString()] : []))
      expect(seen.join("")).not.toContain("INJECTED")
    } finally {
      host.kill()
      await run(rt.kill("b", victim.execId, "SIGKILL"))
      await run(rt.destroy("tty-a"))
    }
  })
})

describe("root only", () => {
  it("the runtime refuses to start without root, with a clear message", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-nonroot-"))
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-nonroot-home-"))
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    cleanups.push(() => fs.rmSync(home, { recursive: true, force: true }))
    fs.chmodSync(dir, 0o777)
    fs.chmodSync(home, 0o777)
    // The runtime as one file the unprivileged user can read: the checkout itself may sit where only root can
    // (a clone under /root, whose parent is 0700).
    const entry = path.join(import.meta.dirname, "..", "..", "src", "runtime", "LocalRuntimeLive.ts")
    const built = await Bun.build({ entrypoints: [entry], target: "bun", outdir: home, naming: "runtime.js" })
    expect(built.success, built.logs.join("\n")).toBe(true)
    const bundle = path.join(home, "runtime.js")
    fs.chmodSync(bundle, 0o644)
    const r = Bun.spawnSync(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, "-e", `const { makeLocalRuntime } = await import(${JSON.stringify(bundle)}); makeLocalRuntime(${JSON.stringify(dir)})`], {
      cwd: home,
      stdout: "pipe",
      stderr: "pipe",
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: home }
    })
    expect(r.exitCode).not.toBe(0)
    expect(r.stderr.toString()).toContain("the local runtime needs root")
    expect(fs.readdirSync(dir)).toEqual([])
  })
})

describe("each sandbox has its own host uid", () => {
  it("128 inotify instances held in one sandbox do not make inotify_init fail in another", async () => {
    await run(rt.create({ id: "i1", vcpu: 1, memoryMb: 256, diskMb: 64, internet: false }))
    await run(rt.create({ id: "i2", vcpu: 1, memoryMb: 256, diskMb: 64, internet: false }))
    expect(stateOf(dataDir, "i1").hostUid).not.toBe(stateOf(dataDir, "i2").hostUid)
    const limit = Number(fs.readFileSync("/proc/sys/fs/inotify/max_user_instances", "utf8"))
    const hold = await run(rt.exec("i1", {
      command: ["python3", "-c", `import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < ${limit + 10}:
    fd = libc.inotify_init()
    if fd < 0: break
    fds.append(fd)
print(len(fds), ctypes.get_errno(), flush=True)
time.sleep(60)`],
      maxOutputBytes: 1000
    }))
    let held = ""
    await waitFor("the instances to be held", async () => {
      const events = await run(rt.execEvents("i1", hold.execId, 0, 1000))
      held = events.flatMap((e) => (e.type === "stdout" ? [Buffer.from(e.data).toString()] : [])).join("")
      return held.includes("\n")
    })
    // Sandbox i1 reached its uid's limit (EMFILE = 24)…
    expect(Number(held.split(" ")[0])).toBeGreaterThan(limit / 2)
    expect(held.trim().split(" ")[1]).toBe("24")
    // …and i2's own uid is not charged for it.
    const other = await sh(rt, "i2", `python3 -c "import ctypes; print(ctypes.CDLL(None).inotify_init() >= 0)"`)
    expect(other.stdout).toBe("True\n")
    await run(rt.kill("i1", hold.execId, "SIGKILL"))
  }, 60_000)

  it("without cgroups, one sandbox's processes do not count against another's process limit", async () => {
    const plain = newRuntime("hostile-nproc", { cgroups: false })
    others.push(plain)
    await run(plain.rt.create({ id: "r1", vcpu: 1, memoryMb: 256, diskMb: 64, internet: false }))
    await run(plain.rt.create({ id: "r2", vcpu: 1, memoryMb: 256, diskMb: 64, internet: false }))
    const many = await run(plain.rt.exec("r1", { command: ["sh", "-c", "n=0; while [ $n -lt 420 ]; do sleep 60 & n=$((n+1)); done; echo started $n; wait"], maxOutputBytes: 1 << 16 }))
    await waitFor("r1's processes", async () => {
      const events = await run(plain.rt.execEvents("r1", many.execId, 0, 1000))
      return events.some((e) => e.type === "stdout" && Buffer.from(e.data).toString().includes("started 420"))
    }, 30_000)
    const r = await sh(plain.rt, "r2", "n=0; while [ $n -lt 200 ]; do sleep 5 & n=$((n+1)); done 2>&1; echo forked $n; kill $(jobs -p) 2>/dev/null; true")
    expect(r.stdout).toContain("forked 200")
    expect(r.stdout).not.toMatch(/fork: |Resource temporarily unavailable|Cannot fork/)
    await run(plain.rt.kill("r1", many.execId, "SIGKILL"))
  }, 90_000)
})

describe("leftovers", () => {
  it("the sweep removes a crashed create's directory, orphaned cgroups and stale uid leases, never a live jail", async () => {
    const local = newRuntime("hostile-sweep")
    others.push(local)
    await run(local.rt.create({ id: "live", vcpu: 1, memoryMb: 128, diskMb: 64, internet: false }))
    await run(local.rt.create({ id: "crashed", vcpu: 1, memoryMb: 128, diskMb: 64, internet: false }))
    // As if the gateway died while creating it: its processes gone, no state, the directory an hour old.
    const crashed = stateOf(local.dataDir, "crashed")
    process.kill(crashed.bwrapPid, "SIGKILL")
    for (const pid of [crashed.childPid]) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {}
    }
    fs.rmSync(path.join(jailDir(local.dataDir, "crashed"), "state.json"))
    const old = new Date(Date.now() - 3_600_000)
    fs.utimesSync(jailDir(local.dataDir, "crashed"), old, old)
    expect(leasesOf(local.dataDir).map((l) => path.basename(l.lease.dir)).sort()).toEqual(["crashed", "live"])
    const swept = await run(local.rt.sweep)
    expect(swept.jails).toEqual(["crashed"])
    expect(fs.existsSync(jailDir(local.dataDir, "crashed"))).toBe(false)
    expect(leasesOf(local.dataDir).map((l) => path.basename(l.lease.dir))).toEqual(["live"])
    expect((await sh(local.rt, "live", "echo alive")).stdout).toBe("alive\n")
    // A second runtime over the same DATA_DIR sweeps nothing of the live one.
    expect((await run(makeLocalRuntime(local.dataDir).sweep)).jails).toEqual([])
  }, 60_000)
})

