/**
 * `bun run bench --load [--clients 50] [--seconds 60]` (issue 28): N clients, each looping create → wait for the
 * create operation → `echo hi` with `?wait_seconds` → delete, for the given time, against a gateway this starts
 * (its own DATA_DIR, emulated providers, the default warm pool). Prints cycles/s, cycle p50/p90/p99, create → ready
 * and run-and-wait percentiles under load, errors by code, the gateway's RSS before / at its peak / after, CPU
 * seconds per cycle split by where they went, and what is left once every sandbox is gone.
 *
 * Where the CPU goes: the gateway runs in a cpuacct cgroup of its own (its helpers — mkfs, losetup, mount,
 * slirp4netns, nft, bwrap's launcher until it joins the sandbox's cgroups — are its children and count there);
 * each sandbox's cgroups count its agent and commands. So: the gateway process itself (/proc/<pid>/stat), its
 * helpers (its cgroup's total minus itself), the sandboxes (their cgroups, sampled as they come and go: a sandbox
 * destroyed between two samples loses at most one sample's worth), and the machine's total (/proc/stat).
 * `--trace` counts the programs exec'd per cycle (strace), `--profile <dir>` writes the gateway's CPU profile,
 * `--acct` adds the CPU per cycle of every program that ended during the run (process accounting, bench/acct.ts).
 *
 * `--remote`: the sandboxes are E2B's, and E2B is a cloud of its own — its emulator and the runtime under it in
 * another process (test/support/remote-e2b.ts), as a real provider is — so the gateway runs no jail and its CPU per
 * cycle is what the gateway itself costs; the cloud's process and its sandboxes are counted apart.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { cgroupPath, cgroupScope, scopeCgroupIds } from "../src/runtime/Cgroups.ts"
import { DEFAULT_HOST_UID } from "../src/runtime/Jail.ts"
import { startRemoteE2B } from "../test/support/remote-e2b.ts"
import { api, bootstrap, startServer, tempDataDir } from "../test/support/server.ts"
import { readAccounting, startAccounting } from "./acct.ts"
import { GATEWAY_POOL, processCpuSeconds } from "./measure.ts"
import { idempotencyKey, minimalSandbox, poll } from "../test/support/sandbox.ts"

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  const value = i === -1 ? undefined : Number(process.argv[i + 1])
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback
}
const CLIENTS = arg("clients", 50)
const SECONDS = arg("seconds", 60)
const TICKS = 100 // USER_HZ on Linux

const readOr = (file: string) => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return ""
  }
}
const rssKb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readOr(`/proc/${pid}/status`))?.[1] ?? 0)
/** All CPU time the machine spent, in seconds (every core). */
const machineCpu = () => {
  const [, ...fields] = readOr("/proc/stat").split("\n")[0]!.trim().split(/\s+/)
  const [user, nice, system, , , irq, softirq, steal] = fields.map(Number)
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) / TICKS
}
const CPUACCT = fs.existsSync("/sys/fs/cgroup/cpuacct/cpuacct.usage") ? "/sys/fs/cgroup/cpuacct" : "/sys/fs/cgroup/cpu"
const cgroupCpu = (rel: string) => Number(readOr(path.join(CPUACCT, rel, "cpuacct.usage")).trim() || 0) / 1e9

const percentile = (values: ReadonlyArray<number>, p: number) => {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}
const ms = (v: number) => (Number.isFinite(v) ? `${v.toFixed(1)} ms` : "–")

// The gateway's default warm pool (test servers start none unless asked).
// `--profile <dir>`: the gateway runs under Bun's CPU profiler, which writes its profile there (also as markdown) on exit.
const profileAt = process.argv.indexOf("--profile")
const profileDir = profileAt === -1 ? undefined : path.resolve(process.argv[profileAt + 1] ?? "profiles")
const cloudDir = process.argv.includes("--remote") ? tempDataDir("bench-load-cloud") : undefined
const cloud = cloudDir === undefined ? undefined : await startRemoteE2B(cloudDir)
const server = await startServer({
  // Remote: the gateway's own runtime has nothing to run (no warm pool); E2B's cloud keeps its own.
  env: { LOG_LEVEL: "error", ...(cloud === undefined ? GATEWAY_POOL : { ...cloud.env, RUNTIME_WARM_POOL: "0", RUNTIME_WARM_POOL_MAX: "0" }) },
  ...(profileDir === undefined ? {} : { command: ["bun", "--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${profileDir}`, path.join(import.meta.dir, "..", "bin", "main.ts")] })
})
// The gateway and everything it starts, until a jail moves into its sandbox's cgroups: a cgroup of its own.
const benchGroup = `sgw-bench-load-${process.pid}`
fs.mkdirSync(path.join(CPUACCT, benchGroup), { recursive: true })
fs.writeFileSync(path.join(CPUACCT, benchGroup, "cgroup.procs"), String(server.pid))
const http = api(server.url)
const owner = await bootstrap(server.dataDir, "load@example.com")
const auth = { token: owner.api_key, project: owner.project_id }
// Where the sandboxes' cgroups are: under the runtime that runs them (the cloud's, remote).
const scope = cgroupScope(cloudDir ?? server.dataDir)

// `--trace`: every program the gateway and its children (jails included) exec, counted per cycle by name: where a
// cycle's helper processes come from. strace stops every traced process at each fork, so a traced run is slower
// and its times and CPU figures are not comparable: read only the counts.
const TRACE = process.argv.includes("--trace")
const traceFile = path.join(server.dataDir, "exec.trace")
const tracer = TRACE
  ? Bun.spawn(["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", traceFile, "-p", String(server.pid)], { stdio: ["ignore", "ignore", "inherit"] })
  : undefined
if (tracer !== undefined) await Bun.sleep(500)

const cycles: Array<number> = []
const readies: Array<number> = []
const runs: Array<number> = []
const errors = new Map<string, number>()
const fail = (code: string) => errors.set(code, (errors.get(code) ?? 0) + 1)

/** One cycle; false when it failed (its error is counted). */
const cycle = async (): Promise<boolean> => {
  const start = performance.now()
  const created = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox(cloud === undefined ? {} : { provider: "e2b" }), headers: { "idempotency-key": idempotencyKey("load") } })
  if (created.status !== 202) return (fail(created.body?.code ?? `http_${created.status}`), false)
  const id = created.body.sandbox.id as string
  try {
    // The create operation, followed: the answer ends when it does.
    const followed = await fetch(`${server.url}/v1/operations/${created.body.operation.id}/events?follow=true`, {
      headers: { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project }
    })
    await followed.text()
    const op = (await http.get(`/v1/operations/${created.body.operation.id}`, auth)).body
    if (op?.state !== "succeeded") return (fail(op?.error?.code ?? "create_not_succeeded"), false)
    readies.push(performance.now() - start)
    const runStart = performance.now()
    const ran = await http.post(`/v1/sandboxes/${id}/processes?wait_seconds=60`, { ...auth, body: { command: ["echo", "hi"] }, headers: { "idempotency-key": idempotencyKey("hi") } })
    if (ran.status !== 201 || ran.body?.stdout !== "hi\n") return (fail(ran.body?.code ?? `run_${ran.status}`), false)
    runs.push(performance.now() - runStart)
    return true
  } finally {
    const deleted = await http.delete(`/v1/sandboxes/${id}`, auth)
    if (deleted.status >= 300) fail(deleted.body?.code ?? `delete_${deleted.status}`)
    else cycles.push(performance.now() - start)
  }
}

// Sandbox CPU: each sandbox cgroup's last reading, kept after the cgroup goes.
const sandboxCpu = new Map<string, number>()
const sampleSandboxes = () => {
  // Warm jails are counted once handed out, under the sandbox's id (the same cgroup renamed, its counter whole);
  // counted under their pool id too, their start would be counted twice.
  for (const id of scopeCgroupIds(scope)) {
    if (id.startsWith("pool-")) continue
    const v = cgroupCpu(cgroupPath(scope, id))
    if (v > 0) sandboxCpu.set(id, v)
  }
}
let peakRss = 0
const sampler = setInterval(() => {
  peakRss = Math.max(peakRss, rssKb(server.pid))
  sampleSandboxes()
}, 100)

await Bun.sleep(2000) // the warm pool fills
const rssBefore = rssKb(server.pid)
sampleSandboxes()
const sandboxBase = [...sandboxCpu.values()].reduce((a, b) => a + b, 0)
const acctFile = path.join(server.dataDir, "process.acct")
const stopAccounting = process.argv.includes("--acct") ? startAccounting(acctFile) : undefined
const cloudCpu = () => (cloud === undefined ? 0 : processCpuSeconds(cloud.pid))
const at0 = { gateway: processCpuSeconds(server.pid), group: cgroupCpu(benchGroup), machine: machineCpu(), clients: processCpuSeconds(process.pid), cloud: cloudCpu() }
const started = performance.now()
const deadline = Date.now() + SECONDS * 1000
let done = 0
await Promise.all(Array.from({ length: CLIENTS }, async () => {
  while (Date.now() < deadline) {
    try {
      if (await cycle()) done++
    } catch (e) {
      fail(`client_${(e as Error).name}`)
    }
  }
}))
const elapsed = (performance.now() - started) / 1000
tracer?.kill("SIGINT")
await tracer?.exited
sampleSandboxes()
const at1 = { gateway: processCpuSeconds(server.pid), group: cgroupCpu(benchGroup), machine: machineCpu(), clients: processCpuSeconds(process.pid), cloud: cloudCpu() }
stopAccounting?.()
const sandboxSeconds = [...sandboxCpu.values()].reduce((a, b) => a + b, 0) - sandboxBase
clearInterval(sampler)

// What is left once every sandbox is gone (the warm pool's jails are the gateway's own).
await poll(async () => (await http.get("/v1/sandboxes?state=stopping&state=cleanup_pending&limit=1", auth)).body.sandboxes.length, (n) => n === 0, 120_000, 200)
// The gateway's RSS once it settled: the garbage of a burst goes at the collector's next full collection, some
// seconds into the quiet (measured: 326 MiB 3 s after a 50-client run, 227 MiB 9 s later, flat from there), so it
// is read 20 s after the last sandbox went, and the seconds it took to come within 5 MiB of that are shown.
const settled: Array<number> = []
for (let i = 0; i < 20; i++) {
  await Bun.sleep(1000)
  settled.push(rssKb(server.pid))
}
const settledIn = settled.findIndex((kb) => kb - settled.at(-1)! <= 5 * 1024) + 1
const rssAfter = settled.at(-1)!
const jails = fs.readdirSync(path.join(cloudDir ?? server.dataDir, "sandboxes")).filter((d) => !d.startsWith("pool-"))
const cgroups = scopeCgroupIds(scope).filter((id) => !id.startsWith("pool-"))
const loops = Bun.spawnSync(["losetup", "-a"]).stdout.toString().split("\n").filter((l) => l.includes(cloudDir ?? server.dataDir) && !l.includes("/pool-"))

const gatewaySeconds = at1.gateway - at0.gateway
const helperSeconds = at1.group - at0.group - gatewaySeconds
const machineSeconds = at1.machine - at0.machine
const perCycle = (s: number) => (done === 0 ? "–" : `${((s / done) * 1000).toFixed(0)} ms`)
const rows: Array<[string, string]> = [
  ["clients, seconds", `${CLIENTS}, ${elapsed.toFixed(1)} s (${os.cpus().length} cores)`],
  ["cycles", `${done} (${(done / elapsed).toFixed(1)}/s)`],
  ["cycle p50 / p90 / p99", `${ms(percentile(cycles, 50))} / ${ms(percentile(cycles, 90))} / ${ms(percentile(cycles, 99))}`],
  ["create → ready p50 / p90 / p99", `${ms(percentile(readies, 50))} / ${ms(percentile(readies, 90))} / ${ms(percentile(readies, 99))}`],
  ["run-and-wait p50 / p90 / p99", `${ms(percentile(runs, 50))} / ${ms(percentile(runs, 90))} / ${ms(percentile(runs, 99))}`],
  ["errors", errors.size === 0 ? "0" : [...errors].map(([code, n]) => `${code} ×${n}`).join(", ")],
  ["gateway RSS before / peak / after", `${(rssBefore / 1024).toFixed(0)} / ${(peakRss / 1024).toFixed(0)} / ${(rssAfter / 1024).toFixed(0)} MiB (within 5 MiB of it ${settledIn} s after)`],
  ["CPU per cycle: gateway", perCycle(gatewaySeconds)],
  ["CPU per cycle: its helpers", perCycle(helperSeconds)],
  ...(cloud === undefined ? [] : [["CPU per cycle: E2B's cloud (its process)", perCycle(at1.cloud - at0.cloud)] as [string, string]]),
  ["CPU per cycle: sandboxes", perCycle(sandboxSeconds)],
  ["CPU per cycle: this benchmark's clients", perCycle(at1.clients - at0.clients)],
  ["CPU per cycle: whole machine", perCycle(machineSeconds)],
  ["left after", `${jails.length} jail dirs, ${cgroups.length} cgroups, ${loops.length} loop devices`]
]
console.log(`\nLoad: ${CLIENTS} clients looping create → ready → echo hi (run and wait) → delete${cloud === undefined ? "" : ", on E2B as a cloud of its own (--remote)"}`)
console.log(rows.map(([k, v]) => `${k.padEnd(40)} ${v}`).join("\n"))
if (TRACE) {
  // Lines like `123 execve("/usr/bin/mount", ...) = 0`: successful execs by program, per cycle (warm-up included).
  const execs = new Map<string, number>()
  for (const line of readOr(traceFile).split("\n")) {
    const program = /execve\("([^"]*)"/.exec(line)?.[1]
    if (program !== undefined && / = 0$/.test(line)) execs.set(path.basename(program), (execs.get(path.basename(program)) ?? 0) + 1)
  }
  const total = [...execs.values()].reduce((a, b) => a + b, 0)
  console.log(`\nProcesses exec'd per cycle (${total} in all, ${done} cycles):`)
  console.log([...execs].sort((a, b) => b[1] - a[1]).map(([name, n]) => `  ${name.padEnd(20)} ${(n / Math.max(1, done)).toFixed(2)}`).join("\n"))
}
if (stopAccounting !== undefined) {
  // Every process that ended during the run, by program: the sandboxes' (their host uids) and the rest (root's).
  const programs = readAccounting(acctFile, DEFAULT_HOST_UID).filter((p) => p.cpuMs > 0)
  console.log(`\nCPU per cycle by program (process accounting: what ended during the run; ${done} cycles):`)
  console.log(programs.slice(0, 20).map((p) =>
    `  ${`${p.program}${p.sandboxed ? " (sandbox)" : ""}`.padEnd(26)} ${perCycle(p.cpuMs / 1000).padStart(7)}   ${(p.count / Math.max(1, done)).toFixed(2)} processes, ${(p.cpuMs / p.count).toFixed(1)} ms each`
  ).join("\n"))
}
await server.stop()
await cloud?.stop()
if (cloudDir !== undefined) fs.rmSync(cloudDir, { recursive: true, force: true })
try {
  fs.rmdirSync(path.join(CPUACCT, benchGroup))
} catch {}
process.exit(0)
