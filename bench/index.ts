/**
 * `bun run bench`: medians (and p90) of the gateway's hot paths, each next to a baseline measured in the same
 * run on this machine, with the ratio. Targets (issue 3): create→ready p50 ≤ 100 ms; exec round trip p50 ≤ 3×
 * spawning the same bwrap jail directly (a minimal bwrap is shown too); GET sandbox p50 ≤ 2× a bare Bun.serve
 * reading the same row. Issue 13: `echo hi` with `?wait_seconds` ≤ 2.5× a minimal bwrap spawn; a followed process's
 * output reaches the follower p50 ≤ 25 ms after it was written. Also (issue 10) event commit → webhook received on
 * loopback, and commit → frame on the live event stream. Issue 11: create → ready p50 on each plugin through its
 * emulator (BENCH_PLUGIN_ROUNDS creates each, 5 by default). Issue 14: create → ready from a cached OCI image.
 * Issue 13: 1 GiB streamed up and down with the gateway's RSS. Issue 9: the same GET and create → ready on
 * PostgreSQL, and two replicas' create throughput (bench/postgres.ts). Issue 29: a screenshot's and an action's round
 * trip on a desktop (bench/computer.ts; `--computer` runs only those). Prints a table; exits 0.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { makeLocalRuntime } from "../src/runtime/LocalRuntimeLive.ts"
import { api, bootstrap, startServer, tempDataDir } from "../test/support/server.ts"
import { createReadySandbox, idempotencyKey, minimalSandbox, poll, runProcess, waitRuntimeOperation } from "../test/support/sandbox.ts"
import { alpineLike, startRegistry } from "../test/support/registry.ts"
import { pgBinDir } from "../test/support/postgres.ts"
import { startRemoteE2B } from "../test/support/remote-e2b.ts"
import { benchComputer } from "./computer.ts"
import { benchPostgres, type PgFigures } from "./postgres.ts"

const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 30)
/** Creates per plugin in the per-provider create → ready rows (after one warm-up). */
const PER_PLUGIN_ROUNDS = Number(process.env["BENCH_PLUGIN_ROUNDS"] ?? 5)
const INTERNET = { network: { internet_access: true } }
/** Every plugin, with what a request needs to be placed on it. */
const PER_PLUGIN: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
  ["daytona", {}],
  ["e2b", {}],
  ["blaxel", INTERNET],
  ["cloudflare", INTERNET],
  ["freestyle", INTERNET],
  ["prime", { ...INTERNET, resources: { vcpu: 0.5, memory_mb: 500 } }],
  ["runloop", INTERNET],
  ["vercel", { network: { internet_access: false } }]
]

const fmt = (ms: number) => `${ms.toFixed(2)} ms`
const printPg = (pg: PgFigures, sqlite?: { readonly createReady: { p50: number }; readonly get: { p50: number } }) => {
  const vs = (p50: number, base?: number) => (base === undefined ? "" : `   (SQLite p50 ${fmt(base)}, ${(p50 / base).toFixed(2)}×)`)
  console.log("\nPostgreSQL (DATABASE_URL, a local cluster without fsync)   p50         p90")
  console.log(`${"create → ready (API)".padEnd(58)} ${fmt(pg.createReady.p50).padEnd(11)} ${fmt(pg.createReady.p90).padEnd(11)}${vs(pg.createReady.p50, sqlite?.createReady.p50)}`)
  console.log(`${"GET /v1/sandboxes/{id} (FastReads)".padEnd(58)} ${fmt(pg.get.p50).padEnd(11)} ${fmt(pg.get.p90).padEnd(11)}${vs(pg.get.p50, sqlite?.get.p50)}`)
  console.log(`${"GET /v1/sandboxes/{id} (full stack)".padEnd(58)} ${fmt(pg.getFullStack.p50).padEnd(11)} ${fmt(pg.getFullStack.p90).padEnd(11)}`)
  console.log(`creates → ready, ${pg.throughput.creates} at 8 in flight: one replica ${pg.throughput.oneReplica.toFixed(1)}/s, two replicas ${pg.throughput.twoReplicas.toFixed(1)}/s`)
}

// `bun run bench --pg`: only the PostgreSQL figures (bench/postgres.ts).
if (process.argv.includes("--pg")) {
  printPg(await benchPostgres(ROUNDS))
  process.exit(0)
}

// `bun run bench --load [--clients N] [--seconds S]`: the load benchmark instead (bench/load.ts).
if (process.argv.includes("--load")) {
  await import("./load.ts")
  process.exit(0)
}

// `bun run bench --density [N]`: the density benchmark instead (bench/density.ts).
if (process.argv.includes("--density")) {
  await import("./density.ts")
  process.exit(0)
}

/** The GET baseline: a bare Bun.serve answering one row of the gateway's SQLite file (args: file, sandbox id). */
const BARE_SERVER = `
const { Database } = require("bun:sqlite")
const [file, id] = process.argv.slice(-2)
const query = new Database(file, { readonly: true }).query("SELECT * FROM sandboxes WHERE id = ?")
const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => Response.json(query.get(id)) })
console.log("http://127.0.0.1:" + server.port + "/")
`

/** The floor of a 10 MiB transfer over HTTP: a bare Bun.serve that sends a file (arg) and writes a PUT body beside it. */
const BARE_FILE_SERVER = `
const file = process.argv.at(-1)
const server = Bun.serve({ port: 0, hostname: "127.0.0.1", maxRequestBodySize: 64 * 1024 * 1024, fetch: async (request) => {
  if (request.method !== "PUT") return new Response(Bun.file(file))
  await Bun.write(file + ".bare", await request.arrayBuffer())
  return new Response("ok")
} })
console.log("http://127.0.0.1:" + server.port + "/")
`

/** The floor of moving 10 MiB at all: a bare TCP socket in its own process that counts the bytes and answers one. */
const BARE_SOCKET_SERVER = `
const net = require("node:net")
const size = Number(process.argv.at(-1))
const server = net.createServer((socket) => {
  let received = 0
  socket.on("data", (d) => {
    received += d.length
    if (received >= size) {
      received -= size
      socket.write("k")
    }
  })
})
server.listen(0, "127.0.0.1", () => console.log(String(server.address().port)))
`

const firstLine = async (stream: ReadableStream<Uint8Array>) => {
  const decoder = new TextDecoder()
  let text = ""
  for await (const chunk of stream) {
    text += decoder.decode(chunk)
    if (text.includes("\n")) break
  }
  return text.split("\n")[0]!.trim()
}

const stats = (samples: Array<number>) => {
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
  return { p50: at(0.5), p90: at(0.9), n: sorted.length }
}

const time = async (fn: () => Promise<unknown>, rounds = ROUNDS, warmup = 3) => {
  for (let i = 0; i < warmup; i++) await fn()
  const samples: Array<number> = []
  for (let i = 0; i < rounds; i++) {
    const t = performance.now()
    await fn()
    samples.push(performance.now() - t)
  }
  return stats(samples)
}

const rows: Array<{ name: string; p50: number; p90: number; baseline?: string; baseP50?: number; target?: string }> = []
/** Figures that are not latencies (throughput, memory), printed after the table. */
const notes: Array<string> = []
const report = (name: string, s: { p50: number; p90: number }, baseline?: { name: string; s: { p50: number } }, target?: string) =>
  rows.push({ name, p50: s.p50, p90: s.p90, ...(baseline ? { baseline: baseline.name, baseP50: baseline.s.p50 } : {}), ...(target ? { target } : {}) })

// `bun run bench --computer`: only the computer-use figures (bench/computer.ts).
if (process.argv.includes("--computer")) {
  const alone = await startServer()
  try {
    const owner = await bootstrap(alone.dataDir, "bench-computer@example.com")
    const c = await benchComputer(api(alone.url), { token: owner.api_key, project: owner.project_id }, alone.dataDir, (fn) => time(fn))
    console.log("computer use                         p50         p90         the runtime's own p50   target")
    console.log(`${"screenshot 1280×800 png (API)".padEnd(36)} ${fmt(c.screenshotApi.p50).padEnd(11)} ${fmt(c.screenshotApi.p90).padEnd(11)} ${fmt(c.screenshotRuntime.p50).padEnd(23)} p50 ≤ 150 ms`)
    console.log(`${"computer action, mouse move (API)".padEnd(36)} ${fmt(c.actionApi.p50).padEnd(11)} ${fmt(c.actionApi.p90).padEnd(11)} ${fmt(c.actionRuntime.p50).padEnd(23)} p50 ≤ 30 ms`)
  } finally {
    await alone.stop()
  }
  process.exit(0)
}

// Webhooks go to a receiver on loopback, which the default URL policy refuses.
const server = await startServer({ env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", REGISTRY_ALLOW_PRIVATE: "true" } })
const http = api(server.url)
const boot = await bootstrap(server.dataDir, "bench@example.com")
const auth = { token: boot.api_key, project: boot.project_id }

try {
  // 1. create → ready, through the API (routed; the client polls the operation).
  const created: Array<string> = []
  const createReady = await time(async () => {
    const res = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox(), headers: { "idempotency-key": idempotencyKey("b") } })
    await poll(async () => (await http.get(`/v1/operations/${res.body.operation.id}`, auth)).body, (op) => op.state === "succeeded", 30_000, 2)
    created.push(res.body.sandbox.id)
  }, Math.min(ROUNDS, 20), 2)
  report("create → ready (API)", createReady, undefined, "p50 ≤ 100 ms")
  // The measured sandboxes go away before the next measurements, so they do not share the machine with them.
  await Promise.all(created.map((id) => http.delete(`/v1/sandboxes/${id}`, auth)))
  await poll(async () => (await http.get("/v1/sandboxes?limit=100", auth)).body.sandboxes, (list) => list.every((s: any) => s.state === "stopped"), 60_000, 50)

  // 1b. create → ready on each plugin through its emulator (issue 11): a few creates per provider, pinned with
  // `provider`, with the network each needs (most cannot keep a sandbox off the internet; Prime sizes are fixed).
  for (const [provider, extra] of PER_PLUGIN) {
    const mine: Array<string> = []
    const s = await time(async () => {
      const res = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider, ...extra }), headers: { "idempotency-key": idempotencyKey(provider) } })
      if (res.status !== 202) throw new Error(`create on ${provider} answered ${res.status}: ${res.text}`)
      const op = await poll(async () => (await http.get(`/v1/operations/${res.body.operation.id}`, auth)).body, (o) => ["succeeded", "failed", "cancelled"].includes(o.state), 30_000, 2)
      if (op.state !== "succeeded") throw new Error(`create on ${provider} ${op.state}: ${JSON.stringify(op.error)}`)
      mine.push(res.body.sandbox.id)
    }, PER_PLUGIN_ROUNDS, 1)
    report(`  create → ready, ${provider} emulator`, s)
    await Promise.all(mine.map((id) => http.delete(`/v1/sandboxes/${id}`, auth)))
  }
  await poll(async () => (await http.get("/v1/sandboxes?limit=100", auth)).body.sandboxes, (list) => list.every((s: any) => s.state === "stopped"), 60_000, 50)

  // 1c. create → ready from an OCI image whose layers are cached already (issue 14): a registry on loopback with a
  // small image, pulled once by a first create; then each create unpacks nothing new, only mounts its layers.
  {
    const registry = startRegistry()
    registry.push("bench/alpine", "1", { layers: [[...alpineLike()]] })
    const image = `${registry.host}/bench/alpine:1`
    const mine: Array<string> = []
    const s = await time(async () => {
      const res = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider: "daytona", source: { kind: "oci_image", image } }), headers: { "idempotency-key": idempotencyKey("oci") } })
      const op = await poll(async () => (await http.get(`/v1/operations/${res.body.operation.id}`, auth)).body, (o) => ["succeeded", "failed", "cancelled"].includes(o.state), 60_000, 2)
      if (op.state !== "succeeded") throw new Error(`create from ${image} ${op.state}: ${JSON.stringify(op.error)}`)
      mine.push(res.body.sandbox.id)
    }, PER_PLUGIN_ROUNDS, 1)
    report("create → ready, cached OCI image", s)
    await Promise.all(mine.map((id) => http.delete(`/v1/sandboxes/${id}`, auth)))
    await poll(async () => (await http.get("/v1/sandboxes?limit=100", auth)).body.sandboxes, (list) => list.every((x: any) => x.state === "stopped"), 60_000, 50)
    registry.stop()
  }

  const sandbox = await createReadySandbox(http, auth)

  // 2. exec round trip vs spawning the same bwrap jail directly: a jail prepared exactly like a sandbox's (root,
  // cgroups, staging, unprivileged uid, bwrap arguments) that runs `echo hi` instead of the agent. A minimal
  // bwrap (no user mapping, staging or cgroups) is measured too, as a floor for any jail.
  const directDir = tempDataDir("bench-direct")
  const directRuntime = makeLocalRuntime(directDir)
  const sameJail = directRuntime.directJail("bench-direct", { vcpu: 1, memoryMb: 512, diskMb: 10_240, internet: false, env: {}, labels: {} })
  const direct = await time(async () => {
    if ((await sameJail.run(["echo", "hi"])) !== "hi\n") throw new Error("the direct jail did not echo")
  })
  await sameJail.remove()
  await Effect.runPromise(directRuntime.shutdown)
  fs.rmSync(directDir, { recursive: true, force: true })
  const bwrapArgs = ["bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
    "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", "--uid", "1000", "--gid", "1000", "/bin/echo", "hi"]
  const minimal = await time(async () => {
    const p = Bun.spawn(bwrapArgs, { stdout: "pipe" })
    await new Response(p.stdout).text()
    await p.exited
  })
  const exec = await time(async () => {
    const started = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body: { command: ["echo", "hi"] }, headers: { "idempotency-key": idempotencyKey("e") } })
    await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}/processes/${started.body.id}`, auth)).body, (p) => p.state === "succeeded", 30_000, 1)
  })
  report("exec `echo hi` round trip (API)", exec, { name: "the same jail spawned directly", s: direct }, "ratio ≤ 3×")
  report("  (same, against a minimal bwrap)", exec, { name: "minimal bwrap spawn", s: minimal })
  // Run and wait: one request, answered 201 with the finished process.
  const execWait = await time(async () => {
    const done = await http.post(`/v1/sandboxes/${sandbox.id}/processes?wait_seconds=30`, { ...auth, body: { command: ["echo", "hi"] }, headers: { "idempotency-key": idempotencyKey("ew") } })
    if (done.status !== 201) throw new Error(`run and wait answered ${done.status}`)
  })
  report("exec `echo hi`, ?wait_seconds (API)", execWait, { name: "minimal bwrap spawn", s: minimal }, "ratio ≤ 2.5×")

  // Live output: how long after the process writes a line a follower has it. The jail shares the host's clock,
  // so each line is the time it was written (ns); the follower subtracts it from the time it read the event.
  const lines = Math.max(ROUNDS, 10)
  const writer = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, {
    ...auth, body: { command: ["sh", "-c", `sleep 0.5; for i in $(seq ${lines}); do date +%s%N; sleep 0.05; done`] }, headers: { "idempotency-key": idempotencyKey("f") }
  })
  const followed = await fetch(`${server.url}/v1/sandboxes/${sandbox.id}/processes/${writer.body.id}/events?follow=true`, {
    headers: { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project }
  })
  const lags: Array<number> = []
  let pending = ""
  for await (const chunk of followed.body!) {
    const readAt = performance.timeOrigin + performance.now()
    pending += new TextDecoder().decode(chunk)
    const frames = pending.split("\n\n")
    pending = frames.pop()!
    for (const frame of frames) {
      if (!frame.includes("event: stdout")) continue
      const data = JSON.parse(frame.split("\n").find((l) => l.startsWith("data: "))!.slice(6))
      for (const line of Buffer.from(data.data.data_base64, "base64").toString().trim().split("\n")) lags.push(readAt - Number(line) / 1e6)
    }
  }
  report("live output: write → follower", stats(lags), undefined, "p50 ≤ 25 ms")

  // 3. a 10 MiB file read through the API vs reading the file directly.
  const tenMiB = Buffer.alloc(10 * 1024 * 1024, 7)
  const localFile = path.join(server.dataDir, "bench-10mib.bin")
  fs.writeFileSync(localFile, tenMiB)
  const write = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/write`, {
    ...auth, body: { path: "/workspace/big.bin", data_base64: tenMiB.toString("base64") }, headers: { "idempotency-key": idempotencyKey("w") }
  })
  await waitRuntimeOperation(http, auth, sandbox.id, write.body.id)
  const directRead = await time(async () => void (await Bun.file(localFile).arrayBuffer()), 10, 1)
  const apiRead = await time(async () => {
    const read = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/read`, { ...auth, body: { path: "/workspace/big.bin", limit_bytes: 10 * 1024 * 1024 } })
    const done = await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}/runtime-operations/${read.body.id}`, auth)).body, (r) => r.state === "succeeded", 30_000, 2)
    Buffer.from(done.result.data_base64, "base64")
  }, 10, 1)
  report("10 MiB file read (API)", apiRead, { name: "direct file read", s: directRead })
  // The same bytes through the raw route: streamed in the request, no base64, no operation to poll.
  const rawHeaders = { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project }
  const rawUrl = `${server.url}/v1/sandboxes/${sandbox.id}/files/content?path=${encodeURIComponent("/workspace/big.bin")}`
  const rawRead = await time(async () => {
    const res = await fetch(rawUrl, { headers: rawHeaders })
    if ((await res.arrayBuffer()).byteLength !== tenMiB.length) throw new Error("the raw read was short")
  }, 10, 1)
  report("10 MiB raw read (GET content)", rawRead, { name: "direct file read", s: directRead }, "ratio ≤ 3×")
  const directWrite = await time(async () => fs.writeFileSync(`${localFile}.w`, tenMiB), 10, 1)
  const rawWrite = await time(async () => {
    const res = await fetch(rawUrl, { method: "PUT", headers: { ...rawHeaders, "content-type": "application/octet-stream" }, body: tenMiB })
    if (res.status !== 200) throw new Error(`the raw write answered ${res.status}`)
  }, 10, 1)
  report("10 MiB raw write (PUT content)", rawWrite, { name: "direct file write", s: directWrite }, "ratio ≤ 3×")
  // The floor of any HTTP transfer of those bytes on this machine: a bare Bun.serve in its own process sending
  // the file (sendfile) and taking a body whole, read by the same client call. Against the direct baselines the
  // floor alone is several × (loopback TCP and the client's own copy), so the 3× targets are read against it too.
  const bareFiles = Bun.spawn(["bun", "-e", BARE_FILE_SERVER, localFile], { stdout: "pipe", stderr: "inherit" })
  const bareFilesUrl = await firstLine(bareFiles.stdout)
  const bareRead = await time(async () => {
    if ((await (await fetch(bareFilesUrl)).arrayBuffer()).byteLength !== tenMiB.length) throw new Error("the bare read was short")
  }, 10, 1)
  const bareWrite = await time(async () => void (await (await fetch(bareFilesUrl, { method: "PUT", body: tenMiB })).text()), 10, 1)
  bareFiles.kill()
  report("  (10 MiB read from a bare Bun.serve)", bareRead, { name: "direct file read", s: directRead })
  report("  (raw read against that floor)", rawRead, { name: "bare Bun.serve read", s: bareRead })
  report("  (10 MiB write to a bare Bun.serve)", bareWrite, { name: "direct file write", s: directWrite })
  // Below HTTP: the same bytes through a bare loopback TCP socket to another process (no HTTP, no file).
  const bareSocket = Bun.spawn(["bun", "-e", BARE_SOCKET_SERVER, String(tenMiB.length)], { stdout: "pipe", stderr: "inherit" })
  const socketPort = Number(await firstLine(bareSocket.stdout))
  let answered: (() => void) | undefined
  let drained: (() => void) | undefined
  const socket = await Bun.connect({ hostname: "127.0.0.1", port: socketPort, socket: { data: () => answered?.(), drain: () => drained?.() } })
  const socketWrite = await time(async () => {
    const ack = new Promise<void>((resolve) => (answered = resolve))
    for (let at = 0; at < tenMiB.length;) {
      at += socket.write(tenMiB.subarray(at))
      if (at < tenMiB.length) await new Promise<void>((resolve) => (drained = resolve))
    }
    await ack
  }, 10, 1)
  socket.end()
  bareSocket.kill()
  report("  (10 MiB through a bare TCP socket)", socketWrite, { name: "direct file write", s: directWrite })
  report("  (raw write against that floor)", rawWrite, { name: "bare Bun.serve write", s: bareWrite })
  // What the sandbox's own disk costs: a process inside writes the same 10 MiB to a new file (timed inside, so
  // without its start). A sandbox's disk is a loop-mounted image of its own (the per-sandbox disk limit), not the
  // host's page cache: the raw write can never be faster than this.
  const insideSamples: Array<number> = []
  for (let i = 0; i < 12; i++) {
    const run = await runProcess(http, auth, sandbox.id, ["sh", "-c", "s=$(date +%s%N); head -c 10485760 /dev/zero > /workspace/inside-$$.bin; e=$(date +%s%N); rm /workspace/inside-$$.bin; echo $(( (e - s) / 1000 ))"])
    if (i >= 2) insideSamples.push(Number(run.stdout.trim()) / 1000)
  }
  const insideWrite = stats(insideSamples)
  report("  (10 MiB written by a process in the sandbox)", insideWrite, { name: "direct file write", s: directWrite })
  report("  (raw write against the sandbox's own write)", rawWrite, { name: "write inside the sandbox", s: insideWrite }, "ratio ≤ 3×")

  // 3b. 1 GiB up and down through the raw route on E2B's emulator (its wire streams writes): the gateway's RSS
  // (emulators and all: one process) before and at its peak, and the throughput each way.
  {
    const e2b = await createReadySandbox(http, auth, minimalSandbox({ provider: "e2b" }))
    const bigUrl = `${server.url}/v1/sandboxes/${e2b.id}/files/content?path=${encodeURIComponent("/workspace/gib.bin")}`
    const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024
    const measure = async (what: string, transfer: () => Promise<void>, pid = server.pid) => {
      const before = rssMiB(pid)
      let peak = before
      const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 20)
      const t = performance.now()
      try {
        await transfer()
      } finally {
        clearInterval(sampler)
      }
      const seconds = (performance.now() - t) / 1000
      notes.push(`${what}: ${(1024 / seconds).toFixed(0)} MiB/s; gateway RSS ${before.toFixed(0)} MiB before, +${(peak - before).toFixed(0)} MiB at its peak (target ± 20 MiB)`)
    }
    const piece = new Uint8Array(1024 * 1024).fill(9)
    // A client uploading a file states its length (curl -T, the CLI's cp): such a body is passed on untouched.
    const gibFile = path.join(server.dataDir, "bench-1gib.bin")
    {
      const fd = fs.openSync(gibFile, "w")
      for (let i = 0; i < 1024; i++) fs.writeSync(fd, piece)
      fs.closeSync(fd)
    }
    await measure("1 GiB raw write of stated length (PUT from a file, E2B emulator)", async () => {
      const res = await fetch(bigUrl, { method: "PUT", headers: { ...rawHeaders, "content-type": "application/octet-stream" }, body: Bun.file(gibFile) })
      if (res.status !== 201) throw new Error(`the 1 GiB write answered ${res.status}: ${await res.text()}`)
    })
    // An unsized (chunked) body is counted as it passes, to be cut at the limit.
    await measure("1 GiB raw write, chunked (PUT, E2B emulator)", async () => {
      let sent = 0
      const body = new ReadableStream<Uint8Array>({ pull: (c) => (sent++ === 1024 ? c.close() : c.enqueue(piece)) })
      const res = await fetch(bigUrl, { method: "PUT", headers: { ...rawHeaders, "content-type": "application/octet-stream" }, body, duplex: "half" } as RequestInit)
      if (res.status !== 200) throw new Error(`the 1 GiB write answered ${res.status}: ${await res.text()}`)
    })
    const readGiB = (url: string, headers: Record<string, string>) => async () => {
      const res = await fetch(url, { headers })
      let size = 0
      for await (const chunk of res.body!) size += chunk.length
      if (size !== 1024 * 1024 * 1024) throw new Error(`the 1 GiB read was ${size} bytes`)
    }
    await measure("1 GiB raw read (GET, E2B emulator)", readGiB(bigUrl, rawHeaders))

    // 3c. The same through a gateway whose E2B is a cloud of its own (remote mode: the emulator in another process),
    // its envd framing downloads by Content-Length as E2B's does: the gateway's own memory, without the emulator's
    // and the sandbox channel's (which the chunked answers of Bun's server make count every chunk).
    const cloud = await startRemoteE2B(tempDataDir("bench-e2b-cloud"), { framed: true })
    const remote = await startServer({ env: cloud.env })
    try {
      const remoteBoot = await bootstrap(remote.dataDir, "bench-remote@example.com")
      const remoteAuth = { token: remoteBoot.api_key, project: remoteBoot.project_id }
      const remoteHeaders = { authorization: `Bearer ${remoteAuth.token}`, "x-metal-project-id": remoteAuth.project }
      const far = await createReadySandbox(api(remote.url), remoteAuth, minimalSandbox({ provider: "e2b" }))
      const farUrl = `${remote.url}/v1/sandboxes/${far.id}/files/content?path=${encodeURIComponent("/workspace/gib.bin")}`
      await measure("1 GiB raw write of stated length (remote E2B in its own process)", async () => {
        // (E2B's home is /home/user: /workspace is made on the first write.)
        const res = await fetch(`${farUrl}&create_parents=true`, { method: "PUT", headers: { ...remoteHeaders, "content-type": "application/octet-stream" }, body: Bun.file(gibFile) })
        if (res.status !== 201) throw new Error(`the 1 GiB write answered ${res.status}: ${await res.text()}`)
      }, remote.pid)
      await measure("1 GiB raw read (remote E2B, downloads framed by Content-Length)", readGiB(farUrl, remoteHeaders), remote.pid)
    } finally {
      await remote.stop()
      await cloud.stop()
      fs.rmSync(gibFile)
    }
  }

  // 4. GET /v1/sandboxes/{id} vs a bare Bun.serve that reads the same row from the same SQLite file. The bare
  // server runs in its own process, like the gateway, and both are read by the same client call (the same
  // headers, the body read as text), so the ratio is the gateway's own cost.
  const bare = Bun.spawn(["bun", "-e", BARE_SERVER, path.join(server.dataDir, "gateway.sqlite"), sandbox.id], { stdout: "pipe", stderr: "inherit" })
  const bareUrl = await firstLine(bare.stdout)
  const get = (url: string) => async () => {
    const response = await fetch(url, { headers: { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project } })
    if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}`)
    await response.text()
  }
  const bareGet = await time(get(bareUrl), ROUNDS * 3)
  const apiGet = await time(get(`${server.url}/v1/sandboxes/${sandbox.id}`), ROUNDS * 3)
  report("GET /v1/sandboxes/{id}", apiGet, { name: "bare Bun.serve + SQLite row", s: bareGet }, "ratio ≤ 2×")
  bare.kill()

  // 5. event commit → webhook received, and → frame on the live event stream. `occurred_at` is stamped inside the
  // committing transaction, so each sample is an upper bound of commit → arrival (same clock, 1 ms resolution).
  let hookWaiter: ((ms: number) => void) | undefined
  let streamWaiter: ((ms: number) => void) | undefined
  const receiver = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: async (request) => {
    const at = Date.now()
    const body = (await request.json()) as { occurred_at: string }
    hookWaiter?.(at - Date.parse(body.occurred_at))
    return new Response("ok")
  } })
  const hook = await http.post(`/v1/organizations/${boot.organization_id}/webhooks`, {
    token: boot.user_token,
    body: { name: "bench", url: `http://127.0.0.1:${receiver.port}/hook`, event_types: ["project.updated"] }
  })
  if (hook.status !== 201) throw new Error(`webhook create answered ${hook.status}: ${hook.text}`)
  const streamAbort = new AbortController()
  const stream = await fetch(`${server.url}/v1/events/stream?project_id=${boot.project_id}`, { headers: { authorization: `Bearer ${boot.user_token}` }, signal: streamAbort.signal })
  void (async () => {
    let buffer = ""
    const decoder = new TextDecoder()
    try {
      for await (const chunk of stream.body!) {
        const at = Date.now()
        buffer += decoder.decode(chunk, { stream: true })
        let end: number
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const data = buffer.slice(0, end).split("\n").find((line) => line.startsWith("data: "))
          buffer = buffer.slice(end + 2)
          if (data !== undefined) streamWaiter?.(at - Date.parse(JSON.parse(data.slice(6)).occurred_at))
        }
      }
    } catch {
      // aborted at the end
    }
  })()
  const hookLatency: Array<number> = []
  const streamLatency: Array<number> = []
  for (let i = 0; i < ROUNDS + 3; i++) {
    const delivered = new Promise<number>((resolve) => (hookWaiter = resolve))
    const framed = new Promise<number>((resolve) => (streamWaiter = resolve))
    await http.patch(`/v1/projects/${boot.project_id}`, { token: boot.user_token, body: { name: `Bench ${i}`, slug: `bench-${i}` } })
    const [hookMs, streamMs] = await Promise.all([delivered, framed])
    if (i >= 3) {
      hookLatency.push(hookMs)
      streamLatency.push(streamMs)
    }
  }
  streamAbort.abort()
  receiver.stop(true)
  report("event commit → webhook received", stats(hookLatency), undefined, "loopback")
  report("event commit → event stream frame", stats(streamLatency), undefined, "≤ 100 ms")

  // Computer use (bench/computer.ts).
  const computer = await benchComputer(http, auth, server.dataDir, (fn) => time(fn))
  report("screenshot 1280×800 png (API)", computer.screenshotApi, { name: "the runtime's own screenshot", s: computer.screenshotRuntime }, "p50 ≤ 150 ms")
  report("computer action, mouse move (API)", computer.actionApi, { name: "the runtime's own action", s: computer.actionRuntime }, "p50 ≤ 30 ms")
} finally {
  await server.stop()
}

// PostgreSQL beside SQLite (issue 9), when PostgreSQL is installed (BENCH_PG=0 skips it).
const sqliteFigures = {
  createReady: rows.find((r) => r.name === "create → ready (API)")!,
  get: rows.find((r) => r.name === "GET /v1/sandboxes/{id}")!
}
const pg = process.env["BENCH_PG"] !== "0" && pgBinDir() !== undefined ? await benchPostgres(ROUNDS) : undefined
console.log("\nbenchmark                              p50         p90         baseline p50                               ratio   target")
for (const r of rows) {
  const ratio = r.baseP50 !== undefined ? `${(r.p50 / r.baseP50).toFixed(2)}×` : "–"
  const base = r.baseline !== undefined ? `${fmt(r.baseP50!)} (${r.baseline})` : "–"
  console.log(`${r.name.padEnd(38)} ${fmt(r.p50).padEnd(11)} ${fmt(r.p90).padEnd(11)} ${base.padEnd(42)} ${ratio.padEnd(7)} ${r.target ?? ""}`)
}
for (const note of notes) console.log(note)
if (pg !== undefined) printPg(pg, sqliteFigures)
