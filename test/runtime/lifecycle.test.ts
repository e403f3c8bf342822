/**
 * Sandbox lifecycle in real jails: create (idempotent, validated), pause/resume, the port bridge, re-attach from
 * a second runtime, destroy leaving nothing behind, reap, warm jails and shutdown, and the rlimit fallback.
 */
import { Option } from "effect"
import * as fs from "node:fs"
import type { Socket } from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cgroupScope } from "../../src/runtime/Cgroups.ts"
import { alive } from "../../src/runtime/Jail.ts"
import type { RuntimeError } from "../../src/runtime/LocalRuntime.ts"
import { makeLocalRuntime, POOL_DISK_MB } from "../../src/runtime/LocalRuntimeLive.ts"
import { cgroupDir, collect, CONTROLLERS, failure, hostPids, inJail, leasesOf, loopsOf, newRuntime, run, sh, stateOf, waitFor } from "./support.ts"

const main = newRuntime("lifecycle")
const { dataDir, rt } = main
const kind = async (effect: Parameters<typeof failure>[0]) => ((await failure(effect)) as RuntimeError).kind
const others: Array<{ cleanup: () => Promise<void> }> = []

/** Nothing of the sandbox is left: no process, cgroup, mount, loop device, uid lease or file. */
const expectGone = async (dir: string, id: string, pids: ReadonlyArray<number>) => {
  expect(fs.existsSync(path.join(dir, "sandboxes", id)), "sandbox dir").toBe(false)
  for (const controller of CONTROLLERS) expect(fs.existsSync(cgroupDir(controller, dir, id)), `${controller} cgroup`).toBe(false)
  for (const pid of pids) {
    const stat = fs.existsSync(`/proc/${pid}/stat`) ? fs.readFileSync(`/proc/${pid}/stat`, "utf8") : ""
    expect(stat === "" || /\) [ZX] /.test(stat), `process ${pid} left: ${stat}`).toBe(true)
  }
  const mounts = Bun.spawnSync(["findmnt", "-rn", "-o", "TARGET,SOURCE"]).stdout.toString()
  expect(mounts).not.toContain(path.join(dir, "sandboxes", id))
  expect(fs.readFileSync("/proc/self/mountinfo", "utf8")).not.toContain(path.join(dir, "sandboxes", id))
  expect(leasesOf(dir).map((l) => path.basename(l.lease.dir))).not.toContain(id)
  // The disk was mounted in the jail's launcher namespace only; its loop device goes with the last process.
  await waitFor("the loop device to detach", () => loopsOf(dir, id).length === 0)
}

beforeAll(async () => {
  await run(rt.create({ id: "a", vcpu: 0.5, memoryMb: 256, diskMb: 2048, internet: false, labels: { provider: "test" } }))
  await run(rt.create({ id: "b", vcpu: 1, memoryMb: 128, internet: false }))
})
afterAll(async () => {
  for (const other of others) await other.cleanup()
  await main.cleanup()
})

describe("create", () => {
  it("reports what was applied, is idempotent on the id, and validates the spec", async () => {
    const a = Option.getOrThrow(await run(rt.get("a")))
    expect(a).toMatchObject({ id: "a", state: "running", labels: { provider: "test" }, applied: { vcpu: 0.5, memoryMb: 256, diskMb: 2048, mechanism: "cgroup" } })
    expect(fs.readFileSync(path.join(cgroupDir("cpu", dataDir, "a"), "cpu.cfs_quota_us"), "utf8").trim()).toBe("50000")
    expect(fs.readFileSync(path.join(cgroupDir("memory", dataDir, "a"), "work", "memory.limit_in_bytes"), "utf8").trim()).toBe(String(256 * 1024 * 1024))
    const again = await run(rt.create({ id: "a", vcpu: 2, memoryMb: 512, internet: true }))
    expect(again.createdAt).toBe(a.createdAt)
    expect(again.applied.vcpu).toBe(0.5)
    expect((await run(rt.list)).map((s) => s.id).sort()).toEqual(["a", "b"])
    expect(Option.isNone(await run(rt.get("missing")))).toBe(true)
    expect(Option.isNone(await run(rt.get("../etc")))).toBe(true)
    // Two concurrent creates of one id make one jail.
    const [x, y] = await Promise.all([run(rt.create({ id: "twin", vcpu: 1, memoryMb: 64, internet: false })), run(rt.create({ id: "twin", vcpu: 1, memoryMb: 64, internet: false }))])
    expect(x.createdAt).toBe(y.createdAt)
    await run(rt.destroy("twin"))
    expect(await kind(rt.create({ id: "bad/id", vcpu: 1, memoryMb: 64, internet: false }))).toBe("invalid")
    expect(await kind(rt.create({ id: "pool-x", vcpu: 1, memoryMb: 64, internet: false }))).toBe("invalid")
    expect(await kind(rt.create({ id: "c", vcpu: 0, memoryMb: 64, internet: false }))).toBe("invalid")
    expect(await kind(rt.create({ id: "c", vcpu: 1, memoryMb: 1, internet: false }))).toBe("invalid")
    expect(await kind(rt.create({ id: "c", vcpu: 1, memoryMb: 64, diskMb: -1, internet: false }))).toBe("invalid")
    expect(fs.existsSync(path.join(dataDir, "sandboxes", "c"))).toBe(false)
  })

  it("states what this host can give one sandbox, and refuses more instead of giving less", async () => {
    const limits = rt.limits!()
    expect(limits.vcpu).toBeGreaterThanOrEqual(1)
    expect(limits.memoryMb).toBeGreaterThan(128)
    expect(limits.diskMb).toBeGreaterThan(0)
    expect(rt.defaultInternet).toBe(true)
    const above = [
      { vcpu: limits.vcpu + 1, memoryMb: 64, message: `this host can give a sandbox at most ${limits.vcpu} vCPUs (${limits.vcpu + 1} asked)` },
      { vcpu: 1, memoryMb: limits.memoryMb + 1, message: `this host can give a sandbox at most ${limits.memoryMb} MB of memory (${limits.memoryMb + 1} asked)` }
    ]
    for (const spec of above) {
      const refused = (await failure(rt.create({ id: "big", vcpu: spec.vcpu, memoryMb: spec.memoryMb, internet: false }))) as RuntimeError
      expect(refused).toMatchObject({ kind: "invalid", message: spec.message })
    }
    const disk = (await failure(rt.create({ id: "big", vcpu: 1, memoryMb: 64, diskMb: Math.min(limits.diskMb + 1, 1024 * 1024), internet: false }))) as RuntimeError
    expect(disk.kind).toBe("invalid")
    expect(fs.existsSync(path.join(dataDir, "sandboxes", "big"))).toBe(false)
  })
})

describe("pause and resume", () => {
  it("freezes every process (a counter stops), refuses work while paused, and thaws", async () => {
    const exec = await run(rt.exec("a", { command: ["sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > /workspace/counter; sleep 0.02; done"], maxOutputBytes: 100 }))
    const counter = inJail(dataDir, "a", "root", "workspace", "counter")
    const read = () => Number(fs.readFileSync(counter, "utf8").trim() || 0)
    await waitFor("the counter", () => fs.existsSync(counter) && read() > 2)
    await run(rt.pause("a"))
    await run(rt.pause("a")) // idempotent
    expect(Option.getOrThrow(await run(rt.get("a"))).state).toBe("paused")
    expect(fs.readFileSync(path.join(cgroupDir("freezer", dataDir, "a"), "freezer.state"), "utf8").trim()).toBe("FROZEN")
    const frozen = read()
    await Bun.sleep(300)
    expect(read()).toBe(frozen)
    expect(await kind(rt.exec("a", { command: ["true"], maxOutputBytes: 1 }))).toBe("conflict")
    expect(await kind(rt.readFile("a", "/workspace/counter", 0, 10))).toBe("conflict")
    await run(rt.resume("a"))
    await run(rt.resume("a"))
    expect(Option.getOrThrow(await run(rt.get("a"))).state).toBe("running")
    await waitFor("the counter to move again", () => read() > frozen + 2)
    await run(rt.kill("a", exec.execId))
    expect(await kind(rt.pause("missing"))).toBe("not_found")
  })
})

describe("port bridge", () => {
  it("reaches each sandbox's own server on the same port", async () => {
    for (const id of ["a", "b"]) {
      await run(rt.writeFile(id, "/workspace/www/index.html", new TextEncoder().encode(`I am ${id}`), { mode: "overwrite", createParents: true }))
      await run(rt.exec(id, { command: ["python3", "-m", "http.server", "8000", "--directory", "/workspace/www"], maxOutputBytes: 1 << 16 }))
    }
    const get = async (id: string) => {
      for (let i = 0; i < 200; i++) {
        const socket = await Promise.resolve(run(rt.connectPort(id, 8000))).catch(() => undefined)
        if (socket !== undefined) {
          return await new Promise<string>((resolve) => {
            let body = ""
            socket.on("data", (c) => (body += c.toString()))
            socket.on("close", () => resolve(body))
            socket.write("GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n")
            socket.resume() // handed over paused, so nothing is lost before a reader is attached
          })
        }
        await Bun.sleep(25)
      }
      throw new Error("port 8000 never opened")
    }
    expect(await get("a")).toContain("I am a")
    expect(await get("b")).toContain("I am b")
    // Many MiB both ways through an echo server: nothing lost, reordered or stuck (backpressure both ways).
    const echo = "import socket\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', 9000)); s.listen()\nwhile True:\n    c, _ = s.accept()\n    while (d := c.recv(65536)):\n        c.sendall(d)\n    c.close()\n"
    await run(rt.exec("a", { command: ["python3", "-c", echo], maxOutputBytes: 1 << 16 }))
    const payload = new Uint8Array(24 * 1024 * 1024).map((_, i) => (i * 7 + (i >> 11)) % 256)
    let socket: Socket | undefined
    await waitFor("the echo server", async () => (socket = await Promise.resolve(run(rt.connectPort("a", 9000))).catch(() => undefined)) !== undefined)
    const echoed = await new Promise<Buffer>((resolve, reject) => {
      const chunks: Array<Buffer> = []
      let received = 0
      socket!.on("data", (c: Buffer) => {
        chunks.push(c)
        received += c.length
        if (received >= payload.length) {
          socket!.end()
          resolve(Buffer.concat(chunks))
        }
      })
      socket!.on("error", reject)
      socket!.resume()
      socket!.write(payload)
    })
    expect(echoed.length).toBe(payload.length)
    expect(echoed.equals(Buffer.from(payload))).toBe(true)
    expect(await kind(rt.connectPort("a", 9))).toBe("unavailable")
    expect(await kind(rt.connectPort("a", 0))).toBe("invalid")
    expect(await kind(rt.connectPort("a", 70000))).toBe("invalid")
    expect(await kind(rt.connectPort("missing", 8000))).toBe("not_found")
  })
})

describe("re-attach", () => {
  it("a second runtime over the same DATA_DIR sees the sandboxes, finished and running executions", async () => {
    const finished = await sh(rt, "a", "echo before")
    const running = await run(rt.exec("a", { command: ["sh", "-c", "sleep 0.5; echo later"], maxOutputBytes: 100 }))
    const other = makeLocalRuntime(dataDir)
    expect(Option.getOrThrow(await run(other.get("a"))).state).toBe("running")
    expect((await run(other.list)).map((s) => s.id).sort()).toEqual(["a", "b"])
    expect((await collect(other, "a", finished.execId)).stdout).toBe("before\n")
    const later = await collect(other, "a", running.execId)
    expect(later.stdout).toBe("later\n")
    expect(later.exit.exitCode).toBe(0)
    await run(other.shutdown)
  })
})

describe("destroy and reap", () => {
  it("destroy leaves no process, cgroup, mount or file behind, and is idempotent", async () => {
    await run(rt.create({ id: "gone", vcpu: 1, memoryMb: 128, internet: true }))
    await sh(rt, "gone", "sleep 100 > /dev/null 2>&1 & echo started")
    const pids = hostPids(dataDir, "gone")
    expect(pids.length).toBeGreaterThan(3)
    await run(rt.destroy("gone"))
    await run(rt.destroy("gone"))
    await expectGone(dataDir, "gone", pids)
    expect(Option.isNone(await run(rt.get("gone")))).toBe(true)
    expect(await kind(rt.exec("gone", { command: ["true"], maxOutputBytes: 1 }))).toBe("not_found")
  })

  it("reap removes jails the caller does not know, also one whose directory was lost", async () => {
    await run(rt.create({ id: "orphan", vcpu: 1, memoryMb: 128, internet: false }))
    await run(rt.create({ id: "lost", vcpu: 1, memoryMb: 128, internet: false }))
    const orphanPids = hostPids(dataDir, "orphan")
    const lostPids = hostPids(dataDir, "lost")
    fs.rmSync(path.join(dataDir, "sandboxes", "lost"), { recursive: true, force: true })
    const reaped = await run(rt.reap(new Set(["a", "b"])))
    expect([...reaped].sort()).toEqual(["lost", "orphan"])
    await expectGone(dataDir, "orphan", orphanPids)
    await expectGone(dataDir, "lost", lostPids)
    expect((await run(rt.list)).map((s) => s.id).sort()).toEqual(["a", "b"])
  })
})

describe("warm jails", () => {
  /** The warm jails of a runtime's DATA_DIR, started or starting. */
  const pooledIn = (dataDir: string) => fs.readdirSync(path.join(dataDir, "sandboxes")).filter((id) => id.startsWith("pool-"))
  /** A warm jail whose agent answers (its socket adopted). */
  const warmReady = (dataDir: string, id: string) => {
    try {
      return fs.existsSync(inJail(dataDir, id, "ctl", "agent.sock"))
    } catch {
      return false
    }
  }

  it("a create takes a warm jail, renamed with the requested limits, hostname and network; shutdown removes only the idle ones", async () => {
    const warm = newRuntime("warm", { warmPool: 2 })
    others.push(warm)
    const pooled = () => pooledIn(warm.dataDir)
    const ready = (id: string) => warmReady(warm.dataDir, id)
    await waitFor("two warm jails", () => pooled().filter(ready).length === 2, 20_000)
    await Bun.sleep(100)
    const before = pooled()
    // Taken from the pool (one warm jail's directory is gone); how fast that is belongs to `bun run bench`.
    const sandbox = await run(warm.rt.create({ id: "w1", vcpu: 1.5, memoryMb: 300, diskMb: POOL_DISK_MB, internet: true, env: { FROM: "pool" } }))
    expect(sandbox).toMatchObject({ id: "w1", state: "running", applied: { vcpu: 1.5, memoryMb: 300, mechanism: "cgroup" } })
    expect(before.some((id) => !fs.existsSync(path.join(warm.dataDir, "sandboxes", id)))).toBe(true)
    expect(fs.readFileSync(path.join(cgroupDir("cpu", warm.dataDir, "w1"), "cpu.cfs_quota_us"), "utf8").trim()).toBe("150000")
    expect(fs.readFileSync(path.join(cgroupDir("memory", warm.dataDir, "w1"), "work", "memory.limit_in_bytes"), "utf8").trim()).toBe(String(300 * 1024 * 1024))
    const r = await sh(warm.rt, "w1", "hostname; cat /etc/hostname; echo $FROM; grep -q tap0 /proc/net/route && echo tap0")
    expect(r.stdout).toBe("w1\nw1\npool\ntap0\n")
    expect(Option.isNone(await run(warm.rt.get(before[0]!)))).toBe(true)
    expect((await run(warm.rt.list)).map((s) => s.id)).toEqual(["w1"])
    // A second runtime does not reap the first one's warm jails it was told nothing about… it does: they are
    // only this runtime's. Reaping from the owner keeps them.
    expect(await run(warm.rt.reap(new Set(["w1"])))).toEqual([])
    await waitFor("the pool refilled", () => pooled().length === 2, 20_000)
    const idle = pooled()
    const diskOf = (id: string) => stateOf(warm.dataDir, id).spec.diskMb
    const fromPool = (id: string) => fs.readFileSync(`/proc/${stateOf(warm.dataDir, id).bwrapPid}/cmdline`, "utf8").includes("claimed")
    // A disk of another size cannot come from a warm jail of the pool's size (a mounted ext4 does not grow here):
    // a jail of its size is started for the create, and the pool follows that size. This pool cannot grow (its
    // ceiling is its size), so one idle jail of the other size makes room.
    const other = await run(warm.rt.create({ id: "w3", vcpu: 1, memoryMb: 64, diskMb: 2048, internet: false }))
    expect(other.applied.diskMb).toBe(2048)
    expect(fromPool("w3")).toBe(true)
    expect(idle.filter((id) => pooled().includes(id))).toHaveLength(1)
    expect((await sh(warm.rt, "w3", "df -m / | tail -1 | awk '{print $2}'")).stdout.trim()).toMatch(/^(19|20)\d\d$/)
    await waitFor("warm jails of the new size", () => pooled().filter((id) => ready(id) && diskOf(id) === 2048).length >= 1, 20_000)
    // The next create of that size takes one that was ready: no jail is started for it.
    const readyBefore = pooled().filter((id) => ready(id) && diskOf(id) === 2048)
    await run(warm.rt.create({ id: "w4", vcpu: 1, memoryMb: 64, diskMb: 2048, internet: false }))
    expect(readyBefore.some((id) => !fs.existsSync(path.join(warm.dataDir, "sandboxes", id)))).toBe(true)
    expect(diskOf("w4")).toBe(2048)
    await run(warm.rt.destroy("w3"))
    await run(warm.rt.destroy("w4"))
    await run(warm.rt.shutdown)
    await run(warm.rt.shutdown)
    expect(pooled()).toEqual([])
    for (const id of idle) expect(fs.existsSync(path.join("/sys/fs/cgroup/pids/sandbox-gateway", cgroupScope(warm.dataDir), id))).toBe(false)
    // The sandbox outlives the runtime that made it.
    expect(Option.getOrThrow(await run(makeLocalRuntime(warm.dataDir).get("w1"))).state).toBe("running")
    expect(await kind(warm.rt.create({ id: "w2", vcpu: 1, memoryMb: 64, internet: false }))).toBe("unavailable")
  }, 60_000)

  it("a warm jail a previous runtime left is gone once the next one's shutdown returns, even a shutdown at once", async () => {
    const first = newRuntime("left", { warmPool: 1 })
    others.push(first)
    await waitFor("a warm jail", () => pooledIn(first.dataDir).filter((id) => warmReady(first.dataDir, id)).length === 1, 20_000)
    const [left] = pooledIn(first.dataDir)
    const launcher = stateOf(first.dataDir, left!).bwrapPid
    // The next runtime finds it and destroys it off its start; stopping before that destroy ends waits for it.
    const next = makeLocalRuntime(first.dataDir, { warmPool: 0 })
    await run(next.shutdown)
    expect(pooledIn(first.dataDir)).toEqual([])
    expect(alive(launcher)).toBe(false)
  }, 60_000)

  it("a warm jail's network starts ahead: a create with internet keeps it, one without gets none, and it ends with its jail", async () => {
    const ahead = newRuntime("net-ahead", { warmPool: 1 })
    others.push(ahead)
    /** The pool's one warm jail once its agent answers and (when `networked`) its network is up. */
    const warmOne = (networked: boolean) =>
      waitFor(`a warm jail${networked ? " with its network" : ""}`, () => {
        const id = pooledIn(ahead.dataDir).find((p) => warmReady(ahead.dataDir, p))
        const state = id === undefined ? undefined : stateOf(ahead.dataDir, id)
        return state !== undefined && (!networked || (alive(state.slirpPid ?? 0, state.slirpStart) && routes(state.childPid).includes("tap0")))
      }, 20_000).then(() => stateOf(ahead.dataDir, pooledIn(ahead.dataDir).find((p) => warmReady(ahead.dataDir, p))!))
    const routes = (pid: number) => fs.readFileSync(`/proc/${pid}/net/route`, "utf8")
    const spec = (id: string, internet: boolean) => ({ id, vcpu: 1, memoryMb: 128, diskMb: POOL_DISK_MB, internet })

    // The runtime's default is internet: its first warm jail has its network before any create asks.
    const first = await warmOne(true)
    // Taken by a create with internet: the same slirp4netns, nothing started on the create's path.
    await run(ahead.rt.create(spec("n1", true)))
    expect(stateOf(ahead.dataDir, "n1").slirpPid).toBe(first.slirpPid)
    expect((await sh(ahead.rt, "n1", "grep -c tap0 /proc/net/route")).stdout.trim()).not.toBe("0")

    // Taken by a create without internet: its network is gone before the create returns.
    const second = await warmOne(true)
    await run(ahead.rt.create(spec("n2", false)))
    expect(alive(second.slirpPid ?? 0, second.slirpStart)).toBe(false)
    expect(stateOf(ahead.dataDir, "n2").slirpPid).toBeNull()
    const inside = await sh(ahead.rt, "n2", "cat /proc/net/dev; python3 -c 'import socket; socket.create_connection((\"10.0.2.2\", 9), timeout=5)' 2>&1 | tail -1")
    expect(inside.stdout).not.toContain("tap0")
    expect(inside.stdout).toContain("Network is unreachable")

    // The pool follows the latest create: no network ahead now, and a create with internet starts its own.
    const third = await warmOne(false)
    expect(third.slirpPid).toBeNull()
    await run(ahead.rt.create(spec("n3", true)))
    expect(alive(stateOf(ahead.dataDir, "n3").slirpPid ?? 0)).toBe(true)
    expect((await sh(ahead.rt, "n3", "grep -c tap0 /proc/net/route")).stdout.trim()).not.toBe("0")

    // A jail's network ends with the jail, even when nobody kills it: its pid 1 gone, slirp4netns follows (its lifeline).
    const fourth = await warmOne(true)
    // The jail's pid 1 (bwrap's child-pid) holds the lifeline.
    process.kill(fourth.childPid, "SIGKILL")
    await waitFor("slirp4netns to end with its jail", () => !alive(fourth.slirpPid ?? 0, fourth.slirpStart), 10_000)
    for (const id of ["n1", "n2", "n3"]) await run(ahead.rt.destroy(id))
  }, 90_000)

  it("the pool grows with creates that find it empty, up to its ceiling, and shrinks back when they stop", async () => {
    // Shrinking after 6 s without a miss: a loaded machine (CI) may take seconds to start the refill, which a shorter
    // period would shrink away before the pool reached its grown size.
    const grows = newRuntime("pool-grows", { warmPool: 1, warmPoolMax: 3, warmPoolShrinkMs: 6000 })
    others.push(grows)
    const pooled = () => pooledIn(grows.dataDir)
    const ready = (id: string) => warmReady(grows.dataDir, id)
    await waitFor("one warm jail", () => pooled().filter(ready).length === 1, 20_000)
    const spec = (id: string) => ({ id, vcpu: 1, memoryMb: 64, diskMb: POOL_DISK_MB, internet: false })
    // Three at once against a pool of one: two find it empty (the pool grows by two, to its ceiling of three).
    // Each waits for a jail already on its way rather than starting one beside it, so none starts cold.
    const made = await Promise.all(["g1", "g2", "g3"].map((id) => run(grows.rt.create(spec(id)))))
    expect(made.map((s) => s.state)).toEqual(["running", "running", "running"])
    // A jail started for the pool runs its agent on a leash (the launcher's command says `claimed`); a cold one not.
    const fromPool = (id: string) => fs.readFileSync(`/proc/${stateOf(grows.dataDir, id).bwrapPid}/cmdline`, "utf8").includes("claimed")
    expect(["g1", "g2", "g3"].map(fromPool)).toEqual([true, true, true])
    await waitFor("the pool at its grown size", () => pooled().length === 3, 30_000)
    // Another create that finds it non-empty does not grow it beyond its ceiling.
    await run(grows.rt.create(spec("g4")))
    await waitFor("the pool refilled", () => pooled().length === 3, 30_000)
    await Bun.sleep(1000)
    expect(pooled().length).toBe(3)
    // Without misses it shrinks by one per shrink period, down to its floor (RUNTIME_WARM_POOL), never below.
    await waitFor("the pool back at its floor", () => pooled().length === 1, 30_000)
    await Bun.sleep(3000)
    expect(pooled().length).toBe(1)
    for (const id of ["g1", "g2", "g3", "g4"]) await run(grows.rt.destroy(id))
  }, 120_000)
})

describe("without cgroups", () => {
  it("falls back to rlimits and SIGSTOP, and says so", async () => {
    const plain = newRuntime("rlimit", { cgroups: false })
    others.push(plain)
    const sandbox = await run(plain.rt.create({ id: "r", vcpu: 1, memoryMb: 256, internet: false }))
    expect(sandbox.applied.mechanism).toBe("rlimit")
    expect(fs.existsSync(cgroupDir("pids", plain.dataDir, "r"))).toBe(false)
    const limits = await run(plain.rt.exec("r", { command: ["python3", "-c", "import resource as r; print(r.getrlimit(r.RLIMIT_NPROC)[0], r.getrlimit(r.RLIMIT_AS)[0])"], maxOutputBytes: 100 }))
    expect((await collect(plain.rt, "r", limits.execId)).stdout).toBe(`512 ${256 * 1024 * 1024}\n`)
    const exec = await run(plain.rt.exec("r", { command: ["sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > /workspace/counter; sleep 0.02; done"], maxOutputBytes: 100 }))
    const counter = inJail(plain.dataDir, "r", "root", "workspace", "counter")
    const read = () => Number(fs.readFileSync(counter, "utf8").trim() || 0)
    await waitFor("the counter", () => fs.existsSync(counter) && read() > 2)
    await run(plain.rt.pause("r"))
    expect(Option.getOrThrow(await run(plain.rt.get("r"))).state).toBe("paused")
    const frozen = read()
    await Bun.sleep(300)
    expect(read()).toBe(frozen)
    await run(plain.rt.resume("r"))
    await waitFor("the counter to move again", () => read() > frozen + 2)
    await run(plain.rt.kill("r", exec.execId))
    const pids = hostPids(plain.dataDir, "r")
    await run(plain.rt.destroy("r"))
    await expectGone(plain.dataDir, "r", pids)
    expect(stateOf.length).toBe(2)
  }, 60_000)
})
