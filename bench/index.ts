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
 * trip on a desktop (bench/computer.ts; `--computer` runs only those). Issue 28: an idle gateway's CPU a second
 * (bench/idle.ts). Prints a table; exits 0.
 *
 * This file is the runner: the modes, the gateway every section measures, the order of the sections. Each section
 * is a file of its own (create.ts, exec.ts, files.ts, gibTransfers.ts, get.ts, events.ts, idle.ts), timed with measure.ts
 * and reported through report.ts.
 */
import { api, bootstrap, startServer } from "../test/support/server.ts"
import { createReadySandbox } from "../test/support/sandbox.ts"
import { pgBinDir } from "../test/support/postgres.ts"
import { benchComputer } from "./computer.ts"
import { benchCreate } from "./create.ts"
import { benchEvents } from "./events.ts"
import { benchExec } from "./exec.ts"
import { benchFiles } from "./files.ts"
import { benchGet } from "./get.ts"
import { benchGiB } from "./gibTransfers.ts"
import { benchIdle } from "./idle.ts"
import { type BenchGateway, GATEWAY_POOL, ROUNDS, time } from "./measure.ts"
import { benchPostgres } from "./postgres.ts"
import { fmt, printPg, printTable, report, rows } from "./report.ts"
import { runScratch } from "../test/support/tmp-global-setup.ts"

// Its gateways' DATA_DIRs (a GiB of files among them) in a TMPDIR of its own, removed when the benchmark ends.
process.on("exit", runScratch())

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
// The gateway's own warm pool (test servers start none): create → ready is measured as an operator's gateway does it.
const server = await startServer({ env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", REGISTRY_ALLOW_PRIVATE: "true", ...GATEWAY_POOL } })
const http = api(server.url)
const boot = await bootstrap(server.dataDir, "bench@example.com")
const auth = { token: boot.api_key, project: boot.project_id }
const gateway: BenchGateway = { server, http, boot, auth }

try {
  // 1. create → ready: through the API, on each plugin's emulator, from a cached OCI image (bench/create.ts).
  await benchCreate(gateway)

  const sandbox = await createReadySandbox(http, auth)

  // 2. exec round trip and live output (bench/exec.ts).
  await benchExec(gateway, sandbox)

  // 3. a 10 MiB file through the API and the raw route (bench/files.ts).
  await benchFiles(gateway, sandbox)

  // 3b, 3c. 1 GiB up and down, with the gateway's RSS (bench/gibTransfers.ts).
  await benchGiB(gateway)

  // 4. GET /v1/sandboxes/{id} vs a bare Bun.serve (bench/get.ts).
  await benchGet(gateway, sandbox)

  // 5. event commit → webhook, and → event stream frame (bench/events.ts).
  await benchEvents(gateway)

  // Computer use (bench/computer.ts).
  const computer = await benchComputer(http, auth, server.dataDir, (fn) => time(fn))
  report("screenshot 1280×800 png (API)", computer.screenshotApi, { name: "the runtime's own screenshot", s: computer.screenshotRuntime }, "p50 ≤ 150 ms")
  report("computer action, mouse move (API)", computer.actionApi, { name: "the runtime's own action", s: computer.actionRuntime }, "p50 ≤ 30 ms")

  // 6. the gateway with nothing to do (bench/idle.ts).
  await benchIdle(gateway)
} finally {
  await server.stop()
}

// PostgreSQL beside SQLite (issue 9), when PostgreSQL is installed (BENCH_PG=0 skips it).
const sqliteFigures = {
  createReady: rows.find((r) => r.name === "create → ready (API)")!,
  createWarm: rows.find((r) => r.name === "  create → ready, a warm jail each"),
  get: rows.find((r) => r.name === "GET /v1/sandboxes/{id}")!
}
const pg = process.env["BENCH_PG"] !== "0" && pgBinDir() !== undefined ? await benchPostgres(ROUNDS) : undefined
printTable()
if (pg !== undefined) printPg(pg, sqliteFigures)
