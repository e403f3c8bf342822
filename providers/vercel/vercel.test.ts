/** The Vercel adapter against its emulator over the real local runtime: the shared conformance suite (wire checks: vercel-remote.test.ts). */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { conformance, conformanceInput, emulatedTarget } from "../testing/conformance.ts"
import { makeVercelProvider, RATE_CARD } from "./adapter/index.ts"
import { startVercelEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("vercel", startVercelEmulator, (emulator) =>
  makeVercelProvider({ apiUrl: emulator.apiUrl, token: emulator.token, projectId: emulator.projectId, teamId: emulator.teamId, mode: "emulated" }))

conformance("vercel (emulated)", setup)

describe("vercel (emulated): beyond conformance", () => {
  let target: Awaited<ReturnType<typeof setup>>
  beforeAll(async () => {
    target = await setup()
  }, 60_000)
  afterAll(() => target.teardown(), 60_000)

  it("the lifetime is extended at the emulator; an offline sandbox has deny-all; cost is the metered usage at the rate card", async () => {
    const { emulator, provider } = target
    const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_extra${Date.now()}`)))
    const session = async () => {
      const res = await fetch(`${emulator.apiUrl}/v2/sandboxes/sessions/${String(sandbox.metadata["sessionId"])}?teamId=${emulator.teamId}`, { headers: { authorization: `Bearer ${emulator.token}` } })
      return ((await res.json()) as { session: { timeout: number; startedAt: number; networkPolicy: { mode: string } } }).session
    }
    const before = await session()
    expect(before.networkPolicy.mode).toBe("deny-all")
    await Effect.runPromise(provider.extendLifetime!(sandbox, 3600))
    const after = await session()
    expect(after.startedAt + after.timeout).toBeGreaterThanOrEqual(Date.now() + 3_600_000)
    const cost = await Effect.runPromise(provider.getCost(sandbox, { from: new Date(Date.now() - 60_000).toISOString(), to: new Date().toISOString() }))
    // At least 60 s of 2 GiB (706.67 µUSD) plus the create.
    expect(cost).toMatchObject({ provenance: "provider_metered", rateCardVersion: RATE_CARD.version })
    expect(cost!.amountMicrousd >= 707n).toBe(true)
    // A wrong token or team is refused as Vercel refuses it.
    const wrong = makeVercelProvider({ apiUrl: emulator.apiUrl, token: "nope", projectId: emulator.projectId, mode: "emulated" })
    expect((await Effect.runPromise(Effect.flip(wrong.inspect(sandbox)))).kind).toBe("auth")
    await Effect.runPromise(provider.destroy(sandbox))
  }, 60_000)

  it("the SDK's create and awaited command: a name made up when none is given, the SDK's network policy, refused what cannot be honoured; hostile: an awaited command's stream relays at most what the runtime keeps (16 MiB)", async () => {
    const { emulator } = target
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${emulator.apiUrl}${path}`, { method, headers: { authorization: `Bearer ${emulator.token}`, "content-type": "application/json" }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    const refused = async (body: Record<string, unknown>) => {
      const res = await call("POST", "/v3/sandboxes", { projectId: emulator.projectId, ...body })
      return { status: res.status, message: ((await res.json()) as { error: { message: string } }).error.message }
    }
    expect(await refused({ source: { type: "git", url: "https://example.com/r.git" } })).toMatchObject({ status: 400, message: expect.stringMatching(/^source: /) })
    expect(await refused({ networkPolicy: { allow: ["example.com"], subnets: { deny: ["10.0.0.0/8"] } } })).toMatchObject({ status: 400, message: expect.stringMatching(/^networkPolicy\.subnets: /) })
    expect(await refused({ networkPolicy: { allow: { "example.com": [] } } })).toMatchObject({ status: 400, message: expect.stringMatching(/rules per domain/) })
    const created = await call("POST", "/v3/sandboxes", { projectId: emulator.projectId, ports: [], networkPolicy: { allow: ["example.com"] }, futureField: 1 })
    expect(created.status).toBe(200)
    const { sandbox, session } = (await created.json()) as { sandbox: { name: string; networkPolicy: unknown }; session: { id: string } }
    expect(sandbox.name).toMatch(/^sbx-[0-9a-f]{16}$/)
    expect(sandbox.networkPolicy).toEqual({ mode: "custom", allowedDomains: ["example.com"] })

    // 17 MiB from the sandbox, awaited as the SDK awaits it: the stream's output stops at the runtime's 16 MiB, then the exit.
    const res = await call("POST", `/v2/sandboxes/sessions/${session.id}/cmd`, { command: "sh", args: ["-c", "head -c 17825792 /dev/zero | tr '\\0' a"], wait: true, logs: true })
    expect(res.headers.get("content-type")).toBe("application/x-ndjson")
    let data = 0
    let first: unknown
    let last: unknown
    let pending = ""
    const decoder = new TextDecoder()
    for await (const chunk of res.body!) {
      pending += decoder.decode(chunk, { stream: true })
      const lines = pending.split("\n")
      pending = lines.pop()!
      for (const line of lines) {
        const parsed = JSON.parse(line) as { stream?: string; data?: string; command?: unknown }
        first ??= parsed
        if (parsed.stream === "stdout") data += parsed.data!.length
        last = parsed
      }
    }
    expect(first).toMatchObject({ command: { exitCode: null, name: "sh" } })
    expect(data).toBe(16 * 1024 * 1024)
    expect(last).toMatchObject({ command: { exitCode: 0 } })
    await call("DELETE", `/v2/sandboxes/${sandbox.name}?projectId=${emulator.projectId}`)
  }, 120_000)
})
