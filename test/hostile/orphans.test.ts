/**
 * Clean-up without a restart (issue 7, item 7): SIGKILL the gateway while 10 creates are in flight, start it
 * again, delete every sandbox, and within 60 s, with no further restart, nothing of any jail is left: no jail
 * directory, cgroup, mount, loop device, uid lease or process. Warm jails are off, so every jail is a sandbox's.
 * A create interrupted by the crash and retried makes a second jail for the same sandbox: only the jail that is
 * the sandbox's recorded provider resource may stay, and only while the sandbox lives. Warm jails whose gateway was
 * killed and whose DATA_DIR was removed exit by themselves, and what they leave goes at any gateway's next sweep.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { cgroupScope } from "../../src/runtime/Cgroups.ts"
import { alive, readState } from "../../src/runtime/Jail.ts"
import { pidsOfUid } from "../../src/runtime/Proc.ts"
import { isLeased, leasesUnder, sweepLeases } from "../../src/runtime/UidLeases.ts"
import { loopsOf } from "../runtime/support.ts"
import { idempotencyKey, minimalSandbox, poll } from "../support/sandbox.ts"
import { api, bootstrap, type RunningServer, startServer, tempDataDir } from "../support/server.ts"

let server: RunningServer | undefined
const env = { RUNTIME_WARM_POOL: "0" }

afterAll(async () => {
  await server?.stop()
})

/** Everything of a jail the host can still see for this DATA_DIR. */
const leftovers = (dataDir: string) => {
  const jails = fs.existsSync(path.join(dataDir, "sandboxes")) ? fs.readdirSync(path.join(dataDir, "sandboxes")) : []
  const cgroups = ["pids", "memory", "cpu", "freezer"].flatMap((c) => {
    try {
      return fs.readdirSync(path.join("/sys/fs/cgroup", c, "sandbox-gateway", cgroupScope(dataDir)), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => `${c}/${e.name}`)
    } catch {
      return []
    }
  })
  const leases = leasesUnder(path.join(dataDir, "sandboxes"))
  const mounts = fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n").filter((l) => l.includes(dataDir))
  const processes = leases.flatMap((l) => pidsOfUid(l.uid))
  return { jails, cgroups, leases: leases.map((l) => l.uid), loops: loopsOf(dataDir), mounts, processes }
}

describe("orphaned jails", () => {
  it("after a SIGKILL during creates and a restart, deleting every sandbox leaves nothing behind within 60 s", async () => {
    const dataDir = tempDataDir("orphans")
    server = await startServer({ dataDir, env })
    let http = api(server.url)
    const boot = await bootstrap(dataDir, "orphans@example.com")
    const auth = { token: boot.api_key, project: boot.project_id }

    const creates = await Promise.all(
      Array.from({ length: 10 }, () => http.post("/v1/sandboxes", { ...auth, body: minimalSandbox(), headers: { "idempotency-key": idempotencyKey("orphan") } }))
    )
    for (const c of creates) expect(c.status).toBe(202)
    await Bun.sleep(150)
    await server.stop({ kill: true })

    server = await startServer({ dataDir, env })
    http = api(server.url)
    const operations = creates.map((c) => c.body.operation.id as string)
    await poll(
      async () => Promise.all(operations.map(async (id) => (await http.get(`/v1/operations/${id}`, auth)).body)),
      (ops) => ops.every((op) => ["succeeded", "failed", "cancelled"].includes(op.state)),
      60_000,
      250
    )
    const before = leftovers(dataDir)
    console.log(`after the restart: ${before.jails.length} jails for ${creates.length} sandboxes`)

    const sandboxes = (await http.get("/v1/sandboxes?limit=100", auth)).body.sandboxes as Array<{ id: string; state: string }>
    expect(sandboxes.length).toBe(10)
    for (const s of sandboxes) if (s.state !== "stopped" && s.state !== "failed") expect((await http.delete(`/v1/sandboxes/${s.id}`, auth)).status).toBeLessThan(300)
    const deleted = Date.now()
    await poll(
      async () => (await http.get("/v1/sandboxes?limit=100", auth)).body.sandboxes as Array<{ state: string }>,
      (list) => list.every((s) => s.state === "stopped" || s.state === "failed"),
      60_000,
      250
    )
    // No restart from here: the periodic reaper (and the one after recovered jobs) must do it.
    const empty = { jails: [], cgroups: [], leases: [], loops: [], mounts: [], processes: [] }
    const left = await poll(async () => {
      const l = leftovers(dataDir)
      if (process.env["DEBUG_ORPHANS"]) console.log(Math.round((Date.now() - deleted) / 1000), JSON.stringify(l))
      return l
    }, (l) => JSON.stringify(l) === JSON.stringify(empty), Math.max(1000, 60_000 - (Date.now() - deleted)), 500)
    console.log(`clean ${Math.round((Date.now() - deleted) / 1000)} s after the deletes`)
    expect(left).toEqual(empty)
    // The restarted gateway is this test's: the next one starts its own (afterAll stops only the last).
    await server.stop()
    server = undefined
  }, 240_000)

  it("warm jails die with their gateway, their network and a pool grown by a tenant's creates too: kill -9 and a removed DATA_DIR leave no warm jail running", async () => {
    const dataDir = tempDataDir("orphans-warm")
    server = await startServer({ dataDir, env: { RUNTIME_WARM_POOL: "1", RUNTIME_WARM_POOL_MAX: "2" } })
    const sandboxes = path.join(dataDir, "sandboxes")
    // A tenant's creates grow the pool: two at once against a pool of one, so one finds it empty (then both go).
    const http = api(server.url)
    const owner = await bootstrap(server.dataDir, "orphans-warm@example.com")
    const auth = { token: owner.api_key, project: owner.project_id }
    await poll(async () => (fs.existsSync(sandboxes) ? fs.readdirSync(sandboxes) : []).filter((id) => id.startsWith("pool-")).length, (n) => n === 1, 60_000, 200)
    // With internet (the default network), so the grown pool's jails get their network ahead (slirp4netns running
    // for each): it must go with them too.
    const created = await Promise.all([1, 2].map(() =>
      http.post("/v1/sandboxes", { ...auth, body: minimalSandbox(), headers: { "idempotency-key": idempotencyKey("grow") } })
    ))
    for (const c of created) {
      expect(c.status).toBe(202)
      await poll(async () => (await http.get(`/v1/operations/${c.body.operation.id}`, auth)).body.state, (state) => state === "succeeded", 60_000, 100)
      expect((await http.delete(`/v1/sandboxes/${c.body.sandbox.id}`, auth)).status).toBeLessThan(300)
    }
    await poll(async () => (await http.get("/v1/sandboxes?limit=10", auth)).body.sandboxes.every((s: { state: string }) => s.state === "stopped"), (done) => done, 60_000, 200)
    // Both warm jails of the grown pool started (their launcher, jail and network processes recorded).
    const warm = await poll(
      async () => (fs.existsSync(sandboxes) ? fs.readdirSync(sandboxes) : []).filter((id) => id.startsWith("pool-")).map((id) => readState(dataDir, id)),
      (states) => states.length === 2 && states.every((s) => s !== undefined && s.childPid > 0 && alive(s.childPid, s.childStart) && alive(s.slirpPid ?? 0, s.slirpStart)),
      60_000,
      200
    )
    const processes = warm.flatMap((s) => [[s!.bwrapPid, s!.bwrapStart], [s!.childPid, s!.childStart], [s!.slirpPid!, s!.slirpStart]] as const)
    const uids = warm.map((s) => s!.hostUid)
    await server.stop({ kill: true })
    server = undefined
    // Nobody will start a gateway on this DATA_DIR again: the jails must go by themselves.
    fs.rmSync(dataDir, { recursive: true, force: true })
    const running = await poll(
      async () => [...processes.filter(([pid, start]) => alive(pid, start)).map(([pid]) => pid), ...uids.flatMap((uid) => pidsOfUid(uid))],
      (pids) => pids.length === 0,
      30_000,
      200
    )
    expect(running).toEqual([])
    // What they left — their cgroups, their uid leases — goes at the next sweep of any gateway on this host (its
    // start, its periodic reaper): no gateway of this DATA_DIR will ever start again to sweep it.
    sweepLeases()
    const scope = cgroupScope(dataDir)
    expect(["pids", "memory", "cpu", "freezer"].filter((c) => fs.existsSync(path.join("/sys/fs/cgroup", c, "sandbox-gateway", scope)))).toEqual([])
    expect(uids.filter(isLeased)).toEqual([])
  }, 120_000)
})
