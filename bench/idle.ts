/**
 * An idle gateway's CPU: what an operator's gateway costs with nothing to do (no request, no exchange or stream
 * open, its warm pool full), beside a bare Bun.serve in a process of its own measured over the same seconds.
 * Its background loops — the job runner's look for work, the event feed's, the watchdogs of open exchanges and
 * streams — are plain JavaScript or asleep while idle (src/services/OperationRunner.ts `waitForWork`).
 */
import { type BenchGateway, firstLine, processCpuSeconds } from "./measure.ts"
import { notes } from "./report.ts"

const BARE_SERVER = `const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("ok") }); console.log(server.port)`
const SETTLE_SECONDS = 10
const SECONDS = 15

export const benchIdle = async ({ server }: BenchGateway) => {
  const bare = Bun.spawn(["bun", "-e", BARE_SERVER], { stdout: "pipe", stderr: "inherit" })
  try {
    await firstLine(bare.stdout)
    // The pool's refills and the last section's jobs are over by then.
    await Bun.sleep(SETTLE_SECONDS * 1000)
    const before = { gateway: processCpuSeconds(server.pid), bare: processCpuSeconds(bare.pid) }
    await Bun.sleep(SECONDS * 1000)
    const perSecond = (now: number, then: number) => ((now - then) * 1000) / SECONDS
    const gateway = perSecond(processCpuSeconds(server.pid), before.gateway)
    const bareMs = perSecond(processCpuSeconds(bare.pid), before.bare)
    notes.push(`idle gateway (nothing in flight, ${SECONDS} s): ${gateway.toFixed(1)} ms of CPU a second; a bare Bun.serve ${bareMs.toFixed(1)} ms a second`)
  } finally {
    bare.kill()
  }
}
