/**
 * The Prime adapter in `remote` mode against a scripted HttpClient: the requests it sends to Prime's API and to a
 * sandbox's gateway (paths, bodies, the Bearer key, then the gateway token from `/auth`), the protobuf bytes of a
 * command session, how it reads the answers (polling until RUNNING, reconcile by label, error kinds, the command
 * stream and its deadline, whole-file downloads and multipart uploads), the refusals made before any request, and
 * the rate-card cost worked example. The emulator-backed suite (prime.test.ts) covers behaviour.
 */
import type { HttpClient } from "@effect/platform"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { conformanceInput } from "../testing/conformance.ts"
import type { CreateInput, ProviderError, ProviderSandbox } from "../../src/providers/Provider.ts"
import { bodyBytes, bodyJson, type Call, json, scripted, type Step } from "../testing/scripted-client.ts"
import { idempotencyKey, isDockerHub, makePrimeProvider, type PrimeProviderConfig, sandboxLabel } from "./adapter/index.ts"
import {
  decodeStartRequest,
  encodeStartRequest,
  encodeStartResponse,
  endOfStream,
  envelope,
  EnvelopeDecoder,
  type SessionEvent,
  STREAM_CONTENT_TYPE
} from "./command-session.ts"

const API = "https://api.prime.test"
const GATEWAY = "https://gw.prime.test"
const provider = (client: HttpClient.HttpClient, extra: Partial<PrimeProviderConfig> = {}) =>
  makePrimeProvider({ apiUrl: API, apiKey: "pi_key", mode: "remote", httpClient: client, pollIntervalMs: 1, ...extra })
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>) => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (result._tag === "Right") throw new Error("expected a failure")
  return result.left
}
const step = (method: string, path: string, reply: Step["reply"]): Step => ({ method, path, reply })
const authorized = (call: Call, token = "pi_key") => expect(call.headers["authorization"]).toBe(`Bearer ${token}`)

const wireSandbox = (status: string, extra: Record<string, unknown> = {}) => ({
  id: "sb1",
  name: "metal-sbx_1",
  dockerImage: "ubuntu:22.04",
  cpuCores: 1,
  memoryGB: 0.5,
  diskSizeGB: 5,
  diskMountPath: "/",
  gpuCount: 0,
  vm: true,
  status,
  timeoutMinutes: 15,
  labels: [sandboxLabel("sbx_1")],
  createdAt: "2026-11-25T10:00:00Z",
  updatedAt: "2026-11-25T10:00:00Z",
  teamId: null,
  ...extra
})
const SANDBOX: ProviderSandbox = {
  resourceId: "sb1",
  resolvedResources: { vcpu: 2, memoryMb: 4096, diskMb: 5120, architecture: "x86_64", providerSize: null },
  metadata: { name: "metal-sbx_1", teamId: null }
}
const input = (extra: Partial<CreateInput> = {}): CreateInput => ({ ...conformanceInput("sbx_1"), ...extra })
/** `/auth` for the sandbox, answering the gateway address and a token. */
const auth = (): Step =>
  step("POST", "/api/v1/sandbox/sb1/auth", (call) => {
    authorized(call)
    return json({ gateway_url: `${GATEWAY}/`, user_ns: "ns-1", job_id: "job-9", token: "gw_token", expires_at: "2026-11-25T11:00:00Z" })
  })
const stream = (events: ReadonlyArray<SessionEvent>, trailer?: { code: string; message: string }) => {
  const parts = [...events.map((e) => envelope(encodeStartResponse(e))), endOfStream(trailer)]
  return new Response(new Uint8Array(Buffer.concat(parts)), { headers: { "content-type": STREAM_CONTENT_TYPE } })
}
const text = (data: Uint8Array) => Buffer.from(data).toString("utf8")

describe("prime remote: the command_session schema", () => {
  it("encodes a StartRequest to the bytes protoc would (field numbers, map entries, proto3 optional cwd)", () => {
    const bytes = encodeStartRequest({ cmd: "/bin/bash", args: ["-c", "echo hi"], envs: { A: "b" }, cwd: "/tmp" })
    // StartRequest.command (1, LEN 38) { cmd (1) "/bin/bash", args (2) "-c", args (2) "echo hi", envs (3) {key A, value b}, cwd (4) "/tmp" }
    expect(Buffer.from(bytes).toString("hex")).toBe(
      "0a26" + "0a092f62696e2f62617368" + "12022d63" + "12076563686f206869" + "1a060a0141120162" + "2204" + "2f746d70"
    )
    expect(decodeStartRequest(bytes).command).toMatchObject({ cmd: "/bin/bash", args: ["-c", "echo hi"], envs: { A: "b" }, cwd: "/tmp" })
  })

  it("an end event's exit code is a zigzag sint32: 42 is 0x54, -1 is 0x01", () => {
    const end = (exitCode: number) => Buffer.from(encodeStartResponse({ type: "end", exitCode, exited: true, status: "", error: undefined })).toString("hex")
    // StartResponse.event (1) { end (3) { exit_code (1) zigzag, exited (2) true } }
    expect(end(42)).toBe("0a061a0408541001")
    expect(end(-1)).toBe("0a061a0408011001")
  })
})

describe("prime remote: sandboxes", () => {
  it("create posts name, image, sizes, timeout, environment, label, idempotency key and vm, then polls until RUNNING", async () => {
    const s = scripted([
      step("POST", "/api/v1/sandbox", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({
          name: "metal-sbx_1",
          docker_image: "ubuntu:22.04",
          cpu_cores: 1,
          memory_gb: 0.5,
          disk_size_gb: 5,
          // 600 s of runtime, plus 5 minutes of margin.
          timeout_minutes: 15,
          environment_vars: { CONFORMANCE_SANDBOX: "yes" },
          labels: [sandboxLabel("sbx_1")],
          idempotency_key: idempotencyKey("sbx_1"),
          vm: true
        })
        return json(wireSandbox("PENDING"), 201)
      }),
      step("GET", "/api/v1/sandbox/sb1", () => json(wireSandbox("PROVISIONING"))),
      step("GET", "/api/v1/sandbox/sb1", () => json(wireSandbox("RUNNING")))
    ])
    const created = await run(provider(s.client).create(input()))
    expect(created).toEqual({
      resourceId: "sb1",
      resolvedResources: { vcpu: 1, memoryMb: 512, diskMb: 5120, architecture: "x86_64", providerSize: null },
      metadata: { name: "metal-sbx_1", teamId: null }
    })
    expect(sandboxLabel("sbx_1")).toMatch(/^metal-[0-9a-f]{32}$/)
    expect(idempotencyKey("sbx_1")).toMatch(/^[0-9a-f]{64}$/)
    expect(s.left()).toBe(0)
  })

  it("sizes round up (whole vCPUs, 128 MiB steps, GiB of disk); images by source; the team option wins over the configured team", async () => {
    const bodies: Array<Record<string, unknown>> = []
    const creating = (): Step =>
      step("POST", "/api/v1/sandbox", (call) => {
        bodies.push(bodyJson(call) as Record<string, unknown>)
        return json(wireSandbox("RUNNING"), 201)
      })
    const s = scripted([creating(), creating(), creating()])
    const p = provider(s.client, { teamId: "team-config" })
    await run(p.create(input({ resources: { vcpu: 2.5, memoryMb: 1000, diskMb: 2500, architecture: "x86_64" }, providerOptions: { team_id: "team-option" } })))
    await run(p.create(input({ source: { kind: "oci_image", image: "docker.io/library/alpine:3.20" } })))
    await run(p.create(input({ source: { kind: "provider_template", provider: "prime", template: "prime/verifiers:1" } })))
    expect(bodies.map((b) => [b["cpu_cores"], b["memory_gb"], b["disk_size_gb"], b["docker_image"], b["team_id"]])).toEqual([
      [3, 1024 / 1024, 3, "ubuntu:22.04", "team-option"],
      [1, 0.5, 5, "docker.io/library/alpine:3.20", "team-config"],
      [1, 0.5, 5, "prime/verifiers:1", "team-config"]
    ])
    expect(s.left()).toBe(0)
  })

  it("refuses before any request: arm64, pause-on-timeout, sizes beyond Prime's, images outside Docker Hub, other templates, pause, resume, ports", async () => {
    const s = scripted([])
    const p = provider(s.client)
    const kinds = await Promise.all([
      failureOf(p.create(input({ resources: { vcpu: 1, memoryMb: 512, architecture: "arm64" } }))),
      failureOf(p.create(input({ lifecycle: { runtimeTimeoutSeconds: 600, onRuntimeTimeout: "pause", onIdleTimeout: "destroy" } }))),
      failureOf(p.create(input({ lifecycle: { runtimeTimeoutSeconds: 600, idleTimeoutSeconds: 60, onRuntimeTimeout: "destroy", onIdleTimeout: "pause" } }))),
      failureOf(p.create(input({ resources: { vcpu: 17, memoryMb: 512, architecture: "any" } }))),
      failureOf(p.create(input({ resources: { vcpu: 1, memoryMb: 65_537, architecture: "any" } }))),
      failureOf(p.create(input({ resources: { vcpu: 1, memoryMb: 512, diskMb: 200_000, architecture: "any" } }))),
      failureOf(p.create(input({ source: { kind: "oci_image", image: "ghcr.io/acme/tool:1" } }))),
      failureOf(p.create(input({ source: { kind: "oci_image", image: "alpine", command: ["sleep", "1"] } }))),
      failureOf(p.create(input({ source: { kind: "provider_template", provider: "prime", template: "other/x" } }))),
      failureOf(p.pause(SANDBOX)),
      failureOf(p.resume(SANDBOX)),
      failureOf(p.exposeHttpEndpoint(SANDBOX, { port: 8000, leaseSeconds: 60 })),
      failureOf(p.revokeHttpEndpoint(SANDBOX, "x"))
    ])
    expect(kinds.map((e) => e.kind)).toEqual(Array(13).fill("unsupported"))
    expect(s.calls).toHaveLength(0)
    expect([isDockerHub("alpine"), isDockerHub("library/alpine:3"), isDockerHub("index.docker.io/a/b"), isDockerHub("ghcr.io/a/b"), isDockerHub("localhost:5000/a")])
      .toEqual([true, true, true, false, false])
  })

  it("a lost create answer is looked for by label (found: waited on; not found: unknown outcome, never created twice)", async () => {
    const listing = (sandboxes: ReadonlyArray<unknown>): Step =>
      step("GET", "/api/v1/sandbox", (call) => {
        authorized(call)
        expect(Object.fromEntries(call.url.searchParams)).toEqual({ labels: sandboxLabel("sbx_1"), is_active: "true", page: "1", per_page: "100" })
        return json({ sandboxes, total: sandboxes.length, page: 1, perPage: 100, hasNext: false })
      })
    const s = scripted([
      step("POST", "/api/v1/sandbox", () => "transport-error"),
      listing([wireSandbox("PROVISIONING")]),
      step("GET", "/api/v1/sandbox/sb1", () => json(wireSandbox("RUNNING"))),
      step("POST", "/api/v1/sandbox", () => json({ detail: "upstream" }, 502)),
      listing([wireSandbox("TERMINATED")])
    ])
    const p = provider(s.client)
    expect((await run(p.create(input()))).resourceId).toBe("sb1")
    expect((await failureOf(p.create(input()))).kind).toBe("unknown_outcome")
    expect(s.left()).toBe(0)
  })

  it("reconcile pages through the label's sandboxes, skips ended ones, asks in the configured team; none is null", async () => {
    const s = scripted([
      step("GET", "/api/v1/sandbox", (call) => {
        expect(call.url.searchParams.get("team_id")).toBe("team-1")
        return json({ sandboxes: [wireSandbox("TERMINATED", { id: "old" })], total: 2, page: 1, perPage: 100, hasNext: true })
      }),
      step("GET", "/api/v1/sandbox", (call) => {
        expect(call.url.searchParams.get("page")).toBe("2")
        return json({ sandboxes: [wireSandbox("RUNNING"), wireSandbox("RUNNING", { id: "other", labels: ["metal-else"] })], total: 2, page: 2, perPage: 100, hasNext: false })
      }),
      step("GET", "/api/v1/sandbox", () => json({ sandboxes: [], total: 0, page: 1, perPage: 100, hasNext: false }))
    ])
    const p = provider(s.client, { teamId: "team-1" })
    expect((await run(p.reconcileCreate("sbx_1")))?.resourceId).toBe("sb1")
    expect(await run(p.reconcileCreate("sbx_none"))).toBeNull()
    expect(s.left()).toBe(0)
  })

  it("inspect maps statuses (gone and terminated are absent); destroy deletes, 404 is success", async () => {
    const s = scripted([
      step("GET", "/api/v1/sandbox/sb1", () => json(wireSandbox("PROVISIONING"))),
      step("GET", "/api/v1/sandbox/sb1", () => json(wireSandbox("ERROR"))),
      step("GET", "/api/v1/sandbox/sb1", () => json(wireSandbox("TIMEOUT"))),
      step("GET", "/api/v1/sandbox/sb1", () => json({ detail: "Sandbox not found" }, 404)),
      step("DELETE", "/api/v1/sandbox/sb1", (call) => (authorized(call), json({ success: true }))),
      step("DELETE", "/api/v1/sandbox/sb1", () => json({ detail: "Sandbox not found" }, 404))
    ])
    const p = provider(s.client)
    const states = []
    for (let i = 0; i < 4; i++) states.push(await run(p.inspect(SANDBOX)))
    expect(states).toEqual(["starting", "failed", "absent", "absent"])
    await run(p.destroy(SANDBOX))
    await run(p.destroy(SANDBOX))
    expect(s.left()).toBe(0)
  })

  it("error kinds: a bad key is auth, 402 quota, 429 capacity, 422 invalid_request with FastAPI's messages, a failed image pull the customer's", async () => {
    const s = scripted([
      step("POST", "/api/v1/sandbox", () => json({ detail: "Invalid API key" }, 401)),
      step("POST", "/api/v1/sandbox", () => json({ detail: "Insufficient balance" }, 402)),
      step("POST", "/api/v1/sandbox", () => json({ detail: "Too many sandboxes" }, 429)),
      step("POST", "/api/v1/sandbox", () => json({ detail: [{ loc: ["body", "cpu_cores"], msg: "too many cores" }] }, 422)),
      step("POST", "/api/v1/sandbox", () => json(wireSandbox("PROVISIONING"), 201)),
      step("GET", "/api/v1/sandbox/sb1", () => json(wireSandbox("ERROR", { errorType: "IMAGE_PULL_FAILED", errorMessage: "no such image" })))
    ])
    const p = provider(s.client)
    const failures = []
    for (let i = 0; i < 5; i++) failures.push(await failureOf(p.create(input())))
    expect(failures.map((f) => f.kind)).toEqual(["auth", "quota", "capacity", "invalid_request", "customer"])
    expect(failures[3]!.message).toContain("too many cores")
    expect(failures[4]!.message).toContain("IMAGE_PULL_FAILED: no such image")
    expect(s.left()).toBe(0)
  })

  it("cost, worked example: 2 vCPU, 4 GiB and 5 GiB of disk for an hour = 2×20,000 + 4×12,500 + 5×200 = 91,000 µUSD (rate card estimate)", async () => {
    const s = scripted([])
    const cost = await run(provider(s.client).getCost(SANDBOX, { from: "2026-11-25T10:00:00Z", to: "2026-11-25T11:00:00Z" }))
    expect(cost).toEqual({
      amountMicrousd: 91_000n,
      measuredThrough: "2026-11-25T11:00:00Z",
      provenance: "estimated_rate_card",
      confidence: "medium",
      rateCardVersion: "prime-2026-12-22"
    })
    expect(s.calls).toHaveLength(0)
  })

  it("BYOK: the organization's key and team, not the operator's", async () => {
    const s = scripted([
      step("POST", "/api/v1/sandbox", (call) => {
        authorized(call, "org_key")
        expect((bodyJson(call) as { team_id?: string }).team_id).toBe("org-team")
        return json(wireSandbox("RUNNING"), 201)
      })
    ])
    const own = provider(s.client, { teamId: "operator-team" }).withCredentials!({ api_key: "org_key", team_id: "org-team" })
    await run(own.create(input()))
    expect(s.left()).toBe(0)
  })
})

describe("prime remote: commands", () => {
  const startStep = (reply: (call: Call) => Response): Step =>
    step("POST", "/ns-1/job-9/command_session.CommandSession/Start", (call) => {
      authorized(call, "gw_token")
      expect(call.url.origin).toBe(GATEWAY)
      return reply(call)
    })
  const collect = async (p: ReturnType<typeof provider>, executionId: string) => {
    for (let i = 0; i < 200; i++) {
      const events = await run(p.execEvents(SANDBOX, executionId, 0))
      if (events.at(-1)?.type === "exit") return events
      await Bun.sleep(5)
    }
    throw new Error("no exit")
  }

  it("exec: /auth, then Start with bash `exec <argv>`, envs, cwd and the timeout; output and a zigzag exit code come back in order", async () => {
    const s = scripted([
      auth(),
      startStep((call) => {
        expect(call.headers["content-type"]).toBe(STREAM_CONTENT_TYPE)
        expect(call.headers["connect-protocol-version"]).toBe("1")
        expect(call.headers["connect-timeout-ms"]).toBe("30000")
        const [message] = new EnvelopeDecoder().push(bodyBytes(call))
        expect(decodeStartRequest(message!.data).command).toMatchObject({
          cmd: "/bin/bash",
          args: ["-c", "exec sh -c 'echo out; exit 42'"],
          envs: { GREETING: "hi there" },
          cwd: "/workspace"
        })
        return stream([
          { type: "start", pid: 7 },
          { type: "stdout", data: new TextEncoder().encode("out\n") },
          { type: "keepalive" },
          { type: "stderr", data: new TextEncoder().encode("err\n") },
          { type: "end", exitCode: 42, exited: true, status: "exit status 42", error: undefined }
        ])
      })
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, {
      command: ["sh", "-c", "echo out; exit 42"],
      cwd: "/workspace",
      environment: { GREETING: "hi there" },
      timeoutSeconds: 30,
      maxOutputBytes: 1000,
      processId: "proc_1"
    }))
    expect(executionId).toBe("prime:proc_1")
    const events = await collect(p, executionId)
    expect(events.map((e) => (e.type === "exit" ? `exit ${e.exitCode}` : `${e.type} ${text(e.data)}`))).toEqual(["stdout out\n", "stderr err\n", "exit 42"])
    expect(events.map((e) => e.seq)).toEqual([0, 1, 2])
    // Asked again from a position: the same events.
    expect(await run(p.execEvents(SANDBOX, executionId, 2))).toEqual([events[2]])
    expect(s.left()).toBe(0)
  })

  it("the deadline (Connect-Timeout-Ms) ends the call deadline_exceeded: a timed-out kill; output is cut at the limit; a signal in the status is reported", async () => {
    const s = scripted([
      auth(),
      startStep(() => stream([{ type: "start", pid: 7 }, { type: "stdout", data: new TextEncoder().encode("0123456789") }], { code: "deadline_exceeded", message: "context deadline exceeded" })),
      auth(),
      startStep(() => stream([{ type: "start", pid: 8 }, { type: "end", exitCode: -1, exited: false, status: "signal: killed", error: undefined }]))
    ])
    const p = provider(s.client)
    const slow = await run(p.exec(SANDBOX, { command: ["sleep", "9"], timeoutSeconds: 1, maxOutputBytes: 4, processId: "proc_slow" }))
    const events = await collect(p, slow.executionId)
    expect(events.map((e) => (e.type === "exit" ? e : text(e.data)))).toEqual([
      "0123",
      { seq: 1, type: "exit", exitCode: null, signal: "SIGKILL", cancelled: false, timedOut: true, outputTruncated: true }
    ])
    const killed = await run(p.exec(SANDBOX, { command: ["x"], timeoutSeconds: 5, maxOutputBytes: 4, processId: "proc_killed" }))
    expect((await collect(p, killed.executionId)).at(-1)).toMatchObject({ type: "exit", exitCode: null, signal: "SIGKILL", timedOut: false })
    expect(s.left()).toBe(0)
  })

  it("a stream that fails says why; an execution this gateway does not hold (restarted) is not_found; no stdin, pty or cancel, before any request", async () => {
    const s = scripted([
      auth(),
      startStep(() => stream([{ type: "start", pid: 7 }], { code: "internal", message: "boom" })),
      auth(),
      step("POST", "/ns-1/job-9/command_session.CommandSession/Start", () => json({ error: "sandbox_not_found" }, 502))
    ])
    const p = provider(s.client)
    const broken = await run(p.exec(SANDBOX, { command: ["true"], timeoutSeconds: 5, maxOutputBytes: 10, processId: "proc_b" }))
    await Bun.sleep(20)
    const failure = await failureOf(p.execEvents(SANDBOX, broken.executionId, 0))
    expect(failure).toMatchObject({ kind: "unavailable" })
    expect(failure.message).toContain("internal boom")
    expect((await failureOf(p.exec(SANDBOX, { command: ["true"], timeoutSeconds: 5, maxOutputBytes: 10, processId: "proc_gone" }))).kind).toBe("not_found")
    expect((await failureOf(provider(scripted([]).client).execEvents(SANDBOX, "prime:proc_b", 0))).kind).toBe("not_found")
    const before = s.calls.length
    const refusals = await Promise.all([
      failureOf(p.exec(SANDBOX, { command: ["cat"], timeoutSeconds: 5, maxOutputBytes: 10, processId: "proc_s", stdin: true })),
      failureOf(p.exec(SANDBOX, { command: ["bash"], timeoutSeconds: 5, maxOutputBytes: 10, processId: "proc_t", pty: { cols: 80, rows: 24 } })),
      failureOf(p.cancelExec(SANDBOX, broken.executionId))
    ])
    expect(refusals.map((e) => e.kind)).toEqual(["unsupported", "unsupported", "unsupported"])
    expect(s.calls.length).toBe(before)
    expect(s.left()).toBe(0)
  })
})

describe("prime remote: files", () => {
  it("read: /auth, then the whole-file download with path and sandbox_id, cut to the range; 404 is not_found", async () => {
    const s = scripted([
      auth(),
      step("GET", "/ns-1/job-9/download", (call) => {
        authorized(call, "gw_token")
        expect(Object.fromEntries(call.url.searchParams)).toEqual({ path: "/workspace/a.bin", sandbox_id: "sb1" })
        return new Response(new Uint8Array([0, 1, 2, 3, 4, 5]))
      }),
      auth(),
      step("GET", "/ns-1/job-9/download", () => json({ detail: "File not found" }, 404))
    ])
    const p = provider(s.client)
    const read = await run(p.readFile(SANDBOX, { path: "/workspace/a.bin", offsetBytes: 2, maxBytes: 3 }))
    expect({ ...read, data: [...read.data] }).toEqual({ data: [2, 3, 4], offsetBytes: 2, sizeBytes: 6, eof: false })
    expect((await failureOf(p.readFile(SANDBOX, { path: "/workspace/none", offsetBytes: 0, maxBytes: 3 }))).kind).toBe("not_found")
    expect(s.left()).toBe(0)
  })

  it("write: a download probe says whether it existed, then a multipart upload (`file`, path and sandbox_id in the query); only overwrite, no parents", async () => {
    const s = scripted([
      auth(),
      step("GET", "/ns-1/job-9/download", () => json({ detail: "File not found" }, 404)),
      step("POST", "/ns-1/job-9/upload", async (call) => {
        authorized(call, "gw_token")
        expect(Object.fromEntries(call.url.searchParams)).toEqual({ path: "/workspace/b.bin", sandbox_id: "sb1" })
        const body = call.request.body
        if (body._tag !== "FormData") throw new Error(`expected a form, got ${body._tag}`)
        const file = body.formData.get("file")
        expect(file instanceof Blob ? [...new Uint8Array(await file.arrayBuffer())] : null).toEqual([0, 255])
        return json({ success: true, path: "/workspace/b.bin", size: 2, timestamp: "2026-11-25T10:00:00Z" })
      }),
      auth(),
      step("GET", "/ns-1/job-9/download", () => new Response(new Uint8Array([1]))),
      step("POST", "/ns-1/job-9/upload", () => json({ success: true, path: "/workspace/b.bin", size: 2, timestamp: "2026-11-25T10:00:00Z" }))
    ])
    const p = provider(s.client)
    const write = (extra: { mode?: "create" | "overwrite" | "append"; createParents?: boolean } = {}) =>
      p.writeFile(SANDBOX, { path: "/workspace/b.bin", data: new Uint8Array([0, 255]), mode: extra.mode ?? "overwrite", createParents: extra.createParents ?? false })
    expect(await run(write())).toEqual({ bytesWritten: 2, created: true })
    expect(await run(write())).toEqual({ bytesWritten: 2, created: false })
    const before = s.calls.length
    const refusals = await Promise.all([
      failureOf(write({ mode: "create" })),
      failureOf(write({ mode: "append" })),
      failureOf(write({ createParents: true })),
      failureOf(p.listFiles(SANDBOX, { path: "/workspace", recursive: false, maxEntries: 10 })),
      failureOf(p.deleteFile(SANDBOX, { path: "/workspace/b.bin", recursive: false }))
    ])
    expect(refusals.map((e) => e.kind)).toEqual(Array(5).fill("unsupported"))
    expect(s.calls.length).toBe(before)
    expect(s.left()).toBe(0)
  })
})
