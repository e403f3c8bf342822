/**
 * Placement that keeps its word (issue 23), through the real gateway over every provider's emulator: a request that
 * says nothing of the network is placed anywhere and the sandbox says what it got; `auto` places a request that
 * names no features where the most of the API works; a later call the provider cannot serve names the create-time
 * feature that would have placed it elsewhere; a sandbox is never smaller than asked; a stored credential makes the
 * sandbox byok whether accepted or not (test/e2e/byok.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PROVIDERS } from "../../src/domain/Sandbox.ts"
import { api, bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, readProcessOutput, runProcess, waitOperation, waitProcess } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  const owner = await bootstrap(server.dataDir, "placement@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
})
afterAll(() => server.stop())

const create = (body: Record<string, unknown>) => http.post("/v1/sandboxes", { ...auth, body, headers: { "idempotency-key": idempotencyKey("create") } })
const destroy = async (id: string) => {
  const deleted = await http.delete(`/v1/sandboxes/${id}`, auth)
  await waitOperation(http, auth, deleted.body.operation.id)
}
/** Fails the create and returns its operation's error. */
const failedCreate = async (body: Record<string, unknown>) => {
  const created = await create(body)
  expect(created.status).toBe(202)
  const op = await waitOperation(http, auth, created.body.operation.id)
  expect(op.state).toBe("failed")
  return op.error
}
/** The sandbox's network interfaces, as the kernel lists them inside it. */
const interfaces = async (sandboxId: string) =>
  (await runProcess(http, auth, sandboxId, ["cat", "/proc/net/dev"])).stdout.split("\n").slice(2).map((l) => l.split(":")[0]!.trim()).filter(Boolean)

describe("absent means unconstrained", () => {
  it("the minimal body (source, resources, lifecycle) becomes ready on each of the eleven providers, with the provider's default network", async () => {
    // One after the other: eleven jails starting at once on a small machine would only test its patience.
    const sandboxes: Array<any> = []
    for (const provider of PROVIDERS) sandboxes.push(await createReadySandbox(http, auth, minimalSandbox({ provider })))
    for (const [i, sandbox] of sandboxes.entries()) {
      expect(sandbox, PROVIDERS[i]).toMatchObject({
        provider: PROVIDERS[i],
        state: "ready",
        resolved_network: { internet_access: true, source: "provider_default", allow_domains: null, deny_domains: null }
      })
      expect(sandbox.resolved_resources.vcpu, PROVIDERS[i]).toBeGreaterThanOrEqual(1)
      expect(sandbox.resolved_resources.memory_mb, PROVIDERS[i]).toBeGreaterThanOrEqual(512)
    }
    // The record tells the truth: the sandbox has a network interface besides loopback.
    const blaxel = sandboxes[PROVIDERS.indexOf("blaxel")]
    expect(await interfaces(blaxel.id)).toContain("tap0")
    await Promise.all(sandboxes.map((s) => destroy(s.id)))
  }, 240_000)

  it("an explicit internet_access: false is kept, and refused where the provider cannot enforce it", async () => {
    const offline = await createReadySandbox(http, auth, minimalSandbox({ provider: "e2b", network: { internet_access: false } }))
    expect(offline.resolved_network).toEqual({ internet_access: false, source: "requested", allow_domains: null, deny_domains: null })
    expect(await interfaces(offline.id)).toEqual(["lo"])
    await destroy(offline.id)
    const error = await failedCreate(minimalSandbox({ provider: "blaxel", network: { internet_access: false } }))
    expect(error.code).toBe("no_eligible_provider")
    expect(error.details.attempts[0].message).toBe("blaxel cannot keep a sandbox off the internet")
  }, 120_000)

  it("a domain list asks for the internet limited to it, on a provider that enforces it", async () => {
    const listed = await createReadySandbox(http, auth, minimalSandbox({ network: { allow_domains: ["example.com"] } }))
    expect(["daytona", "e2b", "vercel"]).toContain(listed.provider)
    expect(listed.resolved_network).toEqual({ internet_access: true, source: "requested", allow_domains: ["example.com"], deny_domains: null })
    await destroy(listed.id)
  }, 120_000)
})

describe("placement that anticipates", () => {
  it("a minimal auto sandbox lands where the most of the API works (Daytona and E2B tie: stdin, terminals, pause; Daytona's endpoints against E2B's live output; Daytona first by name), and stdin works there", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox())
    expect(sandbox.provider).toBe("daytona")
    const started = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, {
      ...auth,
      body: { command: ["sh", "-c", "cat; echo done"], stdin: true },
      headers: { "idempotency-key": idempotencyKey("p") }
    })
    expect(started.status).toBe(202)
    const wrote = await http.post(`/v1/sandboxes/${sandbox.id}/processes/${started.body.id}/stdin`, { ...auth, body: { data_base64: Buffer.from("hi\n").toString("base64"), eof: true } })
    expect(wrote.status).toBe(202)
    const done = await waitProcess(http, auth, sandbox.id, started.body.id)
    expect(done).toMatchObject({ state: "succeeded", exit_code: 0 })
    expect((await readProcessOutput(http, auth, sandbox.id, started.body.id)).stdout).toBe("hi\ndone\n")
    await destroy(sandbox.id)
  }, 120_000)

  it("a call the provider cannot serve is a 409 naming the create-time feature (or the providers) that would have placed it elsewhere", async () => {
    const vercel = await createReadySandbox(http, auth, minimalSandbox({ provider: "vercel" }))
    const terminal = await http.post(`/v1/sandboxes/${vercel.id}/processes`, { ...auth, body: { command: ["sh"], pty: { cols: 80, rows: 24 } }, headers: { "idempotency-key": idempotencyKey("p") } })
    expectEnvelope(terminal, 409, "capability_unsupported")
    expect(terminal.body.message).toBe("vercel sandboxes cannot open terminals; create the sandbox with features.pty: true to be placed on a provider that can")
    expect(terminal.body.details).toMatchObject({ provider: "vercel", feature: "features.pty: true", providers: ["daytona", "e2b"] })
    const stdin = await http.post(`/v1/sandboxes/${vercel.id}/processes`, { ...auth, body: { command: ["cat"], stdin: true }, headers: { "idempotency-key": idempotencyKey("p") } })
    expectEnvelope(stdin, 409, "capability_unsupported")
    expect(stdin.body.message).toMatch(/^vercel sandboxes cannot take standard input; create the sandbox with provider set to one that can \((?:[a-z0-9]+, )*e2b(?:, [a-z0-9]+)*\)$/)
    const endpoint = await http.post(`/v1/sandboxes/${vercel.id}/endpoints`, { ...auth, body: { port: 3000 }, headers: { "idempotency-key": idempotencyKey("e") } })
    expectEnvelope(endpoint, 409, "capability_unsupported")
    expect(endpoint.body.message).toBe("vercel sandboxes cannot serve HTTP endpoints; create the sandbox with features.public_ports: [3000] to be placed on a provider that can")
    const pause = await http.post(`/v1/sandboxes/${vercel.id}/actions/pause`, auth)
    expectEnvelope(pause, 409, "unsupported_operation")
    expect(pause.body.message).toBe("vercel sandboxes cannot be paused; create the sandbox with features.pause_resume: true to be placed on a provider that can")
    await destroy(vercel.id)
  }, 120_000)
})

describe("never less than asked", () => {
  it("a request larger than every provider (and this host) fails naming resources and the largest sizes", async () => {
    const error = await failedCreate(minimalSandbox({ resources: { vcpu: 64, memory_mb: 1_048_576 } }))
    expect(error.code).toBe("no_eligible_provider")
    expect(error.message).toMatch(/^No configured provider can serve this request: resources \(64 vCPU, 1048576 MB of memory\) are more than any of them gives/)
    expect(error.details).toMatchObject({ requirement: "resources", requested_resources: { vcpu: 64, memory_mb: 1_048_576 } })
    const largest = error.details.largest_resources as Array<{ provider: string; vcpu: number | null; memory_mb: number | null }>
    expect(largest.map((l) => l.provider)).toContain("e2b")
    // Every emulated provider is held to what this host has.
    const ready = (await http.get("/ready")).body
    for (const l of largest) expect(l.vcpu!, l.provider).toBeLessThanOrEqual(ready.local_runtime.max_vcpu)
    // An explicit provider says the same about itself.
    const daytona = await failedCreate(minimalSandbox({ provider: "daytona", resources: { vcpu: 64, memory_mb: 1_048_576 } }))
    expect(daytona.details.attempts[0].unmet_requirements[0]).toMatchObject({ requirement: "resources" })
  }, 60_000)

  it("what a sandbox gets is at least what it asked for on every dimension; more is fine", async () => {
    const small = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona", resources: { vcpu: 1, memory_mb: 512, disk_mb: 256 } }))
    expect(small.resolved_resources).toMatchObject({ vcpu: 1, memory_mb: 1024, disk_mb: 3072 })
    await destroy(small.id)
    // Daytona's default snapshot has 3 GiB of disk: a request for more goes elsewhere, which gives at least that.
    const bigger = await createReadySandbox(http, auth, minimalSandbox({ resources: { vcpu: 1, memory_mb: 512, disk_mb: 8192 } }))
    expect(bigger.resolved_resources.disk_mb).toBeGreaterThanOrEqual(8192)
    expect(bigger.resolved_resources.vcpu).toBeGreaterThanOrEqual(1)
    await destroy(bigger.id)
  }, 120_000)

  it("/ready states the local runtime's ceiling and default", async () => {
    const ready = await http.get("/ready")
    expect(ready.status).toBe(200)
    expect(ready.body.local_runtime).toMatchObject({ default_internet: true })
    expect(ready.body.local_runtime.max_vcpu).toBeGreaterThanOrEqual(1)
    expect(ready.body.local_runtime.max_memory_mb).toBeGreaterThan(512)
    expect(ready.body.local_runtime.max_disk_mb).toBeGreaterThan(0)
  })
})

describe("environments are a catalogue", () => {
  it("GET /v1/environments lists the names, versions and the providers that create each", async () => {
    const listed = await http.get("/v1/environments", auth)
    expect(listed.status).toBe(200)
    expect(listed.body.environments.map((e: any) => e.name)).toEqual(["metal/base", "metal/node", "metal/python"])
    for (const e of listed.body.environments) {
      expect(e).toMatchObject({ versions: ["latest"], default_version: "latest" })
      // Every provider takes environment sources.
      expect(e.providers).toEqual([...PROVIDERS])
    }
    expectEnvelope(await http.get("/v1/environments", { token: "metal_sk_wrong", project: auth.project }), 401, "unauthenticated")
  })

  it("an unknown environment or version is a 422 at the field with the known ones in details, and makes nothing", async () => {
    const before = (await http.get("/v1/sandboxes", auth)).body.sandboxes.length
    const unknown = await create(minimalSandbox({ source: { kind: "environment", environment: "ubuntu-22.04" } }))
    expectEnvelope(unknown, 422, "validation_error")
    expect(unknown.body.message).toBe("source.environment must be one of: metal/base, metal/node, metal/python")
    expect(unknown.body.details).toMatchObject({
      issues: [{ path: "source.environment", allowed: ["metal/base", "metal/node", "metal/python"] }],
      environments: ["metal/base", "metal/node", "metal/python"]
    })
    const version = await create(minimalSandbox({ source: { kind: "environment", environment: "metal/python", version: "2.7" } }))
    expectEnvelope(version, 422, "validation_error")
    expect(version.body.message).toBe("source.version of metal/python must be one of: latest")
    expect(version.body.details.issues[0].path).toBe("source.version")
    expect((await http.get("/v1/sandboxes", auth)).body.sandboxes.length).toBe(before)
  })
})

describe("errors a person can act on", () => {
  it("a refused provider name is one issue with the allowed values", async () => {
    const refused = await create(minimalSandbox({ provider: "nope" }))
    expectEnvelope(refused, 422, "validation_error")
    const message = "provider must be one of: blaxel, cloudflare, codesandbox, daytona, e2b, freestyle, modal, northflank, prime, runloop, vercel, auto"
    expect(refused.body.message).toBe(message)
    expect(refused.body.details.issues).toEqual([{ path: "provider", message, allowed: [...PROVIDERS, "auto"] }])
    const arch = await create(minimalSandbox({ resources: { vcpu: 1, memory_mb: 512, architecture: "sparc" } }))
    expect(arch.body.message).toBe("resources.architecture must be one of: x86_64, arm64, any")
    const kind = await create(minimalSandbox({ source: { kind: "vm" } }))
    expect(kind.body.message).toBe("source.kind must be one of: environment, oci_image, provider_template")
  })

  it("a command given as a string is told to be an argv array; several problems are counted", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "e2b" }))
    const started = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body: { command: "ls -la" }, headers: { "idempotency-key": idempotencyKey("p") } })
    expectEnvelope(started, 422, "validation_error")
    expect(started.body.message).toBe("command is an argv array: send the program and its arguments as a list of strings, e.g. [\"sh\", \"-c\", \"ls -la\"]")
    const two = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body: { command: "ls", timeout_seconds: "x" }, headers: { "idempotency-key": idempotencyKey("p") } })
    expect(two.body.message).toMatch(/^command is an argv array: .* \(and 1 more in details\.issues\)$/)
    expect(two.body.details.issues.map((i: any) => i.path)).toEqual(["command", "timeout_seconds"])
    await destroy(sandbox.id)
  }, 60_000)
})
