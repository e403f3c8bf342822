/**
 * `bun run bench --density [N]` (issue 14, item 4; not part of the default run): how many idle sandboxes one
 * machine holds. Starts N idle sandboxes without internet through the API (default 1,000; DENSITY_CONCURRENCY
 * creates at once, default 8) and reports create throughput, proportional memory (PSS) per idle sandbox (every
 * process in this gateway's sandbox cgroups), the gateway's RSS, and `echo hi` (run and wait) on the last sandbox
 * against the same on an idle system; then destroys them all and checks that nothing is left: no process of a
 * sandbox uid, no cgroup, no loop device of this DATA_DIR, no jail directory.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { cgroupPath, cgroupPids, cgroupScope, scopeCgroupIds } from "../src/runtime/Cgroups.ts"
import { api, bootstrap, startServer } from "../test/support/server.ts"
import { idempotencyKey, minimalSandbox, poll, waitOperation } from "../test/support/sandbox.ts"

const argN = Number(process.argv[process.argv.indexOf("--density") + 1])
const N = Number.isSafeInteger(argN) && argN > 0 ? argN : Number(process.env["DENSITY_N"] ?? 1000)
const CONCURRENCY = Number(process.env["DENSITY_CONCURRENCY"] ?? 8)

const kib = (text: string, field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? 0)
const readOr = (file: string) => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return ""
  }
}

/** Every process in this gateway's sandbox cgroups (each jail's launcher, bwrap, agent loop, agent, commands), with its PSS (kB). */
const sandboxProcesses = () => {
  const pids = new Set(scopeCgroupIds(scope).flatMap((id) => cgroupPids(cgroupPath(scope, id))))
  return [...pids].map((pid) => ({ pid, pssKb: kib(readOr(`/proc/${pid}/smaps_rollup`), "Pss") }))
}

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN

const server = await startServer({ env: { RUNTIME_WARM_POOL: "0" } })
const scope = cgroupScope(server.dataDir)
const http = api(server.url)
const boot = await bootstrap(server.dataDir, "density@example.com")
const auth = { token: boot.api_key, project: boot.project_id }

const echoHi = async (sandboxId: string, rounds = 20) => {
  const samples: Array<number> = []
  for (let i = 0; i < rounds + 3; i++) {
    const t = performance.now()
    const res = await http.post(`/v1/sandboxes/${sandboxId}/processes?wait_seconds=30`, { ...auth, body: { command: ["echo", "hi"] }, headers: { "idempotency-key": idempotencyKey("d") } })
    if (res.status !== 201) throw new Error(`echo hi answered ${res.status}`)
    if (i >= 3) samples.push(performance.now() - t)
  }
  return median(samples)
}

const create = async () => {
  const res = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider: "daytona", resources: { vcpu: 1, memory_mb: 1024 } }), headers: { "idempotency-key": idempotencyKey("c") } })
  if (res.status !== 202) throw new Error(`create answered ${res.status}: ${res.text}`)
  const op = await waitOperation(http, auth, res.body.operation.id, 300_000)
  if (op.state !== "succeeded") throw new Error(`create ${op.state}: ${JSON.stringify(op.error)}`)
  return res.body.sandbox.id as string
}

const pool = async <T>(count: number, work: (i: number) => Promise<T>) => {
  const out: Array<T> = []
  let next = 0
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, count) }, async () => {
    while (next < count) {
      const i = next++
      out[i] = await work(i)
    }
  }))
  return out
}

const rows: Array<[string, string]> = []
try {
  const first = await create()
  const idleEcho = await echoHi(first)
  await http.delete(`/v1/sandboxes/${first}`, auth)

  const started = performance.now()
  const ids = await pool(N, async (i) => {
    const id = await create()
    if ((i + 1) % 100 === 0) console.error(`${i + 1} sandboxes ready`)
    return id
  })
  const seconds = (performance.now() - started) / 1000
  await Bun.sleep(2000) // let start-up settle before measuring memory
  const processes = sandboxProcesses()
  const pssKb = processes.reduce((n, p) => n + p.pssKb, 0)
  const gatewayRssKb = kib(readOr(`/proc/${server.pid}/status`), "VmRSS")
  const lastEcho = await echoHi(ids.at(-1)!)

  rows.push(
    ["idle sandboxes", String(ids.length)],
    ["create throughput", `${(ids.length / seconds).toFixed(1)} sandboxes/s (${seconds.toFixed(1)} s, ${CONCURRENCY} at once)`],
    ["PSS per idle sandbox", `${(pssKb / ids.length / 1024).toFixed(2)} MiB (${processes.length} processes, ${(processes.length / ids.length).toFixed(1)} each)`],
    ["gateway RSS", `${(gatewayRssKb / 1024).toFixed(0)} MiB`],
    ["echo hi, last sandbox", `${lastEcho.toFixed(2)} ms (idle system: ${idleEcho.toFixed(2)} ms, ${(lastEcho / idleEcho).toFixed(2)}×)`]
  )

  await pool(ids.length, (i) => http.delete(`/v1/sandboxes/${ids[i]}`, auth))
  await poll(async () => (await http.get("/v1/sandboxes?state=stopping&state=cleanup_pending&limit=1", auth)).body.sandboxes.length, (n) => n === 0, 300_000, 200)
  await poll(async () => sandboxProcesses().length, (n) => n === 0, 60_000, 200)
  const jails = fs.readdirSync(path.join(server.dataDir, "sandboxes")).filter((d) => !d.startsWith("pool-"))
  const loops = Bun.spawnSync(["losetup", "-a"]).stdout.toString().split("\n").filter((l) => l.includes(server.dataDir))
  const cgroups = scopeCgroupIds(scope)
  rows.push(["left after destroying", `${sandboxProcesses().length} processes, ${jails.length} jail dirs, ${loops.length} loop devices, ${cgroups.length} cgroups`])
} finally {
  console.log(rows.map(([k, v]) => `${k.padEnd(24)} ${v}`).join("\n"))
  await server.stop()
}
