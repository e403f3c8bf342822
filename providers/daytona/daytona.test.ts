/** The Daytona adapter against its emulator over the real local runtime: the shared conformance suite, plus wire checks. */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { conformance, conformanceInput, emulatedTarget } from "../core/conformance.ts"
import type { ProviderExecEvent } from "../core/Provider.ts"
import { makeDaytonaProvider } from "./adapter/index.ts"
import { startDaytonaEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("daytona", startDaytonaEmulator, (emulator) => makeDaytonaProvider({ baseUrl: emulator.baseUrl, apiKey: emulator.apiKey, mode: "emulated" }))

conformance("daytona (emulated)", setup)

describe("daytona wire", () => {
  it("refuses a wrong API key with an auth error, and maps 404 to absent", async () => {
    const { emulator, teardown } = await setup()
    try {
      const wrong = makeDaytonaProvider({ baseUrl: emulator.baseUrl, apiKey: "wrong", mode: "emulated" })
      const result = await Effect.runPromise(Effect.either(wrong.reconcileCreate("sbx_x")))
      expect(result._tag === "Left" && result.left.kind).toBe("auth")
      const response = await fetch(`${emulator.baseUrl}/sandbox/nope`, { headers: { authorization: `Bearer ${emulator.apiKey}` } })
      expect(response.status).toBe(404)
      expect(await response.json()).toMatchObject({ statusCode: 404 })
    } finally {
      await teardown()
    }
  })

  it("hands out a running command's output before it exits, in the order written, and the exit after", async () => {
    const { provider, teardown } = await setup()
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_live${Date.now()}`)))
      const { executionId } = await Effect.runPromise(provider.exec(sandbox, {
        command: ["sh", "-c", "echo first; echo oops >&2; sleep 3; echo second"],
        timeoutSeconds: 30,
        maxOutputBytes: 1 << 20,
        processId: `proc_live${Date.now()}`
      }))
      let early: ReadonlyArray<ProviderExecEvent> = []
      const deadline = Date.now() + 2500
      while (early.length < 2 && Date.now() < deadline) early = await Effect.runPromise(provider.execEvents(sandbox, executionId, 0))
      expect(early.map((e) => e.type)).toEqual(["stdout", "stderr"])
      expect(early.map((e) => (e.type === "exit" ? "" : Buffer.from(e.data).toString()))).toEqual(["first\n", "oops\n"])
      let all: ReadonlyArray<ProviderExecEvent> = early
      while (all.at(-1)?.type !== "exit") all = [...all, ...(await Effect.runPromise(provider.execEvents(sandbox, executionId, all.length)))]
      expect(all.map((e) => e.seq)).toEqual([0, 1, 2, 3])
      expect(Buffer.from((all[2] as { data: Uint8Array }).data).toString()).toBe("second\n")
      expect(all[3]).toMatchObject({ type: "exit", exitCode: 0 })
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 20_000)

  it("serves a download past a piece as a stream of the file's exact bytes, and a range of it whole", async () => {
    const { emulator, provider, teardown } = await setup()
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_dl${Date.now()}`)))
      const bytes = new Uint8Array(20 << 20).map((_, i) => (i * 31) % 253)
      await Effect.runPromise(provider.writeFile(sandbox, { path: "/workspace/big.bin", data: bytes.subarray(0, 10 << 20), mode: "overwrite", createParents: false }))
      await Effect.runPromise(provider.writeFile(sandbox, { path: "/workspace/big2.bin", data: bytes.subarray(10 << 20), mode: "overwrite", createParents: false }))
      const exec = await Effect.runPromise(provider.exec(sandbox, { command: ["sh", "-c", "cat /workspace/big2.bin >> /workspace/big.bin"], timeoutSeconds: 30, maxOutputBytes: 1024, processId: `proc_cat${Date.now()}` }))
      let events: ReadonlyArray<ProviderExecEvent> = []
      while (events.at(-1)?.type !== "exit") events = [...events, ...(await Effect.runPromise(provider.execEvents(sandbox, exec.executionId, events.length)))]
      const url = `${emulator.baseUrl}/toolbox/${sandbox.resourceId}/files/download?path=${encodeURIComponent("/workspace/big.bin")}`
      const headers = { authorization: `Bearer ${emulator.apiKey}` }
      const whole = await fetch(url, { headers })
      expect(whole.status).toBe(200)
      expect(Buffer.compare(Buffer.from(await whole.arrayBuffer()), Buffer.from(bytes))).toBe(0)
      const range = await fetch(url, { headers: { ...headers, range: "bytes=5-9" } })
      expect(range.status).toBe(206)
      expect(range.headers.get("content-range")).toBe(`bytes 5-9/${20 << 20}`)
      expect([...new Uint8Array(await range.arrayBuffer())]).toEqual([...bytes.subarray(5, 10)])
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 30_000)
})
