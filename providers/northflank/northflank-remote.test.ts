/**
 * The Northflank adapter in `remote` mode against a scripted HttpClient: the requests it sends (paths under the
 * project or team, bodies, auth), the deployment service per sandbox (external image, `sleep infinity`, expiry,
 * plan, storage, architecture), 409 and lost answers found by the derived name, readiness polling, pause/resume by
 * instances, delete with child objects, reconcile, the error kinds, the hourly billing worked example, BYOK, and the
 * runtime refused.
 */
import type { HttpClient } from "@effect/platform"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { conformanceInput } from "../testing/conformance.ts"
import type { ProviderError, ProviderSandbox } from "../../src/providers/Provider.ts"
import { bodyJson, type Call, json, scripted, type Step } from "../testing/scripted-client.ts"
import { makeNorthflankProvider, planCentsPerHour, planFor, serviceName } from "./adapter/index.ts"

const API = "https://api.northflank.test/v1"
const provider = (client: HttpClient.HttpClient, extra: { teamId?: string; apiToken?: string } = {}) =>
  makeNorthflankProvider({ apiUrl: API, apiToken: extra.apiToken ?? "nf_token", projectId: "proj", teamId: extra.teamId, mode: "remote", httpClient: client, pollIntervalMs: 1, lifecycleTimeoutMs: 2000 })
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>) => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (result._tag === "Right") throw new Error("expected a failure")
  return result.left
}
const step = (method: string, path: string, reply: Step["reply"]): Step => ({ method, path, reply })
const authorized = (call: Call, token = "nf_token") => expect(call.headers["authorization"]).toBe(`Bearer ${token}`)
const NAME = serviceName("sbx_1")
const P = "/v1/projects/proj/services"
const svc = (status: string, extra: Record<string, unknown> = {}) =>
  json({ data: { id: NAME, description: "metal sandbox sbx_1", servicePaused: false, billing: { deploymentPlan: "nf-compute-200" }, status: { deployment: { status, reason: "DEPLOYING" } }, ...extra } })
const missing = () => json({ error: { status: 404, message: "Service not found" } }, 404)
const SANDBOX: ProviderSandbox = {
  resourceId: NAME,
  resolvedResources: { vcpu: 2, memoryMb: 4096, diskMb: 2048, architecture: "x86_64", providerSize: "nf-compute-200" },
  metadata: { plan: "nf-compute-200" }
}

describe("northflank remote: create", () => {
  it("a deployment service named for our id: external image, sleep infinity, plan, storage, env, expiry; polled until COMPLETED", async () => {
    const s = scripted([
      step("GET", `${P}/${NAME}`, (call) => (authorized(call), missing())),
      step("POST", `${P}/deployment`, (call) => {
        authorized(call)
        expect(bodyJson(call)).toEqual({
          name: NAME,
          description: "metal sandbox sbx_1",
          tags: ["metal-sandbox"],
          billing: { deploymentPlan: "nf-compute-200" },
          infrastructure: { architecture: "x86" },
          deployment: {
            instances: 1,
            external: { imagePath: "ubuntu:22.04" },
            docker: { configType: "customCommand", customCommand: "sleep infinity" },
            storage: { ephemeralStorage: { storageSize: 2048 } }
          },
          runtimeEnvironment: { CONFORMANCE_SANDBOX: "yes" },
          expiryTime: 900
        })
        return json({ data: { id: NAME } })
      }),
      step("GET", `${P}/${NAME}`, () => svc("PENDING")),
      step("GET", `${P}/${NAME}`, () => svc("IN_PROGRESS")),
      step("GET", `${P}/${NAME}`, () => svc("COMPLETED"))
    ])
    const before = Date.now()
    const created = await run(provider(s.client).create(conformanceInput("sbx_1")))
    const { expiresAt, ...metadata } = created.metadata
    expect({ ...created, metadata }).toEqual(SANDBOX)
    expect(Date.parse(String(expiresAt)) - before).toBeGreaterThanOrEqual(899_000)
    await run(provider(s.client).extendLifetime!(created, 600))
    expect((await failureOf(provider(s.client).extendLifetime!(created, 3600))).kind).toBe("unsupported")
    expect(s.left()).toBe(0)
  })

  it("a first create posts at once: no earlier create can have made the service of our name", async () => {
    const s = scripted([
      step("POST", `${P}/deployment`, () => json({ data: { id: NAME } })),
      step("GET", `${P}/${NAME}`, () => svc("COMPLETED"))
    ])
    expect((await run(provider(s.client).create({ ...conformanceInput("sbx_1"), firstCreate: true }))).resourceId).toBe(SANDBOX.resourceId)
    expect(s.left()).toBe(0)
  })

  it("team paths; an OCI image with its command on arm; options pick plan and storage; pause-on-timeout sends no expiry", async () => {
    const T = "/v1/teams/team1/projects/proj/services"
    const s = scripted([
      step("GET", `${T}/${NAME}`, () => missing()),
      step("POST", `${T}/deployment`, (call) => {
        const body = bodyJson(call) as Record<string, unknown>
        expect(body).toMatchObject({
          billing: { deploymentPlan: "nf-compute-400" },
          infrastructure: { architecture: "arm" },
          deployment: { external: { imagePath: "ghcr.io/acme/app:1" }, docker: { configType: "customCommand", customCommand: "python -c 'print(1)'" }, storage: { ephemeralStorage: { storageSize: 4096 } } }
        })
        expect(body["expiryTime"]).toBeUndefined()
        return json({ data: { id: NAME } })
      }),
      step("GET", `${T}/${NAME}`, () => svc("COMPLETED", { billing: { deploymentPlan: "nf-compute-400" } }))
    ])
    const input = conformanceInput("sbx_1")
    const created = await run(provider(s.client, { teamId: "team1" }).create({
      ...input,
      source: { kind: "oci_image", image: "ghcr.io/acme/app:1", command: ["python", "-c", "print(1)"] },
      resources: { vcpu: 1, memoryMb: 512, architecture: "arm64" },
      providerOptions: { deployment_plan: "nf-compute-400", ephemeral_storage_mb: 4096 },
      lifecycle: { ...input.lifecycle, onRuntimeTimeout: "pause" }
    }))
    expect(created.resolvedResources).toEqual({ vcpu: 4, memoryMb: 8192, diskMb: 4096, architecture: "arm64", providerSize: "nf-compute-400" })
    expect(s.left()).toBe(0)
  })

  it("409 already exists and a lost answer are the service of our name; a FAILED deployment fails the create; templates are refused", async () => {
    const conflict = scripted([
      step("GET", `${P}/${NAME}`, () => missing()),
      step("POST", `${P}/deployment`, () => json({ error: { status: 409, message: "A service with this name already exists" } }, 409)),
      step("GET", `${P}/${NAME}`, () => svc("IN_PROGRESS")),
      step("GET", `${P}/${NAME}`, () => svc("COMPLETED"))
    ])
    expect((await run(provider(conflict.client).create(conformanceInput("sbx_1")))).resourceId).toBe(NAME)
    expect(conflict.left()).toBe(0)

    const lost = scripted([
      step("GET", `${P}/${NAME}`, () => missing()),
      step("POST", `${P}/deployment`, () => "transport-error"),
      step("GET", `${P}/${NAME}`, () => missing())
    ])
    expect((await failureOf(provider(lost.client).create(conformanceInput("sbx_1")))).kind).toBe("unknown_outcome")

    const failed = scripted([
      step("GET", `${P}/${NAME}`, () => missing()),
      step("POST", `${P}/deployment`, () => json({ data: { id: NAME } })),
      step("GET", `${P}/${NAME}`, () => svc("FAILED"))
    ])
    expect((await failureOf(provider(failed.client).create(conformanceInput("sbx_1")))).kind).toBe("unavailable")

    const input = conformanceInput("sbx_1")
    expect((await failureOf(provider(scripted([]).client).create({ ...input, source: { kind: "provider_template", provider: "northflank", template: "x" } }))).kind).toBe("unsupported")
  })

  it("plans: the option; the default when it covers; else the first known plan that does; none beyond the largest", () => {
    const r = (vcpu: number, memoryMb: number, providerOptions: Record<string, unknown> = {}) => ({ resources: { vcpu, memoryMb, architecture: "any" as const }, providerOptions })
    expect(planFor(r(64, 1, { deployment_plan: "nf-gpu" }), "nf-compute-200")).toBe("nf-gpu")
    expect(planFor(r(1, 512), "nf-compute-200")).toBe("nf-compute-200")
    expect(planFor(r(2, 6000), "nf-compute-200")).toBe("nf-compute-200-8")
    expect(planFor(r(32, 1), "nf-compute-200")).toBeUndefined()
    expect(planFor(r(32, 1), "custom-plan")).toBe("custom-plan")
  })
})

describe("northflank remote: lifecycle", () => {
  it("inspect, reconcile (our id in the description), pause and resume by instances, delete with child objects, idempotent", async () => {
    const s = scripted([
      step("GET", `${P}/${NAME}`, () => svc("COMPLETED")),
      step("GET", `${P}/${NAME}`, () => svc("COMPLETED", { servicePaused: true })),
      step("GET", `${P}/${NAME}`, () => missing()),
      step("GET", `${P}/${NAME}`, () => svc("COMPLETED")),
      step("GET", `${P}/${serviceName("sbx_other")}`, () => svc("COMPLETED")),
      step("GET", `${P}/${NAME}`, () => svc("COMPLETED")),
      step("POST", `${P}/${NAME}/pause`, () => json({ data: {} })),
      step("GET", `${P}/${NAME}`, () => svc("COMPLETED", { servicePaused: true })),
      step("GET", `${P}/${NAME}`, () => svc("COMPLETED", { servicePaused: true })),
      step("GET", `${P}/${NAME}`, () => svc("COMPLETED", { servicePaused: true })),
      step("POST", `${P}/${NAME}/resume`, (call) => (expect(bodyJson(call)).toEqual({ instances: 1 }), json({ data: {} }))),
      step("GET", `${P}/${NAME}`, () => svc("IN_PROGRESS")),
      step("GET", `${P}/${NAME}`, () => svc("COMPLETED")),
      step("DELETE", `${P}/${NAME}`, (call) => (expect(call.url.searchParams.get("delete_child_objects")).toBe("true"), json({ data: {} }))),
      step("DELETE", `${P}/${NAME}`, () => missing())
    ])
    const p = provider(s.client)
    expect(await run(p.inspect(SANDBOX))).toBe("running")
    expect(await run(p.inspect(SANDBOX))).toBe("paused")
    expect(await run(p.inspect(SANDBOX))).toBe("absent")
    expect((await run(p.reconcileCreate("sbx_1")))?.resourceId).toBe(NAME)
    // A service of that name describing another sandbox is not ours.
    expect(await run(p.reconcileCreate("sbx_other"))).toBeNull()
    await run(p.pause(SANDBOX))
    await run(p.pause(SANDBOX)) // already paused: nothing sent
    await run(p.resume(SANDBOX))
    await run(p.destroy(SANDBOX))
    await run(p.destroy(SANDBOX))
    expect(s.left()).toBe(0)
  })

  it("error kinds: 401/403 auth, 402 quota, 429 capacity, 404 not_found, 400 invalid_request, 5xx unavailable; messages from {error}", async () => {
    for (const [status, kind] of [[401, "auth"], [403, "auth"], [402, "quota"], [429, "capacity"], [404, "not_found"], [400, "invalid_request"], [503, "unavailable"]] as const) {
      const q = provider(scripted([
        step("GET", `${P}/${NAME}`, () => svc("COMPLETED", { servicePaused: true })),
        step("POST", `${P}/${NAME}/resume`, () => json({ error: { status, message: "nope" } }, status))
      ]).client)
      const e = await failureOf(q.resume(SANDBOX))
      expect(e.kind, String(status)).toBe(kind)
      expect(e.message).toContain("nope")
    }
  })

  it("runtime calls are unsupported, with the reason", async () => {
    const p = provider(scripted([]).client)
    const e = await failureOf(p.exec(SANDBOX, { command: ["true"], timeoutSeconds: 1, maxOutputBytes: 1, processId: "proc_x" }))
    expect(e.kind).toBe("unsupported")
    expect(e.message).toMatch(/exec websocket/)
    expect((await failureOf(p.writeFile(SANDBOX, { path: "/x", data: new Uint8Array(1), mode: "overwrite", createParents: false }))).kind).toBe("unsupported")
    expect(p.capabilities).toMatchObject({ process: null, files: null, httpEndpoints: null, architectures: ["x86_64", "arm64"] })
  })
})

describe("northflank remote: cost and BYOK", () => {
  it("worked example: hourly billing in cents summed from the window's first hour (two later hours asked for too), measured through the last hour reported", async () => {
    const s = scripted([
      step("GET", "/v1/billing/usage", (call) => {
        expect(Object.fromEntries(call.url.searchParams)).toEqual({
          projectId: "proj",
          serviceId: NAME,
          startTime: "2026-01-01T10:00:00.000Z",
          endTime: "2026-01-01T14:00:00.000Z",
          interval: "hour"
        })
        return json({ data: { usage: [
          { startTime: "2026-01-01T10:00:00.000Z", endTime: "2026-01-01T11:00:00.000Z", price: { total: 3.333 } },
          { startTime: "2026-01-01T11:00:00.000Z", endTime: "2026-01-01T12:00:00.000Z", price: { total: 6.666 } }
        ] } })
      })
    ])
    const cost = await run(provider(s.client).getCost(SANDBOX, { from: "2026-01-01T10:30:00.000Z", to: "2026-01-01T11:45:00.000Z" }))
    // 3.333 + 6.666 = 9.999 cents = 99,990 µUSD.
    expect(cost).toEqual({ amountMicrousd: 99_990n, measuredThrough: "2026-01-01T11:45:00.000Z", provenance: "provider_reported", confidence: "high", rateCardVersion: null })
    // nf-compute-200 (2 vCPU, 4 GiB) costs 2 × 1.667 + 4 × 0.833 = 6.666 cents an hour.
    expect(planCentsPerHour({ vcpu: 2, memoryMb: 4096 })).toBeCloseTo(6.666, 6)
  })

  it("BYOK: the organization's token, project and team", async () => {
    const s = scripted([step("GET", `/v1/teams/t9/projects/p9/services/${NAME}`, (call) => (authorized(call, "org_token"), svc("COMPLETED")))])
    const byok = provider(s.client).withCredentials!({ api_token: "org_token", project_id: "p9", team_id: "t9" })
    expect(await run(byok.inspect(SANDBOX))).toBe("running")
    expect(s.left()).toBe(0)
  })
})
