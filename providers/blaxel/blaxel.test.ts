/** The Blaxel adapter against its emulator over the real local runtime: the shared conformance suite, and stdin (wire checks: blaxel-remote.test.ts). */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { conformance, conformanceInput, emulatedTarget } from "../testing/conformance.ts"
import type { ExecEvent } from "../../src/runtime/LocalRuntime.ts"
import { makeBlaxelProvider } from "./adapter/index.ts"
import { startBlaxelEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("blaxel", startBlaxelEmulator, (emulator) =>
  makeBlaxelProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, workspace: emulator.workspace, mode: "emulated" }))

conformance("blaxel (emulated)", setup)

describe("blaxel (emulated): beyond conformance", () => {
  it("standard input: what is sent reaches the process, in order, and end-of-file ends it", async () => {
    const { provider, teardown } = await setup()
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_stdin${Date.now()}`)))
      const { executionId } = await Effect.runPromise(provider.exec(sandbox, { command: ["sh", "-c", "read l; echo \"$l\"; wc -c"], stdin: true, timeoutSeconds: 60, maxOutputBytes: 1024, processId: `proc_in${Date.now()}` }))
      await Effect.runPromise(provider.sendInput!(sandbox, executionId, new TextEncoder().encode("first line\n"), false))
      await Effect.runPromise(provider.sendInput!(sandbox, executionId, new TextEncoder().encode("12345"), true))
      let events: ReadonlyArray<ExecEvent> = []
      for (const deadline = Date.now() + 20_000; events.at(-1)?.type !== "exit" && Date.now() < deadline;) events = await Effect.runPromise(provider.execEvents(sandbox, executionId, 0))
      expect(events.flatMap((e) => (e.type === "stdout" ? [Buffer.from(e.data).toString()] : [])).join("")).toBe("first line\n5\n")
      expect(events.at(-1)).toMatchObject({ type: "exit", exitCode: 0 })
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 60_000)

  it("news: a quiet process's wait ends at its end, and a process flooding its log stream is left to polling once the stream carried its bound", async () => {
    const { provider, teardown } = await setup()
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_news${Date.now()}`)))
      const run = (command: string) => Effect.runPromise(provider.exec(sandbox, { command: ["sh", "-c", command], timeoutSeconds: 60, maxOutputBytes: 16 * 1024, processId: `proc_news${Date.now()}${Math.random()}` }))
      const timed = async (wait: Promise<void>) => {
        const started = Date.now()
        await wait
        return Date.now() - started
      }
      // Its output is no news (it is read only at the end): the wait lasts until the end.
      const quiet = await run("echo early; sleep 2; echo late")
      expect(await timed(Effect.runPromise(provider.execNews!(sandbox, quiet.executionId, 20_000)))).toBeGreaterThan(1_500)
      // 5 MB of lines, then quiet until told: the stream carried more than its bound (1 MiB here), so the wait ends
      // long before the command does, and the next ones are a poll's.
      const flood = await run("yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -c 5000000; while [ ! -e /workspace/end ]; do sleep 0.05; done")
      expect(await timed(Effect.runPromise(provider.execNews!(sandbox, flood.executionId, 20_000)))).toBeLessThan(5_000)
      expect(await timed(Effect.runPromise(provider.execNews!(sandbox, flood.executionId, 20_000)))).toBeLessThan(5_000)
      await Effect.runPromise(provider.writeFile(sandbox, { path: "/workspace/end", data: new Uint8Array(), mode: "overwrite", createParents: false }))
      let events: ReadonlyArray<ExecEvent> = []
      for (const deadline = Date.now() + 20_000; events.at(-1)?.type !== "exit" && Date.now() < deadline;) events = await Effect.runPromise(provider.execEvents(sandbox, flood.executionId, 0))
      expect(events.at(-1)).toMatchObject({ type: "exit", exitCode: 0, outputTruncated: true })
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 90_000)

  it("hostile: a sandbox's output without newlines reaches the SDK's streams (waited NDJSON, live logs) in lines of at most 1 MiB", async () => {
    const { emulator, teardown } = await setup()
    try {
      const base = emulator.apiUrl.replace(/\/v0$/, "")
      const headers = { authorization: `Bearer ${emulator.apiKey}`, "x-blaxel-workspace": emulator.workspace, "content-type": "application/json" }
      const created = await fetch(`${emulator.apiUrl}/sandboxes`, { method: "POST", headers, body: JSON.stringify({ metadata: { name: "flood" }, spec: { runtime: { generation: "mk3", memory: 2048 } } }) })
      expect(created.status).toBe(200)
      const run = `${base}/run/flood`
      // 3 MiB on one line, then a short one.
      const command = "head -c 3145728 /dev/zero | tr '\\0' a; echo; echo tail"
      const waited = await fetch(`${run}/process`, { method: "POST", headers: { ...headers, accept: "text/event-stream" }, body: JSON.stringify({ name: "flood", command, waitForCompletion: true }) })
      expect(waited.headers.get("content-type")).toBe("application/x-ndjson")
      const records = (await waited.text()).trim().split("\n").map((l) => JSON.parse(l) as { type: string; data: string })
      const out = records.filter((r) => r.type === "stdout")
      expect(out.map((r) => r.data.length)).toEqual([1024 * 1024, 1024 * 1024, 1024 * 1024, 4])
      expect(records.at(-1)).toMatchObject({ type: "result" })
      expect(JSON.parse(records.at(-1)!.data)).toMatchObject({ name: "flood", status: "completed", exitCode: 0 })
      const live = (await (await fetch(`${run}/process/flood/logs/stream`, { headers })).text()).trim().split("\n")
      expect(live.map((l) => l.length)).toEqual([7 + 1024 * 1024, 7 + 1024 * 1024, 7 + 1024 * 1024, 11])
    } finally {
      await teardown()
    }
  }, 60_000)
})
