/**
 * How `bun run bench` measures (bench/index.ts runs the sections): timed rounds after a warm-up, read as p50 and p90,
 * and what every section of the main run is given — the gateway it measures and its owner's credentials.
 */
import * as fs from "node:fs"
import type { api, Bootstrap, RunningServer } from "../test/support/server.ts"

export const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 30)
/** The gateway's default warm pool and its growth (test servers start none); set either variable to try another. */
export const GATEWAY_POOL = {
  RUNTIME_WARM_POOL: process.env["RUNTIME_WARM_POOL"] ?? "2",
  RUNTIME_WARM_POOL_MAX: process.env["RUNTIME_WARM_POOL_MAX"] ?? "8"
}

/** The pause before each create of the warm rows: long enough for the pool to refill (a jail starts in ~100 ms here). */
const WARM_PAUSE_MS = 300

/**
 * create → ready one at a time, as issue 28's warm-pool target means it: each create finds the pool refilled and
 * nothing else going on — the sandbox before it deleted at the start of the pause (not timed), so `rounds` creates
 * are each measured alone. `create` answers once the sandbox is ready, with its id.
 */
export const warmCreates = async (create: () => Promise<string>, remove: (id: string) => Promise<unknown>, rounds: number) => {
  const samples: Array<number> = []
  let previous: string | undefined
  for (let i = 0; i < rounds + 1; i++) {
    if (previous !== undefined) await remove(previous)
    await Bun.sleep(WARM_PAUSE_MS)
    const t = performance.now()
    previous = await create()
    // The first one warms up (the pool's size, the code's first run).
    if (i > 0) samples.push(performance.now() - t)
  }
  if (previous !== undefined) await remove(previous)
  return stats(samples)
}

/** The gateway the main run measures (started with webhooks and registries on loopback allowed), and its owner. */
export interface BenchGateway {
  readonly server: RunningServer
  readonly http: ReturnType<typeof api>
  readonly boot: Bootstrap
  readonly auth: { readonly token: string; readonly project: string }
}

/** A process's CPU so far (utime + stime), in seconds; 0 once it is gone. */
export const processCpuSeconds = (pid: number) => {
  let stat = ""
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  } catch {}
  const fields = stat.split(") ")[1]?.split(" ") ?? []
  return (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) / 100 // USER_HZ on Linux
}

/** The first line a helper process prints (its URL or port). */
export const firstLine = async (stream: ReadableStream<Uint8Array>) => {
  const decoder = new TextDecoder()
  let text = ""
  for await (const chunk of stream) {
    text += decoder.decode(chunk)
    if (text.includes("\n")) break
  }
  return text.split("\n")[0]!.trim()
}

export const stats = (samples: Array<number>) => {
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
  return { p50: at(0.5), p90: at(0.9), n: sorted.length }
}

/** `timesItself`: `fn` answers the milliseconds to count (what it does before its timed part is not counted). */
export const time = async (fn: () => Promise<unknown>, rounds = ROUNDS, warmup = 3, timesItself = false) => {
  for (let i = 0; i < warmup; i++) await fn()
  const samples: Array<number> = []
  for (let i = 0; i < rounds; i++) {
    const t = performance.now()
    const answer = await fn()
    samples.push(timesItself && typeof answer === "number" ? answer : performance.now() - t)
  }
  return stats(samples)
}
