/**
 * What a sandbox cannot reach: host files (directly, through symlinks it makes, through /proc), the files API
 * escaping through `..` or symlinks, other processes of the host, the network (none by default; with internet,
 * still not the host: its loopback or its other addresses; test/hostile/sandbox.test.ts has the rest), and what it runs as on the host.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { RuntimeError } from "../../src/runtime/LocalRuntime.ts"
import { hasDefaultRoute } from "../../src/runtime/JailNetwork.ts"
import { makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { tempDataDir } from "../support/server.ts"
import { agentHostPid, failure, hostPids, inJail, newRuntime, run, sh, waitFor } from "./support.ts"

const { dataDir, rt, cleanup } = newRuntime("isolation")
const kind = async (effect: Parameters<typeof failure>[0]) => ((await failure(effect)) as RuntimeError).kind
const secret = `host-secret-${crypto.randomUUID()}`
const PROJECT = path.resolve(import.meta.dirname, "../..")

beforeAll(async () => {
  fs.writeFileSync(path.join(dataDir, "secret.txt"), secret)
  await run(rt.create({ id: "iso", vcpu: 1, memoryMb: 256, internet: false }))
})
afterAll(cleanup)

describe("host files", () => {
  it("are not visible to processes: not directly, not through symlinks, not through /proc", async () => {
    const script = [
      "cat /etc/hostname",
      "hostname",
      `ls ${PROJECT} 2>&1 | head -1`,
      `cat ${dataDir}/secret.txt 2>&1`,
      "ls /root 2>&1",
      "ls /home 2>&1",
      "ln -s / /workspace/up; cat /workspace/up/etc/hostname",
      `cat /workspace/up${dataDir}/secret.txt 2>&1`,
      `cat /proc/1/root${dataDir}/secret.txt 2>&1`,
      `cat /proc/1/root${PROJECT}/package.json 2>&1`,
      `cat /proc/${process.pid}/environ 2>&1 | head -c 200`,
      "cat /etc/shadow 2>&1",
      "ls /etc/ssl/private 2>&1",
      "ls /proc | grep -cE '^[0-9]+$'"
    ].join("; echo; ")
    const r = await sh(rt, "iso", script)
    const out = r.stdout
    expect(out).not.toContain(secret)
    // The host's name never appears as a line (paths in error messages may contain it by chance: "vm").
    const hostName = fs.readFileSync("/etc/hostname", "utf8").trim()
    if (hostName !== "iso") expect(out.split("\n").map((l) => l.trim())).not.toContain(hostName)
    expect(out).not.toContain('"name": "sandbox-gateway"')
    const lines = out.split("\n").filter((l) => l !== "")
    expect(lines[0]).toBe("iso")
    expect(lines[1]).toBe("iso")
    expect(out).toContain(`ls: cannot access '${PROJECT}': No such file or directory`)
    expect(out).toContain(`cat: ${dataDir}/secret.txt: No such file or directory`)
    expect(out).toContain("ls: cannot access '/root': No such file or directory")
    expect(out).toContain(`cat: /proc/${process.pid}/environ: No such file or directory`)
    expect(out).toContain("cat: /etc/shadow: No such file or directory")
    // Only the jail's own processes: its init, the agent's shell loop, the agent, this shell, ls, grep.
    expect(Number(lines.at(-1))).toBeLessThan(10)
  })

  it("the jail's processes run as an unprivileged host uid, never root", async () => {
    const agent = agentHostPid(dataDir, "iso")
    const uids = /Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/.exec(fs.readFileSync(`/proc/${agent}/status`, "utf8"))!.slice(1).map(Number)
    expect(uids.every((uid) => uid !== 0)).toBe(true)
    for (const pid of hostPids(dataDir, "iso")) {
      const uid = Number(/Uid:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))![1])
      expect(uid, `pid ${pid}`).not.toBe(0)
    }
    // Inside: uid 1000, no capabilities, no new user namespaces.
    const r = await sh(rt, "iso", "id -u; grep CapEff /proc/self/status; unshare -U true 2>/dev/null && echo nested || echo no-nested")
    expect(r.stdout).toBe("1000\nCapEff:\t0000000000000000\nno-nested\n")
  })
})

describe("the files API", () => {
  it("resolves `..` and symlinks inside the jail", async () => {
    await sh(rt, "iso", "ln -sfn /etc /workspace/etc-link; ln -sfn / /workspace/root-link")
    const viaRoot = await run(rt.readFile("iso", "/workspace/root-link/etc/hostname", 0, 100))
    expect(Buffer.from(viaRoot.data).toString()).toBe("iso\n")
    const viaEtc = await run(rt.readFile("iso", "/workspace/etc-link/hostname", 0, 100))
    expect(Buffer.from(viaEtc.data).toString()).toBe("iso\n")
    expect(await kind(rt.readFile("iso", `/workspace/root-link${dataDir}/secret.txt`, 0, 100))).toBe("not_found")
    expect(await kind(rt.readFile("iso", `/workspace/../../..${dataDir}/secret.txt`, 0, 100))).toBe("not_found")
    expect(await kind(rt.readFile("iso", `${PROJECT}/package.json`, 0, 100))).toBe("not_found")
    expect(await kind(rt.readFile("iso", "/workspace/etc-link/shadow", 0, 100))).toBe("not_found")
    expect(await kind(rt.readFile("iso", `/proc/1/root${dataDir}/secret.txt`, 0, 100))).toBe("not_found")
    const up = await run(rt.readFile("iso", "/workspace/../../../etc/hostname", 0, 100))
    expect(Buffer.from(up.data).toString()).toBe("iso\n")
    const listed = await run(rt.listFiles("iso", "/workspace/root-link/", { recursive: false, maxEntries: 100 }))
    expect(listed.entries.map((e) => path.basename(e.path))).toContain("workspace")
    expect(listed.entries.map((e) => path.basename(e.path))).not.toContain("root")
  })

  it("cannot write outside the sandbox: read-only system, runtime-owned /etc, symlinks to host paths", async () => {
    const before = fs.readFileSync("/etc/hostname", "utf8")
    expect(await kind(rt.writeFile("iso", "/usr/evil", new Uint8Array([1]), { mode: "overwrite", createParents: false }))).toBe("invalid")
    expect(await kind(rt.writeFile("iso", "/workspace/etc-link/hostname", new Uint8Array([1]), { mode: "overwrite", createParents: false }))).toBe("invalid")
    expect(await kind(rt.writeFile("iso", "/etc/passwd", new Uint8Array([1]), { mode: "append", createParents: false }))).toBe("invalid")
    await run(rt.writeFile("iso", `/workspace/root-link${dataDir}/secret.txt`, new TextEncoder().encode("overwritten"), { mode: "overwrite", createParents: true }))
    expect(fs.readFileSync(path.join(dataDir, "secret.txt"), "utf8")).toBe(secret)
    expect(fs.existsSync("/usr/evil")).toBe(false)
    expect(fs.readFileSync("/etc/hostname", "utf8")).toBe(before)
    // What was written through the link landed in the jail's own root.
    expect(fs.readFileSync(inJail(dataDir, "iso", "root", dataDir.slice(1), "secret.txt"), "utf8")).toBe("overwritten")
  })
})

describe("network", () => {
  const hostAddress = Object.values(os.networkInterfaces()).flat().find((a) => a?.family === "IPv4" && !a.internal)?.address
  const probe = (targets: ReadonlyArray<readonly [string, number]>) => `python3 - <<'EOF'
import socket
for host, port in ${JSON.stringify(targets)}:
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((host, port)); print('CONNECTED', host)
    except Exception as e:
        print('refused', host, type(e).__name__)
EOF`
  const withHostServer = async <A>(f: (port: number) => Promise<A>) => {
    const server = Bun.serve({ port: 0, hostname: "0.0.0.0", fetch: () => new Response("host secret") })
    try {
      return await f(server.port!)
    } finally {
      server.stop(true)
    }
  }

  it("without internet: only the sandbox's own loopback; no TCP out, not the host's services", async () => {
    await withHostServer(async (port) => {
      const targets: Array<[string, number]> = [["127.0.0.1", port], ["10.0.2.2", port], ["1.1.1.1", 80]]
      if (hostAddress !== undefined) targets.push([hostAddress, port])
      const r = await sh(rt, "iso", probe(targets), { timeoutMs: 30_000 })
      expect(r.stdout).not.toContain("CONNECTED")
      expect(r.stdout.match(/refused/g)?.length).toBe(targets.length)
    })
    // Its own loopback is up: a server inside answers a client inside.
    const server = await run(rt.exec("iso", { command: ["python3", "-m", "http.server", "8123", "--bind", "127.0.0.1"], maxOutputBytes: 1 << 16 }))
    let body = ""
    await waitFor("the server inside", async () => {
      body = (await sh(rt, "iso", "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8123/').status)\" 2>/dev/null")).stdout
      return body === "200\n"
    })
    await run(rt.kill("iso", server.execId))
    expect((await sh(rt, "iso", "cat /proc/net/dev | grep -cE '^ *(eth|tap|wlan)'")).stdout).toBe("0\n")
  }, 60_000)

  it("with internet: slirp4netns gives it a route out, and the host stays unreachable (loopback and its other addresses)", async () => {
    await run(rt.create({ id: "net", vcpu: 1, memoryMb: 256, internet: true }))
    try {
      // Ready means routed out: the default route is there as soon as create returns (not only the subnet's).
      expect(hasDefaultRoute((await sh(rt, "net", "cat /proc/net/route")).stdout, "tap0")).toBe(true)
      expect((await sh(rt, "net", "cat /etc/resolv.conf")).stdout).toBe("nameserver 10.0.2.3\n")
      await withHostServer(async (port) => {
        const targets: Array<[string, number]> = [["127.0.0.1", port], ["10.0.2.2", port]]
        // A non-loopback address of the host is still the host (the egress filter; test/hostile/sandbox.test.ts has more).
        if (hostAddress !== undefined) targets.push([hostAddress, port])
        const r = await sh(rt, "net", probe(targets), { timeoutMs: 30_000 })
        expect(r.stdout).not.toContain("CONNECTED")
        expect(r.stdout.match(/refused/g)?.length).toBe(targets.length)
      })
      // slirp4netns is part of the sandbox: in its cgroups, gone with it.
      const slirp = JSON.parse(fs.readFileSync(path.join(dataDir, "sandboxes", "net", "state.json"), "utf8")).slirpPid as number
      expect(hostPids(dataDir, "net")).toContain(slirp)
      await run(rt.destroy("net"))
      await waitFor("slirp4netns to exit", () => !fs.existsSync(`/proc/${slirp}`) || fs.readFileSync(`/proc/${slirp}/stat`, "utf8").includes(") Z"))
    } finally {
      await Effect.runPromise(rt.destroy("net"))
    }
  }, 60_000)

  it("a slirp4netns that ends while it starts is started once more, instead of failing the create", async () => {
    // A stand-in ahead of slirp4netns on PATH ends at its first run (as slirp4netns once did under heavy load) and
    // runs the real one after, in a runtime of its own process (slirp-again.ts). It runs as the sandbox's uid: its
    // directory is open to it.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "slirp-once-"))
    fs.chmodSync(dir, 0o777)
    const real = Bun.which("slirp4netns")!
    fs.writeFileSync(path.join(dir, "slirp4netns"), `#!/bin/sh\nif mkdir '${dir}/tried' 2>/dev/null; then echo 'stand-in: ended at its first run' >&2; exit 1; fi\nexec '${real}' "$@"\n`, { mode: 0o755 })
    const again = tempDataDir("slirp-again")
    try {
      const child = Bun.spawn(["bun", path.join(import.meta.dirname, "slirp-again.ts"), again], { env: { ...process.env, PATH: `${dir}:${process.env["PATH"]}` }, stdout: "pipe", stderr: "pipe" })
      const [out, err] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
      expect(fs.existsSync(path.join(dir, "tried"))).toBe(true)
      expect(JSON.parse(out.trim().split("\n").at(-1)!)).toEqual({ created: true, routed: true })
      // The operator's log says it happened, with what slirp4netns said.
      expect(err).toContain("slirp4netns of net-again ended while it started; starting it again")
      expect(err).toContain("stand-in: ended at its first run")
    } finally {
      await run(makeLocalRuntime(again).reap(new Set()))
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})

describe("a direct jail (the benchmark's baseline)", () => {
  it("is the same jail as a sandbox's: same user, hostname, root and no host files; removal leaves nothing", async () => {
    const jail = rt.directJail("direct", { vcpu: 1, memoryMb: 256, diskMb: 1024, internet: false, env: {}, labels: {} })
    const sandboxView = (await sh(rt, "iso", "id -u; id -g; ls /; cat /etc/hostname")).stdout.replace("iso", "<id>")
    const directView = (await jail.run(["sh", "-c", "id -u; id -g; ls /; cat /etc/hostname"])).replace("direct", "<id>")
    expect(directView).toBe(sandboxView)
    expect(await jail.run(["sh", "-c", `cat ${dataDir}/secret.txt 2>&1 || true`])).not.toContain(secret)
    await jail.remove()
    expect(fs.existsSync(path.join(dataDir, "sandboxes", "direct"))).toBe(false)
  })
})

describe("readiness of a sandbox's network", () => {
  it("is the default route through tap0, not the subnet's route that slirp4netns adds first", () => {
    const head = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    const subnet = "tap0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
    const gateway = "tap0\t00000000\t0202000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
    expect(hasDefaultRoute(head + subnet, "tap0")).toBe(false)
    expect(hasDefaultRoute(head + subnet + gateway, "tap0")).toBe(true)
    expect(hasDefaultRoute(head + gateway.replace("tap0", "eth0"), "tap0")).toBe(false)
  })
})
