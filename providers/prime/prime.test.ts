/**
 * The Prime adapter against its emulator over the real local runtime: the shared conformance suite, plus what is
 * the emulator's own (keys, idempotency keys, Prime's limits, gateway tokens, command deadlines, a restart). Wire checks
 * (request bodies, protobuf bytes, refusals, cost): prime-remote.test.ts.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { conformance, conformanceInput, emulatedTarget } from "../testing/conformance.ts"
import type { ExecEvent } from "../../src/runtime/LocalRuntime.ts"
import { makePrimeProvider } from "./adapter/index.ts"
import { startPrimeEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("prime", startPrimeEmulator, (emulator) =>
  makePrimeProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }))

conformance("prime (emulated)", setup)

describe("prime emulator", () => {
  const api = (emulator: { apiUrl: string; apiKey: string }, method: string, path: string, body?: unknown) =>
    fetch(`${emulator.apiUrl}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${emulator.apiKey}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })

  it("a wrong key is auth; a repeated idempotency key is the same sandbox; Prime's limits are 422; a wrong gateway token is 401", async () => {
    const { emulator, provider, teardown } = await setup()
    try {
      const wrong = makePrimeProvider({ apiUrl: emulator.apiUrl, apiKey: "wrong", mode: "emulated" })
      const refused = await Effect.runPromise(Effect.either(wrong.reconcileCreate("sbx_x")))
      expect(refused._tag === "Left" && refused.left.kind).toBe("auth")

      const body = { name: "twice", docker_image: "ubuntu:22.04", cpu_cores: 1, memory_gb: 0.5, idempotency_key: "k-1", labels: ["a"] }
      const first = await (await api(emulator, "POST", "/sandbox", body)).json() as { id: string }
      const second = await (await api(emulator, "POST", "/sandbox", body)).json() as { id: string }
      expect(second.id).toBe(first.id)
      for (const bad of [{ cpu_cores: 1.5 }, { cpu_cores: 17 }, { memory_gb: 0.3 }, { memory_gb: 65 }, { disk_size_gb: 1 }, { arch: "arm64" }, { network_allowlist: ["x.com"] }]) {
        expect((await api(emulator, "POST", "/sandbox", { ...body, idempotency_key: null, ...bad })).status, JSON.stringify(bad)).toBe(422)
      }

      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_tok${Date.now()}`)))
      const grant = await (await api(emulator, "POST", `/sandbox/${sandbox.resourceId}/auth`)).json() as { gateway_url: string; user_ns: string; job_id: string }
      const download = await fetch(`${grant.gateway_url}/${grant.user_ns}/${grant.job_id}/download?path=/etc/hostname`, { headers: { authorization: "Bearer nope" } })
      expect(download.status).toBe(401)
      await Effect.runPromise(provider.destroy(sandbox))
      // A deleted sandbox has no gateway any more: its auth is refused, and the record says TERMINATED.
      expect((await api(emulator, "POST", `/sandbox/${sandbox.resourceId}/auth`)).status).toBe(409)
      expect(((await (await api(emulator, "GET", `/sandbox/${sandbox.resourceId}`)).json()) as { status: string }).status).toBe("TERMINATED")
      await Effect.runPromise(provider.destroy({ ...sandbox, resourceId: first.id }))
    } finally {
      await teardown()
    }
  }, 60_000)

  it("a command's timeout (Connect-Timeout-Ms) ends it: a timed-out exit; books and port survive a restart", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-prime-restart-"))
    const runtime = makeLocalRuntime(dataDir)
    let emulator = startPrimeEmulator(dataDir, runtime)
    try {
      const provider = makePrimeProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" })
      const sandbox = await Effect.runPromise(provider.create(conformanceInput("sbx_restart")))
      const { executionId } = await Effect.runPromise(provider.exec(sandbox, { command: ["sh", "-c", "echo started; sleep 30"], timeoutSeconds: 1, maxOutputBytes: 100, processId: "proc_deadline" }))
      let events: ReadonlyArray<ExecEvent> = []
      for (const deadline = Date.now() + 10_000; events.at(-1)?.type !== "exit" && Date.now() < deadline; await Bun.sleep(50)) {
        events = await Effect.runPromise(provider.execEvents(sandbox, executionId, 0))
      }
      expect(events.map((e) => (e.type === "exit" ? e : Buffer.from(e.data).toString()))).toEqual([
        "started\n",
        { seq: 1, type: "exit", exitCode: null, signal: "SIGKILL", cancelled: false, timedOut: true, outputTruncated: false }
      ])
      const firstUrl = emulator.apiUrl
      emulator.stop()
      emulator = startPrimeEmulator(dataDir, runtime)
      expect(emulator.apiUrl).toBe(firstUrl)
      expect(await Effect.runPromise(provider.inspect(sandbox))).toBe("running")
      expect((await Effect.runPromise(provider.reconcileCreate("sbx_restart")))?.resourceId).toBe(sandbox.resourceId)
      await Effect.runPromise(provider.destroy(sandbox))
      expect(await Effect.runPromise(provider.inspect(sandbox))).toBe("absent")
    } finally {
      emulator.stop()
      await Effect.runPromise(runtime.reap(new Set()))
    }
  }, 60_000)
})
