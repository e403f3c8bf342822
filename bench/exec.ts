/**
 * A process's round trip (issue 3: p50 ≤ 3× spawning the same bwrap jail directly; issue 13: run and wait ≤ 2.5×
 * a minimal bwrap spawn) and how soon a follower reads a line the process wrote (issue 13: p50 ≤ 25 ms).
 */
import * as fs from "node:fs"
import { Effect } from "effect"
import { makeLocalRuntime } from "../src/runtime/LocalRuntimeLive.ts"
import { tempDataDir } from "../test/support/server.ts"
import { idempotencyKey, poll } from "../test/support/sandbox.ts"
import { type BenchGateway, processCpuSeconds, ROUNDS, stats, time } from "./measure.ts"
import { notes, report } from "./report.ts"

export const benchExec = async ({ server, http, auth }: BenchGateway, sandbox: { readonly id: string }) => {
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

  // Quiet processes: the gateway's CPU a second while ten commands run that write nothing (a server, a long build),
  // against the same gateway with none running. Its provider is polled less often the longer a command is quiet
  // (src/services/sandboxes/Processes.ts, pollCap): at 100 polls a second each, ten took most of a core.
  const cpuPerSecond = async (seconds: number) => {
    const before = processCpuSeconds(server.pid)
    await Bun.sleep(seconds * 1000)
    return ((processCpuSeconds(server.pid) - before) * 1000) / seconds
  }
  const idle = await cpuPerSecond(5)
  const sleepers: Array<string> = []
  for (let i = 0; i < 10; i++) {
    const started = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body: { command: ["sleep", "120"] }, headers: { "idempotency-key": idempotencyKey("q") } })
    sleepers.push(started.body.id)
  }
  await Bun.sleep(3000) // quiet by now
  const quiet = await cpuPerSecond(5)
  for (const id of sleepers) await http.post(`/v1/sandboxes/${sandbox.id}/processes/${id}/actions/cancel`, { ...auth, body: {} })
  for (const id of sleepers) await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}/processes/${id}`, auth)).body, (p) => p.state === "cancelled", 30_000, 50)
  notes.push(`ten quiet processes (sleep 120): the gateway's CPU ${quiet.toFixed(0)} ms a second, against ${idle.toFixed(0)} ms a second with none running`)
}
