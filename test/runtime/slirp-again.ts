/**
 * Run by isolation.test.ts with a stand-in slirp4netns ahead on PATH (Bun's spawns keep the environment the process
 * started with, so the test cannot change it for its own runtime): creates a sandbox with internet on a runtime of its
 * own, prints whether its default route goes out through tap0, and destroys it.
 * Usage: `bun test/runtime/slirp-again.ts <data dir>`.
 */
import { Effect } from "effect"
import { hasDefaultRoute } from "../../src/runtime/JailNetwork.ts"
import { makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { sh } from "./support.ts"

const rt = makeLocalRuntime(process.argv[2]!)
try {
  const created = await Effect.runPromise(Effect.either(rt.create({ id: "net-again", vcpu: 1, memoryMb: 256, internet: true })))
  if (created._tag === "Left") console.log(JSON.stringify({ created: false, error: created.left.message }))
  else console.log(JSON.stringify({ created: true, routed: hasDefaultRoute((await sh(rt, "net-again", "cat /proc/net/route")).stdout, "tap0") }))
} finally {
  await Effect.runPromise(Effect.either(rt.destroy("net-again")))
  await Effect.runPromise(rt.shutdown)
}
// The runtime's timers would keep the process for its sweep period.
process.exit(0)
