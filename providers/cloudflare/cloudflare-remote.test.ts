/**
 * The Cloudflare adapter in `remote` mode against a scripted HttpClient: the requests it sends to the bridge Worker
 * (paths, bearer token, bodies, ranges, the idempotency key) and to Cloudflare's analytics, and how it reads the
 * answers (running polls, SSE frames, exit and error frames, ranges, error kinds, cost at the rate card). The
 * emulator-backed suite covers behaviour.
 */
import type { HttpClient } from "@effect/platform"
import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import { conformanceInput } from "../testing/conformance.ts"
import { DECLARED } from "../core/declared.ts"
import type { ExecEvent } from "../../src/runtime/LocalRuntime.ts"
import type { ProviderError, ProviderSandbox } from "../../src/providers/Provider.ts"
import { bodyBytes, bodyJson, type Call, json, scripted, type Step } from "../testing/scripted-client.ts"
import { argvWithEnvironment, bridgePath, makeCloudflareProvider, makeSseParser, usageCostMicrousd } from "./adapter/index.ts"

const BRIDGE = "https://bridge.example.workers.dev"
const provider = (client: HttpClient.HttpClient, extra: { accountId?: string; analyticsToken?: string } = {}) =>
  makeCloudflareProvider({ apiUrl: BRIDGE, apiKey: "bridge_token", mode: "remote", httpClient: client, pollIntervalMs: 1, eventsWaitMs: 50, ...extra })
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>) => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (result._tag === "Right") throw new Error("expected a failure")
  return result.left
}
const step = (method: string, path: string, reply: Step["reply"]): Step => ({ method, path, reply })
const authorized = (call: Call) => expect(call.headers["authorization"]).toBe("Bearer bridge_token")
const b64 = (s: string) => Buffer.from(s).toString("base64")
const sse = (frames: ReadonlyArray<readonly [string, string]>) =>
  new Response(frames.map(([event, data]) => `event: ${event}\ndata: ${data}\n\n`).join(""), { headers: { "content-type": "text/event-stream" } })
const SANDBOX: ProviderSandbox = {
  resourceId: "sb-1",
  resolvedResources: { vcpu: 1, memoryMb: 512, diskMb: null, architecture: "x86_64", providerSize: null },
  metadata: { sandboxId: "sbx_1", environment: { CONFORMANCE_SANDBOX: "yes" } }
}
const collect = async (p: ReturnType<typeof provider>, executionId: string) => {
  const events: Array<ExecEvent> = []
  for (let i = 0; i < 200 && !events.some((e) => e.type === "exit"); i++) events.push(...(await run(p.execEvents(SANDBOX, executionId, events.length))))
  return events
}

describe("cloudflare remote: capabilities and sandboxes", () => {
  it("declares the reference row; cost only with an account id and an analytics token", () => {
    expect(provider(scripted([]).client).capabilities).toEqual(DECLARED.cloudflare)
    expect(provider(scripted([]).client, { accountId: "acc", analyticsToken: "tok" }).capabilities).toEqual({ ...DECLARED.cloudflare, cost: true })
  })

  it("create posts no body with our id as Idempotency-Key, polls /running, and is remembered for a retry and reconcile", async () => {
    const s = scripted([
      step("POST", "/v1/sandbox", (call) => {
        authorized(call)
        expect(call.headers["idempotency-key"]).toBe("sbx_1")
        expect(call.request.body._tag).toBe("Empty")
        return json({ id: "sb-1" }, 201)
      }),
      step("GET", "/v1/sandbox/sb-1/running", () => json({ running: false, instanceId: "i-1" })),
      step("GET", "/v1/sandbox/sb-1/running", (call) => {
        authorized(call)
        return json({ running: true, instanceId: "i-1" })
      }),
      // The retried create and reconcile ask the bridge whether it still has it.
      step("GET", "/v1/sandbox/sb-1/running", () => json({ running: true, instanceId: "i-1" })),
      step("GET", "/v1/sandbox/sb-1/running", () => json({ running: true, instanceId: "i-1" })),
      step("GET", "/v1/sandbox/sb-1/running", () => json({ running: true, instanceId: "i-1" }))
    ])
    const p = provider(s.client)
    const created = await run(p.create(conformanceInput("sbx_1")))
    expect(created).toEqual({
      resourceId: "sb-1",
      // The bridge's one instance type (standard-2), whatever was asked.
      resolvedResources: { vcpu: 1, memoryMb: 6144, diskMb: 12_288, architecture: "x86_64", providerSize: null },
      metadata: { sandboxId: "sbx_1", bridge: "bridge.example.workers.dev", instanceId: "i-1", environment: { CONFORMANCE_SANDBOX: "yes" } }
    })
    expect((await run(p.create(conformanceInput("sbx_1")))).resourceId).toBe("sb-1")
    expect((await run(p.reconcileCreate("sbx_1")))?.resourceId).toBe("sb-1")
    expect(await run(p.reconcileCreate("sbx_other"))).toBeNull()
    expect(s.left()).toBe(0)
    // Nothing is sent for what the bridge cannot run.
    const none = scripted([])
    const input = conformanceInput("sbx_2")
    expect((await failureOf(provider(none.client).create({ ...input, source: { kind: "oci_image", image: "alpine" } }))).kind).toBe("unsupported")
    expect((await failureOf(provider(none.client).create({ ...input, resources: { ...input.resources, architecture: "arm64" } }))).kind).toBe("unsupported")
  })

  it("a create whose answer is lost is an unknown outcome; 401 is auth, 429 capacity, 503 unavailable", async () => {
    const lost = scripted([step("POST", "/v1/sandbox", () => "transport-error")])
    expect((await failureOf(provider(lost.client).create(conformanceInput("sbx_1")))).kind).toBe("unknown_outcome")
    for (const [status, kind] of [[401, "auth"], [429, "capacity"], [503, "unavailable"]] as const) {
      const s = scripted([step("POST", "/v1/sandbox", () => json({ error: "nope" }, status))])
      const e = await failureOf(provider(s.client).create(conformanceInput("sbx_1")))
      expect(e.kind).toBe(kind)
      expect(e.message).toContain("nope")
    }
  })

  it("inspect reads /running (404 absent); destroy deletes, a 404 is success; no pause or resume", async () => {
    const s = scripted([
      step("GET", "/v1/sandbox/sb-1/running", () => json({ running: true })),
      step("GET", "/v1/sandbox/sb-1/running", () => json({ running: false })),
      step("DELETE", "/v1/sandbox/sb-1", (call) => {
        authorized(call)
        return json({ ok: true })
      }),
      step("DELETE", "/v1/sandbox/sb-1", () => json({ error: "sandbox not found", code: "SANDBOX_NOT_FOUND" }, 404)),
      step("GET", "/v1/sandbox/sb-1/running", () => json({ error: "not found" }, 404))
    ])
    const p = provider(s.client)
    expect(await run(p.inspect(SANDBOX))).toBe("running")
    expect(await run(p.inspect(SANDBOX))).toBe("starting")
    await run(p.destroy(SANDBOX))
    await run(p.destroy(SANDBOX))
    expect(await run(p.inspect(SANDBOX))).toBe("absent")
    expect((await failureOf(p.pause(SANDBOX))).kind).toBe("unsupported")
    expect((await failureOf(p.resume(SANDBOX))).kind).toBe("unsupported")
    expect(s.left()).toBe(0)
  })

  it("cost: none without analytics; with them, the container usage by label at the rate card, the metrics as a fallback", async () => {
    expect(await run(provider(scripted([]).client).getCost(SANDBOX, { from: "2026-01-01T00:00:00Z", to: "2026-01-01T01:00:00Z" }))).toBeNull()
    const row = { dimensions: { instanceId: "i-1", region: "WNAM" }, sum: { cpuTimeSec: 100, allocatedMemory: 2 ** 30 * 3600, allocatedDisk: 1e9 * 3600, txBytes: 2e9 } }
    // 100 × 20 + 3600 × 2.5 + 3600 × 0.07 + 2 × 25,000 = 61,252 µUSD
    expect(usageCostMicrousd([row])).toBeCloseTo(61_252, 6)
    const s = scripted([
      step("POST", "/client/v4/graphql", (call) => {
        expect(call.url.host).toBe("api.cloudflare.com")
        expect(call.headers["authorization"]).toBe("Bearer analytics_tok")
        expect(bodyJson(call)).toMatchObject({
          variables: { accountTag: "acc_1", datetimeStart: "2026-01-01T00:00:00Z", datetimeEnd: "2026-01-01T01:00:00Z", label: "metal_sbx=sb-1" }
        })
        return json({ data: { viewer: { accounts: [{ usage: [row], metrics: [] }] } }, errors: null })
      }),
      step("POST", "/client/v4/graphql", () => json({ data: { viewer: { accounts: [{ usage: [], metrics: [row] }] } } })),
      step("POST", "/client/v4/graphql", () => json({ data: { viewer: { accounts: [{ usage: [], metrics: [] }] } } })),
      step("POST", "/client/v4/graphql", () => json({ data: null, errors: [{ message: "not authorized for that account" }] }))
    ])
    const p = provider(s.client, { accountId: "acc_1", analyticsToken: "analytics_tok" })
    const window = { from: "2026-01-01T00:00:00Z", to: "2026-01-01T01:00:00Z" }
    expect(await run(p.getCost(SANDBOX, window))).toEqual({
      amountMicrousd: 61_252n,
      measuredThrough: window.to,
      provenance: "provider_metered",
      confidence: "medium",
      rateCardVersion: "cloudflare-2026-04-21"
    })
    expect(await run(p.getCost(SANDBOX, window))).toMatchObject({ amountMicrousd: 61_252n, provenance: "estimated_rate_card", confidence: "low" })
    expect(await run(p.getCost(SANDBOX, window))).toBeNull()
    expect((await failureOf(p.getCost(SANDBOX, window))).message).toContain("not authorized")
  })
})

describe("cloudflare remote: commands", () => {
  it("exec sends argv (under env for the environment), the capped timeout and cwd, then reads base64 frames to the exit", async () => {
    const s = scripted([
      step("POST", "/v1/sandbox/sb-1/exec", (call) => {
        authorized(call)
        expect(call.headers["accept"]).toBe("text/event-stream")
        expect(bodyJson(call)).toEqual({ argv: ["env", "CONFORMANCE_SANDBOX=yes", "GREETING=hi there", "sh", "-c", "echo out"], timeout_ms: 30_000, cwd: "/tmp" })
        return sse([["stdout", b64("out\n")], ["stderr", b64("err\n")], ["stdout", b64("more")], ["exit", JSON.stringify({ exit_code: 3 })]])
      })
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, { command: ["sh", "-c", "echo out"], cwd: "/tmp", environment: { GREETING: "hi there" }, timeoutSeconds: 600, maxOutputBytes: 1000, processId: "proc_1" }))
    expect(executionId).toBe("cloudflare:proc_1")
    const events = await collect(p, executionId)
    expect(events.map((e) => [e.seq, e.type, e.type === "exit" ? e.exitCode : new TextDecoder().decode(e.data)])).toEqual([
      [0, "stdout", "out\n"],
      [1, "stderr", "err\n"],
      [2, "stdout", "more"],
      [3, "exit", 3]
    ])
    // Read again from a position: the same events.
    expect(await run(p.execEvents(SANDBOX, executionId, 3))).toEqual([events[3]])
    // A second exec of the same process (a lost answer) starts nothing.
    expect((await run(p.exec(SANDBOX, { command: ["true"], timeoutSeconds: 5, maxOutputBytes: 10, processId: "proc_1" }))).executionId).toBe(executionId)
    expect(s.left()).toBe(0)
  })

  it("output past the limit is cut; a timeout error frame is a timed-out exit; another error is stderr and an exit without code", async () => {
    const s = scripted([
      step("POST", "/v1/sandbox/sb-1/exec", (call) => {
        expect((bodyJson(call) as { timeout_ms: number }).timeout_ms).toBe(2000)
        return sse([["stdout", b64("0123456789")], ["error", JSON.stringify({ error: "the command ran longer than 2000 ms", code: "COMMAND_TIMEOUT" })]])
      }),
      step("POST", "/v1/sandbox/sb-1/exec", () => sse([["error", JSON.stringify({ error: "container crashed", code: "INTERNAL" })]]))
    ])
    const p = provider(s.client)
    const first = await run(p.exec({ ...SANDBOX, metadata: {} }, { command: ["yes"], timeoutSeconds: 2, maxOutputBytes: 4, processId: "proc_a" }))
    const cut = await collect(p, first.executionId)
    expect(cut).toEqual([
      { seq: 0, type: "stdout", data: new TextEncoder().encode("0123") },
      { seq: 1, type: "exit", exitCode: null, signal: "SIGKILL", cancelled: false, timedOut: true, outputTruncated: true }
    ])
    const second = await run(p.exec({ ...SANDBOX, metadata: {} }, { command: ["x"], timeoutSeconds: 2, maxOutputBytes: 100, processId: "proc_b" }))
    const crashed = await collect(p, second.executionId)
    expect(new TextDecoder().decode((crashed[0] as { data: Uint8Array }).data)).toBe("INTERNAL: container crashed\n")
    expect(crashed[1]).toMatchObject({ type: "exit", exitCode: null, timedOut: false, cancelled: false })
  })

  it("a refused exec fails the call; a stream without an exit is lost; stdin, terminals and cancel are unsupported; an unknown execution is lost", async () => {
    const s = scripted([
      step("POST", "/v1/sandbox/sb-1/exec", () => json({ error: "the bridge runs commands without environment overrides", code: "UNSUPPORTED" }, 400)),
      step("POST", "/v1/sandbox/sb-1/exec", () => sse([["stdout", b64("partial")]]))
    ])
    const p = provider(s.client)
    const input = { command: ["true"], timeoutSeconds: 5, maxOutputBytes: 100 }
    expect((await failureOf(p.exec(SANDBOX, { ...input, processId: "proc_x" }))).kind).toBe("invalid_request")
    const { executionId } = await run(p.exec(SANDBOX, { ...input, processId: "proc_y" }))
    const events = await run(p.execEvents(SANDBOX, executionId, 0))
    expect(events).toHaveLength(1)
    expect((await failureOf(p.execEvents(SANDBOX, executionId, 1))).kind).toBe("not_found")
    expect((await failureOf(p.exec(SANDBOX, { ...input, stdin: true, processId: "proc_z" }))).kind).toBe("unsupported")
    expect((await failureOf(p.exec(SANDBOX, { ...input, pty: { cols: 80, rows: 24 }, processId: "proc_z" }))).kind).toBe("unsupported")
    expect((await failureOf(p.cancelExec(SANDBOX, executionId))).kind).toBe("unsupported")
    expect((await failureOf(p.execEvents(SANDBOX, "cloudflare:proc_gone", 0))).kind).toBe("not_found")
    expect(p.sendInput).toBeUndefined()
    expect(s.left()).toBe(0)
  })

  it("the environment goes through env(1); names are checked; SSE frames are parsed across chunks", () => {
    expect(Either.getOrThrow(argvWithEnvironment(["ls"], {}))).toEqual(["ls"])
    expect(argvWithEnvironment(["ls"], { "A B": "1" })._tag).toBe("Left")
    expect(argvWithEnvironment(["X=1"], { A: "1" })._tag).toBe("Left")
    const parser = makeSseParser()
    expect(parser.push(": started\n\nevent: std")).toEqual([])
    expect(parser.push("out\r\ndata: aGk=\r\n\r\nevent: exit\ndata: {\"exit_code\":0}")).toEqual([{ event: "stdout", data: "aGk=" }])
    expect(parser.end()).toEqual([{ event: "exit", data: "{\"exit_code\":0}" }])
  })
})

describe("cloudflare remote: files", () => {
  it("paths only under /workspace/, each segment encoded", () => {
    expect(bridgePath("/workspace/a b/c.txt")).toBe("workspace/a%20b/c.txt")
    expect(bridgePath("/etc/passwd")).toBeUndefined()
    expect(bridgePath("/workspace/../etc")).toBeUndefined()
    expect(bridgePath("/workspace")).toBeUndefined()
  })

  it("read asks for the range and reads the size from Content-Range; 416 is past the end; 404 not found; nothing is sent outside /workspace", async () => {
    const s = scripted([
      step("GET", "/v1/sandbox/sb-1/file/workspace/a%20b.bin", (call) => {
        authorized(call)
        expect(call.headers["range"]).toBe("bytes=2-5")
        return new Response(new Uint8Array([2, 3, 4, 5]), { status: 206, headers: { "content-range": "bytes 2-5/10" } })
      }),
      step("GET", "/v1/sandbox/sb-1/file/workspace/a%20b.bin", () => new Response(null, { status: 416, headers: { "content-range": "bytes */10" } })),
      // A bridge that ignores ranges answers the whole file.
      step("GET", "/v1/sandbox/sb-1/file/workspace/a%20b.bin", () => new Response(new Uint8Array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]))),
      step("GET", "/v1/sandbox/sb-1/file/workspace/missing", () => json({ error: "no such file", code: "FILE_NOT_FOUND" }, 404))
    ])
    const p = provider(s.client)
    expect(await run(p.readFile(SANDBOX, { path: "/workspace/a b.bin", offsetBytes: 2, maxBytes: 4 }))).toEqual({ data: new Uint8Array([2, 3, 4, 5]), offsetBytes: 2, sizeBytes: 10, eof: false })
    expect(await run(p.readFile(SANDBOX, { path: "/workspace/a b.bin", offsetBytes: 20, maxBytes: 4 }))).toEqual({ data: new Uint8Array(0), offsetBytes: 20, sizeBytes: 10, eof: true })
    expect(await run(p.readFile(SANDBOX, { path: "/workspace/a b.bin", offsetBytes: 8, maxBytes: 4 }))).toEqual({ data: new Uint8Array([8, 9]), offsetBytes: 8, sizeBytes: 10, eof: true })
    expect((await failureOf(p.readFile(SANDBOX, { path: "/workspace/missing", offsetBytes: 0, maxBytes: 4 }))).kind).toBe("not_found")
    expect((await failureOf(p.readFile(SANDBOX, { path: "/tmp/x", offsetBytes: 0, maxBytes: 4 }))).kind).toBe("invalid_request")
    expect(s.left()).toBe(0)
  })

  it("write: create checks first and refuses an existing file; append is a read-modify-write; parents, list and delete are unsupported", async () => {
    const s = scripted([
      step("GET", "/v1/sandbox/sb-1/file/workspace/new.txt", (call) => {
        expect(call.headers["range"]).toBe("bytes=0-0")
        return json({ error: "no such file" }, 404)
      }),
      step("PUT", "/v1/sandbox/sb-1/file/workspace/new.txt", (call) => {
        authorized(call)
        expect(call.headers["content-type"]).toBe("application/octet-stream")
        expect([...bodyBytes(call)]).toEqual([1, 2, 3])
        return json({ ok: true })
      }),
      step("GET", "/v1/sandbox/sb-1/file/workspace/new.txt", () => new Response(new Uint8Array([1]), { status: 206, headers: { "content-range": "bytes 0-0/3" } })),
      step("GET", "/v1/sandbox/sb-1/file/workspace/new.txt", () => new Response(new Uint8Array([1, 2, 3]), { status: 206, headers: { "content-range": "bytes 0-2/3" } })),
      step("PUT", "/v1/sandbox/sb-1/file/workspace/new.txt", (call) => {
        expect([...bodyBytes(call)]).toEqual([1, 2, 3, 4])
        return json({ ok: true })
      })
    ])
    const p = provider(s.client)
    const data = new Uint8Array([1, 2, 3])
    expect(await run(p.writeFile(SANDBOX, { path: "/workspace/new.txt", data, mode: "create", createParents: false }))).toEqual({ bytesWritten: 3, created: true })
    expect((await failureOf(p.writeFile(SANDBOX, { path: "/workspace/new.txt", data, mode: "create", createParents: false }))).kind).toBe("customer")
    expect(await run(p.writeFile(SANDBOX, { path: "/workspace/new.txt", data: new Uint8Array([4]), mode: "append", createParents: false }))).toEqual({ bytesWritten: 1, created: false })
    expect((await failureOf(p.writeFile(SANDBOX, { path: "/workspace/x/y", data, mode: "overwrite", createParents: true }))).kind).toBe("unsupported")
    expect((await failureOf(p.listFiles(SANDBOX, { path: "/workspace", recursive: false, maxEntries: 10 }))).kind).toBe("unsupported")
    expect((await failureOf(p.deleteFile(SANDBOX, { path: "/workspace/new.txt", recursive: false }))).kind).toBe("unsupported")
    expect((await failureOf(p.exposeHttpEndpoint(SANDBOX, { port: 8000, leaseSeconds: 60 }))).kind).toBe("unsupported")
    expect(s.left()).toBe(0)
  })

  it("BYOK: the organization's bridge, token and analytics account", async () => {
    const s = scripted([
      step("GET", "/v1/sandbox/sb-1/running", (call) => {
        expect(call.url.host).toBe("org-bridge.example.com")
        expect(call.headers["authorization"]).toBe("Bearer org_token")
        return json({ running: true })
      })
    ])
    const org = provider(s.client).withCredentials!({ api_url: "https://org-bridge.example.com", api_key: "org_token", account_id: "a", analytics_token: "t" })
    expect(org.capabilities.cost).toBe(true)
    expect(await run(org.inspect(SANDBOX))).toBe("running")
  })
})
