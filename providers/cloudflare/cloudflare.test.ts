/** The Cloudflare adapter against its bridge emulator over the real local runtime: the shared conformance suite (wire checks: cloudflare-remote.test.ts). */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { conformance, conformanceInput, emulatedTarget } from "../testing/conformance.ts"
import { DECLARED } from "../core/declared.ts"
import { makeCloudflareProvider } from "./adapter/index.ts"
import { startCloudflareEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("cloudflare", startCloudflareEmulator, (emulator) =>
  makeCloudflareProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }))

conformance("cloudflare (emulated)", setup)

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)

describe("cloudflare (emulated): beyond conformance", () => {
  let target: Awaited<ReturnType<typeof setup>>
  beforeAll(async () => {
    target = await setup()
  }, 60_000)
  afterAll(() => target.teardown(), 60_000)

  it("declares the reference row (no cost without analytics); the bridge refuses env, stdin and a wrong token; append; paths outside /workspace", async () => {
    const { emulator, provider } = target
    expect(provider.capabilities).toEqual({ ...DECLARED.cloudflare, sources: ["environment"] })
    expect(provider.capabilities.process?.maxTimeoutSeconds).toBe(30)
    const sandbox = await run(provider.create(conformanceInput(`sbx_extra${Date.now()}`)))
    const auth = { authorization: `Bearer ${emulator.apiKey}`, "content-type": "application/json" }
    const exec = (body: unknown, headers: Record<string, string> = auth) =>
      fetch(`${emulator.apiUrl}/v1/sandbox/${sandbox.resourceId}/exec`, { method: "POST", headers, body: JSON.stringify(body) })
    const env = await exec({ argv: ["true"], env: { A: "1" } })
    expect(env.status).toBe(400)
    expect(await env.json()).toMatchObject({ code: "UNSUPPORTED" })
    expect((await exec({ argv: ["cat"], stdin: "hi" })).status).toBe(400)
    expect((await exec({ argv: ["true"] }, { ...auth, authorization: "Bearer nope" })).status).toBe(401)
    // An empty env is no override; the stream ends with the exit frame.
    const ok = await exec({ argv: ["sh", "-c", "printf hi"], env: {}, timeout_ms: 120_000 })
    expect(ok.headers.get("content-type")).toContain("text/event-stream")
    expect(await ok.text()).toBe(`: started\n\nevent: stdout\ndata: ${Buffer.from("hi").toString("base64")}\n\nevent: exit\ndata: {"exit_code":0}\n\n`)

    const path = "/workspace/append.txt"
    await run(provider.writeFile(sandbox, { path, data: new TextEncoder().encode("one "), mode: "append", createParents: false }))
    const again = await run(provider.writeFile(sandbox, { path, data: new TextEncoder().encode("two"), mode: "append", createParents: false }))
    expect(again).toEqual({ bytesWritten: 3, created: false })
    const read = await run(provider.readFile(sandbox, { path, offsetBytes: 0, maxBytes: 100 }))
    expect(new TextDecoder().decode(read.data)).toBe("one two")
    const past = await run(provider.readFile(sandbox, { path, offsetBytes: 50, maxBytes: 10 }))
    expect(past).toMatchObject({ sizeBytes: 7, eof: true })
    expect(past.data.length).toBe(0)
    const outside = await run(Effect.flip(provider.readFile(sandbox, { path: "/etc/passwd", offsetBytes: 0, maxBytes: 10 })))
    expect(outside.kind).toBe("invalid_request")
    const wrong = makeCloudflareProvider({ apiUrl: emulator.apiUrl, apiKey: "nope", mode: "emulated" })
    expect((await run(Effect.flip(wrong.inspect(sandbox)))).kind).toBe("auth")
    // An emulated sandbox is estimated at Cloudflare's prices.
    const cost = await run(provider.getCost(sandbox, { from: new Date(Date.now() - 60_000).toISOString(), to: new Date().toISOString() }))
    expect(cost).toMatchObject({ provenance: "estimated_rate_card" })
    await run(provider.destroy(sandbox))
  }, 60_000)

  it("a command past its timeout (capped at the bridge's 30 s) is a timed-out exit", async () => {
    const { provider } = target
    const sandbox = await run(provider.create(conformanceInput(`sbx_tmo${Date.now()}`)))
    const { executionId } = await run(provider.exec(sandbox, { command: ["sleep", "10"], timeoutSeconds: 1, maxOutputBytes: 100, processId: `proc_tmo${Date.now()}` }))
    let events: ReadonlyArray<{ readonly type: string }> = []
    const deadline = Date.now() + 20_000
    while (!events.some((e) => e.type === "exit") && Date.now() < deadline) events = await run(provider.execEvents(sandbox, executionId, 0))
    expect(events.at(-1)).toMatchObject({ type: "exit", exitCode: null, timedOut: true })
    // An execution this instance never started (a restarted gateway) is lost, not retried.
    expect((await run(Effect.flip(provider.execEvents(sandbox, "cloudflare:proc_unknown", 0)))).kind).toBe("not_found")
    await run(provider.destroy(sandbox))
  }, 60_000)
})
