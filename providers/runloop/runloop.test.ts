/**
 * The Runloop adapter against its emulator over the real local runtime: the shared conformance suite, plus what is
 * the emulator's own (408s, keep-alive, suspend ending commands, books across a restart). Wire checks:
 * runloop-remote.test.ts.
 */
import { Effect, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { conformance, conformanceInput, emulatedTarget } from "../testing/conformance.ts"
import type { ExecEvent } from "../../src/runtime/LocalRuntime.ts"
import { makeRunloopProvider } from "./adapter/index.ts"
import { readOutputEvents } from "./adapter/processes.ts"
import { startRunloopEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("runloop", startRunloopEmulator, (emulator) =>
  makeRunloopProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }))

conformance("runloop (emulated)", setup)

describe("runloop emulator", () => {
  const api = (emulator: { apiUrl: string; apiKey: string }, method: string, path: string, body?: unknown) =>
    fetch(`${emulator.apiUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${emulator.apiKey}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })

  it("refuses a wrong key (auth); wait_for_status answers 408 when its window passes; keep-alive shuts a devbox down", async () => {
    const { emulator, teardown } = await emulatedTarget("runloop", (dataDir, runtime) => startRunloopEmulator(dataDir, runtime, { longPollMs: 200 }), (e) =>
      makeRunloopProvider({ apiUrl: e.apiUrl, apiKey: e.apiKey, mode: "emulated" }))()
    try {
      const wrong = makeRunloopProvider({ apiUrl: emulator.apiUrl, apiKey: "wrong", mode: "emulated" })
      const refused = await Effect.runPromise(Effect.either(wrong.reconcileCreate("sbx_x")))
      expect(refused._tag === "Left" && refused.left.kind).toBe("auth")

      const created = await (await api(emulator, "POST", "/v1/devboxes", { name: "short", launch_parameters: { resource_size_request: "X_SMALL", keep_alive_time_seconds: 1 } })).json() as { id: string; status: string }
      expect(created.status).toBe("provisioning")
      // A window passing (408) is asked again, as Runloop's clients do: here it is 200 ms, and a start under load takes longer.
      let running = await api(emulator, "POST", `/v1/devboxes/${created.id}/wait_for_status`, { statuses: ["running"] })
      for (let tries = 0; running.status === 408 && tries < 100; tries++) running = await api(emulator, "POST", `/v1/devboxes/${created.id}/wait_for_status`, { statuses: ["running"] })
      expect((await running.json() as { status: string }).status).toBe("running")
      const started = Date.now()
      const late = await api(emulator, "POST", `/v1/devboxes/${created.id}/wait_for_status`, { statuses: ["suspended"] })
      expect(late.status).toBe(408)
      // Its 200 ms window, not the default 30 s (with room for a loaded machine).
      expect(Date.now() - started).toBeLessThan(5_000)
      expect((await api(emulator, "POST", `/v1/devboxes/${created.id}/keep_alive`)).status).toBe(200)
      // Past its keep-alive (1 s of running since the signal), the devbox is shut down; it is still listed, as shut down.
      let after = { status: "running", shutdown_reason: null as string | null }
      for (const deadline = Date.now() + 5000; after.status !== "shutdown" && Date.now() < deadline; await Bun.sleep(100)) {
        after = await (await api(emulator, "GET", `/v1/devboxes/${created.id}`)).json() as typeof after
      }
      expect(after).toMatchObject({ status: "shutdown", shutdown_reason: "keep_alive_timeout" })
      const listed = await (await api(emulator, "GET", "/v1/devboxes?status=shutdown")).json() as { devboxes: Array<{ id: string }> }
      expect(listed.devboxes.map((d) => d.id)).toContain(created.id)
      expect((await api(emulator, "POST", `/v1/devboxes/${created.id}/shutdown`)).status).toBe(400)
      expect((await api(emulator, "POST", `/v1/devboxes/${created.id}/keep_alive`)).status).toBe(400)
    } finally {
      await teardown()
    }
  }, 30_000)

  it("hostile: a sandbox's output past the limit is read from Runloop's event stream only up to the limit, and cut there", async () => {
    const { provider, emulator, teardown } = await setup()
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_flood${Date.now()}`)))
      // 8 MiB in 16-byte lines: far past the last 100 lines an execution's answer carries, so the stream is read.
      const { executionId } = await Effect.runPromise(provider.exec(sandbox, { command: ["sh", "-c", "yes 0123456789abcde | head -c 8388608"], timeoutSeconds: 60, maxOutputBytes: 65_536, processId: `proc_f${Date.now()}` }))
      let events: ReadonlyArray<ExecEvent> = []
      for (const deadline = Date.now() + 30_000; events.at(-1)?.type !== "exit" && Date.now() < deadline;) events = await Effect.runPromise(provider.execEvents(sandbox, executionId, 0))
      const output = events.flatMap((e) => (e.type === "stdout" ? [Buffer.from(e.data).toString()] : [])).join("")
      expect(output.length).toBe(65_536)
      expect(output.startsWith("0123456789abcde\n0123456789abcde\n")).toBe(true)
      expect(events.at(-1)).toMatchObject({ type: "exit", exitCode: 0, outputTruncated: true })

      // The stream itself, counted as it is pulled: reading stops at the cap, never the whole 8 MiB.
      const runloopId = JSON.parse(Buffer.from(executionId.slice("runloop:".length), "base64url").toString())[0] as string
      const response = await fetch(`${emulator.apiUrl}/v1/devboxes/${sandbox.resourceId}/executions/${runloopId}/stream_stdout_updates`, { headers: { authorization: `Bearer ${emulator.apiKey}` } })
      let pulled = 0
      const counted = response.body!.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({ transform: (chunk, c) => { pulled += chunk.length; c.enqueue(chunk) } }))
      const read = await Effect.runPromise(readOutputEvents(Stream.fromReadableStream(() => counted, (e) => e), 65_536, (m) => new Error(m) as never))
      expect(read).toMatchObject({ truncated: true })
      expect(Buffer.byteLength(read.output)).toBe(65_536)
      expect(pulled).toBeLessThan(4 * 1024 * 1024)
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 60_000)

  it("suspend ends running commands (Runloop keeps the disk, not the processes); resume runs commands again", async () => {
    const { provider, teardown } = await setup()
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_susp${Date.now()}`)))
      const { executionId } = await Effect.runPromise(provider.exec(sandbox, { command: ["sleep", "30"], timeoutSeconds: 60, maxOutputBytes: 100, processId: `proc_s${Date.now()}` }))
      await Effect.runPromise(provider.pause(sandbox))
      const ended = await Effect.runPromise(provider.execEvents(sandbox, executionId, 0))
      expect(ended.at(-1)).toMatchObject({ type: "exit", exitCode: null, signal: "SIGKILL", cancelled: true })
      await Effect.runPromise(provider.resume(sandbox))
      const again = await Effect.runPromise(provider.exec(sandbox, { command: ["echo", "back"], timeoutSeconds: 60, maxOutputBytes: 100, processId: `proc_b${Date.now()}` }))
      let events: ReadonlyArray<ExecEvent> = []
      for (const deadline = Date.now() + 5000; events.at(-1)?.type !== "exit" && Date.now() < deadline;) events = await Effect.runPromise(provider.execEvents(sandbox, again.executionId, 0))
      expect(events.map((e) => e.type)).toEqual(["stdout", "exit"])
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 30_000)

  it("its books survive a restart: the devbox, its executions (one that ended meanwhile too) and its usage", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-runloop-restart-"))
    const runtime = makeLocalRuntime(dataDir)
    let emulator = startRunloopEmulator(dataDir, runtime)
    try {
      const firstUrl = emulator.apiUrl
      const provider = makeRunloopProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" })
      const sandbox = await Effect.runPromise(provider.create(conformanceInput("sbx_restart")))
      const { executionId } = await Effect.runPromise(provider.exec(sandbox, { command: ["sh", "-c", "sleep 1; echo done"], timeoutSeconds: 60, maxOutputBytes: 100, processId: "proc_restart" }))
      emulator.stop()
      await Bun.sleep(1500)
      emulator = startRunloopEmulator(dataDir, runtime)
      // The same port: the adapter (and the gateway's stored sandboxes) reach it as before.
      expect(emulator.apiUrl).toBe(firstUrl)
      expect(await Effect.runPromise(provider.inspect(sandbox))).toBe("running")
      expect((await Effect.runPromise(provider.reconcileCreate("sbx_restart")))?.resourceId).toBe(sandbox.resourceId)
      const events = await Effect.runPromise(provider.execEvents(sandbox, executionId, 0))
      expect(events.map((e) => (e.type === "exit" ? `exit ${e.exitCode}` : Buffer.from(e.data).toString()))).toEqual(["done\n", "exit 0"])
      const cost = await Effect.runPromise(provider.getCost(sandbox, { from: new Date(0).toISOString(), to: new Date().toISOString() }))
      expect(cost?.amountMicrousd).toBeGreaterThan(0n)
      await Effect.runPromise(provider.destroy(sandbox))
      expect(await Effect.runPromise(provider.inspect(sandbox))).toBe("absent")
    } finally {
      emulator.stop()
      await Effect.runPromise(runtime.reap(new Set()))
    }
  }, 30_000)
})
