/**
 * The Freestyle adapter in `remote` mode against a scripted HttpClient: the requests it sends to Freestyle's `/v5`
 * API as Freestyle's SDK (`freestyle` 0.2.17) shapes them (paths, bodies, auth) and how it reads the answers — the
 * deterministic VM slug, the firewall, readiness polling, the upward-only resize in MiB, the TTL moved by PATCH, the
 * 202 rule (never a second create, never a second exec), lost answers and 409s looked up by slug, state-aware
 * pause/resume, exec-await (shell line, 300 s cap, stdin as base64, 408 and a null status as timeouts), fs/* (ranges,
 * sha256 writes, parents, names stat'ed, DELETE remove), error kinds, the rate-card cost worked example and BYOK.
 */
import type { HttpClient } from "@effect/platform"
import { Effect } from "effect"
import { CWD_MISSING_MARK } from "../../src/providers/cwd.ts"
import { createHash } from "node:crypto"
import { describe, expect, it } from "vitest"
import { conformanceInput } from "../testing/conformance.ts"
import type { ExecEvent } from "../../src/runtime/LocalRuntime.ts"
import type { ProviderError, ProviderSandbox, SandboxProvider } from "../../src/providers/Provider.ts"
import { bodyBytes, bodyJson, type Call, json, scripted, type Step } from "../testing/scripted-client.ts"
import { commandLine, makeFreestyleProvider, RATE_CARD, vmSlug } from "./adapter/index.ts"

const API = "https://api.freestyle.test"
const provider = (client: HttpClient.HttpClient, apiKey = "fs_key") =>
  makeFreestyleProvider({ apiUrl: API, apiKey, mode: "remote", httpClient: client, pollIntervalMs: 1, lifecycleTimeoutMs: 2000 })
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>) => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (result._tag === "Right") throw new Error("expected a failure")
  return result.left
}
const step = (method: string, path: string, reply: Step["reply"]): Step => ({ method, path, reply })
const authorized = (call: Call, key = "fs_key") => expect(call.headers["authorization"]).toBe(`Bearer ${key}`)

const SLUG = vmSlug("sbx_1")
const vm = (state: string, extra: Record<string, unknown> = {}) => ({
  id: "vm_1",
  slug: SLUG,
  state,
  snapshotId: "freestyle/ubuntu-sm",
  resources: { cpu: 2, memory: 4096, storage: 16384 },
  metadata: { metal_sandbox_id: "sbx_1" },
  createdAt: "2026-11-01T00:00:00.000Z",
  ...extra
})
const notFound = (code = "VM_NOT_FOUND") => json({ code, message: "not found" }, 404)
const accepted = () => new Response(null, { status: 202 })
const SANDBOX: ProviderSandbox = {
  resourceId: "vm_1",
  resolvedResources: { vcpu: 2, memoryMb: 4096, diskMb: 16384, architecture: "x86_64", providerSize: "freestyle/ubuntu-sm" },
  metadata: { name: SLUG, snapshotId: "freestyle/ubuntu-sm", environment: { CONFORMANCE_SANDBOX: "yes" } }
}

/** execEvents until the exit is there. */
const events = async (p: SandboxProvider, executionId: string) => {
  for (let i = 0; i < 500; i++) {
    const got = await run(p.execEvents(SANDBOX, executionId, 0))
    if (got.some((e) => e.type === "exit")) return got
    await Bun.sleep(2)
  }
  throw new Error("no exit")
}
const text = (got: ReadonlyArray<ExecEvent>, type: "stdout" | "stderr") =>
  Buffer.concat(got.flatMap((e) => (e.type === type ? [Buffer.from(e.data)] : []))).toString("utf8")

describe("freestyle remote: names", () => {
  it("the VM name is derived from the sandbox id only: a DNS label of at most 63 characters with a hash", () => {
    expect(vmSlug("sbx_1")).toBe(vmSlug("sbx_1"))
    expect(vmSlug("sbx_1")).toMatch(/^metal-sbx-1-[0-9a-f]{10}$/)
    expect(vmSlug("sbx_2")).not.toBe(vmSlug("sbx_1"))
    const long = vmSlug(`sbx_${"a".repeat(100)}`)
    expect(long.length).toBeLessThanOrEqual(63)
    expect(long).toMatch(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/)
  })
})

describe("freestyle remote: VMs", () => {
  it("create looks for the slug, posts slug, snapshot, firewall (the public internet, or nothing), TTL and our ids, polls until running; no resize at the base size; a later deadline moves the TTL", async () => {
    const s = scripted([
      step("GET", `/v5/vms/${SLUG}`, (call) => {
        authorized(call)
        return notFound()
      }),
      step("POST", "/v5/vms", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({
          slug: SLUG,
          snapshotId: "freestyle/ubuntu-sm",
          firewall: { rules: [] },
          ttlSeconds: 900,
          metadata: {
            suite: "conformance",
            metal_sandbox_id: "sbx_1",
            metal_project_id: "prj_conformance",
            metal_organization_id: "00000000-0000-4000-8000-000000000000",
            metal_env: JSON.stringify({ CONFORMANCE_SANDBOX: "yes" })
          }
        })
        return json(vm("starting"))
      }),
      step("GET", "/v5/vms/vm_1", () => json(vm("running"))),
      // The deadline moves: the VM's creation time, then ttlSeconds from it (deadline + 5 min).
      step("GET", "/v5/vms/vm_1", () => json(vm("running", { createdAt: new Date(Date.now() - 60_000).toISOString(), ttlSeconds: 900 }))),
      step("PATCH", "/v5/vms/vm_1", (call) => {
        const ttl = (bodyJson(call) as { ttlSeconds: number }).ttlSeconds
        expect(ttl).toBeGreaterThanOrEqual(60 + 3600 + 300)
        expect(ttl).toBeLessThanOrEqual(60 + 3600 + 300 + 5)
        return json(vm("running", { ttlSeconds: ttl }))
      })
    ])
    const before = Date.now()
    const created = await run(provider(s.client).create({ ...conformanceInput("sbx_1"), internetAccess: false }))
    const { ttlEndsAt, ...metadata } = created.metadata
    expect({ ...created, metadata }).toEqual(SANDBOX)
    expect(Date.parse(String(ttlEndsAt)) - before).toBeGreaterThanOrEqual(900_000 - 1000)
    await run(provider(s.client).extendLifetime!(created, 3600))
    expect(s.left()).toBe(0)
  })

  it("grows the VM upward to what the request needs (MiB); a template names the snapshot; pause actions send maxRun and idle; the internet is all outbound traffic to the public internet", async () => {
    const s = scripted([
      step("GET", `/v5/vms/${SLUG}`, () => notFound()),
      step("POST", "/v5/vms", (call) => {
        const body = bodyJson(call) as Record<string, unknown>
        expect(body).toMatchObject({ snapshotId: "snap-tpl", maxRunSeconds: 600, idleTimeoutSeconds: 60 })
        expect(body["firewall"]).toEqual({ rules: [{ action: "allow", source: {}, destination: { public: true } }] })
        expect(body["ttlSeconds"]).toBeUndefined()
        return json(vm("running"))
      }),
      step("POST", "/v5/vms/vm_1/resize", (call) => {
        expect(bodyJson(call)).toEqual({ cpu: 3, memory: 5120, storage: 20480 })
        return json(vm("running", { resources: { cpu: 3, memory: 5120, storage: 20480 } }))
      })
    ])
    const input = conformanceInput("sbx_1")
    const created = await run(provider(s.client).create({
      ...input,
      internetAccess: true,
      source: { kind: "provider_template", provider: "freestyle", template: "snap-tpl" },
      resources: { vcpu: 2.5, memoryMb: 5000, diskMb: 20_000, architecture: "x86_64" },
      lifecycle: { runtimeTimeoutSeconds: 600, idleTimeoutSeconds: 60, onRuntimeTimeout: "pause", onIdleTimeout: "pause" }
    }))
    expect(created.resolvedResources).toEqual({ vcpu: 3, memoryMb: 5120, diskMb: 20480, architecture: "x86_64", providerSize: "freestyle/ubuntu-sm" })
    // A VM made to pause at its timeout has no TTL: a later deadline needs nothing.
    await run(provider(s.client).extendLifetime!(created, 3600))
    expect(s.left()).toBe(0)
  })

  it("a request that leaves the internet unsaid gets the declared default (Freestyle has none: its firewall is required): open, or closed when the default is off", async () => {
    const OPEN = { rules: [{ action: "allow", source: {}, destination: { public: true } }] }
    for (const [internetByDefault, firewall] of [[undefined, OPEN], [true, OPEN], [false, { rules: [] }]] as const) {
      const s = scripted([
        step("GET", `/v5/vms/${SLUG}`, () => notFound()),
        step("POST", "/v5/vms", (call) => {
          expect((bodyJson(call) as Record<string, unknown>)["firewall"]).toEqual(firewall)
          return json(vm("running"))
        })
      ])
      const p = makeFreestyleProvider({ apiUrl: API, apiKey: "fs_key", mode: "remote", httpClient: s.client, pollIntervalMs: 1, lifecycleTimeoutMs: 2000, internetByDefault })
      expect(p.capabilities.internetByDefault).toBe(internetByDefault ?? true)
      await run(p.create({ ...conformanceInput("sbx_1"), internetAccess: undefined }))
      expect(s.left()).toBe(0)
    }
  })

  it("provider_options.freestyle.snapshot_id picks the snapshot; a failed resize deletes the VM; nothing is sent for OCI, arm64, too much or a domain list", async () => {
    const s = scripted([
      step("GET", `/v5/vms/${SLUG}`, () => notFound()),
      step("POST", "/v5/vms", (call) => {
        expect(bodyJson(call)).toMatchObject({ snapshotId: "snap-opt" })
        return json(vm("running"))
      }),
      step("POST", "/v5/vms/vm_1/resize", () => json({ code: "QUOTA_EXCEEDED", message: "plan allows 8 vCPU" }, 400)),
      step("DELETE", "/v5/vms/vm_1", () => new Response(null, { status: 204 }))
    ])
    const input = conformanceInput("sbx_1")
    const failed = await failureOf(provider(s.client).create({ ...input, providerOptions: { snapshot_id: "snap-opt" }, resources: { vcpu: 16, memoryMb: 512, architecture: "any" } }))
    expect(failed.kind).toBe("quota")
    expect(s.left()).toBe(0)
    const none = scripted([])
    const p = provider(none.client)
    expect((await failureOf(p.create({ ...input, source: { kind: "oci_image", image: "alpine" } }))).kind).toBe("unsupported")
    expect((await failureOf(p.create({ ...input, resources: { vcpu: 1, memoryMb: 512, architecture: "arm64" } }))).kind).toBe("unsupported")
    expect((await failureOf(p.create({ ...input, resources: { vcpu: 33, memoryMb: 512, architecture: "any" } }))).kind).toBe("unsupported")
    expect((await failureOf(p.create({ ...input, source: { kind: "provider_template", provider: "e2b", template: "base" } }))).kind).toBe("unsupported")
    expect((await failureOf(p.create({ ...input, internetAccess: true, domainPolicy: { mode: "allow", domains: ["example.com"] } }))).kind).toBe("unsupported")
  })

  it("the 202 rule: an accepted create is looked up by slug until the VM shows — never posted twice; unresolved stays unknown_outcome", async () => {
    const s = scripted([
      step("GET", `/v5/vms/${SLUG}`, () => notFound()),
      step("POST", "/v5/vms", accepted),
      step("GET", `/v5/vms/${SLUG}`, () => notFound()),
      step("GET", `/v5/vms/${SLUG}`, () => json(vm("starting"))),
      step("GET", "/v5/vms/vm_1", () => json(vm("running")))
    ])
    expect((await run(provider(s.client).create(conformanceInput("sbx_1")))).resourceId).toBe("vm_1")
    expect(s.left()).toBe(0)

    const lookups: Array<Step> = Array.from({ length: 4000 }, () => step("GET", `/v5/vms/${SLUG}`, () => notFound()))
    const unresolved = scripted([step("GET", `/v5/vms/${SLUG}`, () => notFound()), step("POST", "/v5/vms", accepted), ...lookups])
    const p = makeFreestyleProvider({ apiUrl: API, apiKey: "fs_key", mode: "remote", httpClient: unresolved.client, pollIntervalMs: 1, lifecycleTimeoutMs: 50 })
    expect((await failureOf(p.create(conformanceInput("sbx_1")))).kind).toBe("unknown_outcome")
    expect(unresolved.calls.filter((c) => c.method === "POST")).toHaveLength(1)
  })

  it("a retry finds the VM by slug (a paused one is returned paused); a lost answer and a 409 are looked up; another's VM is not ours", async () => {
    const retry = scripted([step("GET", `/v5/vms/${SLUG}`, () => json(vm("paused")))])
    expect((await run(provider(retry.client).create(conformanceInput("sbx_1")))).resourceId).toBe("vm_1")

    const lost = scripted([
      step("GET", `/v5/vms/${SLUG}`, () => notFound()),
      step("POST", "/v5/vms", () => "transport-error"),
      step("GET", `/v5/vms/${SLUG}`, () => json(vm("running")))
    ])
    expect((await run(provider(lost.client).create(conformanceInput("sbx_1")))).resourceId).toBe("vm_1")

    const raced = scripted([
      step("GET", `/v5/vms/${SLUG}`, () => notFound()),
      step("POST", "/v5/vms", () => json({ code: "SLUG_TAKEN", message: "exists" }, 409)),
      step("GET", `/v5/vms/${SLUG}`, () => json(vm("running")))
    ])
    expect((await run(provider(raced.client).create(conformanceInput("sbx_1")))).resourceId).toBe("vm_1")

    const reconcile = scripted([
      step("GET", `/v5/vms/${SLUG}`, () => json(vm("running", { metadata: { metal_sandbox_id: "sbx_1", metal_env: "{\"A\":\"b\"}" } }))),
      step("GET", `/v5/vms/${SLUG}`, () => json(vm("running", { metadata: { metal_sandbox_id: "sbx_other" } }))),
      step("GET", `/v5/vms/${SLUG}`, () => notFound())
    ])
    const p = provider(reconcile.client)
    expect((await run(p.reconcileCreate("sbx_1")))?.metadata).toMatchObject({ environment: { A: "b" } })
    expect(await run(p.reconcileCreate("sbx_1"))).toBeNull()
    expect(await run(p.reconcileCreate("sbx_1"))).toBeNull()
  })

  it("pause and resume follow the state (202 or not); destroy takes 404 as done and follows a 202 until the VM is gone", async () => {
    const s = scripted([
      step("GET", "/v5/vms/vm_1", () => json(vm("running"))),
      step("POST", "/v5/vms/vm_1/pause", accepted),
      step("GET", "/v5/vms/vm_1", () => json(vm("pausing"))),
      step("GET", "/v5/vms/vm_1", () => json(vm("paused"))),
      step("GET", "/v5/vms/vm_1", () => json(vm("paused"))), // paused already: nothing sent
      step("GET", "/v5/vms/vm_1", () => json(vm("paused"))),
      step("POST", "/v5/vms/vm_1/start", () => json(vm("running"))),
      step("GET", "/v5/vms/vm_1", () => json(vm("running"))),
      step("GET", "/v5/vms/vm_1", () => json(vm("running"))), // running already
      step("DELETE", "/v5/vms/vm_1", accepted),
      step("GET", "/v5/vms/vm_1", () => json(vm("running"))),
      step("GET", "/v5/vms/vm_1", () => notFound()),
      step("DELETE", "/v5/vms/vm_1", () => notFound()),
      step("GET", "/v5/vms/vm_1", () => notFound())
    ])
    const p = provider(s.client)
    await run(p.pause(SANDBOX))
    await run(p.pause(SANDBOX))
    await run(p.resume(SANDBOX))
    await run(p.resume(SANDBOX))
    await run(p.destroy(SANDBOX))
    await run(p.destroy(SANDBOX))
    expect(await run(p.inspect(SANDBOX))).toBe("absent")
    expect(s.left()).toBe(0)
  })

  it("error kinds from Freestyle's codes and statuses", async () => {
    const answers: Array<[Response, string]> = [
      [json({ code: "UNAUTHORIZED", message: "bad key" }, 401), "auth"],
      [json({ code: "VM_LIMIT_EXCEEDED", message: "too many" }, 400), "quota"],
      [json({ code: "RATE_LIMITED", message: "slow down" }, 429), "capacity"],
      [json({ code: "INTERNAL_ERROR", message: "oops" }, 503), "unavailable"],
      [new Response("<html>bad gateway</html>", { status: 502 }), "unknown_outcome"]
    ]
    for (const [answer, kind] of answers) {
      const s = scripted([
        step("GET", `/v5/vms/${SLUG}`, () => notFound()),
        step("POST", "/v5/vms", () => answer.clone()),
        ...(kind === "unknown_outcome" ? [step("GET", `/v5/vms/${SLUG}`, () => notFound())] : [])
      ])
      expect((await failureOf(provider(s.client).create(conformanceInput("sbx_1")))).kind, kind).toBe(kind)
    }
  })
})

describe("freestyle remote: exec-await", () => {
  it("one shell line (cwd, the sandbox's and the process's env, quoted argv), the timeout capped at 300 s; stdout then stderr, then the exit", async () => {
    const s = scripted([
      step("POST", "/v5/vms/vm_1/exec-await", (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({
          command: `{ cd -- /tmp 2>/dev/null || { echo '${CWD_MISSING_MARK}' >&2; exit 97; }; } && export CONFORMANCE_SANDBOX=yes GREETING='hi there' && exec sh -c 'echo "$GREETING"; exit 3'`,
          timeoutMs: 300_000
        })
        return json({ stdout: "hi there\n", stderr: "warn\n", statusCode: 3 })
      })
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, {
      command: ["sh", "-c", "echo \"$GREETING\"; exit 3"],
      cwd: "/tmp",
      environment: { GREETING: "hi there" },
      timeoutSeconds: 3600,
      maxOutputBytes: 1 << 20,
      processId: "proc_1"
    }))
    const got = await events(p, executionId)
    expect(got.map((e) => [e.seq, e.type])).toEqual([[0, "stdout"], [1, "stderr"], [2, "exit"]])
    expect(text(got, "stdout")).toBe("hi there\n")
    expect(got.at(-1)).toMatchObject({ exitCode: 3, signal: null, cancelled: false, timedOut: false, outputTruncated: false })
    // Read again from a position: the same events.
    expect(await run(p.execEvents(SANDBOX, executionId, 2))).toEqual([got[2]])
    expect(s.left()).toBe(0)
    expect((await failureOf(p.cancelExec(SANDBOX, executionId))).kind).toBe("unsupported")
  })

  it("408 and a null status are timed-out exits; an unresolved 202 is an UNKNOWN exit (never sent again); output is cut at the limit", async () => {
    const replies = [
      () => json({ code: "EXEC_TIMED_OUT", message: "too long" }, 408),
      () => json({ stdout: "", stderr: "", statusCode: null }),
      accepted,
      () => json({ stdout: "0123456789", stderr: "abc", statusCode: 0 })
    ]
    const expected = [
      { exitCode: null, signal: null, timedOut: true },
      { exitCode: null, signal: null, timedOut: true },
      { exitCode: null, signal: "UNKNOWN", timedOut: false },
      { exitCode: 0, outputTruncated: true }
    ]
    for (const [i, reply] of replies.entries()) {
      const s = scripted([step("POST", "/v5/vms/vm_1/exec-await", reply)])
      const p = provider(s.client)
      const { executionId } = await run(p.exec(SANDBOX, { command: ["true"], timeoutSeconds: 5, maxOutputBytes: 4, processId: "proc_1" }))
      const got = await events(p, executionId)
      expect(got.at(-1), String(i)).toMatchObject(expected[i]!)
      expect(s.left()).toBe(0)
      if (i === 3) expect(text(got, "stdout")).toBe("0123")
    }
  })

  it("stdin is held until end-of-file, then sent once with the command as base64; an unknown execution (after a restart) reads as UNKNOWN", async () => {
    const s = scripted([
      step("POST", "/v5/vms/vm_1/exec-await", (call) => {
        expect(bodyJson(call)).toMatchObject({ command: "export CONFORMANCE_SANDBOX=yes && exec cat", stdin: Buffer.from("hello world").toString("base64"), timeoutMs: 5000 })
        return json({ stdout: "hello world", stderr: "", statusCode: 0 })
      })
    ])
    const p = provider(s.client)
    const { executionId } = await run(p.exec(SANDBOX, { command: ["cat"], timeoutSeconds: 5, maxOutputBytes: 100, processId: "proc_1", stdin: true }))
    expect(await run(p.execEvents(SANDBOX, executionId, 0))).toEqual([])
    await run(p.sendInput!(SANDBOX, executionId, new TextEncoder().encode("hello "), false))
    expect(s.left()).toBe(1)
    await run(p.sendInput!(SANDBOX, executionId, new TextEncoder().encode("world"), true))
    expect(text(await events(p, executionId), "stdout")).toBe("hello world")
    expect((await failureOf(p.sendInput!(SANDBOX, executionId, new Uint8Array(1), true))).kind).toBe("customer")

    const fresh = provider(scripted([]).client)
    expect(await run(fresh.execEvents(SANDBOX, executionId, 0))).toEqual([
      { seq: 0, type: "exit", exitCode: null, signal: "UNKNOWN", timedOut: false, cancelled: false, outputTruncated: false }
    ])
  })

  it("commandLine quotes what the shell would read", () => {
    expect(commandLine({ command: ["echo", "a b", "it's"] }, {})).toBe("exec echo 'a b' 'it'\\''s'")
  })
})

describe("freestyle remote: files", () => {
  it("ranged reads with Content-Range, 416 past the end, 404 as not_found", async () => {
    const s = scripted([
      step("GET", "/v5/vms/vm_1/fs/read", (call) => {
        expect(call.url.searchParams.get("path")).toBe("/workspace/a.bin")
        expect(call.headers["range"]).toBe("bytes=10-29")
        return new Response(new Uint8Array(20).fill(7), { status: 206, headers: { "content-range": "bytes 10-29/256" } })
      }),
      step("GET", "/v5/vms/vm_1/fs/read", () => new Response(null, { status: 416, headers: { "content-range": "bytes */256" } })),
      step("GET", "/v5/vms/vm_1/fs/read", () => json({ code: "FILE_NOT_FOUND", message: "no such file" }, 404))
    ])
    const p = provider(s.client)
    expect(await run(p.readFile(SANDBOX, { path: "/workspace/a.bin", offsetBytes: 10, maxBytes: 20 }))).toMatchObject({ offsetBytes: 10, sizeBytes: 256, eof: false })
    expect(await run(p.readFile(SANDBOX, { path: "/workspace/a.bin", offsetBytes: 300, maxBytes: 20 }))).toMatchObject({ sizeBytes: 256, eof: true })
    expect((await failureOf(p.readFile(SANDBOX, { path: "/workspace/a.bin", offsetBytes: 0, maxBytes: 20 }))).kind).toBe("not_found")
  })

  it("writes: exists first, missing parents one by one from the top, the bytes with their sha256; a 202 is checked by stat; create and append are unsupported", async () => {
    const data = new Uint8Array([0, 1, 2, 255])
    const sha = createHash("sha256").update(data).digest("hex")
    const stat = (size: number, kind: "file" | "dir") => json({ size, isFile: kind === "file", isDirectory: kind === "dir", isSymlink: false, permissions: "0644", owner: "user", group: "user", modified: "2026-01-01T00:00:00.000Z" })
    const s = scripted([
      step("GET", "/v5/vms/vm_1/fs/exists", () => json({ exists: false })),
      step("GET", "/v5/vms/vm_1/fs/stat", (call) => {
        expect(call.url.searchParams.get("path")).toBe("/workspace")
        return stat(4096, "dir")
      }),
      step("GET", "/v5/vms/vm_1/fs/stat", () => notFound("FILE_NOT_FOUND")),
      step("POST", "/v5/vms/vm_1/fs/mkdir", (call) => {
        expect(bodyJson(call)).toEqual({ path: "/workspace/d" })
        return json({})
      }),
      step("GET", "/v5/vms/vm_1/fs/stat", () => notFound("FILE_NOT_FOUND")),
      step("POST", "/v5/vms/vm_1/fs/mkdir", (call) => {
        expect(bodyJson(call)).toEqual({ path: "/workspace/d/e" })
        return json({})
      }),
      step("PUT", "/v5/vms/vm_1/fs/write", (call) => {
        expect(call.url.searchParams.get("path")).toBe("/workspace/d/e/f.bin")
        expect(call.url.searchParams.get("sha256")).toBe(sha)
        expect([...bodyBytes(call)]).toEqual([...data])
        return accepted()
      }),
      step("GET", "/v5/vms/vm_1/fs/stat", () => stat(4, "file")),
      step("GET", "/v5/vms/vm_1/fs/exists", () => json({ exists: true })),
      step("PUT", "/v5/vms/vm_1/fs/write", () => json({ code: "PARENT_NOT_FOUND", message: "no dir" }, 404))
    ])
    const p = provider(s.client)
    expect(await run(p.writeFile(SANDBOX, { path: "/workspace/d/e/f.bin", data, mode: "overwrite", createParents: true }))).toEqual({ bytesWritten: 4, created: true })
    expect((await failureOf(p.writeFile(SANDBOX, { path: "/workspace/x/f.bin", data, mode: "overwrite", createParents: false }))).kind).toBe("not_found")
    expect(s.left()).toBe(0)
    expect((await failureOf(p.writeFile(SANDBOX, { path: "/workspace/f", data, mode: "create", createParents: false }))).kind).toBe("unsupported")
    expect((await failureOf(p.writeFile(SANDBOX, { path: "/workspace/f", data, mode: "append", createParents: false }))).kind).toBe("unsupported")
  })

  it("list: the directory's names, each stat'ed, up to the limit; delete: stat first, DELETE …/fs/remove?path=, a non-empty directory only when recursive", async () => {
    const stat = (size: number, kind: "file" | "dir") => json({ size, isFile: kind === "file", isDirectory: kind === "dir", isSymlink: false, permissions: "0644", owner: "user", group: "user", modified: "2026-01-01T00:00:00.000Z" })
    const s = scripted([
      step("GET", "/v5/vms/vm_1/fs/dir", (call) => {
        expect(Object.fromEntries(call.url.searchParams)).toEqual({ path: "/workspace" })
        return json({ entries: [{ name: "a", kind: "file" }, { name: "b", kind: "file" }] })
      }),
      step("GET", "/v5/vms/vm_1/fs/stat", (call) => {
        expect(call.url.searchParams.get("path")).toBe("/workspace/a")
        return stat(3, "file")
      }),
      step("GET", "/v5/vms/vm_1/fs/stat", () => notFound("FILE_NOT_FOUND")),
      step("GET", "/v5/vms/vm_1/fs/stat", () => stat(3, "file")),
      step("DELETE", "/v5/vms/vm_1/fs/remove", (call) => {
        expect(call.url.searchParams.get("path")).toBe("/workspace/a")
        return new Response(null, { status: 204 })
      }),
      step("GET", "/v5/vms/vm_1/fs/stat", () => stat(4096, "dir")),
      step("GET", "/v5/vms/vm_1/fs/dir", () => json({ entries: [{ name: "x", kind: "file" }] }))
    ])
    const p = provider(s.client)
    expect(await run(p.listFiles(SANDBOX, { path: "/workspace", recursive: false, maxEntries: 1 }))).toEqual({
      entries: [{ path: "/workspace/a", type: "file", sizeBytes: 3, modifiedAt: "2026-01-01T00:00:00.000Z" }],
      truncated: true
    })
    expect(await run(p.deleteFile(SANDBOX, { path: "/workspace/gone", recursive: false }))).toEqual({ deleted: false })
    expect(await run(p.deleteFile(SANDBOX, { path: "/workspace/a", recursive: false }))).toEqual({ deleted: true })
    expect((await failureOf(p.deleteFile(SANDBOX, { path: "/workspace/dir", recursive: false }))).kind).toBe("customer")
    expect(s.left()).toBe(0)
  })
})

describe("freestyle remote: cost and BYOK", () => {
  it("the rate card's worked example: 2 vCPU, 4 GiB and 16 GiB for one hour is 133,616 µUSD (80,640 + 51,600 + 1,376)", async () => {
    const p = provider(scripted([]).client)
    const cost = await run(p.getCost(SANDBOX, { from: "2026-09-10T00:00:00.000Z", to: "2026-09-10T01:00:00.000Z" }))
    expect(cost).toEqual({ amountMicrousd: 133_616n, measuredThrough: "2026-09-10T01:00:00.000Z", provenance: "estimated_rate_card", confidence: "low", rateCardVersion: RATE_CARD.version })
  })

  it("BYOK: the organization's api_key on every call", async () => {
    const s = scripted([step("GET", "/v5/vms/vm_1", (call) => {
      authorized(call, "org_key")
      return json(vm("running"))
    })])
    const byok = provider(s.client).withCredentials!({ api_key: "org_key" })
    expect(await run(byok.inspect(SANDBOX))).toBe("running")
    expect(byok.capabilities).toEqual(provider(s.client).capabilities)
  })
})
