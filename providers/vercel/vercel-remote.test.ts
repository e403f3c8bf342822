/**
 * The Vercel adapter in `remote` mode against a scripted HttpClient: the requests it sends to Vercel's API (paths,
 * `?teamId=`, bodies, auth) and how it reads the answers (session polling, reconcile by name and tag, NDJSON logs,
 * tar.gz writes, error kinds, the metered cost at the rate card). The emulator-backed suite covers behaviour.
 */
import type { HttpClient } from "@effect/platform"
import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import { conformanceInput } from "../testing/conformance.ts"
import type { ProviderError, ProviderSandbox } from "../../src/providers/Provider.ts"
import { bodyBytes, bodyJson, type Call, json, scripted, type Step } from "../testing/scripted-client.ts"
import { executionIds, makeVercelProvider, PROBE_SCRIPT, usageCostMicrousd } from "./adapter/index.ts"
import { untarGz } from "./tar.ts"

const API = "https://api.vercel.test"
const provider = (client: HttpClient.HttpClient, extra: { teamId?: string | undefined } = { teamId: "team_1" }) =>
  makeVercelProvider({ apiUrl: API, token: "vc_token", projectId: "prj_v", mode: "remote", httpClient: client, pollIntervalMs: 1, logsWaitMs: 50, ...extra })
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>) => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (result._tag === "Right") throw new Error("expected a failure")
  return result.left
}
const step = (method: string, path: string, reply: Step["reply"]): Step => ({ method, path, reply })
const authorized = (call: Call, team: string | null = "team_1") => {
  expect(call.headers["authorization"]).toBe("Bearer vc_token")
  expect(call.url.searchParams.get("teamId")).toBe(team)
}
const found = (status: string, tags: Record<string, string> = { "metal.sandbox_id": "sbx_1" }, usage: Record<string, number> = {}) => ({
  sandbox: { name: "metal-sbx-1", persistent: false, memory: 2048, vcpus: 1, status, createdAt: 1_790_000_000_000, currentSessionId: "sess_1", tags, ...usage },
  session: { id: "sess_1", memory: 2048, vcpus: 1, region: "iad1", timeout: 900_000, status, requestedAt: 1_790_000_000_000, startedAt: 1_790_000_000_000, createdAt: 1_790_000_000_000, cwd: "/vercel/sandbox", updatedAt: 1_790_000_000_000 },
  routes: []
})
const notFound = () => json({ error: { code: "not_found", message: "Sandbox not found" } }, 404)
const ndjson = (lines: ReadonlyArray<unknown>) => new Response(lines.map((l) => `${JSON.stringify(l)}\n`).join(""), { headers: { "content-type": "application/x-ndjson" } })
const command = (exitCode: number | null, extra: Record<string, unknown> = {}) => json({ command: { id: "cmd_1", name: "sh", args: [], cwd: "/vercel/sandbox", sessionId: "sess_1", exitCode, startedAt: 1, ...extra } })
const SANDBOX: ProviderSandbox = {
  resourceId: "metal-sbx-1",
  resolvedResources: { vcpu: 1, memoryMb: 2048, diskMb: null, architecture: "x86_64", providerSize: "1 vCPU" },
  metadata: { name: "metal-sbx-1", sessionId: "sess_1" }
}
const SESSION = "/v2/sandboxes/sessions/sess_1"

describe("vercel remote: sandboxes", () => {
  it("create looks for the name, then posts name, project, runtime, vCPUs, timeout, deny-all, env and tags, and polls until the session runs", async () => {
    const s = scripted([
      step("GET", "/v2/sandboxes/metal-sbx-1", (call) => {
        authorized(call)
        expect(call.url.searchParams.get("projectId")).toBe("prj_v")
        expect(call.url.searchParams.get("resume")).toBe("false")
        return notFound()
      }),
      step("POST", "/v3/sandboxes", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({
          name: "metal-sbx-1",
          projectId: "prj_v",
          persistent: false,
          runtime: "node24",
          resources: { vcpus: 1 },
          timeout: 900_000,
          networkPolicy: { mode: "deny-all" },
          env: { CONFORMANCE_SANDBOX: "yes" },
          tags: { suite: "conformance", "metal.sandbox_id": "sbx_1", "metal.project_id": "prj_conformance", "metal.organization_id": "00000000-0000-4000-8000-000000000000" }
        })
        return json(found("pending"))
      }),
      step("GET", "/v2/sandboxes/metal-sbx-1", () => json(found("pending"))),
      step("GET", "/v2/sandboxes/metal-sbx-1", () => json(found("running")))
    ])
    const created = await run(provider(s.client).create(conformanceInput("sbx_1")))
    expect(created).toEqual({
      resourceId: "metal-sbx-1",
      resolvedResources: { vcpu: 1, memoryMb: 2048, diskMb: null, architecture: "x86_64", providerSize: "1 vCPU" },
      metadata: { name: "metal-sbx-1", sessionId: "sess_1", createdAt: new Date(1_790_000_000_000).toISOString() }
    })
    expect(s.left()).toBe(0)
  })

  it("a first create posts at once: no earlier create can have taken the name", async () => {
    const s = scripted([
      step("POST", "/v3/sandboxes", () => json(found("running")))
    ])
    expect((await run(provider(s.client).create({ ...conformanceInput("sbx_1"), firstCreate: true }))).resourceId).toBe("metal-sbx-1")
    expect(s.left()).toBe(0)
  })

  it("sizes by vCPUs (memory 2048 MB each), sends an OCI image as is, leaves the network open when asked, caps the timeout at 5 h; no team, no teamId", async () => {
    const s = scripted([
      step("GET", "/v2/sandboxes/metal-sbx-1", (call) => {
        authorized(call, null)
        return notFound()
      }),
      step("POST", "/v3/sandboxes", (call) => {
        const body = bodyJson(call) as Record<string, unknown>
        expect(body).toMatchObject({ image: "python:3.14", resources: { vcpus: 3 }, timeout: 18_000_000 })
        expect(body["runtime"]).toBeUndefined()
        // Asked for: said (Vercel's default is the same, but the request's word is sent).
        expect(body["networkPolicy"]).toEqual({ mode: "allow-all" })
        return json(found("running"))
      })
    ])
    const input = conformanceInput("sbx_1")
    await run(provider(s.client, { teamId: undefined }).create({
      ...input,
      source: { kind: "oci_image", image: "python:3.14" },
      resources: { vcpu: 1, memoryMb: 5000, architecture: "x86_64" },
      lifecycle: { ...input.lifecycle, runtimeTimeoutSeconds: 86_400 },
      internetAccess: true
    }))
    expect(s.left()).toBe(0)
    // Nothing is sent for what Vercel cannot size or run.
    const none = scripted([])
    expect((await failureOf(provider(none.client).create({ ...input, resources: { vcpu: 9, memoryMb: 512, architecture: "any" } }))).kind).toBe("unsupported")
    expect((await failureOf(provider(none.client).create({ ...input, source: { kind: "provider_template", provider: "vercel", template: "t" } }))).kind).toBe("unsupported")
  })

  it("a domain allow list is sent as the SDK sends it (networkPolicy.allow); a deny list is not placed", async () => {
    const s = scripted([
      step("GET", "/v2/sandboxes/metal-sbx-1", () => notFound()),
      step("POST", "/v3/sandboxes", (call) => {
        expect((bodyJson(call) as Record<string, unknown>)["networkPolicy"]).toEqual({ allow: ["example.com", "*.example.com"] })
        return json(found("running"))
      })
    ])
    const input = { ...conformanceInput("sbx_1"), internetAccess: true }
    await run(provider(s.client).create({ ...input, domainPolicy: { mode: "allow", domains: ["example.com", "*.example.com"] } }))
    expect(s.left()).toBe(0)
    expect((await failureOf(provider(scripted([]).client).create({ ...input, domainPolicy: { mode: "deny", domains: ["example.com"] } }))).kind).toBe("unsupported")
  })

  it("a retry finds its sandbox by name; another's name is refused; a lost answer and a 409 are looked up; reconcile checks our tag", async () => {
    const retry = scripted([step("GET", "/v2/sandboxes/metal-sbx-1", () => json(found("running")))])
    expect((await run(provider(retry.client).create(conformanceInput("sbx_1")))).resourceId).toBe("metal-sbx-1")

    const taken = scripted([step("GET", "/v2/sandboxes/metal-sbx-1", () => json(found("running", { "metal.sandbox_id": "sbx_other" })))])
    expect((await failureOf(provider(taken.client).create(conformanceInput("sbx_1")))).kind).toBe("customer")

    const lost = scripted([
      step("GET", "/v2/sandboxes/metal-sbx-1", notFound),
      step("POST", "/v3/sandboxes", () => json({ error: { code: "gateway_timeout", message: "timeout" } }, 504)),
      step("GET", "/v2/sandboxes/metal-sbx-1", () => json(found("running")))
    ])
    expect((await run(provider(lost.client).create(conformanceInput("sbx_1")))).resourceId).toBe("metal-sbx-1")

    const raced = scripted([
      step("GET", "/v2/sandboxes/metal-sbx-1", notFound),
      step("POST", "/v3/sandboxes", () => json({ error: { code: "conflict", message: "exists" } }, 409)),
      step("GET", "/v2/sandboxes/metal-sbx-1", () => json(found("running")))
    ])
    expect((await run(provider(raced.client).create(conformanceInput("sbx_1")))).resourceId).toBe("metal-sbx-1")

    const reconcile = scripted([
      step("GET", "/v2/sandboxes/metal-sbx-1", () => json(found("running"))),
      step("GET", "/v2/sandboxes/metal-sbx-1", () => json(found("running", { "metal.sandbox_id": "sbx_other" }))),
      step("GET", "/v2/sandboxes/metal-sbx-1", () => json(found("stopped"))),
      step("GET", "/v2/sandboxes/metal-sbx-1", notFound)
    ])
    const p = provider(reconcile.client)
    expect((await run(p.reconcileCreate("sbx_1")))?.metadata).toMatchObject({ sessionId: "sess_1" })
    expect(await run(p.reconcileCreate("sbx_1"))).toBeNull()
    expect(await run(p.reconcileCreate("sbx_1"))).toBeNull()
    expect(await run(p.reconcileCreate("sbx_1"))).toBeNull()
  })

  it("maps Vercel's failures to kinds; destroy stops the session then deletes, and a missing sandbox is success; pause is unsupported", async () => {
    const s = scripted([
      step("GET", "/v2/sandboxes/metal-sbx-1", notFound),
      step("POST", "/v3/sandboxes", () => json({ error: { code: "forbidden", message: "no" } }, 403)),
      step("GET", "/v2/sandboxes/metal-sbx-1", notFound),
      step("POST", "/v3/sandboxes", () => json({ error: { code: "rate_limited", message: "slow down" } }, 429)),
      step("GET", "/v2/sandboxes/metal-sbx-1", notFound),
      step("POST", "/v3/sandboxes", () => json({ error: { code: "sandbox_limit_exceeded", message: "too many" } }, 400)),
      step("GET", "/v2/sandboxes/metal-sbx-1", () => json(found("running"))),
      step("POST", `${SESSION}/stop`, (call) => {
        authorized(call)
        return json({ session: found("stopped").session })
      }),
      step("DELETE", "/v2/sandboxes/metal-sbx-1", (call) => {
        authorized(call)
        expect(call.url.searchParams.get("projectId")).toBe("prj_v")
        return json({ sandbox: found("stopped").sandbox })
      }),
      step("GET", "/v2/sandboxes/metal-sbx-1", notFound),
      step("GET", "/v2/sandboxes/metal-sbx-1", notFound)
    ])
    const p = provider(s.client)
    expect((await failureOf(p.create(conformanceInput("sbx_1")))).kind).toBe("auth")
    expect((await failureOf(p.create(conformanceInput("sbx_1")))).kind).toBe("capacity")
    expect((await failureOf(p.create(conformanceInput("sbx_1")))).kind).toBe("quota")
    await run(p.destroy(SANDBOX))
    await run(p.destroy(SANDBOX))
    expect(await run(p.inspect(SANDBOX))).toBe("absent")
    expect((await failureOf(p.pause(SANDBOX))).kind).toBe("unsupported")
    expect((await failureOf(p.exposeHttpEndpoint(SANDBOX, { port: 3000, leaseSeconds: 60 }))).kind).toBe("unsupported")
    expect(s.left()).toBe(0)
  })

  it("the lifetime is extended to the new deadline (plus the margin), never beyond Vercel's 5 h", async () => {
    const now = Date.now()
    const s = scripted([
      step("GET", SESSION, () => json({ session: { ...found("running").session, startedAt: now - 60_000, timeout: 900_000 }, routes: [] })),
      step("POST", `${SESSION}/extend-timeout`, (call) => {
        const { duration } = bodyJson(call) as { duration: number }
        // wanted end = now + 3600 s + 300 s; current end = now - 60 s + 900 s.
        expect(Math.abs(duration - (3_900_000 - 840_000))).toBeLessThan(2000)
        return json({ session: found("running").session })
      }),
      step("GET", SESSION, () => json({ session: { ...found("running").session, startedAt: now - 60_000, timeout: 18_000_000 }, routes: [] }))
    ])
    const p = provider(s.client)
    await run(p.extendLifetime!(SANDBOX, 3600))
    await run(p.extendLifetime!(SANDBOX, 86_400)) // already at 5 h: nothing to send
    expect(s.left()).toBe(0)
  })

  it("cost is the metered usage at Vercel's rate card (worked example)", async () => {
    // 2 vCPU / 4096 MB, 30 min of active CPU, 1 h running, 1 GB out:
    //   0.5 h × $0.128 + 4 GiB × 1 h × $0.0212 + $0.0000006 + 1 GB × $0.15
    //   = 64,000 + 84,800 + 0.6 + 150,000 µUSD = 298,800.6 → 298,801 µUSD.
    const usage = { memory: 4096, totalActiveCpuDurationMs: 1_800_000, totalDurationMs: 3_600_000, totalEgressBytes: 1_000_000_000 }
    expect(usageCostMicrousd({ activeCpuMs: 1_800_000, memoryMb: 4096, durationMs: 3_600_000, egressBytes: 1e9 })).toBeCloseTo(298_800.6, 6)
    // A short sandbox is billed 60 s of memory at least: 2 GiB × 60 s = 706.67 µUSD, plus the create.
    expect(usageCostMicrousd({ activeCpuMs: 0, memoryMb: 2048, durationMs: 5_000, egressBytes: 0 })).toBeCloseTo(707.2667, 3)
    const window = { from: "2026-11-22T10:00:00.000Z", to: "2026-11-22T11:00:00.000Z" }
    const s = scripted([
      step("GET", "/v2/sandboxes/metal-sbx-1", () => json(found("running", undefined, usage))),
      step("GET", "/v2/sandboxes/metal-sbx-1", notFound)
    ])
    const p = provider(s.client)
    expect(await run(p.getCost(SANDBOX, window))).toEqual({
      amountMicrousd: 298_801n,
      measuredThrough: window.to,
      provenance: "provider_metered",
      confidence: "medium",
      rateCardVersion: "vercel-2026"
    })
    expect(await run(p.getCost(SANDBOX, window))).toBeNull()
    expect(s.left()).toBe(0)
  })
})

describe("vercel remote: commands", () => {
  it("exec runs argv detached in the session (/workspace mapped to /vercel/sandbox); events are the NDJSON lines in order, then the exit from ?wait=true", async () => {
    const s = scripted([
      step("POST", `${SESSION}/cmd`, (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({ command: "echo", args: ["a b"], cwd: "/vercel/sandbox/src", env: { K: "v" }, sudo: false, timeout: 60_000 })
        return command(null)
      }),
      step("GET", `${SESSION}/cmd/cmd_1/logs`, (call) => {
        authorized(call)
        return ndjson([{ stream: "stdout", data: "a b\n" }, { stream: "stderr", data: "warn\n" }, { stream: "stdout", data: "é" }])
      }),
      step("GET", `${SESSION}/cmd/cmd_1`, (call) => {
        expect(call.url.searchParams.get("wait")).toBe("true")
        return command(3)
      })
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, { command: ["echo", "a b"], cwd: "/workspace/src", environment: { K: "v" }, timeoutSeconds: 60, maxOutputBytes: 1024, processId: "proc_1" }))
    expect(Either.getOrUndefined(executionIds.parse(executionId))).toEqual({ sessionId: "sess_1", cmdId: "cmd_1", maxOutputBytes: 1024, timeoutSeconds: 60 })
    const events = await run(p.execEvents(SANDBOX, executionId, 1))
    expect(events.map((e) => [e.seq, e.type])).toEqual([[1, "stderr"], [2, "stdout"], [3, "exit"]])
    expect(new TextDecoder().decode((events[1] as { data: Uint8Array }).data)).toBe("é")
    expect(events[2]).toMatchObject({ exitCode: 3, signal: null, cancelled: false, timedOut: false, outputTruncated: false })
    expect(s.left()).toBe(0)
  })

  it("a running command's output comes as it is written (whole lines only); the stream is read once; output past the limit is cut and marked", async () => {
    const ref = executionIds.encode({ sessionId: "sess_1", cmdId: "cmd_1", maxOutputBytes: 5, timeoutSeconds: 60 })
    let push: (text: string | null) => void = () => {}
    const s = scripted([
      step("GET", `${SESSION}/cmd/cmd_1/logs`, () =>
        new Response(
          new ReadableStream<Uint8Array>({
            start: (c) => {
              push = (text) => (text === null ? c.close() : c.enqueue(new TextEncoder().encode(text)))
              push(`${JSON.stringify({ stream: "stdout", data: "abc" })}\n{"stream":"std`)
            }
          }),
          { headers: { "content-type": "application/x-ndjson" } }
        )),
      step("GET", `${SESSION}/cmd/cmd_1`, (call) => {
        expect(call.url.searchParams.get("wait")).toBe("true")
        return command(0)
      })
    ])
    const p = provider(s.client)
    const running = await run(p.execEvents(SANDBOX, ref, 0))
    expect(running.map((e) => e.type)).toEqual(["stdout"])
    expect(await run(p.execEvents(SANDBOX, ref, 1))).toEqual([])
    push(`out","data":"defgh"}\n${JSON.stringify({ stream: "stderr", data: "never kept" })}\n`)
    push(null)
    // A poller asks from where it is, and gets what came since.
    expect((await run(p.execEvents(SANDBOX, ref, 1))).map((e) => e.type)).toEqual(["stdout", "exit"])
    const over = await run(p.execEvents(SANDBOX, ref, 0))
    expect(over.map((e) => (e.type === "exit" ? e.outputTruncated : new TextDecoder().decode(e.data)))).toEqual(["abc", "de", true])
    expect(s.left()).toBe(0)
  })

  it("cancel kills with SIGKILL and the exit says cancelled; a finished command is not cancelled; a kill past the timeout reads as timed out", async () => {
    const ref = executionIds.encode({ sessionId: "sess_1", cmdId: "cmd_1", maxOutputBytes: 100, timeoutSeconds: 10 })
    const s = scripted([
      step("GET", `${SESSION}/cmd/cmd_1`, (call) => {
        expect(call.url.searchParams.get("wait")).toBeNull()
        return command(null)
      }),
      step("POST", `${SESSION}/cmd/cmd_1/kill`, (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({ signal: 9 })
        return command(null)
      }),
      step("GET", `${SESSION}/cmd/cmd_1/logs`, () => ndjson([])),
      step("GET", `${SESSION}/cmd/cmd_1`, () => command(137, { durationMs: 500 })),
      step("GET", `${SESSION}/cmd/cmd_1`, () => command(137))
    ])
    const p = provider(s.client)
    expect(await run(p.cancelExec(SANDBOX, ref))).toEqual({ cancelled: true })
    expect(await run(p.execEvents(SANDBOX, ref, 0))).toEqual([{ seq: 0, type: "exit", exitCode: null, signal: "SIGKILL", cancelled: true, timedOut: false, outputTruncated: false }])
    expect(await run(p.cancelExec(SANDBOX, ref))).toEqual({ cancelled: false })
    expect(s.left()).toBe(0)

    const timedOut = scripted([
      step("GET", `${SESSION}/cmd/cmd_1/logs`, () => ndjson([])),
      step("GET", `${SESSION}/cmd/cmd_1`, () => command(137, { durationMs: 10_020 }))
    ])
    expect(await run(provider(timedOut.client).execEvents(SANDBOX, ref, 0))).toEqual([
      { seq: 0, type: "exit", exitCode: null, signal: "SIGKILL", cancelled: false, timedOut: true, outputTruncated: false }
    ])
  })

  it("a log stream that ends with an error line (the sandbox stopped) is a failure", async () => {
    const ref = executionIds.encode({ sessionId: "sess_1", cmdId: "cmd_1", maxOutputBytes: 100, timeoutSeconds: 10 })
    const s = scripted([step("GET", `${SESSION}/cmd/cmd_1/logs`, () => ndjson([{ stream: "stdout", data: "x" }, { stream: "error", data: { code: "sandbox_stopped", message: "gone" } }]))])
    expect((await failureOf(provider(s.client).execEvents(SANDBOX, ref, 0))).kind).toBe("not_found")
  })
})

describe("vercel remote: files", () => {
  it("read posts the path and keeps the requested range; a missing file is not_found", async () => {
    const bytes = new Uint8Array(100).map((_, i) => i)
    const s = scripted([
      step("POST", `${SESSION}/fs/read`, (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({ path: "/vercel/sandbox/a.bin" })
        return new Response(bytes, { headers: { "content-type": "application/octet-stream", "content-length": "100" } })
      }),
      step("POST", `${SESSION}/fs/read`, notFound)
    ])
    const p = provider(s.client)
    const read = await run(p.readFile(SANDBOX, { path: "/workspace/a.bin", offsetBytes: 10, maxBytes: 20 }))
    expect([...read.data]).toEqual([...bytes.slice(10, 30)])
    expect(read).toMatchObject({ offsetBytes: 10, sizeBytes: 100, eof: false })
    expect((await failureOf(p.readFile(SANDBOX, { path: "/workspace/none", offsetBytes: 0, maxBytes: 20 }))).kind).toBe("not_found")
    expect(s.left()).toBe(0)
  })

  it("write probes the path, makes the missing parents one by one, and posts a gzipped tar extracted at /", async () => {
    const data = new Uint8Array([0, 1, 2, 255])
    const s = scripted([
      step("POST", `${SESSION}/cmd`, (call) => {
        expect(bodyJson(call)).toEqual({ command: "sh", args: ["-c", PROBE_SCRIPT, "sh", "/vercel/sandbox/x/y/f.bin"], env: {}, sudo: false, timeout: 60_000 })
        return command(null)
      }),
      step("GET", `${SESSION}/cmd/cmd_1`, () => command(12)),
      step("POST", `${SESSION}/fs/mkdir`, (call) => {
        expect(bodyJson(call)).toEqual({ path: "/vercel/sandbox/x" })
        return json({})
      }),
      step("POST", `${SESSION}/fs/mkdir`, (call) => {
        expect(bodyJson(call)).toEqual({ path: "/vercel/sandbox/x/y" })
        return json({})
      }),
      step("POST", `${SESSION}/fs/write`, (call) => {
        authorized(call)
        expect(call.headers["x-cwd"]).toBe("/")
        expect(call.headers["content-type"]).toBe("application/gzip")
        const entries = untarGz(bodyBytes(call), 1 << 20)
        expect(entries.map((e) => [e.name, e.type, [...e.data]])).toEqual([["vercel/sandbox/x/y/f.bin", "file", [0, 1, 2, 255]]])
        return json({})
      })
    ])
    expect(await run(provider(s.client).writeFile(SANDBOX, { path: "/workspace/x/y/f.bin", data, mode: "create", createParents: true }))).toEqual({ bytesWritten: 4, created: true })
    expect(s.left()).toBe(0)
  })

  it("write refuses a missing parent without createParents, an existing file in create mode, a directory; no append, list or delete", async () => {
    const probe = (code: number) => [step("POST", `${SESSION}/cmd`, () => command(null)), step("GET", `${SESSION}/cmd/cmd_1`, () => command(code))]
    const s = scripted([...probe(11), ...probe(5), ...probe(4)])
    const p = provider(s.client)
    const write = (mode: "create" | "overwrite" | "append", createParents = false) => p.writeFile(SANDBOX, { path: "/workspace/d/f", data: new Uint8Array(1), mode, createParents })
    expect(await failureOf(write("overwrite"))).toMatchObject({ kind: "not_found", message: "/vercel/sandbox/d does not exist" })
    expect((await failureOf(write("create"))).kind).toBe("customer")
    expect((await failureOf(write("overwrite"))).kind).toBe("invalid_request")
    expect((await failureOf(write("append"))).kind).toBe("unsupported")
    expect((await failureOf(p.listFiles(SANDBOX, { path: "/workspace", recursive: false, maxEntries: 10 }))).kind).toBe("unsupported")
    expect((await failureOf(p.deleteFile(SANDBOX, { path: "/workspace/f", recursive: false }))).kind).toBe("unsupported")
    expect(s.left()).toBe(0)
  })
})
