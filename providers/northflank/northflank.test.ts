/** The Northflank adapter against its emulator over the real local runtime: the shared conformance suite (wire checks: northflank-remote.test.ts). */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { conformance, conformanceInput, emulatedTarget } from "../testing/conformance.ts"
import { makeNorthflankProvider } from "./adapter/index.ts"
import { EMULATED_ARCHITECTURES, startNorthflankEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("northflank", startNorthflankEmulator, (emulator) =>
  makeNorthflankProvider({ apiUrl: emulator.apiUrl, apiToken: emulator.apiToken, projectId: emulator.projectId, architectures: EMULATED_ARCHITECTURES, mode: "emulated" }))

conformance("northflank (emulated)", setup)

describe("northflank (emulated): beyond conformance", () => {
  let target: Awaited<ReturnType<typeof setup>>
  beforeAll(async () => {
    target = await setup()
  }, 60_000)
  afterAll(() => target.teardown(), 60_000)

  const call = (method: string, path: string, body?: unknown, key = target.emulator.apiToken) =>
    fetch(`${target.emulator.apiUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })

  it("one service per name (409), pause as zero instances, an unknown project is 404, billing while it ran, a wrong token is auth", async () => {
    const { provider } = target
    const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_nf${Date.now()}`)))
    expect(sandbox.resolvedResources).toEqual({ vcpu: 2, memoryMb: 4096, diskMb: 2048, architecture: "x86_64", providerSize: "nf-compute-200" })
    const project = `/projects/${target.emulator.projectId}`
    const again = await call("POST", `${project}/services/deployment`, {
      name: sandbox.resourceId,
      billing: { deploymentPlan: "nf-compute-200" },
      deployment: { instances: 1, external: { imagePath: "ubuntu:22.04" } }
    })
    expect(again.status).toBe(409)
    expect(await again.json()).toMatchObject({ error: { status: 409, message: expect.stringMatching(/already exists/) } })
    expect((await call("GET", `/projects/other/services/${sandbox.resourceId}`)).status).toBe(404)

    await Effect.runPromise(provider.pause(sandbox))
    expect(await (await call("GET", `${project}/services/${sandbox.resourceId}`)).json()).toMatchObject({ data: { servicePaused: true, deployment: { instances: 0 } } })
    await Effect.runPromise(provider.resume(sandbox))

    const hourAgo = new Date(Date.now() - 3_600_000).toISOString()
    const cost = await Effect.runPromise(provider.getCost(sandbox, { from: hourAgo, to: new Date().toISOString() }))
    expect(cost).toMatchObject({ provenance: "provider_reported" })
    expect(cost!.amountMicrousd >= 0n).toBe(true)

    const wrong = makeNorthflankProvider({ apiUrl: target.emulator.apiUrl, apiToken: "nope", projectId: target.emulator.projectId, mode: "emulated" })
    expect((await Effect.runPromise(Effect.flip(wrong.inspect(sandbox)))).kind).toBe("auth")
    await Effect.runPromise(provider.destroy(sandbox))
    expect(await Effect.runPromise(provider.inspect(sandbox))).toBe("absent")
  }, 60_000)

  it("services listed newest first by cursor, scaled to 0 and 1 instances; a bad page size, cursor or instance count is a 400", async () => {
    const project = `/projects/${target.emulator.projectId}`
    const names = [`nf-list-a${Date.now()}`, `nf-list-b${Date.now()}`]
    for (const name of names) {
      const created = await call("POST", `${project}/services/deployment`, { name, billing: { deploymentPlan: "nf-compute-20" }, deployment: { instances: 1, external: { imagePath: "ubuntu:22.04" } } })
      expect(created.status).toBe(200)
    }
    const seen: Array<string> = []
    let cursor: string | undefined
    do {
      const page = (await (await call("GET", `${project}/services?per_page=1${cursor === undefined ? "" : `&cursor=${cursor}`}`)).json()) as {
        data: { services: Array<{ id: string }> }
        pagination: { hasNextPage: boolean; cursor?: string; count: number }
      }
      expect(page.pagination.count).toBe(page.data.services.length)
      seen.push(...page.data.services.map((s) => s.id))
      cursor = page.pagination.hasNextPage ? page.pagination.cursor : undefined
    } while (cursor !== undefined)
    expect(new Set(seen).size).toBe(seen.length)
    expect(seen.filter((id) => names.includes(id))).toEqual([names[1], names[0]])

    for (const bad of ["per_page=0", "per_page=101", "per_page=x", "cursor=not-a-cursor", "page=0"]) {
      const refused = await call("GET", `${project}/services?${bad}`)
      expect(refused.status, bad).toBe(400)
      expect(await refused.json()).toMatchObject({ error: { status: 400, message: expect.any(String) } })
    }

    const service = `${project}/services/${names[0]}`
    expect((await call("POST", `${service}/scale`, { instances: 0 })).status).toBe(200)
    expect(await (await call("GET", service)).json()).toMatchObject({ data: { servicePaused: true, deployment: { instances: 0 } } })
    expect((await call("POST", `${service}/scale`, { instances: 1 })).status).toBe(200)
    expect(await (await call("GET", service)).json()).toMatchObject({ data: { servicePaused: false, deployment: { instances: 1 }, status: { deployment: { status: "COMPLETED" } } } })
    const tooMany = await call("POST", `${service}/scale`, { instances: 2 })
    expect(tooMany.status).toBe(400)
    expect((await call("POST", `${project}/services/nf-missing/scale`, { instances: 0 })).status).toBe(404)

    for (const name of names) expect((await call("DELETE", `${project}/services/${name}`)).status).toBe(200)
    expect((await call("GET", service)).status).toBe(404)
  }, 60_000)

  it("a request larger than the default plan gets the first plan covering it; arm64 is refused on an x86 host", async () => {
    // Within this host (the emulator's deployments are its jails): 1 vCPU with 6000 MB needs more memory than the default.
    const sandbox = await Effect.runPromise(target.provider.create({ ...conformanceInput(`sbx_big${Date.now()}`), resources: { vcpu: 1, memoryMb: 6000, architecture: "any" } }))
    expect(sandbox.resolvedResources.providerSize).toBe("nf-compute-200-8")
    await Effect.runPromise(target.provider.destroy(sandbox))
    if (EMULATED_ARCHITECTURES.includes("x86_64")) {
      const arm = await Effect.runPromise(Effect.flip(target.provider.create({ ...conformanceInput("sbx_arm"), resources: { vcpu: 1, memoryMb: 512, architecture: "arm64" } })))
      expect(arm.kind).toBe("unsupported")
    }
  }, 60_000)
})
