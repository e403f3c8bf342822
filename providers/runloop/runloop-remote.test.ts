/**
 * The Runloop adapter in `remote` mode against a scripted HttpClient: the requests it sends to Runloop's API
 * (paths, bodies, the Bearer key) and how it reads the answers (wait_for_status long-polls and their 408s,
 * reconcile by listing live devboxes and matching our id, suspend/resume, shutdown, error kinds, the cost of
 * active seconds at the preset's price, executions and their exits, whole-file downloads and multipart uploads).
 * The emulator-backed suite covers behaviour.
 */
import type { HttpClient } from "@effect/platform"
import { Effect, Either } from "effect"
import { CWD_MISSING_MARK } from "../../src/providers/cwd.ts"
import { describe, expect, it } from "vitest"
import { conformanceInput } from "../testing/conformance.ts"
import type { CreateInput, ProviderError, ProviderSandbox } from "../../src/providers/Provider.ts"
import { bodyJson, type Call, json, scripted, type Step } from "../testing/scripted-client.ts"
import { commandLine, executionIds, makeRunloopProvider, type RunloopProviderConfig, WHOLE_FILE_BYTES } from "./adapter/index.ts"

const API = "https://api.runloop.test"
const provider = (client: HttpClient.HttpClient, extra: Partial<RunloopProviderConfig> = {}) =>
  makeRunloopProvider({ apiUrl: API, apiKey: "rl_key", mode: "remote", httpClient: client, pollIntervalMs: 1, ...extra })
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>) => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (result._tag === "Right") throw new Error("expected a failure")
  return result.left
}
const step = (method: string, path: string, reply: Step["reply"]): Step => ({ method, path, reply })
/** A server-sent event stream of these events (one line each). */
const sse = (events: ReadonlyArray<string>) => new Response(events.map((e) => `${e}\n\n`).join(""), { headers: { "content-type": "text/event-stream" } })
const authorized = (call: Call) => expect(call.headers["authorization"]).toBe("Bearer rl_key")

const devbox = (status: string, extra: Record<string, unknown> = {}) => ({
  id: "dbx_1",
  name: "metal-sbx_1",
  status,
  metadata: { metal_sandbox_id: "sbx_1" },
  launch_parameters: { resource_size_request: "SMALL", architecture: "x86_64" },
  create_time_ms: 1_790_000_000_000,
  ...extra
})
const LIVE = ["running", "provisioning", "initializing", "queued", "scheduled", "resuming", "suspending", "suspended"]
/** Reconcile's walk over the live statuses, each answering `answers[status]` (an empty page otherwise). */
const lists = (answers: Record<string, ReadonlyArray<unknown>> = {}, upTo = LIVE.length): Array<Step> =>
  LIVE.slice(0, upTo).map((status) =>
    step("GET", "/v1/devboxes", (call) => {
      authorized(call)
      expect(Object.fromEntries(call.url.searchParams)).toEqual({ status, limit: "100" })
      return json({ devboxes: answers[status] ?? [], has_more: false, total_count: (answers[status] ?? []).length })
    })
  )
const SANDBOX: ProviderSandbox = {
  resourceId: "dbx_1",
  resolvedResources: { vcpu: 2, memoryMb: 4096, diskMb: 8192, architecture: "x86_64", providerSize: "MEDIUM" },
  metadata: { name: "metal-sbx_1", resourceSize: "MEDIUM" }
}
const input = (extra: Partial<CreateInput> = {}): CreateInput => ({ ...conformanceInput("sbx_1"), ...extra })

describe("runloop remote: devboxes", () => {
  it("create looks for a live devbox with our id, posts name, metadata, preset, keep-alive and environment, then long-polls until running (408: again)", async () => {
    const s = scripted([
      ...lists(),
      step("POST", "/v1/devboxes", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({
          name: "metal-sbx_1",
          metadata: { suite: "conformance", metal_sandbox_id: "sbx_1", metal_project_id: "prj_conformance", metal_organization_id: "00000000-0000-4000-8000-000000000000" },
          environment_variables: { CONFORMANCE_SANDBOX: "yes" },
          // 1 vCPU / 512 MB: SMALL is the first preset covering it; keep-alive = 600 s + 300 s margin.
          launch_parameters: { resource_size_request: "SMALL", architecture: "x86_64", keep_alive_time_seconds: 900 }
        })
        return json(devbox("provisioning"))
      }),
      step("POST", "/v1/devboxes/dbx_1/wait_for_status", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({ statuses: ["running", "failure", "shutdown"] })
        return json({ message: "timed out" }, 408)
      }),
      step("POST", "/v1/devboxes/dbx_1/wait_for_status", () => json(devbox("running")))
    ])
    const created = await run(provider(s.client).create(input()))
    expect(created).toEqual({
      resourceId: "dbx_1",
      resolvedResources: { vcpu: 1, memoryMb: 2048, diskMb: 4096, architecture: "x86_64", providerSize: "SMALL" },
      metadata: { name: "metal-sbx_1", resourceSize: "SMALL", keepAliveSeconds: 900 }
    })
    expect(s.left()).toBe(0)
  })

  it("a first create posts at once: no earlier create can have made a devbox for this sandbox", async () => {
    const s = scripted([
      step("POST", "/v1/devboxes", () => json(devbox("running")))
    ])
    expect((await run(provider(s.client).create({ ...input(), firstCreate: true }))).resourceId).toBe("dbx_1")
    expect(s.left()).toBe(0)
  })

  it("a moved deadline restarts the keep-alive timer; one beyond the keep-alive set at create is refused after the signal", async () => {
    const s = scripted([
      step("POST", "/v1/devboxes/dbx_1/keep_alive", (call) => (authorized(call), json({}))),
      step("POST", "/v1/devboxes/dbx_1/keep_alive", () => json({}))
    ])
    const p = provider(s.client)
    const sandbox = { ...SANDBOX, metadata: { ...SANDBOX.metadata, keepAliveSeconds: 900 } }
    await run(p.extendLifetime!(sandbox, 900))
    expect((await failureOf(p.extendLifetime!(sandbox, 901))).kind).toBe("unsupported")
    expect(s.left()).toBe(0)
  })

  it("sizes: the resource_size option wins; the account's floor; too large is unsupported. Templates name a blueprint, blueprint_id an environment's", async () => {
    const bodies: Array<unknown> = []
    const creating = (): Array<Step> => [
      ...lists(),
      step("POST", "/v1/devboxes", (call) => {
        bodies.push(bodyJson(call))
        return json(devbox("running"))
      })
    ]
    const s = scripted([...creating(), ...creating(), ...creating()])
    const p = provider(s.client, { resourceSize: "MEDIUM", blueprintId: "bpt_default" })
    await run(p.create(input({ providerOptions: { resource_size: "X_LARGE", blueprint_id: "bpt_mine" } })))
    await run(p.create(input({ source: { kind: "provider_template", provider: "runloop", template: "my-blueprint" } })))
    await run(p.create(input({ resources: { vcpu: 3, memoryMb: 1024, architecture: "any" } })))
    expect(bodies.map((b) => {
      const body = b as { launch_parameters: { resource_size_request: string }; blueprint_id?: string; blueprint_name?: string }
      return [body.launch_parameters.resource_size_request, body.blueprint_id ?? body.blueprint_name]
    })).toEqual([["X_LARGE", "bpt_mine"], ["MEDIUM", "my-blueprint"], ["X_LARGE", "bpt_default"]])
    expect((await failureOf(p.create(input({ resources: { vcpu: 16, memoryMb: 1024, architecture: "any" } })))).kind).toBe("unsupported")
    expect((await failureOf(p.create(input({ source: { kind: "oci_image", image: "alpine" } })))).kind).toBe("unsupported")
    expect((await failureOf(p.create(input({ providerOptions: { resource_size: "HUGE" } })))).kind).toBe("invalid_request")
    expect(s.left()).toBe(0)
  })

  it("a devbox already made for the sandbox is reused; a lost answer is found by our id; reconcile pages and ignores others' and ended devboxes", async () => {
    const again = scripted([...lists({ running: [devbox("running")] }, 1)])
    expect((await run(provider(again.client).create(input()))).resourceId).toBe("dbx_1")
    expect(again.left()).toBe(0)

    const lost = scripted([
      ...lists(),
      step("POST", "/v1/devboxes", () => json({ message: "gateway timeout" }, 504)),
      ...lists({ provisioning: [devbox("provisioning")] }, 2),
      step("POST", "/v1/devboxes/dbx_1/wait_for_status", () => json(devbox("running")))
    ])
    expect((await run(provider(lost.client).create(input()))).resourceId).toBe("dbx_1")
    expect(lost.left()).toBe(0)

    const other = { ...devbox("running"), id: "dbx_other", metadata: { metal_sandbox_id: "sbx_2" } }
    const reconcile = scripted([
      step("GET", "/v1/devboxes", () => json({ devboxes: [other], has_more: true })),
      step("GET", "/v1/devboxes", (call) => {
        expect(call.url.searchParams.get("starting_after")).toBe("dbx_other")
        return json({ devboxes: [devbox("running")], has_more: false })
      }),
      ...lists({ running: [devbox("failure"), other] })
    ])
    const p = provider(reconcile.client)
    expect((await run(p.reconcileCreate("sbx_1")))?.resourceId).toBe("dbx_1")
    expect(await run(p.reconcileCreate("sbx_1"))).toBeNull()
    expect(reconcile.left()).toBe(0)
  })

  it("a devbox that fails while starting is an error; Runloop's failures map to kinds", async () => {
    const s = scripted([
      ...lists(),
      step("POST", "/v1/devboxes", () => json(devbox("provisioning"))),
      step("POST", "/v1/devboxes/dbx_1/wait_for_status", () => json(devbox("failure", { failure_reason: "out_of_memory" }))),
      step("GET", "/v1/devboxes", () => json({ message: "unauthorized" }, 401)),
      step("GET", "/v1/devboxes", () => json({ message: "slow down" }, 429))
    ])
    const p = provider(s.client)
    const failed = await failureOf(p.create(input()))
    expect(failed).toMatchObject({ kind: "unavailable" })
    expect(failed.message).toContain("out_of_memory")
    expect((await failureOf(p.create(input()))).kind).toBe("auth")
    expect((await failureOf(p.create(input()))).kind).toBe("capacity")
    expect(s.left()).toBe(0)
  })

  it("pause suspends and waits; resume resumes and waits; both idempotent; inspect maps statuses", async () => {
    const s = scripted([
      step("GET", "/v1/devboxes/dbx_1", () => json(devbox("running"))),
      step("POST", "/v1/devboxes/dbx_1/suspend", (call) => (authorized(call), json(devbox("suspending")))),
      step("POST", "/v1/devboxes/dbx_1/wait_for_status", (call) => {
        expect(bodyJson(call)).toEqual({ statuses: ["suspended", "failure", "shutdown"] })
        return json(devbox("suspended"))
      }),
      step("GET", "/v1/devboxes/dbx_1", () => json(devbox("suspended"))),
      step("GET", "/v1/devboxes/dbx_1", () => json(devbox("suspended"))),
      step("POST", "/v1/devboxes/dbx_1/resume", () => json(devbox("resuming"))),
      step("POST", "/v1/devboxes/dbx_1/wait_for_status", (call) => {
        expect(bodyJson(call)).toEqual({ statuses: ["running", "failure", "shutdown"] })
        return json(devbox("running"))
      }),
      step("GET", "/v1/devboxes/dbx_1", () => json(devbox("running"))),
      step("GET", "/v1/devboxes/dbx_1", () => json(devbox("suspended"))),
      step("GET", "/v1/devboxes/dbx_1", () => json(devbox("provisioning"))),
      step("GET", "/v1/devboxes/dbx_1", () => json(devbox("failure"))),
      step("GET", "/v1/devboxes/dbx_1", () => json(devbox("shutdown"))),
      step("GET", "/v1/devboxes/dbx_1", () => json({ message: "not found" }, 404))
    ])
    const p = provider(s.client)
    await run(p.pause(SANDBOX))
    await run(p.pause(SANDBOX))
    await run(p.resume(SANDBOX))
    await run(p.resume(SANDBOX))
    const states = []
    for (let i = 0; i < 5; i++) states.push(await run(p.inspect(SANDBOX)))
    expect(states).toEqual(["paused", "starting", "failed", "absent", "absent"])
    expect(s.left()).toBe(0)
  })

  it("destroy shuts down with force; a devbox gone or already shut down is success", async () => {
    const s = scripted([
      step("POST", "/v1/devboxes/dbx_1/shutdown", (call) => {
        authorized(call)
        expect(call.url.searchParams.get("force")).toBe("true")
        return json(devbox("shutdown"))
      }),
      step("POST", "/v1/devboxes/dbx_1/shutdown", () => json({ message: "not found" }, 404)),
      step("POST", "/v1/devboxes/dbx_1/shutdown", () => json({ message: "already shut down" }, 400)),
      step("GET", "/v1/devboxes/dbx_1", () => json(devbox("shutdown"))),
      step("POST", "/v1/devboxes/dbx_1/shutdown", () => json({ message: "bad" }, 400)),
      step("GET", "/v1/devboxes/dbx_1", () => json(devbox("running")))
    ])
    const p = provider(s.client)
    await run(p.destroy(SANDBOX))
    await run(p.destroy(SANDBOX))
    await run(p.destroy(SANDBOX))
    expect((await failureOf(p.destroy(SANDBOX))).kind).toBe("invalid_request")
    expect(s.left()).toBe(0)
  })

  it("cost: active seconds × the preset's hourly price (MEDIUM, 1.5 h → 479,250 µUSD); an OEM account's per-component prices; none for a devbox gone", async () => {
    const window = { from: "2026-11-22T10:00:00.000Z", to: "2026-11-22T12:00:00.000Z" }
    const usage = { id: "dbx_1", status: "running", start_time_ms: 0, total_active_seconds: 5400, total_elapsed_seconds: 7200, vcpu_seconds: 10_800, memory_gb_seconds: 21_600, disk_gb_seconds: 57_600 }
    const s = scripted([
      step("GET", "/v1/devboxes/dbx_1/usage", (call) => (authorized(call), json(usage))),
      step("GET", "/v1/devboxes/dbx_1/usage", () => json(usage)),
      step("GET", "/v1/devboxes/dbx_1/usage", () => json({ message: "not found" }, 404))
    ])
    expect(await run(provider(s.client).getCost(SANDBOX, window))).toEqual({
      amountMicrousd: 479_250n, // 319,500 µUSD an hour × 5,400 s / 3,600
      measuredThrough: window.to,
      provenance: "provider_metered",
      confidence: "medium",
      rateCardVersion: "runloop-presets-2026"
    })
    // $0.10 per vCPU-hour × 3 h + $0.01 per GB-hour × 6 h + $0.0001 per disk GB-hour × 16 h = $0.3616
    const oem = provider(s.client, { oemRates: { vcpuHourUsd: 0.1, memoryGbHourUsd: 0.01, diskGbHourUsd: 0.0001 } })
    expect(await run(oem.getCost(SANDBOX, window))).toMatchObject({ amountMicrousd: 361_600n, rateCardVersion: "runloop-oem" })
    expect(await run(oem.getCost(SANDBOX, window))).toBeNull()
    expect(s.left()).toBe(0)
  })

  it("BYOK: the organization's key, size floor and OEM prices", async () => {
    const s = scripted([
      step("GET", "/v1/devboxes", (call) => {
        expect(call.headers["authorization"]).toBe("Bearer org_key")
        return json({ devboxes: [devbox("running")], has_more: false })
      })
    ])
    const own = provider(s.client).withCredentials!({ api_key: "org_key", resource_size: "LARGE", vcpu_hour_rate_usd: "0.1", memory_gb_hour_rate_usd: "0.01", disk_gb_hour_rate_usd: "0" })
    expect((await run(own.create(input()))).resourceId).toBe("dbx_1")
    expect(s.left()).toBe(0)
  })
})

describe("runloop remote: executions and files", () => {
  const exec = (p: ReturnType<typeof provider>, extra: Record<string, unknown> = {}) =>
    run(p.exec(SANDBOX, { command: ["echo", "a b"], timeoutSeconds: 60, maxOutputBytes: 1024, processId: "proc_1", ...extra }))
  const execution = (status: string, extra: Record<string, unknown> = {}) => ({ devbox_id: "dbx_1", execution_id: "exe_1", status, ...extra })

  it("exec sends one shell line (home-relative cwd, exports, exec of the quoted argv); events are the buffered output once completed", async () => {
    const s = scripted([
      step("POST", "/v1/devboxes/dbx_1/execute_async", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({ command: `{ cd -- "$HOME"/'sub dir' 2>/dev/null || { echo '${CWD_MISSING_MARK}' >&2; exit 97; }; } && export K='v w' && exec echo 'a b'` })
        return json(execution("queued"))
      }),
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1", () => json(execution("running"))),
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1", () => json(execution("completed", { exit_status: 3, stdout: "a b\n", stderr: "oops\n" })))
    ])
    const p = provider(s.client)
    const { executionId } = await exec(p, { cwd: "/workspace/sub dir", environment: { K: "v w" } })
    expect(Either.getOrUndefined(executionIds.parse(executionId))).toEqual({ executionId: "exe_1", maxOutputBytes: 1024 })
    expect(await run(p.execEvents(SANDBOX, executionId, 0))).toEqual([])
    const events = await run(p.execEvents(SANDBOX, executionId, 0))
    expect(events.map((e) => e.type)).toEqual(["stdout", "stderr", "exit"])
    expect(events[2]).toEqual({ seq: 2, type: "exit", exitCode: 3, signal: null, cancelled: false, timedOut: false, outputTruncated: false })
    expect(s.left()).toBe(0)
    expect(commandLine({ command: ["pwd"], cwd: "/tmp" })).toBe(`{ cd -- /tmp 2>/dev/null || { echo '${CWD_MISSING_MARK}' >&2; exit 97; }; } && exec pwd`)
    expect(commandLine({ command: ["ls"] })).toBe("exec ls")
  })

  it("exits: 128 + SIGKILL/SIGTERM is a cancel, other signals are not; output cut at Runloop or at our limit says so; bad env names are refused", async () => {
    const id = executionIds.encode({ executionId: "exe_1", maxOutputBytes: 4 })
    const s = scripted([
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1", () => json(execution("completed", { exit_status: 137 }))),
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1", () => json(execution("completed", { exit_status: 139 }))),
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1", () => json(execution("completed", { exit_status: 0, stdout: "12345678" }))),
      // Only the last lines came: the whole stdout is read from its event stream, up to our limit (4 bytes) and no further.
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1", () => json(execution("completed", { exit_status: 0, stdout: "9\n", stdout_truncated: true, stderr: "e\n" }))),
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1/stream_stdout_updates", (call) => {
        authorized(call)
        expect(call.headers["accept"]).toBe("text/event-stream")
        return sse([": keep-alive", 'data: {"output":"12","offset":2}', 'data: {"output":"34\\n5","offset":5}', 'data: {"output":"never read","offset":15}'])
      }),
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1", () => json(execution("completed", { exit_status: 0, stdout: "", stderr: "x", stderr_truncated: true }))),
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1/stream_stderr_updates", () => sse(["event: error", 'data: {"code":"500","message":"boom"}']))
    ])
    const p = provider(s.client)
    expect((await run(p.execEvents(SANDBOX, id, 0))).at(-1)).toMatchObject({ exitCode: null, signal: "SIGKILL", cancelled: true })
    expect((await run(p.execEvents(SANDBOX, id, 0))).at(-1)).toMatchObject({ exitCode: null, signal: "SIGSEGV", cancelled: false })
    const cut = await run(p.execEvents(SANDBOX, id, 0))
    expect(new TextDecoder().decode((cut[0] as { data: Uint8Array }).data)).toBe("1234")
    expect(cut.at(-1)).toMatchObject({ exitCode: 0, outputTruncated: true })
    const streamed = await run(p.execEvents(SANDBOX, id, 0))
    expect(streamed.map((e) => (e.type === "exit" ? "exit" : `${e.type} ${new TextDecoder().decode(e.data)}`))).toEqual(["stdout 1234", "exit"])
    expect(streamed.at(-1)).toMatchObject({ outputTruncated: true })
    expect((await failureOf(p.execEvents(SANDBOX, id, 0))).kind).toBe("unavailable")
    expect((await failureOf(p.exec(SANDBOX, { command: ["true"], environment: { "BAD-NAME": "x" }, timeoutSeconds: 1, maxOutputBytes: 1, processId: "proc_2" }))).kind).toBe("invalid_request")
    expect((await failureOf(p.execEvents(SANDBOX, "daytona:xyz", 0))).kind).toBe("invalid_request")
    expect(s.left()).toBe(0)
  })

  it("cancel kills the process group of a running execution (its exit then reads cancelled); a completed one is left as it is", async () => {
    const id = executionIds.encode({ executionId: "exe_1", maxOutputBytes: 1024 })
    const s = scripted([
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1", () => json(execution("running"))),
      step("POST", "/v1/devboxes/dbx_1/executions/exe_1/kill", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({ kill_process_group: true })
        return json(execution("completed", { exit_status: null }))
      }),
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1", () => json(execution("completed", { exit_status: null }))),
      step("GET", "/v1/devboxes/dbx_1/executions/exe_1", () => json(execution("completed", { exit_status: 0 })))
    ])
    const p = provider(s.client)
    expect(await run(p.cancelExec(SANDBOX, id))).toEqual({ cancelled: true })
    expect((await run(p.execEvents(SANDBOX, id, 0))).at(-1)).toMatchObject({ exitCode: null, signal: "SIGKILL", cancelled: true })
    expect(await run(p.cancelExec(SANDBOX, id))).toEqual({ cancelled: false })
    expect(s.left()).toBe(0)
  })

  it("files: /workspace is the home (paths sent home-relative); whole-file downloads cut to the range; 400/404 are no file; uploads are multipart", async () => {
    const bytes = new Uint8Array(256).map((_, i) => i)
    const s = scripted([
      step("POST", "/v1/devboxes/dbx_1/download_file", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({ path: "dir/a.bin" })
        return new Response(bytes, { headers: { "content-type": "application/octet-stream" } })
      }),
      step("POST", "/v1/devboxes/dbx_1/download_file", (call) => {
        expect(bodyJson(call)).toEqual({ path: "/etc/missing" })
        return json({ message: "file not found" }, 400)
      }),
      step("POST", "/v1/devboxes/dbx_1/download_file", () => json({ message: "file not found" }, 404)),
      step("POST", "/v1/devboxes/dbx_1/upload_file", async (call) => {
        authorized(call)
        const body = call.request.body
        if (body._tag !== "FormData") throw new Error(`expected a form, got ${body._tag}`)
        expect(body.formData.get("path")).toBe("new.bin")
        expect([...new Uint8Array(await (body.formData.get("file") as Blob).arrayBuffer())]).toEqual([1, 2, 3])
        return json({})
      }),
      step("POST", "/v1/devboxes/dbx_1/download_file", () => new Response(new Uint8Array([9]))),
      step("POST", "/v1/devboxes/dbx_1/download_file", () => new Response(new Uint8Array([9]))),
      step("POST", "/v1/devboxes/dbx_1/upload_file", () => json({})),
      step("POST", "/v1/devboxes/dbx_1/download_file", () => new Response(new Uint8Array([1]), { headers: { "content-length": String(WHOLE_FILE_BYTES + 1) } }))
    ])
    const p = provider(s.client)
    const read = await run(p.readFile(SANDBOX, { path: "/workspace/dir/a.bin", offsetBytes: 10, maxBytes: 20 }))
    expect([...read.data]).toEqual([...bytes.slice(10, 30)])
    expect(read).toMatchObject({ offsetBytes: 10, sizeBytes: 256, eof: false })
    expect((await failureOf(p.readFile(SANDBOX, { path: "/etc/missing", offsetBytes: 0, maxBytes: 10 }))).kind).toBe("not_found")
    const data = new Uint8Array([1, 2, 3])
    expect(await run(p.writeFile(SANDBOX, { path: "/workspace/new.bin", data, mode: "create", createParents: false }))).toEqual({ bytesWritten: 3, created: true })
    expect((await failureOf(p.writeFile(SANDBOX, { path: "/workspace/new.bin", data, mode: "create", createParents: false }))).kind).toBe("customer")
    expect(await run(p.writeFile(SANDBOX, { path: "/workspace/new.bin", data, mode: "overwrite", createParents: false }))).toEqual({ bytesWritten: 3, created: false })
    expect((await failureOf(p.readFile(SANDBOX, { path: "/workspace/huge", offsetBytes: 0, maxBytes: 10 }))).kind).toBe("invalid_request")
    expect((await failureOf(p.writeFile(SANDBOX, { path: "/workspace/x/y", data, mode: "overwrite", createParents: true }))).kind).toBe("unsupported")
    expect((await failureOf(p.writeFile(SANDBOX, { path: "/workspace/y", data, mode: "append", createParents: false }))).kind).toBe("unsupported")
    expect((await failureOf(p.listFiles(SANDBOX, { path: "/workspace", recursive: false, maxEntries: 10 }))).kind).toBe("unsupported")
    expect((await failureOf(p.deleteFile(SANDBOX, { path: "/workspace/y", recursive: false }))).kind).toBe("unsupported")
    expect((await failureOf(p.exposeHttpEndpoint(SANDBOX, { port: 80, leaseSeconds: 60 }))).kind).toBe("unsupported")
    expect(s.left()).toBe(0)
  })
})
