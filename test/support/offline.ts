/**
 * No test leaves the machine: a provider SDK's flow runs in a fresh network namespace with only loopback up, beside
 * the emulators it talks to, so an SDK that falls back to its vendor's hostname reaches nothing (no resolver is
 * reachable, no route leaves: name resolution and connections fail at once).
 *
 *   const run = await runSdkFlow({ providers: ["e2b"], script: "test/sdk/e2b.flow.ts" })
 *   expect(run.report.ok).toBe(true)                     // run.status: the flow's exit status
 *
 * In the namespace (`unshare --net`, then `ip link set lo up`; root only), this file runs again with `--inside`:
 * it starts `sandbox-gateway emulate <providers> --json` on a data dir of its own, then the flow script with Bun,
 * its environment carrying what `emulate` printed for each SDK (`sdkEnv`, e.g. E2B_API_URL) plus `env`, and the
 * served emulators as JSON in OFFLINE_EMULATORS (test/sdk/flow.ts reads it); then it stops `emulate`, which
 * stops every sandbox it made, and the data dir is removed.
 *
 * The flow script (test/sdk/flow.ts `runFlow`) prints its report, `{ok, steps: [{name, status, error?|reason?}]}`,
 * as the last line of its stdout. A flow that does not end within `timeoutMs` is killed (status null).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { ServedEmulator } from "../../providers/emulatorCatalog.ts"
import type { FlowReport } from "../sdk/flow.ts"

export interface SdkFlowOptions {
  /** The emulators to serve (providers/emulate.ts: any but modal). */
  readonly providers: ReadonlyArray<string>
  /** The flow script, relative to the repository (run with Bun). */
  readonly script: string
  /** More environment for the flow (after each SDK's own, so it can override it). */
  readonly env?: Readonly<Record<string, string>>
  /** The flow's deadline (default 240 s). */
  readonly timeoutMs?: number
}

export interface SdkFlowRun {
  /** The flow's exit status; null when it was killed at its deadline. */
  readonly status: number | null
  /** Its report (the last line of its stdout), or null when it printed none. */
  readonly report: FlowReport | null
  readonly stdout: string
  readonly stderr: string
  /** What `emulate` printed to stderr (its errors, if any). */
  readonly emulateStderr: string
  /** The network interfaces of the namespace the flow ran in (`ip -o link`): loopback only. */
  readonly interfaces: ReadonlyArray<string>
}

const ROOT = path.resolve(import.meta.dirname, "../..")
const MAIN = path.join(ROOT, "bin/main.ts")
const PATH = `${process.env["PATH"] ?? "/usr/bin:/bin"}:/usr/sbin:/sbin`

interface Inside extends SdkFlowOptions {
  readonly dataDir: string
}

/** Runs `options.script` against the emulators of `options.providers`, all inside a namespace with only loopback. */
export const runSdkFlow = async (options: SdkFlowOptions): Promise<SdkFlowRun> => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sdk-flow-"))
  try {
    const inside: Inside = { ...options, dataDir }
    const child = Bun.spawn(
      ["unshare", "--net", "--", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\"", process.execPath, import.meta.filename, "--inside", JSON.stringify(inside)],
      { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, PATH } }
    )
    const [stdout, stderr] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
    const last = stdout.trim().split("\n").at(-1) ?? ""
    try {
      return JSON.parse(last) as SdkFlowRun
    } catch {
      throw new Error(`the offline runner did not report (exit ${child.exitCode}): ${stdout}\n${stderr}`)
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

/** `promise`, or undefined once `ms` passed (the timer is cleared either way: it keeps no process alive). */
const within = async <A>(promise: Promise<A>, ms: number): Promise<A | undefined> => {
  const { promise: elapsed, resolve } = Promise.withResolvers<undefined>()
  const timer = setTimeout(() => resolve(undefined), Math.max(0, ms))
  try {
    return await Promise.race([promise, elapsed])
  } finally {
    clearTimeout(timer)
  }
}

/** Reads a child's stdout up to its first line, within `ms`. */
const firstLine = async (stream: ReadableStream<Uint8Array>, ms: number): Promise<{ line: string | null; rest: ReadableStreamDefaultReader<Uint8Array> }> => {
  const reader = stream.getReader()
  let text = ""
  const deadline = Date.now() + ms
  while (!text.includes("\n")) {
    const chunk = await within(reader.read(), deadline - Date.now())
    if (chunk === undefined || chunk.done) return { line: null, rest: reader }
    text += new TextDecoder().decode(chunk.value)
  }
  return { line: text.slice(0, text.indexOf("\n")), rest: reader }
}

/** In the namespace: emulate, then the flow, then one JSON line (an SdkFlowRun) on stdout. */
const inside = async (options: Inside) => {
  const interfaces = (await new Response(Bun.spawn(["ip", "-o", "link"], { stdout: "pipe", env: { PATH } }).stdout).text())
    .trim().split("\n").map((line) => line.split(":")[1]?.trim() ?? line)
  const emulate = Bun.spawn(["bun", MAIN, "emulate", ...options.providers, "--json", "--data-dir", options.dataDir], { cwd: ROOT, stdout: "pipe", stderr: "pipe" })
  const emulateStderr = new Response(emulate.stderr).text()
  const report = (run: Omit<SdkFlowRun, "interfaces" | "emulateStderr">, emulateErr: string) =>
    process.stdout.write(`${JSON.stringify({ ...run, interfaces, emulateStderr: emulateErr } satisfies SdkFlowRun)}\n`)
  const { line, rest } = await firstLine(emulate.stdout, 60_000)
  if (line === null) {
    emulate.kill("SIGKILL")
    return report({ status: null, report: null, stdout: "", stderr: "emulate did not start" }, await emulateStderr)
  }
  rest.releaseLock()
  const served = (JSON.parse(line) as { emulators: Array<Omit<ServedEmulator, "stop">> }).emulators
  const sdkEnv = Object.assign({}, ...served.map((e) => e.sdkEnv)) as Record<string, string>
  const flow = Bun.spawn(["bun", options.script], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...sdkEnv, ...options.env, OFFLINE_EMULATORS: JSON.stringify(served) }
  })
  const deadline = setTimeout(() => flow.kill("SIGKILL"), options.timeoutMs ?? 240_000)
  const [stdout, stderr] = await Promise.all([new Response(flow.stdout).text(), new Response(flow.stderr).text(), flow.exited])
  clearTimeout(deadline)
  // emulate stops its emulators and every sandbox they made on SIGTERM.
  emulate.kill("SIGTERM")
  if ((await within(emulate.exited, 60_000)) === undefined) emulate.kill("SIGKILL")
  let flowReport: FlowReport | null = null
  try {
    flowReport = JSON.parse(stdout.trim().split("\n").at(-1) ?? "") as FlowReport
  } catch {}
  report({ status: flow.signalCode === null ? flow.exitCode : null, report: flowReport, stdout, stderr }, await emulateStderr)
}

if (import.meta.main && process.argv[2] === "--inside") await inside(JSON.parse(process.argv[3]!) as Inside)
