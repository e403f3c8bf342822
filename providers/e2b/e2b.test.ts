/**
 * E2B: the Connect codec; the adapter's requests against a scripted HttpClient (exact wire shapes, error kinds,
 * re-attach semantics of real envd); and the adapter against its emulator over the real local runtime (the
 * shared conformance suite, pause, gateway restart, timeouts, stdin, auth and bad input on the wire).
 */
import type { HttpClient } from "@effect/platform"
import { ConfigProvider, Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AppConfig } from "../../src/Config.ts"
import { type ExecEvent, LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { tempDataDir } from "../../test/support/server.ts"
import { conformance } from "../testing/conformance.ts"
import { bodyBytes, bodyJson, type Call, json, type Reply, scripted, type Step } from "../testing/scripted-client.ts"
import type { CreateInput, ProviderSandbox, SandboxProvider } from "../../src/providers/Provider.ts"
import { E2B_CAPABILITIES, envdAtLeast, envdBaseUrl, makeE2BProvider, REPLAY_HEADER, signalOfStatus } from "./adapter/index.ts"
import { encodeEnvelope, END_STREAM, EnvelopeDecoder, EnvelopeError, trailerError } from "./connect.ts"
import { startE2BEmulator } from "./emulator/index.ts"
import { E2BPlugin } from "./plugin.ts"

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const runEither = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(effect))
const kindOf = async <A>(effect: Effect.Effect<A, { readonly kind: string }>) => {
  const result = await runEither(effect)
  return result._tag === "Left" ? result.left.kind : "succeeded"
}
const text = (events: ReadonlyArray<ExecEvent>, type: "stdout" | "stderr") =>
  events.filter((e) => e.type === type).map((e) => Buffer.from((e as { data: Uint8Array }).data).toString()).join("")

const input = (sandboxId: string, overrides: Partial<CreateInput> = {}): CreateInput => ({
  sandboxId,
  organizationId: "00000000-0000-4000-8000-000000000000",
  projectId: "prj_e2btest",
  source: { kind: "environment", environment: "metal/base", version: "latest" },
  resources: { vcpu: 1, memoryMb: 512, architecture: "any" },
  lifecycle: { runtimeTimeoutSeconds: 600, onRuntimeTimeout: "destroy", onIdleTimeout: "destroy" },
  internetAccess: false,
  providerOptions: {},
  environment: {},
  metadata: {},
  ...overrides
})

/** Reads events until the exit (acknowledging as it goes, like the gateway). */
const drain = async (provider: SandboxProvider, sandbox: ProviderSandbox, executionId: string, fromSeq = 0, deadlineMs = 20_000) => {
  const events: Array<ExecEvent> = []
  const deadline = Date.now() + deadlineMs
  while (!events.some((e) => e.type === "exit")) {
    if (Date.now() > deadline) throw new Error(`no exit within ${deadlineMs} ms (got ${events.length} events)`)
    events.push(...(await run(provider.execEvents(sandbox, executionId, fromSeq + events.length))))
    await Bun.sleep(5)
  }
  return events
}

describe("Connect envelopes", () => {
  it("encode and decode across arbitrary chunk boundaries, with the end-stream trailer", () => {
    const bytes = new Uint8Array([
      ...encodeEnvelope({ event: { start: { pid: 7 } } }),
      ...encodeEnvelope({ event: { data: { stdout: "aGk=" } } }),
      ...encodeEnvelope({ error: { code: "not_found", message: "gone" } }, END_STREAM)
    ])
    for (const size of [1, 3, 5, 17, bytes.length]) {
      const decoder = new EnvelopeDecoder()
      const out = []
      for (let i = 0; i < bytes.length; i += size) out.push(...decoder.push(bytes.subarray(i, i + size)))
      expect(out).toEqual([
        { flags: 0, message: { event: { start: { pid: 7 } } } },
        { flags: 0, message: { event: { data: { stdout: "aGk=" } } } },
        { flags: END_STREAM, message: { error: { code: "not_found", message: "gone" } } }
      ])
      expect(decoder.pending).toBe(0)
    }
    // The length is big-endian after one flag byte.
    expect([...encodeEnvelope({}, END_STREAM).subarray(0, 5)]).toEqual([2, 0, 0, 0, 2])
  })

  it("reads trailers and refuses compressed, oversized or non-JSON messages", () => {
    expect(trailerError({})).toBeNull()
    expect(trailerError({ error: { code: "deadline_exceeded", message: "late" } })).toEqual({ code: "deadline_exceeded", message: "late" })
    expect(trailerError({ error: { code: "made_up" } })).toEqual({ code: "unknown", message: "" })
    expect(() => new EnvelopeDecoder().push(encodeEnvelope({}, 0x01))).toThrow(EnvelopeError)
    expect(() => new EnvelopeDecoder().push(new Uint8Array([0, 0x7f, 0xff, 0xff, 0xff]))).toThrow(/too large/)
    expect(() => new EnvelopeDecoder().push(new Uint8Array([0, 0, 0, 0, 1, 0x7b]))).toThrow(/not valid JSON/)
  })

  it("maps envd's words for signals, compares envd versions and fills the host pattern", () => {
    expect(signalOfStatus("signal: killed")).toBe("SIGKILL")
    expect(signalOfStatus("signal: terminated")).toBe("SIGTERM")
    expect(signalOfStatus("signal: segmentation fault (core dumped)")).toBe("SIGSEGV")
    expect(signalOfStatus("exit status 1")).toBeNull()
    expect(envdAtLeast("0.5.7", "0.5.7")).toBe(true)
    expect(envdAtLeast("0.5.10", "0.5.7")).toBe(true)
    expect(envdAtLeast("0.4.9", "0.5.7")).toBe(false)
    expect(envdBaseUrl("https://{port}-{sandboxId}.e2b.app", "iabc")).toBe("https://49983-iabc.e2b.app")
    expect(envdBaseUrl("https://sandbox.e2b.app/", "iabc")).toBe("https://sandbox.e2b.app")
  })
})

// ---- the adapter against a scripted HttpClient ----

const envelopeBody = (call: Call) => new EnvelopeDecoder().push(bodyBytes(call)).map((e) => e.message)
const frames = (...messages: Array<unknown>) => {
  const parts = messages.map((m, i) => encodeEnvelope(m, i === messages.length - 1 ? END_STREAM : 0))
  return new Uint8Array(parts.flatMap((p) => [...p]))
}
/** A Connect stream response delivered in small chunks, so frames straddle reads. */
const stream = (bytes: Uint8Array, headers: Record<string, string> = {}) =>
  new Response(
    new ReadableStream<Uint8Array>({
      start: (controller) => {
        for (let i = 0; i < bytes.length; i += 7) controller.enqueue(bytes.slice(i, i + 7))
        controller.close()
      }
    }),
    { headers: { "content-type": "application/connect+json", ...headers } }
  )
const b64 = (s: string) => Buffer.from(s).toString("base64")

const SANDBOX: ProviderSandbox = {
  resourceId: "isbx1",
  resolvedResources: { vcpu: 2, memoryMb: 512, diskMb: 1024, architecture: "x86_64", providerSize: "base" },
  metadata: { templateID: "base", envdVersion: "0.5.7", timeoutSeconds: 900 }
}
const detail = (fields: Record<string, unknown> = {}) => ({
  templateID: "base",
  sandboxID: "isbx1",
  clientID: "c",
  startedAt: "2026-11-22T10:00:00.000Z",
  endAt: "2026-11-22T10:15:00.000Z",
  cpuCount: 2,
  memoryMB: 512,
  diskSizeMB: 1024,
  metadata: {},
  state: "running",
  envdVersion: "0.5.7",
  envdAccessToken: "tok-1",
  ...fields
})
const provider = (client: HttpClient.HttpClient, sandboxUrl = "https://sandbox.e2b.test") =>
  makeE2BProvider({ apiUrl: "https://api.e2b.test", sandboxUrl, apiKey: "e2b_0123", mode: "remote", httpClient: client })
const getDetail = (fields: Record<string, unknown> = {}): Step => ({ method: "GET", path: "/sandboxes/isbx1", reply: () => json(detail(fields)) })

describe("e2b adapter: control API requests", () => {
  it("create reconciles by metadata, then posts the sandbox and reads its resources", async () => {
    const s = scripted([
      {
        method: "GET",
        path: "/v2/sandboxes",
        reply: (call) => {
          expect(call.headers["x-api-key"]).toBe("e2b_0123")
          expect(call.url.searchParams.get("metadata")).toBe("metal.sandbox_id=sbx_one")
          expect(call.url.searchParams.get("state")).toBe("running,paused")
          return json([])
        }
      },
      {
        method: "POST",
        path: "/v2/sandboxes",
        reply: (call) => {
          expect(call.headers["content-type"]).toBe("application/json")
          expect(bodyJson(call)).toEqual({
            templateID: "my-template",
            timeout: 900,
            autoPause: false,
            allow_internet_access: true,
            metadata: { team: "a", "metal.sandbox_id": "sbx_one", "metal.project_id": "prj_e2btest", "metal.organization_id": "00000000-0000-4000-8000-000000000000" },
            envVars: { A: "1" }
          })
          return json({ sandboxID: "isbx1", templateID: "my-template", clientID: "c", envdVersion: "0.5.7", envdAccessToken: "tok-1" }, 201)
        }
      },
      getDetail({ templateID: "my-template", cpuCount: 4, memoryMB: 2048 })
    ])
    const created = await run(provider(s.client).create(input("sbx_one", {
      internetAccess: true,
      providerOptions: { template_id: "my-template" },
      environment: { A: "1" },
      metadata: { team: "a", "metal.sandbox_id": "spoofed" }
    })))
    expect(created).toEqual({
      resourceId: "isbx1",
      resolvedResources: { vcpu: 4, memoryMb: 2048, diskMb: 1024, architecture: "x86_64", providerSize: "my-template" },
      metadata: { templateID: "my-template", envdVersion: "0.5.7", timeoutSeconds: 900 }
    })
    expect(s.left()).toBe(0)
  })

  it("a first create posts at once: nothing made by an earlier create is looked for", async () => {
    const s = scripted([
      { method: "POST", path: "/v2/sandboxes", reply: () => json({ sandboxID: "isbx1", templateID: "base", clientID: "c", envdVersion: "0.5.7", envdAccessToken: "tok-1" }, 201) },
      getDetail()
    ])
    expect((await run(provider(s.client).create(input("sbx_one", { firstCreate: true })))).resourceId).toBe("isbx1")
    expect(s.left()).toBe(0)
  })

  it("create finds the existing sandbox instead of posting again", async () => {
    const s = scripted([
      { method: "GET", path: "/v2/sandboxes", reply: () => json([{ sandboxID: "isbx1", state: "running" }]) },
      getDetail(),
      getDetail()
    ])
    const found = await run(provider(s.client).create(input("sbx_one")))
    expect(found.resourceId).toBe("isbx1")
    expect(found.metadata["timeoutSeconds"]).toBe(900)
    expect(s.left()).toBe(0)
  })

  it("create refuses OCI images and arm64 before any request", async () => {
    const s = scripted([])
    expect(await kindOf(provider(s.client).create(input("sbx_x", { source: { kind: "oci_image", image: "ubuntu" } })))).toBe("unsupported")
    expect(await kindOf(provider(s.client).create(input("sbx_x", { resources: { vcpu: 1, memoryMb: 512, architecture: "arm64" } })))).toBe("unsupported")
    expect(s.calls).toHaveLength(0)
  })

  it("create failures carry the right kind (unknown outcomes are reconciled, capacity falls back)", async () => {
    const cases: Array<[Reply, string]> = [
      ["transport-error", "unknown_outcome"],
      [json({ code: 504, message: "timeout" }, 504), "unknown_outcome"],
      [json({ code: 503, message: "no room", error_code: "sandbox_capacity_unavailable" }, 503), "capacity"],
      [json({ code: 503, message: "down" }, 503), "unavailable"],
      [json({ code: 429, message: "slow down" }, 429), "capacity"],
      [json({ code: 401, message: "Invalid API key" }, 401), "auth"],
      [json({ code: 400, message: "bad template" }, 400), "invalid_request"]
    ]
    for (const [reply, kind] of cases) {
      const s = scripted([{ method: "GET", path: "/v2/sandboxes", reply: () => json([]) }, { method: "POST", path: "/v2/sandboxes", reply: () => reply }])
      expect(await kindOf(provider(s.client).create(input("sbx_k")))).toBe(kind)
    }
  })

  it("inspect, pause, resume and destroy speak the lifecycle routes", async () => {
    const s = scripted([
      getDetail({ state: "paused" }),
      { method: "GET", path: "/sandboxes/isbx1", reply: () => json({ code: 404, message: "not found" }, 404) },
      {
        method: "POST",
        path: "/sandboxes/isbx1/pause",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ memory: true })
          return new Response(null, { status: 204 })
        }
      },
      { method: "POST", path: "/sandboxes/isbx1/pause", reply: () => json({ code: 409, message: "already paused" }, 409) },
      getDetail({ state: "paused" }),
      {
        method: "POST",
        path: "/v2/sandboxes/isbx1/connect",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ timeout: 900 })
          return json({ sandboxID: "isbx1", templateID: "base", clientID: "c", envdVersion: "0.5.7", envdAccessToken: "tok-2" }, 201)
        }
      },
      { method: "DELETE", path: "/sandboxes/isbx1", reply: () => new Response(null, { status: 204 }) },
      { method: "DELETE", path: "/sandboxes/isbx1", reply: () => json({ code: 404, message: "gone" }, 404) }
    ])
    const p = provider(s.client)
    expect(await run(p.inspect(SANDBOX))).toBe("paused")
    expect(await run(p.inspect(SANDBOX))).toBe("absent")
    await run(p.pause(SANDBOX))
    await run(p.pause(SANDBOX)) // 409 while already paused is success
    await run(p.resume(SANDBOX))
    await run(p.destroy(SANDBOX))
    await run(p.destroy(SANDBOX)) // idempotent
    expect(s.left()).toBe(0)
  })

  it("cost follows the rate card; HTTP endpoints are unsupported", async () => {
    const p = provider(scripted([]).client)
    const oneSecond = { from: "2026-11-22T10:00:00.000Z", to: "2026-11-22T10:00:01.000Z" }
    const small = { ...SANDBOX, resolvedResources: { ...SANDBOX.resolvedResources, vcpu: 1, memoryMb: 512 } }
    expect(await run(p.getCost(small, oneSecond))).toMatchObject({ amountMicrousd: 16n, provenance: "estimated_rate_card", rateCardVersion: "e2b-2026-08-21" })
    const hour = { from: "2026-11-22T10:00:00.000Z", to: "2026-11-22T11:00:00.000Z" }
    expect((await run(p.getCost(SANDBOX, hour)))?.amountMicrousd).toBe(BigInt(3600 * (2 * 14 + 0.5 * 4.5)))
    expect(await kindOf(p.exposeHttpEndpoint(SANDBOX, { port: 80, leaseSeconds: 60 }))).toBe("unsupported")
    expect(p.capabilities.process?.cancel).toBe(true)
    expect(p.capabilities.httpEndpoints).toBeNull()
  })

  it("metrics read E2B's latest sample (nulls before the first); a missing sandbox is not_found", async () => {
    const sample = (at: string, cpu: number) => ({ timestamp: at, timestampUnix: Date.parse(at) / 1000, cpuCount: 2, cpuUsedPct: cpu, memUsed: 33316864, memTotal: 507592704, memCache: 1, diskUsed: 1514856448, diskTotal: 2573185024 })
    const s = scripted([
      {
        method: "GET",
        path: "/sandboxes/isbx1/metrics",
        reply: (call) => {
          expect(call.headers["x-api-key"]).toBe("e2b_0123")
          return json([sample("2025-07-28T08:04:05.000Z", 20.33), sample("2025-07-28T08:04:10.000Z", 0.2)])
        }
      },
      { method: "GET", path: "/sandboxes/isbx1/metrics", reply: () => json([]) },
      { method: "GET", path: "/sandboxes/isbx1/metrics", reply: () => json({ code: 404, message: "sandbox not found" }, 404) }
    ])
    const p = provider(s.client)
    expect(await run(p.metrics!(SANDBOX))).toEqual({
      source: "provider",
      collectedAt: "2025-07-28T08:04:10.000Z",
      cpuSeconds: null,
      cpuUsedPercent: 0.2,
      memoryBytes: 33316864,
      memoryPeakBytes: null,
      memoryLimitBytes: 507592704,
      diskBytes: 1514856448,
      diskLimitBytes: 2573185024,
      networkRxBytes: null,
      networkTxBytes: null,
      processCount: null
    })
    expect(await run(p.metrics!(SANDBOX))).toMatchObject({ source: "provider", cpuUsedPercent: null, memoryBytes: null })
    expect(await kindOf(p.metrics!(SANDBOX))).toBe("not_found")
    expect(s.left()).toBe(0)
    // Emulated, the adapter has no metrics of its own (the plugin gives it the local runtime's).
    expect(makeE2BProvider({ apiUrl: "http://127.0.0.1:1", sandboxUrl: "http://127.0.0.1:1", apiKey: "k", mode: "emulated" }).metrics).toBeUndefined()
  })
})

describe("e2b adapter: envd requests", () => {
  const envdHeaders = (call: Call, token = "tok-1") => {
    expect(call.headers["e2b-sandbox-id"]).toBe("isbx1")
    expect(call.headers["e2b-sandbox-port"]).toBe("49983")
    expect(call.headers["x-access-token"]).toBe(token)
  }

  it("exec lists processes, starts with our tag, and turns the stream into ordered events", async () => {
    const s = scripted([
      getDetail(),
      {
        method: "POST",
        path: "/process.Process/List",
        reply: (call) => {
          envdHeaders(call)
          expect(call.headers["content-type"]).toBe("application/json")
          expect(call.headers["connect-protocol-version"]).toBe("1")
          expect(bodyJson(call)).toEqual({})
          return json({ processes: [{ pid: 3, tag: "proc_other", config: { cmd: "x" } }] })
        }
      },
      {
        method: "POST",
        path: "/process.Process/Start",
        reply: (call) => {
          envdHeaders(call)
          expect(call.headers["content-type"]).toBe("application/connect+json")
          expect(call.headers["connect-timeout-ms"]).toBe("30000")
          expect(call.headers["keepalive-ping-interval"]).toBe("50")
          expect(call.headers["authorization"]).toBeUndefined() // envd >= 0.4 has a default user
          expect(envelopeBody(call)).toEqual([{ process: { cmd: "sh", args: ["-c", "work"], envs: { K: "v" }, cwd: "/tmp" }, tag: "proc_one", stdin: false }])
          return stream(frames(
            { event: { start: { pid: 42 } } },
            { event: { keepalive: {} } },
            { event: { data: { stdout: b64("out 1\n") } } },
            { event: { data: { stderr: b64("err\n") } } },
            { event: { data: { stdout: b64("out 2\n") } } },
            { event: { end: { exitCode: 3, exited: true, status: "exit status 3", error: "exit status 3" } } },
            {}
          ))
        }
      }
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, { command: ["sh", "-c", "work"], cwd: "/tmp", environment: { K: "v" }, timeoutSeconds: 30, maxOutputBytes: 1000, processId: "proc_one" }))
    expect(executionId).toBe("e2b:proc_one")
    const events = await drain(p, SANDBOX, executionId)
    expect(events.map((e) => e.seq)).toEqual([0, 1, 2, 3])
    expect(text(events, "stdout")).toBe("out 1\nout 2\n")
    expect(text(events, "stderr")).toBe("err\n")
    expect(events.at(-1)).toEqual({ seq: 3, type: "exit", exitCode: 3, signal: null, cancelled: false, timedOut: false, outputTruncated: false })
    // Asking from 4 acknowledged everything: earlier events are gone, and asking for them says so.
    expect(await run(p.execEvents(SANDBOX, executionId, 4))).toEqual([])
    expect(await kindOf(p.execEvents(SANDBOX, executionId, 1))).toBe("invalid_request")
    expect(s.left()).toBe(0)
  })

  it("exec truncates output past maxOutputBytes and says so in the exit; a zero exit code is implied", async () => {
    const s = scripted([
      getDetail(),
      { method: "POST", path: "/process.Process/List", reply: () => json({}) },
      {
        method: "POST",
        path: "/process.Process/Start",
        reply: () =>
          stream(frames(
            { event: { start: { pid: 1 } } },
            { event: { data: { stdout: b64("0123456789") } } },
            { event: { data: { stdout: b64("abc") } } },
            { event: { end: { exited: true, status: "exit status 0" } } },
            {}
          ))
      }
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, { command: ["x"], timeoutSeconds: 0, maxOutputBytes: 4, processId: "proc_t" }))
    const events = await drain(p, SANDBOX, executionId)
    expect(text(events, "stdout")).toBe("0123")
    expect(events.at(-1)).toMatchObject({ type: "exit", exitCode: 0, outputTruncated: true })
  })

  it("a retried exec finds its process by tag and re-attaches instead of starting it again", async () => {
    const s = scripted([
      getDetail(),
      { method: "POST", path: "/process.Process/List", reply: () => json({ processes: [{ pid: 9, tag: "proc_again" }] }) },
      {
        method: "POST",
        path: "/process.Process/Connect",
        reply: (call) => {
          expect(envelopeBody(call)).toEqual([{ process: { tag: "proc_again" } }])
          return stream(frames({ event: { start: { pid: 9 } } }, { event: { end: { exited: true, status: "exit status 0" } } }, {}))
        }
      }
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, { command: ["x"], timeoutSeconds: 5, maxOutputBytes: 10, processId: "proc_again" }))
    expect((await drain(p, SANDBOX, executionId)).at(-1)).toMatchObject({ exitCode: 0 })
    expect(s.left()).toBe(0)
  })

  it("a first attempt starts at once: no earlier attempt can have started it, so envd is not asked for its list", async () => {
    const s = scripted([
      getDetail(),
      {
        method: "POST",
        path: "/process.Process/Start",
        reply: () => stream(frames({ event: { start: { pid: 5 } } }, { event: { end: { exited: true, status: "exit status 0" } } }, {}))
      }
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, { command: ["x"], timeoutSeconds: 5, maxOutputBytes: 10, processId: "proc_first", firstAttempt: true }))
    expect((await drain(p, SANDBOX, executionId)).at(-1)).toMatchObject({ exitCode: 0 })
    expect(s.left()).toBe(0)
  })

  it("a start that envd refuses fails exec with the Connect error's kind", async () => {
    const s = scripted([
      getDetail(),
      { method: "POST", path: "/process.Process/List", reply: () => json({}) },
      { method: "POST", path: "/process.Process/Start", reply: () => stream(frames({ error: { code: "invalid_argument", message: "error starting process: no such file" } })) }
    ])
    expect(await kindOf(provider(s.client).exec(SANDBOX, { command: ["nope"], timeoutSeconds: 5, maxOutputBytes: 10, processId: "proc_bad" }))).toBe("invalid_request")
  })

  it("envd's deadline ending the Start call reports a timed-out exit", async () => {
    const s = scripted([
      getDetail(),
      { method: "POST", path: "/process.Process/List", reply: () => json({}) },
      {
        method: "POST",
        path: "/process.Process/Start",
        reply: () => stream(frames({ event: { start: { pid: 5 } } }, { event: { data: { stdout: b64("tick\n") } } }, { error: { code: "deadline_exceeded", message: "context deadline exceeded" } }))
      }
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, { command: ["sleep", "99"], timeoutSeconds: 1, maxOutputBytes: 100, processId: "proc_slow" }))
    expect((await drain(p, SANDBOX, executionId)).at(-1)).toEqual({ seq: 1, type: "exit", exitCode: null, signal: "SIGKILL", cancelled: false, timedOut: true, outputTruncated: false })
  })

  it("after a restart, execEvents re-attaches by tag and continues the caller's sequence (real envd: no replay)", async () => {
    const s = scripted([
      getDetail(), // the access token is not stored: a fresh adapter asks for it
      {
        method: "POST",
        path: "/process.Process/Connect",
        reply: (call) => {
          envdHeaders(call)
          expect(envelopeBody(call)).toEqual([{ process: { tag: "proc_long" } }])
          return stream(frames(
            { event: { start: { pid: 77 } } },
            { event: { data: { stdout: b64("later\n") } } },
            { event: { end: { exitCode: -1, status: "signal: killed", error: "signal: killed" } } },
            {}
          ))
        }
      }
    ])
    const fresh = provider(s.client)
    const events = await drain(fresh, SANDBOX, "e2b:proc_long", 5)
    expect(events).toEqual([
      { seq: 5, type: "stdout", data: new Uint8Array(Buffer.from("later\n")) },
      { seq: 6, type: "exit", exitCode: null, signal: "SIGKILL", cancelled: false, timedOut: false, outputTruncated: false }
    ])
  })

  it("a process that ended while nobody was attached is reported lost, or cancelled if we had cancelled it", async () => {
    const notFound = () => stream(frames({ error: { code: "not_found", message: "process with tag proc_gone not found" } }))
    const s = scripted([
      getDetail(),
      { method: "POST", path: "/process.Process/Connect", reply: notFound },
      { method: "POST", path: "/process.Process/SendSignal", reply: () => json({ code: "not_found", message: "process not found" }, 404) },
      {
        method: "POST",
        path: "/process.Process/SendSignal",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ process: { tag: "proc_cancel" }, signal: "SIGNAL_SIGTERM" })
          return json({})
        }
      },
      { method: "POST", path: "/process.Process/Connect", reply: notFound }
    ])
    const p = provider(s.client)
    const lost = await runEither(p.execEvents(SANDBOX, "e2b:proc_gone", 2))
    expect(lost._tag === "Left" && lost.left.kind).toBe("not_found")
    expect(lost._tag === "Left" && lost.left.message).toMatch(/ended while no client was attached/)
    expect(await run(p.cancelExec(SANDBOX, "e2b:proc_gone"))).toEqual({ cancelled: false })
    expect(await run(p.cancelExec(SANDBOX, "e2b:proc_cancel"))).toEqual({ cancelled: true })
    expect(await run(p.execEvents(SANDBOX, "e2b:proc_cancel", 0))).toEqual([
      { seq: 0, type: "exit", exitCode: null, signal: null, cancelled: true, timedOut: false, outputTruncated: false }
    ])
  })

  it("stdin: SendInput carries the bytes as base64 under our tag, then CloseStdin closes it", async () => {
    const s = scripted([
      getDetail(),
      {
        method: "POST",
        path: "/process.Process/SendInput",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ process: { tag: "proc_in" }, input: { stdin: "aGk=" } })
          return json({})
        }
      },
      {
        method: "POST",
        path: "/process.Process/CloseStdin",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ process: { tag: "proc_in" } })
          return json({})
        }
      }
    ])
    await run(provider(s.client).sendInput!(SANDBOX, "e2b:proc_in", new TextEncoder().encode("hi"), true))
    expect(s.left()).toBe(0)
  })

  it("a terminal: Start carries pty.size, pty data is the output, input goes as pty bytes (eof is ^D), Update resizes", async () => {
    const s = scripted([
      getDetail(),
      { method: "POST", path: "/process.Process/List", reply: () => json({}) },
      {
        method: "POST",
        path: "/process.Process/Start",
        reply: (call) => {
          expect(envelopeBody(call)).toEqual([{ process: { cmd: "sh", args: [], envs: {} }, tag: "proc_tty", pty: { size: { cols: 80, rows: 24 } }, stdin: false }])
          return stream(frames({ event: { start: { pid: 7 } } }, { event: { data: { pty: b64("$ ") } } }, { event: { end: { exited: true, status: "exit status 0" } } }, {}))
        }
      },
      {
        method: "POST",
        path: "/process.Process/SendInput",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ process: { tag: "proc_tty" }, input: { pty: b64("ls\n\x04") } })
          return json({})
        }
      },
      {
        method: "POST",
        path: "/process.Process/Update",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ process: { tag: "proc_tty" }, pty: { size: { cols: 120, rows: 40 } } })
          return json({})
        }
      }
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, { command: ["sh"], timeoutSeconds: 0, maxOutputBytes: 1000, processId: "proc_tty", pty: { cols: 80, rows: 24 } }))
    expect(executionId).toBe("e2b-pty:proc_tty")
    expect(text(await drain(p, SANDBOX, executionId), "stdout")).toBe("$ ")
    // No CloseStdin for a terminal: its end is ^D typed.
    await run(p.sendInput!(SANDBOX, executionId, new TextEncoder().encode("ls\n"), true))
    await run(p.resizeTerminal!(SANDBOX, executionId, { cols: 120, rows: 40 }))
    expect(await kindOf(p.resizeTerminal!(SANDBOX, "e2b:proc_plain", { cols: 1, rows: 1 }))).toBe("invalid_request")
    expect(s.left()).toBe(0)
  })

  it("the emulator's replay header makes the adapter skip what it already handed out", async () => {
    const s = scripted([
      getDetail(),
      {
        method: "POST",
        path: "/process.Process/Connect",
        reply: () =>
          stream(
            frames(
              { event: { start: { pid: 1 } } },
              { event: { data: { stdout: b64("a") } } },
              { event: { data: { stdout: b64("b") } } },
              { event: { data: { stdout: b64("c") } } },
              { event: { end: { exited: true, status: "exit status 0" } } },
              {}
            ),
            { [REPLAY_HEADER]: "start" }
          )
      }
    ])
    const p = provider(s.client)
    const events = await drain(p, SANDBOX, "e2b:proc_replay", 2)
    expect(events.map((e) => [e.seq, e.type])).toEqual([[2, "stdout"], [3, "exit"]])
    expect(text(events, "stdout")).toBe("c")
  })

  it("a 401 from envd fetches the current access token and tries once more", async () => {
    const s = scripted([
      getDetail(),
      { method: "POST", path: "/filesystem.Filesystem/Stat", reply: () => json({ code: 401, message: "unauthorized access" }, 401) },
      getDetail({ envdAccessToken: "tok-2" }),
      {
        method: "POST",
        path: "/filesystem.Filesystem/Stat",
        reply: (call) => {
          envdHeaders(call, "tok-2")
          return json({ code: "not_found", message: "no such file" }, 404)
        }
      },
      // A token that is refused again is an auth failure, not a loop.
      { method: "POST", path: "/filesystem.Filesystem/Stat", reply: () => json({ code: "unauthenticated", message: "bad token" }, 401) },
      getDetail({ envdAccessToken: "tok-3" }),
      { method: "POST", path: "/filesystem.Filesystem/Stat", reply: () => json({ code: "unauthenticated", message: "bad token" }, 401) }
    ])
    const p = provider(s.client)
    expect(await run(p.deleteFile(SANDBOX, { path: "/x", recursive: true }))).toEqual({ deleted: false })
    expect(await kindOf(p.deleteFile(SANDBOX, { path: "/x", recursive: true }))).toBe("auth")
    expect(s.left()).toBe(0)
  })

  it("readFile sends a Range and reads 206, 416 and whole-file answers", async () => {
    const s = scripted([
      getDetail(),
      {
        method: "GET",
        path: "/files",
        reply: (call) => {
          envdHeaders(call)
          expect(call.url.searchParams.get("path")).toBe("/data/f.bin")
          expect(call.url.searchParams.get("username")).toBeNull()
          expect(call.headers["range"]).toBe("bytes=2-5")
          return new Response(new Uint8Array([2, 3, 4, 5]), { status: 206, headers: { "content-range": "bytes 2-5/10" } })
        }
      },
      { method: "GET", path: "/files", reply: () => new Response(null, { status: 416, headers: { "content-range": "bytes */10" } }) },
      { method: "GET", path: "/files", reply: () => new Response(new Uint8Array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])) },
      { method: "GET", path: "/files", reply: () => json({ code: 404, message: "path '/nope' does not exist" }, 404) },
      { method: "GET", path: "/files", reply: () => json({ code: 400, message: "path '/data' is a directory" }, 400) }
    ])
    const p = provider(s.client)
    expect(await run(p.readFile(SANDBOX, { path: "/data/f.bin", offsetBytes: 2, maxBytes: 4 }))).toEqual({ data: new Uint8Array([2, 3, 4, 5]), offsetBytes: 2, sizeBytes: 10, eof: false })
    expect(await run(p.readFile(SANDBOX, { path: "/data/f.bin", offsetBytes: 10, maxBytes: 4 }))).toEqual({ data: new Uint8Array(), offsetBytes: 10, sizeBytes: 10, eof: true })
    expect(await run(p.readFile(SANDBOX, { path: "/data/f.bin", offsetBytes: 8, maxBytes: 4 }))).toEqual({ data: new Uint8Array([8, 9]), offsetBytes: 8, sizeBytes: 10, eof: true })
    expect(await kindOf(p.readFile(SANDBOX, { path: "/nope", offsetBytes: 0, maxBytes: 4 }))).toBe("not_found")
    expect(await kindOf(p.readFile(SANDBOX, { path: "/data", offsetBytes: 0, maxBytes: 4 }))).toBe("invalid_request")
  })

  it("writeFile checks create and parents first, then uploads octet-stream (envd >= 0.5.7) or multipart with a user (old envd)", async () => {
    const missing = () => json({ code: "not_found", message: "no such file" }, 404)
    const dir = () => json({ entry: { name: "d", type: "FILE_TYPE_DIRECTORY", path: "/d", size: "4096", modifiedTime: "2026-11-22T10:00:00Z" } })
    const s = scripted([
      getDetail(),
      { method: "POST", path: "/filesystem.Filesystem/Stat", reply: missing },
      {
        method: "POST",
        path: "/filesystem.Filesystem/Stat",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ path: "/d" })
          return dir()
        }
      },
      {
        method: "POST",
        path: "/files",
        reply: (call) => {
          expect(call.url.searchParams.get("path")).toBe("/d/f.txt")
          expect(call.headers["content-type"]).toBe("application/octet-stream")
          expect([...bodyBytes(call)]).toEqual([104, 105])
          return json([{ name: "f.txt", type: "file", path: "/d/f.txt" }])
        }
      },
      { method: "POST", path: "/filesystem.Filesystem/Stat", reply: () => json({ entry: { path: "/d/f.txt", type: "FILE_TYPE_FILE", size: "2" } }) },
      { method: "POST", path: "/filesystem.Filesystem/Stat", reply: missing },
      { method: "POST", path: "/filesystem.Filesystem/Stat", reply: missing }
    ])
    const p = provider(s.client)
    expect(await run(p.writeFile(SANDBOX, { path: "/d/f.txt", data: new Uint8Array([104, 105]), mode: "create", createParents: false }))).toEqual({ bytesWritten: 2, created: true })
    expect(await kindOf(p.writeFile(SANDBOX, { path: "/d/f.txt", data: new Uint8Array([1]), mode: "create", createParents: true }))).toBe("customer")
    expect(await kindOf(p.writeFile(SANDBOX, { path: "/none/f.txt", data: new Uint8Array([1]), mode: "overwrite", createParents: false }))).toBe("not_found")
    expect(await kindOf(p.writeFile(SANDBOX, { path: "/d/f.txt", data: new Uint8Array([1]), mode: "append", createParents: false }))).toBe("unsupported")
    expect(s.left()).toBe(0)

    const old = scripted([
      getDetail({ envdVersion: "0.3.1" }),
      {
        method: "POST",
        path: "/filesystem.Filesystem/Stat",
        reply: (call) => {
          expect(call.headers["authorization"]).toBe(`Basic ${btoa("user:")}`)
          return missing()
        }
      },
      {
        method: "POST",
        path: "/files",
        reply: async (call) => {
          expect(call.url.searchParams.get("username")).toBe("user")
          const body = call.request.body
          if (body._tag !== "FormData") throw new Error(`expected multipart, got ${body._tag}`)
          const file = body.formData.get("file") as File
          expect(new Uint8Array(await file.arrayBuffer())).toEqual(new Uint8Array([7]))
          return json([{ name: "g", type: "file", path: "/g" }])
        }
      }
    ])
    expect(await run(provider(old.client).writeFile(SANDBOX, { path: "/g", data: new Uint8Array([7]), mode: "overwrite", createParents: true }))).toEqual({ bytesWritten: 1, created: true })
    expect(old.left()).toBe(0)
  })

  it("listFiles maps ListDir entries; deleteFile stats first (envd's Remove is rm -rf)", async () => {
    const s = scripted([
      getDetail(),
      {
        method: "POST",
        path: "/filesystem.Filesystem/ListDir",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ path: "/d", depth: 1 })
          return json({
            entries: [
              { name: "a", type: "FILE_TYPE_FILE", path: "/d/a", size: "5", modifiedTime: "2026-11-22T10:00:00Z" },
              { name: "b", type: "FILE_TYPE_DIRECTORY", path: "/d/b", size: "4096", modifiedTime: "2026-11-22T10:00:01Z" },
              { name: "c", type: "FILE_TYPE_SYMLINK", path: "/d/c", size: "1", modifiedTime: "2026-11-22T10:00:02Z" }
            ]
          })
        }
      },
      { method: "POST", path: "/filesystem.Filesystem/ListDir", reply: () => json({}) }, // an empty directory: protobuf JSON omits the list
      { method: "POST", path: "/filesystem.Filesystem/Stat", reply: () => json({ code: "not_found", message: "no such file" }, 404) },
      { method: "POST", path: "/filesystem.Filesystem/Stat", reply: () => json({ entry: { path: "/d", type: "FILE_TYPE_DIRECTORY" } }) },
      { method: "POST", path: "/filesystem.Filesystem/ListDir", reply: () => json({ entries: [{ path: "/d/a", type: "FILE_TYPE_FILE" }] }) },
      { method: "POST", path: "/filesystem.Filesystem/Stat", reply: () => json({ entry: { path: "/d/a", type: "FILE_TYPE_FILE" } }) },
      {
        method: "POST",
        path: "/filesystem.Filesystem/Remove",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ path: "/d/a" })
          return json({})
        }
      }
    ])
    const p = provider(s.client)
    const listed = await run(p.listFiles(SANDBOX, { path: "/d", recursive: false, maxEntries: 2 }))
    expect(listed).toEqual({
      entries: [
        { path: "/d/a", type: "file", sizeBytes: 5, modifiedAt: "2026-11-22T10:00:00Z" },
        { path: "/d/b", type: "directory", sizeBytes: 4096, modifiedAt: "2026-11-22T10:00:01Z" }
      ],
      truncated: true
    })
    expect(await run(p.listFiles(SANDBOX, { path: "/e", recursive: false, maxEntries: 2 }))).toEqual({ entries: [], truncated: false })
    expect(await run(p.deleteFile(SANDBOX, { path: "/d/x", recursive: false }))).toEqual({ deleted: false })
    expect(await kindOf(p.deleteFile(SANDBOX, { path: "/d", recursive: false }))).toBe("customer")
    expect(await run(p.deleteFile(SANDBOX, { path: "/d/a", recursive: false }))).toEqual({ deleted: true })
    expect(s.left()).toBe(0)
  })

  it("remote: /workspace is the E2B user's home on the wire, and listed paths come back as /workspace", async () => {
    const s = scripted([
      getDetail(),
      {
        method: "POST",
        path: "/filesystem.Filesystem/ListDir",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ path: "/home/user/src", depth: 1 })
          return json({ entries: [{ name: "a.py", type: "FILE_TYPE_FILE", path: "/home/user/src/a.py", size: "3", modifiedTime: "2026-11-22T10:00:00Z" }] })
        }
      },
      {
        method: "POST",
        path: "/filesystem.Filesystem/Stat",
        reply: (call) => {
          expect(bodyJson(call)).toEqual({ path: "/home/user/src/a.py" })
          return json({ code: "not_found", message: "no such file" }, 404)
        }
      }
    ])
    const p = provider(s.client)
    const listed = await run(p.listFiles(SANDBOX, { path: "/workspace/src", recursive: false, maxEntries: 10 }))
    expect(listed.entries.map((e) => e.path)).toEqual(["/workspace/src/a.py"])
    expect(await run(p.deleteFile(SANDBOX, { path: "/workspace/src/a.py", recursive: false }))).toEqual({ deleted: false })
    expect(s.left()).toBe(0)
  })

  it("the host pattern addresses envd per sandbox", async () => {
    const s = scripted([
      getDetail(),
      {
        method: "POST",
        path: "/filesystem.Filesystem/Stat",
        reply: (call) => {
          expect(call.url.host).toBe("49983-isbx1.e2b.test")
          envdHeaders(call)
          return json({ code: "not_found", message: "none" }, 404)
        }
      }
    ])
    expect(await run(provider(s.client, "https://{port}-{sandboxId}.e2b.test").deleteFile(SANDBOX, { path: "/x", recursive: true }))).toEqual({ deleted: false })
    expect(s.left()).toBe(0)
  })
})

// ---- the adapter against its emulator, over the real local runtime ----

const setup = async () => {
  const dataDir = tempDataDir("e2b")
  const runtime = makeLocalRuntime(dataDir)
  const emulator = startE2BEmulator(dataDir, runtime)
  const provider = makeE2BProvider({ apiUrl: emulator.apiUrl, sandboxUrl: emulator.sandboxUrl, apiKey: emulator.apiKey, mode: "emulated" })
  return {
    dataDir,
    provider,
    emulator,
    teardown: async () => {
      emulator.stop()
      await Effect.runPromise(runtime.reap(new Set()))
    }
  }
}

conformance("e2b (emulated)", setup)

describe("e2b emulator over the local runtime", () => {
  let env: Awaited<ReturnType<typeof setup>>
  let sandbox: ProviderSandbox
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${env.emulator.apiUrl}${path}`, { ...init, headers: { "x-api-key": env.emulator.apiKey, "content-type": "application/json", ...init.headers } })
  const token = async () => ((await (await api(`/sandboxes/${sandbox.resourceId}`)).json()) as { envdAccessToken: string }).envdAccessToken
  const envdFetch = async (path: string, init: RequestInit & { headers?: Record<string, string> } = {}) =>
    fetch(`${env.emulator.sandboxUrl}${path}`, {
      method: "POST",
      ...init,
      headers: { "e2b-sandbox-id": sandbox.resourceId, "e2b-sandbox-port": "49983", "x-access-token": await token(), ...init.headers }
    })

  beforeAll(async () => {
    env = await setup()
    sandbox = await run(env.provider.create(input("sbx_e2bwire")))
  })
  afterAll(async () => {
    await env.teardown()
  })

  it("refuses a wrong API key, a wrong access token, a wrong content type and a bad Start", async () => {
    const wrong = makeE2BProvider({ apiUrl: env.emulator.apiUrl, sandboxUrl: env.emulator.sandboxUrl, apiKey: "e2b_00", mode: "emulated" })
    expect(await kindOf(wrong.reconcileCreate("sbx_e2bwire"))).toBe("auth")
    const badToken = await fetch(`${env.emulator.sandboxUrl}/filesystem.Filesystem/Stat`, {
      method: "POST",
      headers: { "e2b-sandbox-id": sandbox.resourceId, "x-access-token": "nope", "content-type": "application/json" },
      body: JSON.stringify({ path: "/workspace" })
    })
    expect(badToken.status).toBe(401)
    const unknown = await fetch(`${env.emulator.sandboxUrl}/filesystem.Filesystem/Stat`, { method: "POST", headers: { "e2b-sandbox-id": "inope", "content-type": "application/json" }, body: "{}" })
    expect(unknown.status).toBe(502)
    const wrongType = await envdFetch("/process.Process/Start", { headers: { "content-type": "application/json" }, body: "{}" })
    expect(wrongType.status).toBe(415)
    const noCmd = await envdFetch("/process.Process/Start", { headers: { "content-type": "application/connect+json" }, body: encodeEnvelope({ process: {} }) })
    expect(noCmd.status).toBe(200)
    const trailer = new EnvelopeDecoder().push(new Uint8Array(await noCmd.arrayBuffer()))
    expect(trailer).toEqual([{ flags: END_STREAM, message: { error: { code: "invalid_argument", message: "process.cmd is required" } } }])
    const badStat = await envdFetch("/filesystem.Filesystem/Stat", { headers: { "content-type": "application/json" }, body: "{" })
    expect(badStat.status).toBe(400)
    expect(await badStat.json()).toMatchObject({ code: "invalid_argument" })
  })

  it("validates control-plane bodies and filters lists by metadata, with pages", async () => {
    const create = (body: unknown) => api("/v2/sandboxes", { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body) })
    expect((await create("{")).status).toBe(400)
    expect((await create({ timeout: 5 })).status).toBe(400)
    expect((await create({ templateID: "base", timeout: 100_000 })).status).toBe(400)
    expect((await create({ templateID: "base", metadata: { n: 1 } })).status).toBe(400)
    expect((await api(`/v2/sandboxes/${sandbox.resourceId}/connect`, { method: "POST", body: JSON.stringify({ timeout: -1 }) })).status).toBe(400)
    expect((await api("/v2/sandboxes?state=sleeping")).status).toBe(400)
    expect((await api("/v2/sandboxes?order=up")).status).toBe(400)
    expect((await api("/sandboxes/inope")).status).toBe(404)
    expect(await (await api("/sandboxes/inope")).json()).toEqual({ code: 404, message: `sandbox "inope" doesn't exist or you don't have access to it` })
    // Fields the API has but this emulator cannot honour are refused, in E2B's error shape, and create nothing.
    for (const [field, value] of [["mcp", { github: {} }], ["volumeMounts", [{ name: "v", path: "/data" }]], ["autoResume", { enabled: true }], ["autoPauseMemory", false]] as const) {
      const refused = await create({ templateID: "base", [field]: value })
      expect(refused.status).toBe(400)
      expect(await refused.json()).toEqual({ code: 400, message: expect.stringContaining(field) })
    }
    const proxied = await create({ templateID: "base", network: { egressProxy: { address: "proxy.example:1080" } } })
    expect(await proxied.json()).toEqual({ code: 400, message: expect.stringContaining("network.egressProxy") })
    // Unknown fields are ignored, as E2B ignores them (its SDK sends fields newer than any emulator).
    const other = await create({ templateID: "base", timeout: 60, metadata: { "metal.sandbox_id": "sbx_other" }, someFutureField: { x: 1 }, autoPauseMemory: true, mcp: null })
    expect(other.status).toBe(201)
    const otherId = ((await other.json()) as { sandboxID: string }).sandboxID
    const mine = (await (await api(`/v2/sandboxes?metadata=${encodeURIComponent("metal.sandbox_id=sbx_e2bwire")}`)).json()) as Array<{ sandboxID: string }>
    expect(mine.map((s) => s.sandboxID)).toEqual([sandbox.resourceId])
    const page = await api("/v2/sandboxes?limit=1")
    expect(((await page.json()) as Array<unknown>).length).toBe(1)
    expect(page.headers.get("x-next-token")).toBe("1")
    const oldestFirst = (await (await api("/v2/sandboxes?order=asc&state=running&state=paused")).json()) as Array<{ sandboxID: string }>
    expect(oldestFirst.map((s) => s.sandboxID)).toEqual([sandbox.resourceId, otherId])
    // A sandbox already running: connect answers 200 and only ever extends its lifetime (an empty body is 300 s).
    const connected = await api(`/v2/sandboxes/${otherId}/connect`, { method: "POST" })
    expect(connected.status).toBe(200)
    const detail = (await (await api(`/sandboxes/${otherId}`)).json()) as { endAt: string; lifecycle: unknown }
    expect(Date.parse(detail.endAt) - Date.now()).toBeGreaterThan(200_000)
    expect(detail.lifecycle).toEqual({ autoResume: false, onTimeout: "kill" })
    // E2B's deprecated v1 routes are not served; routes it has that this emulator does not serve say so.
    expect((await api("/sandboxes", { method: "POST", body: JSON.stringify({ templateID: "base" }) })).status).toBe(404)
    expect((await api(`/sandboxes/${otherId}/connect`, { method: "POST", body: JSON.stringify({ timeout: 60 }) })).status).toBe(404)
    const fork = await api(`/sandboxes/${otherId}/fork`, { method: "POST", body: "{}" })
    expect(fork.status).toBe(501)
    expect(await fork.json()).toEqual({ code: 501, message: `POST /sandboxes/${otherId}/fork is not served by this emulator` })
    expect((await api(`/sandboxes/${otherId}`, { method: "DELETE" })).status).toBe(204)
  })

  it("runs each envd call as the user it names: the default user `user`; root is refused, an unknown name is envd's invalid username", async () => {
    const basic = (user: string) => `Basic ${Buffer.from(`${user}:`).toString("base64")}`
    const stat = (headers: Record<string, string>) =>
      envdFetch("/filesystem.Filesystem/Stat", { headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ path: "/workspace" }) })
    expect((await stat({})).status).toBe(200)
    expect((await stat({ authorization: basic("user") })).status).toBe(200)
    const asRoot = await stat({ authorization: basic("root") })
    expect(asRoot.status).toBe(403)
    expect(await asRoot.json()).toMatchObject({ code: "permission_denied", message: expect.stringContaining("no root") })
    const asBob = await stat({ authorization: basic("bob") })
    expect(asBob.status).toBe(401)
    expect(await asBob.json()).toEqual({ code: "unauthenticated", message: "invalid username: 'bob'" })
    const rootStart = await envdFetch("/process.Process/Start", {
      headers: { "content-type": "application/connect+json", authorization: basic("root") },
      body: encodeEnvelope({ process: { cmd: "id", args: ["-u"] } })
    })
    const trailer = new EnvelopeDecoder().push(new Uint8Array(await rootStart.arrayBuffer()))
    expect(trailer).toEqual([{ flags: END_STREAM, message: { error: { code: "permission_denied", message: expect.stringContaining("no root") } } }])
    // The SDK's `gzip` upload: envd decodes the body before writing it.
    const gzipped = await envdFetch("/files?path=/workspace/u.txt", {
      headers: { "content-type": "application/octet-stream", "content-encoding": "gzip" },
      body: Bun.gzipSync(new TextEncoder().encode("hello as user"))
    })
    expect(gzipped.status).toBe(200)
    const download = (username: string) => envdFetch(`/files?path=/workspace/u.txt&username=${username}`, { method: "GET" })
    expect(await (await download("user")).text()).toBe("hello as user")
    expect((await download("root")).status).toBe(403)
    expect((await download("bob")).status).toBe(401)
  })

  it("a timed-out command is killed by envd's deadline and reported timed out", async () => {
    const { executionId } = await run(env.provider.exec(sandbox, { command: ["sleep", "30"], timeoutSeconds: 1, maxOutputBytes: 100, processId: "proc_timeout" }))
    const exit = (await drain(env.provider, sandbox, executionId)).at(-1)
    expect(exit).toMatchObject({ type: "exit", exitCode: null, timedOut: true, cancelled: false })
  })

  it("stdin: a Start with stdin open takes SendInput and CloseStdin", async () => {
    const started = await envdFetch("/process.Process/Start", {
      headers: { "content-type": "application/connect+json" },
      body: encodeEnvelope({ process: { cmd: "cat" }, stdin: true, tag: "proc_cat" })
    })
    const reader = started.body!.getReader()
    const decoder = new EnvelopeDecoder()
    const messages: Array<{ flags: number; message: unknown }> = []
    const readUntil = async (done: () => boolean) => {
      while (!done()) {
        const { value, done: ended } = await reader.read()
        if (ended) break
        messages.push(...decoder.push(value))
      }
    }
    await readUntil(() => messages.length >= 1)
    const pid = (messages[0]!.message as { event: { start: { pid: number } } }).event.start.pid
    const input = await envdFetch("/process.Process/SendInput", { headers: { "content-type": "application/json" }, body: JSON.stringify({ process: { pid }, input: { stdin: b64("hello\n") } }) })
    expect(input.status).toBe(200)
    const listed = (await (await envdFetch("/process.Process/List", { headers: { "content-type": "application/json" }, body: "{}" })).json()) as { processes: Array<{ pid: number; tag?: string }> }
    expect(listed.processes).toContainEqual(expect.objectContaining({ pid, tag: "proc_cat", config: expect.objectContaining({ cmd: "cat" }) }))
    expect((await envdFetch("/process.Process/CloseStdin", { headers: { "content-type": "application/json" }, body: JSON.stringify({ process: { tag: "proc_cat" } }) })).status).toBe(200)
    await readUntil(() => messages.some((m) => m.flags === END_STREAM))
    const out = messages.flatMap((m) => {
      const data = (m.message as { event?: { data?: { stdout?: string } } }).event?.data?.stdout
      return data === undefined ? [] : [Buffer.from(data, "base64").toString()]
    }).join("")
    expect(out).toBe("hello\n")
    expect(messages.at(-2)?.message).toEqual({ event: { end: { exited: true, status: "exit status 0" } } })
    // envd forgets a process once it ended.
    const signal = await envdFetch("/process.Process/SendSignal", { headers: { "content-type": "application/json" }, body: JSON.stringify({ process: { pid }, signal: "SIGNAL_SIGKILL" }) })
    expect(signal.status).toBe(404)
  })

  it("a quiet stream gets keepalives at the interval the client asked for", async () => {
    const started = await envdFetch("/process.Process/Start", {
      headers: { "content-type": "application/connect+json", "keepalive-ping-interval": "1" },
      body: encodeEnvelope({ process: { cmd: "sleep", args: ["2.5"] } })
    })
    const messages = new EnvelopeDecoder().push(new Uint8Array(await started.arrayBuffer())).map((m) => m.message as { event?: Record<string, unknown> })
    const kinds = messages.map((m) => Object.keys(m.event ?? { trailer: true })[0])
    expect(kinds[0]).toBe("start")
    expect(kinds.filter((k) => k === "keepalive").length).toBeGreaterThanOrEqual(1)
    expect(kinds.slice(-2)).toEqual(["end", "trailer"])
  })

  it("a whole-file download past a piece streams every byte (none held back past a cap)", async () => {
    const bytes = new Uint8Array(20 << 20).map((_, i) => (i * 29) % 251)
    const up = await envdFetch(`/files?path=${encodeURIComponent("/workspace/w/big.bin")}`, { headers: { "content-type": "application/octet-stream" }, body: bytes })
    expect(up.status).toBe(200)
    const whole = await envdFetch(`/files?path=${encodeURIComponent("/workspace/w/big.bin")}`, { method: "GET" })
    expect(whole.status).toBe(200)
    expect(Buffer.compare(Buffer.from(await whole.arrayBuffer()), Buffer.from(bytes))).toBe(0)
  }, 30_000)

  it("files on the wire: Range reads like ServeContent, both upload encodings, Remove of a missing path", async () => {
    const up = await envdFetch(`/files?path=${encodeURIComponent("/workspace/w/a.bin")}`, { headers: { "content-type": "application/octet-stream" }, body: new Uint8Array([0, 1, 2, 3, 4, 5]) })
    expect(up.status).toBe(200)
    expect(await up.json()).toEqual([{ name: "a.bin", type: "file", path: "/workspace/w/a.bin" }])
    const form = new FormData()
    form.append("file", new Blob([new Uint8Array([9, 9])]), "w/b.bin") // relative: under the home directory
    expect((await envdFetch("/files", { body: form })).status).toBe(200)
    const ranged = await envdFetch(`/files?path=${encodeURIComponent("/workspace/w/a.bin")}`, { method: "GET", headers: { range: "bytes=4-" } })
    expect(ranged.status).toBe(206)
    expect(ranged.headers.get("content-range")).toBe("bytes 4-5/6")
    expect([...new Uint8Array(await ranged.arrayBuffer())]).toEqual([4, 5])
    const suffix = await envdFetch(`/files?path=${encodeURIComponent("/workspace/w/a.bin")}`, { method: "GET", headers: { range: "bytes=-2" } })
    expect([...new Uint8Array(await suffix.arrayBuffer())]).toEqual([4, 5])
    const beyond = await envdFetch(`/files?path=${encodeURIComponent("/workspace/w/a.bin")}`, { method: "GET", headers: { range: "bytes=6-9" } })
    expect(beyond.status).toBe(416)
    expect(beyond.headers.get("content-range")).toBe("bytes */6")
    const whole = await envdFetch(`/files?path=${encodeURIComponent("w/b.bin")}`, { method: "GET" })
    expect([...new Uint8Array(await whole.arrayBuffer())]).toEqual([9, 9])
    expect((await envdFetch(`/files?path=${encodeURIComponent("/workspace/w")}`, { method: "GET" })).status).toBe(400)
    expect((await envdFetch(`/files?path=${encodeURIComponent("/workspace/none")}`, { method: "GET" })).status).toBe(404)
    expect((await envdFetch("/files", { headers: { "content-type": "text/plain" }, body: "x" })).status).toBe(400)
    const remove = await envdFetch("/filesystem.Filesystem/Remove", { headers: { "content-type": "application/json" }, body: JSON.stringify({ path: "/workspace/none" }) })
    expect(remove.status).toBe(200)
    const made = await envdFetch("/filesystem.Filesystem/MakeDir", { headers: { "content-type": "application/json" }, body: JSON.stringify({ path: "/workspace/w" }) })
    expect(made.status).toBe(409)
    const deep = await envdFetch("/filesystem.Filesystem/ListDir", { headers: { "content-type": "application/json" }, body: JSON.stringify({ path: "/workspace", depth: 1 }) })
    const names = ((await deep.json()) as { entries: Array<{ path: string }> }).entries.map((e) => e.path)
    expect(names).toContain("/workspace/w")
    expect(names).not.toContain("/workspace/w/a.bin")
  })

  it("pause freezes a running loop (its output stops advancing) and resume continues it without gaps or repeats", async () => {
    const { executionId } = await run(env.provider.exec(sandbox, {
      command: ["sh", "-c", "i=0; while true; do echo $i; i=$((i+1)); sleep 0.05; done"],
      timeoutSeconds: 120,
      maxOutputBytes: 1 << 20,
      processId: "proc_loop"
    }))
    const events: Array<ExecEvent> = []
    const collectFor = async (ms: number) => {
      const until = Date.now() + ms
      while (Date.now() < until) {
        events.push(...(await run(env.provider.execEvents(sandbox, executionId, events.length))))
        await Bun.sleep(10)
      }
    }
    const lines = () => text(events, "stdout").split("\n").filter((l) => l !== "")
    while (lines().length < 5) await collectFor(50)
    await run(env.provider.pause(sandbox))
    expect(await run(env.provider.inspect(sandbox))).toBe("paused")
    await collectFor(300)
    const frozenAt = lines().length
    await collectFor(700)
    expect(lines().length).toBe(frozenAt)
    await run(env.provider.resume(sandbox))
    expect(await run(env.provider.inspect(sandbox))).toBe("running")
    const deadline = Date.now() + 15_000
    while (lines().length < frozenAt + 5 && Date.now() < deadline) await collectFor(50)
    expect(lines().length).toBeGreaterThanOrEqual(frozenAt + 5)
    expect(await run(env.provider.cancelExec(sandbox, executionId))).toEqual({ cancelled: true })
    events.push(...(await drain(env.provider, sandbox, executionId, events.length)))
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
    const seen = lines()
    expect(seen).toEqual(seen.map((_, i) => String(i))) // every number once, in order
    expect(events.at(-1)).toMatchObject({ type: "exit", cancelled: true })
  })

  it("honours the sandbox timeout: a running sandbox past its end is killed", async () => {
    const doomed = await run(env.provider.create(input("sbx_e2bdoomed")))
    const set = await api(`/sandboxes/${doomed.resourceId}/timeout`, { method: "POST", body: JSON.stringify({ timeout: 1 }) })
    expect(set.status).toBe(204)
    const deadline = Date.now() + 6_000
    while ((await run(env.provider.inspect(doomed))) !== "absent" && Date.now() < deadline) await Bun.sleep(100)
    expect(await run(env.provider.inspect(doomed))).toBe("absent")
    expect(await run(env.provider.reconcileCreate("sbx_e2bdoomed"))).toBeNull()
  })
})

describe("e2b emulator: List asks the runtime only about what may still run", () => {
  it("a sandbox that ran many processes lists its running one without asking about those that ended", async () => {
    const dataDir = tempDataDir("e2b-list")
    const runtime = makeLocalRuntime(dataDir)
    let asked = 0
    const counting = { ...runtime, getExec: (id: string, execId: string) => (asked++, runtime.getExec(id, execId)) }
    const emulator = startE2BEmulator(dataDir, counting)
    const provider = makeE2BProvider({ apiUrl: emulator.apiUrl, sandboxUrl: emulator.sandboxUrl, apiKey: emulator.apiKey, mode: "emulated" })
    try {
      const sandbox = await run(provider.create(input("sbx_e2blist")))
      for (let i = 0; i < 5; i++) {
        const { executionId } = await run(provider.exec(sandbox, { command: ["true"], timeoutSeconds: 60, maxOutputBytes: 100, processId: `proc_done${i}` }))
        await drain(provider, sandbox, executionId)
      }
      await run(provider.exec(sandbox, { command: ["sleep", "30"], timeoutSeconds: 60, maxOutputBytes: 100, processId: "proc_running" }))
      const token = ((await (await fetch(`${emulator.apiUrl}/sandboxes/${sandbox.resourceId}`, { headers: { "x-api-key": emulator.apiKey } })).json()) as { envdAccessToken: string }).envdAccessToken
      asked = 0
      const listed = await fetch(`${emulator.sandboxUrl}/process.Process/List`, {
        method: "POST",
        headers: { "e2b-sandbox-id": sandbox.resourceId, "e2b-sandbox-port": "49983", "x-access-token": token, "content-type": "application/json" },
        body: "{}"
      })
      expect(((await listed.json()) as { processes: Array<{ tag?: string }> }).processes.map((p) => p.tag)).toEqual(["proc_running"])
      // Before, every process the sandbox ever ran was asked about: List's cost grew with the sandbox's history.
      expect(asked).toBe(1)
    } finally {
      emulator.stop()
      await Effect.runPromise(runtime.reap(new Set()))
    }
  })
})

describe("e2b emulator across a gateway restart", () => {
  it("a new adapter and emulator on the same DATA_DIR re-attach: running and finished processes keep all their output", async () => {
    const dataDir = tempDataDir("e2b-restart")
    const start = () => {
      const runtime = makeLocalRuntime(dataDir)
      const emulator = startE2BEmulator(dataDir, runtime)
      return { runtime, emulator, provider: makeE2BProvider({ ...emulator, mode: "emulated" }) }
    }
    let current = start()
    try {
      const sandbox = await run(current.provider.create(input("sbx_e2brestart")))
      const { executionId } = await run(current.provider.exec(sandbox, {
        command: ["sh", "-c", "for i in 1 2 3 4 5 6; do echo line$i; sleep 0.15; done"],
        timeoutSeconds: 60,
        maxOutputBytes: 1 << 20,
        processId: "proc_survivor"
      }))
      const before: Array<ExecEvent> = []
      while (text(before, "stdout").split("\n").length < 3) {
        before.push(...(await run(current.provider.execEvents(sandbox, executionId, before.length))))
        await Bun.sleep(10)
      }
      const quick = await run(current.provider.exec(sandbox, { command: ["sh", "-c", "sleep 0.3; echo bye; exit 7"], timeoutSeconds: 60, maxOutputBytes: 100, processId: "proc_quick" }))

      current.emulator.stop() // the gateway goes away; the jails and their processes do not
      await Bun.sleep(800) // proc_quick ends while nobody is attached
      current = start()
      expect(await run(current.provider.inspect(sandbox))).toBe("running")

      const after = await drain(current.provider, sandbox, executionId, before.length)
      const all = [...before, ...after]
      expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i))
      expect(text(all, "stdout")).toBe("line1\nline2\nline3\nline4\nline5\nline6\n")
      expect(all.at(-1)).toMatchObject({ type: "exit", exitCode: 0 })

      const finished = await drain(current.provider, sandbox, quick.executionId, 0)
      expect(text(finished, "stdout")).toBe("bye\n")
      expect(finished.at(-1)).toMatchObject({ type: "exit", exitCode: 7 })
      await run(current.provider.destroy(sandbox))
    } finally {
      current.emulator.stop()
      await Effect.runPromise(current.runtime.reap(new Set()))
    }
  })
})

describe("e2b capabilities", () => {
  it("declares what the adapter does: cancel via SendSignal, no endpoints, the internet switch", () => {
    expect(E2B_CAPABILITIES.process).toMatchObject({ execute: true, streams: true, cancel: true })
    expect(E2B_CAPABILITIES.pause && E2B_CAPABILITIES.resume).toBe(true)
    expect(E2B_CAPABILITIES.network).toEqual({ blockInternet: true, allowDomains: true, denyDomains: false })
  })
})

describe("e2b plugin", () => {
  it("is remote with E2B_API_KEY (an empty one counts as unset) and emulated without, the emulator living in the scope", async () => {
    const dataDir = tempDataDir("e2b-plugin")
    const runtime = makeLocalRuntime(dataDir)
    const config = { port: 0, host: "127.0.0.1", dataDir, publicUrl: "http://127.0.0.1", publicUrlSet: false, logLevel: "none", maxBodyBytes: 1 << 20, rawWriteMaxBytes: 1 << 30, endpoints: { port: 0, host: "127.0.0.1", publicOrigin: undefined, base: undefined } }
    const withEnv = (env: Record<string, string>) => <A, E>(effect: Effect.Effect<A, E, AppConfig | LocalRuntime>) =>
      effect.pipe(
        Effect.provideService(AppConfig, config),
        Effect.provideService(LocalRuntime, runtime),
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
      )
    try {
      const remote = await run(Effect.scoped(Effect.map(E2BPlugin, (p) => p.mode)).pipe(withEnv({ E2B_API_KEY: "e2b_0123", E2B_SANDBOX_URL: "https://{port}-{sandboxId}.e2b.app" })))
      expect(remote).toBe("remote")
      const emulated = await run(
        Effect.scoped(Effect.gen(function*() {
          const p = yield* E2BPlugin
          return [p.mode, yield* p.reconcileCreate("sbx_none")] as const
        })).pipe(withEnv({ E2B_API_KEY: " " }))
      )
      expect(emulated).toEqual(["emulated", null])
    } finally {
      await Effect.runPromise(runtime.reap(new Set()))
    }
  })
})
