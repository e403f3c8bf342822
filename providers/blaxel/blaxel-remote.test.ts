/**
 * The Blaxel adapter in `remote` mode against a scripted HttpClient: the requests it sends to Blaxel's control
 * API and a sandbox's runtime (paths, bodies, auth headers) and how it reads the answers (deploy polling,
 * reconcile by name and label, error kinds, provider-reported cost). The emulator-backed suite covers behaviour.
 */
import type { HttpClient } from "@effect/platform"
import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import { conformanceInput } from "../testing/conformance.ts"
import type { ProviderError, ProviderSandbox } from "../../src/providers/Provider.ts"
import { bodyBytes, bodyJson, type Call, json, scripted, type Step } from "../testing/scripted-client.ts"
import { API_VERSION, executionIds, makeBlaxelProvider } from "./adapter/index.ts"

const API = "https://api.blaxel.test/v0"
const RUN = "https://run.blaxel.test/sbx-1"
const provider = (client: HttpClient.HttpClient, extra: { accountId?: string } = {}) =>
  makeBlaxelProvider({ apiUrl: API, apiKey: "bl_key", workspace: "acme", mode: "remote", httpClient: client, pollIntervalMs: 1, ...extra })
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>) => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (result._tag === "Right") throw new Error("expected a failure")
  return result.left
}
const step = (method: string, path: string, reply: Step["reply"]): Step => ({ method, path, reply })
const wire = (status: string, labels: Record<string, string> = { "metal.sandbox_id": "sbx_1" }) => ({
  metadata: { name: "metal-sbx-1", url: RUN, labels },
  spec: { runtime: { memory: 2048 } },
  status
})
const SANDBOX: ProviderSandbox = {
  resourceId: "metal-sbx-1",
  resolvedResources: { vcpu: 1, memoryMb: 2048, diskMb: null, architecture: "x86_64", providerSize: null },
  metadata: { name: "metal-sbx-1", url: RUN }
}
const authorized = (call: Call) => {
  expect(call.headers["authorization"]).toBe("Bearer bl_key")
  expect(call.headers["x-blaxel-workspace"]).toBe("acme")
}

describe("blaxel remote: sandboxes", () => {
  it("create posts name, labels, image, memory (one vCPU per 2048 MB) and a TTL behind ours, then polls until DEPLOYED", async () => {
    const s = scripted([
      step("POST", "/v0/sandboxes", (call) => {
        authorized(call)
        expect(call.headers["blaxel-version"]).toBe(API_VERSION)
        expect(call.url.searchParams.get("createIfNotExist")).toBe("true")
        expect(bodyJson(call)).toEqual({
          metadata: {
            name: "metal-sbx-1",
            labels: { suite: "conformance", "metal.sandbox_id": "sbx_1", "metal.project_id": "prj_conformance", "metal.organization_id": "00000000-0000-4000-8000-000000000000" }
          },
          spec: { runtime: { image: "blaxel/base-image:latest", memory: 2048, ttl: "15m", envs: [{ name: "CONFORMANCE_SANDBOX", value: "yes" }] } }
        })
        return json(wire("DEPLOYING"))
      }),
      step("GET", "/v0/sandboxes/metal-sbx-1", (call) => {
        authorized(call)
        return json(wire("DEPLOYING"))
      }),
      step("GET", "/v0/sandboxes/metal-sbx-1", () => json(wire("DEPLOYED")))
    ])
    const created = await run(provider(s.client).create(conformanceInput("sbx_1")))
    expect(created).toMatchObject({ resourceId: "metal-sbx-1", resolvedResources: { vcpu: 1, memoryMb: 2048 }, metadata: { url: RUN } })
    expect(s.left()).toBe(0)
  })

  it("a name taken by another sandbox is refused; a lost answer is found by name; reconcile checks our label", async () => {
    const taken = scripted([step("POST", "/v0/sandboxes", () => json(wire("DEPLOYED", { "metal.sandbox_id": "sbx_other" })))])
    expect((await failureOf(provider(taken.client).create(conformanceInput("sbx_1")))).kind).toBe("customer")

    const lost = scripted([
      step("POST", "/v0/sandboxes", () => json({ error: "gateway timeout" }, 504)),
      step("GET", "/v0/sandboxes/metal-sbx-1", () => json(wire("DEPLOYED")))
    ])
    expect((await run(provider(lost.client).create(conformanceInput("sbx_1")))).resourceId).toBe("metal-sbx-1")

    const reconcile = scripted([
      step("GET", "/v0/sandboxes/metal-sbx-1", () => json(wire("DEPLOYED"))),
      step("GET", "/v0/sandboxes/metal-sbx-1", () => json(wire("DEPLOYED", { "metal.sandbox_id": "sbx_other" }))),
      step("GET", "/v0/sandboxes/metal-sbx-1", () => json({ error: "not found" }, 404))
    ])
    const p = provider(reconcile.client)
    expect((await run(p.reconcileCreate("sbx_1")))?.resourceId).toBe("metal-sbx-1")
    expect(await run(p.reconcileCreate("sbx_1"))).toBeNull()
    expect(await run(p.reconcileCreate("sbx_1"))).toBeNull()
  })

  it("maps Blaxel's failures to kinds; destroy of a missing sandbox is success; pause is unsupported", async () => {
    const s = scripted([
      step("POST", "/v0/sandboxes", () => json({ code: "QUOTA_EXCEEDED", message: "quota" }, 403)),
      step("POST", "/v0/sandboxes", () => json({ error: "unauthorized" }, 401)),
      step("DELETE", "/v0/sandboxes/metal-sbx-1", () => json({ error: "not found" }, 404)),
      step("GET", "/v0/sandboxes/metal-sbx-1", () => json({ error: "not found" }, 404))
    ])
    const p = provider(s.client)
    expect((await failureOf(p.create(conformanceInput("sbx_1")))).kind).toBe("quota")
    expect((await failureOf(p.create(conformanceInput("sbx_1")))).kind).toBe("auth")
    await run(p.destroy(SANDBOX))
    expect(await run(p.inspect(SANDBOX))).toBe("absent")
    expect((await failureOf(p.pause(SANDBOX))).kind).toBe("unsupported")
    expect(s.left()).toBe(0)
  })

  it("cost is what Blaxel reports for the sandbox over the window (the workspace's account asked once)", async () => {
    const window = { from: "2026-11-22T10:00:00.000Z", to: "2026-11-22T11:00:00.000Z" }
    const s = scripted([
      step("GET", "/v0/workspaces/acme", () => json({ name: "acme", accountId: "acct-9" })),
      step("GET", "/v0/accounts/acct-9/metrics", (call) => {
        expect(Object.fromEntries(call.url.searchParams)).toEqual({ startTime: window.from, endTime: window.to, resolution: "hourly", resourceType: "sandbox", resourceName: "metal-sbx-1" })
        return json({ summary: { totalCost: 0.0123456 }, data: [{}] })
      }),
      step("GET", "/v0/accounts/acct-9/metrics", () => json({ summary: { totalCost: 0 }, data: [] }))
    ])
    const p = provider(s.client)
    expect(await run(p.getCost(SANDBOX, window))).toMatchObject({ amountMicrousd: 12346n, provenance: "provider_reported", confidence: "high" })
    expect(await run(p.getCost(SANDBOX, window))).toBeNull()
    expect(s.left()).toBe(0)
  })
})

describe("blaxel remote: the sandbox runtime", () => {
  it("exec starts a named process without waiting, in /workspace; events are the buffered logs once it is over", async () => {
    const s = scripted([
      step("GET", "/sbx-1/process/metal-proc_1", () => json({ error: "process not found" }, 404)),
      step("POST", "/sbx-1/process", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({ name: "metal-proc_1", command: "mkdir -p /workspace && cd /workspace && exec echo 'a b'", env: { K: "v" }, waitForCompletion: false })
        return json({ pid: "1", name: "metal-proc_1", status: "running" })
      }),
      step("GET", "/sbx-1/process/metal-proc_1", () => json({ pid: "1", name: "metal-proc_1", status: "running" })),
      step("GET", "/sbx-1/process/metal-proc_1", () => json({ pid: "1", name: "metal-proc_1", status: "completed", exitCode: 0 })),
      step("GET", "/sbx-1/process/metal-proc_1/logs", () => json({ stdout: "a b\n", stderr: "" }))
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, { command: ["echo", "a b"], environment: { K: "v" }, timeoutSeconds: 60, maxOutputBytes: 1024, processId: "proc_1" }))
    expect(Either.getOrUndefined(executionIds.parse(executionId))).toEqual({ name: "metal-proc_1", maxOutputBytes: 1024 })
    expect(await run(p.execEvents(SANDBOX, executionId, 0))).toEqual([])
    const events = await run(p.execEvents(SANDBOX, executionId, 0))
    expect(events.map((e) => e.type)).toEqual(["stdout", "exit"])
    expect(events[1]).toMatchObject({ exitCode: 0, cancelled: false })
    expect(s.left()).toBe(0)
  })

  it("a first attempt starts its process at once: no earlier attempt can have started one of that name", async () => {
    const s = scripted([
      step("POST", "/sbx-1/process", () => json({ pid: "1", name: "metal-proc_1", status: "running" }))
    ])
    const { executionId } = await run(provider(s.client).exec(SANDBOX, { command: ["true"], timeoutSeconds: 60, maxOutputBytes: 1024, processId: "proc_1", firstAttempt: true }))
    expect(Either.getOrUndefined(executionIds.parse(executionId))).toEqual({ name: "metal-proc_1", maxOutputBytes: 1024 })
    expect(s.left()).toBe(0)
  })

  it("on an image of the user's own (kept from create), a process without a directory starts where the image says (its WorkingDir)", async () => {
    const s = scripted([
      step("POST", "/v0/sandboxes", () => json({ ...wire("DEPLOYED"), spec: { runtime: { image: "registry.example.com/team/app:1", memory: 2048 } } })),
      step("GET", "/sbx-1/process/metal-proc_2", () => json({ error: "process not found" }, 404)),
      step("POST", "/sbx-1/process", (call) => {
        expect(bodyJson(call)).toEqual({ name: "metal-proc_2", command: "exec pwd", waitForCompletion: false })
        return json({ pid: "2", name: "metal-proc_2", status: "running" })
      })
    ])
    const p = provider(s.client)
    const created = await run(p.create({ ...conformanceInput("sbx_1"), source: { kind: "oci_image", image: "registry.example.com/team/app:1" } }))
    expect(created.metadata).toMatchObject({ image: "registry.example.com/team/app:1" })
    await run(p.exec(created, { command: ["pwd"], timeoutSeconds: 60, maxOutputBytes: 1024, processId: "proc_2" }))
    expect(s.left()).toBe(0)
  })
})

describe("blaxel remote: standard input", () => {
  it("a process asking for stdin starts with stdin: true; input is posted raw, in order, in pieces of at most 1 MiB; end-of-file deletes it", async () => {
    const big = new Uint8Array(1024 * 1024 + 5).fill(7)
    const s = scripted([
      step("GET", "/sbx-1/process/metal-proc_2", () => json({ error: "process not found" }, 404)),
      step("POST", "/sbx-1/process", (call) => {
        expect(bodyJson(call)).toMatchObject({ name: "metal-proc_2", stdin: true, waitForCompletion: false })
        return json({ pid: "2", name: "metal-proc_2", status: "running" })
      }),
      step("POST", "/sbx-1/process/metal-proc_2/stdin", (call) => {
        authorized(call)
        expect(new TextDecoder().decode(bodyBytes(call))).toBe("line\n")
        return json({ message: "ok" })
      }),
      step("POST", "/sbx-1/process/metal-proc_2/stdin", (call) => {
        expect(bodyBytes(call).length).toBe(1024 * 1024)
        return json({ message: "ok" })
      }),
      step("POST", "/sbx-1/process/metal-proc_2/stdin", (call) => {
        expect(bodyBytes(call)).toEqual(new Uint8Array(5).fill(7))
        return json({ message: "ok" })
      }),
      step("DELETE", "/sbx-1/process/metal-proc_2/stdin", () => json({ message: "closed" }))
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, { command: ["cat"], stdin: true, timeoutSeconds: 60, maxOutputBytes: 1024, processId: "proc_2" }))
    await run(p.sendInput!(SANDBOX, executionId, new TextEncoder().encode("line\n"), false))
    await run(p.sendInput!(SANDBOX, executionId, big, true))
    expect(s.left()).toBe(0)
  })
})

describe("blaxel remote: files", () => {
  it("a download is bounded while it is read: a chunked body (no length stated) past the range asked is refused", async () => {
    const path = new URL(`${RUN}/filesystem/${encodeURIComponent("/workspace/big.bin")}`).pathname
    const endless = () =>
      new Response(new ReadableStream<Uint8Array>({ pull: (c) => c.enqueue(new Uint8Array(64 * 1024)) }), {
        status: 206,
        headers: { "content-type": "application/octet-stream", "content-disposition": "attachment", "content-range": "bytes 0-99/100" }
      })
    const s = scripted([step("GET", path, endless)])
    const failure = await failureOf(provider(s.client).readFile(SANDBOX, { path: "/workspace/big.bin", offsetBytes: 0, maxBytes: 100 }))
    expect(failure.kind).toBe("invalid_request")
    expect(failure.message).toContain("larger than 100 bytes")
  })
})
