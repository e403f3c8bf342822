/**
 * The jail reaper keeps every emulated provider's live sandboxes and removes the rest. A sandbox on each of the
 * eleven plugins (their emulators name, label and number their jails each their own way) is still `ready` after
 * the reaper has run (the gateway restarted on the same DATA_DIR: it reaps at start), and runs `echo ok` where the
 * plugin runs processes. Jails made through the emulators' own APIs, as a provider would keep them, go: a
 * duplicate of a live sandbox (a crashed and retried create: E2B, whose jail id is the resource id, and Blaxel,
 * whose is not), one of a destroyed sandbox, one of an unknown sandbox and one without a sandbox id; each through
 * its provider, so the emulator no longer knows it either.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { stateOf } from "../runtime/support.ts"
import { createReadySandbox, destroyAndExpectStopped, type KeyAuth, minimalSandbox, poll, runProcess } from "../support/sandbox.ts"
import { api, bootstrap, type RunningServer, startServer, tempDataDir } from "../support/server.ts"

let server: RunningServer | undefined
// Debug: the reaper's "pass over" line, which says a pass has run.
const env = { RUNTIME_WARM_POOL: "0", LOG_LEVEL: "debug" }

afterAll(async () => {
  await server?.stop()
})

const INTERNET = { network: { internet_access: true } }
/** Every plugin, with what a request needs to be placed there, and whether it runs processes. */
const PLUGINS: ReadonlyArray<{ readonly provider: string; readonly body: Record<string, unknown>; readonly processes: boolean }> = [
  { provider: "daytona", body: {}, processes: true },
  { provider: "e2b", body: {}, processes: true },
  { provider: "blaxel", body: INTERNET, processes: true },
  { provider: "cloudflare", body: INTERNET, processes: true },
  { provider: "freestyle", body: INTERNET, processes: true },
  { provider: "prime", body: { ...INTERNET, resources: { vcpu: 0.5, memory_mb: 500 } }, processes: true },
  { provider: "runloop", body: INTERNET, processes: true },
  { provider: "vercel", body: { network: { internet_access: false } }, processes: true },
  { provider: "modal", body: { network: { internet_access: false } }, processes: true },
  { provider: "codesandbox", body: INTERNET, processes: false },
  { provider: "northflank", body: INTERNET, processes: false }
]

/** Every jail's labels under a DATA_DIR, by jail id. */
const jailLabels = (dataDir: string): Map<string, Readonly<Record<string, string>>> => {
  const dir = path.join(dataDir, "sandboxes")
  const ids = fs.existsSync(dir) ? fs.readdirSync(dir).filter((id) => fs.existsSync(path.join(dir, id, "state.json"))) : []
  return new Map(ids.map((id) => [id, stateOf(dataDir, id).spec.labels]))
}
const jailsOf = (dataDir: string, sandboxId: string) => [...jailLabels(dataDir)].filter(([, labels]) => labels["metal.sandbox_id"] === sandboxId).map(([id]) => id)

/** A client of an emulator's own API on the port it keeps in DATA_DIR/emulators/<name>/port. */
const emulator = (dataDir: string, name: string, headers: (key: string) => Record<string, string>) => {
  const kept = (file: string) => fs.readFileSync(path.join(dataDir, "emulators", name, file), "utf8").trim()
  const base = `http://127.0.0.1:${kept("port")}`
  return async (method: string, route: string, body?: unknown) => {
    const response = await fetch(base + route, {
      method,
      headers: { ...headers(kept("api-key")), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
  }
}

describe("the jail reaper", () => {
  it("keeps every provider's live sandboxes and removes duplicates, jails of dead or unknown sandboxes and of none", async () => {
    const dataDir = tempDataDir("reaper")
    server = await startServer({ dataDir, env })
    let http = api(server.url)
    const boot = await bootstrap(dataDir, "reaper@example.com")
    const auth: KeyAuth = { token: boot.api_key, project: boot.project_id }

    const [live, gone] = await Promise.all([
      Promise.all(PLUGINS.map((p) => createReadySandbox(http, auth, minimalSandbox({ provider: p.provider, ...p.body })))),
      createReadySandbox(http, auth, minimalSandbox({ provider: "e2b" }))
    ])
    expect(live.map((s) => s.provider)).toEqual(PLUGINS.map((p) => p.provider))
    await destroyAndExpectStopped(http, auth, gone.id)
    const byProvider = (name: string) => live[PLUGINS.findIndex((p) => p.provider === name)]!
    // Each live sandbox's jail carries its sandbox id, whatever its provider.
    for (const s of live) expect(jailsOf(dataDir, s.id), s.provider).toHaveLength(1)

    // Jails the reaper must remove, made by the emulators as their providers keep them.
    const e2b = emulator(dataDir, "e2b", (key) => ({ "x-api-key": key }))
    const e2bSandbox = async (metadata: Record<string, string>) => {
      const created = await e2b("POST", "/v2/sandboxes", { templateID: "base", timeout: 3600, metadata })
      expect(created.status, JSON.stringify(created.body)).toBe(201)
      return created.body.sandboxID as string
    }
    const unknownId = `sbx_${"0".repeat(32)}`
    const e2bDoomed = {
      duplicate: await e2bSandbox({ "metal.sandbox_id": byProvider("e2b").id }),
      destroyed: await e2bSandbox({ "metal.sandbox_id": gone.id }),
      unknown: await e2bSandbox({ "metal.sandbox_id": unknownId }),
      none: await e2bSandbox({})
    }
    const workspace = fs.readFileSync(path.join(dataDir, "emulators", "blaxel", "workspace"), "utf8").trim()
    const blaxel = emulator(dataDir, "blaxel", (key) => ({ authorization: `Bearer ${key}`, "x-blaxel-workspace": workspace }))
    const duplicateName = "metal-duplicate"
    const made = await blaxel("POST", "/v0/sandboxes", { metadata: { name: duplicateName, labels: { "metal.sandbox_id": byProvider("blaxel").id } } })
    expect(made.status, JSON.stringify(made.body)).toBeLessThan(300)
    expect(jailsOf(dataDir, byProvider("e2b").id)).toHaveLength(2)
    expect(jailsOf(dataDir, byProvider("blaxel").id)).toHaveLength(2)

    // The reaper runs at start: restart on the same DATA_DIR and wait for its first pass to be over.
    await server.stop({ keepJails: true })
    server = await startServer({ dataDir, env })
    http = api(server.url)
    const restarted = server
    await poll(async () => restarted.logs(), (logs) => logs.includes("reaper pass over"), 60_000, 100)

    const after = await Promise.all(live.map(async (s, i) => ({
      provider: s.provider,
      state: (await http.get(`/v1/sandboxes/${s.id}`, auth)).body.state,
      jails: jailsOf(dataDir, s.id).length,
      echo: PLUGINS[i]!.processes ? (await runProcess(http, auth, s.id, ["echo", "ok"])).stdout : null
    })))
    expect(after).toEqual(PLUGINS.map((p) => ({ provider: p.provider, state: "ready", jails: 1, echo: p.processes ? "ok\n" : null })))

    // The doomed jails are gone, and so are the resources at their emulators.
    const left = [...jailLabels(dataDir).values()]
    for (const id of [gone.id, unknownId]) expect(left.filter((labels) => labels["metal.sandbox_id"] === id)).toEqual([])
    for (const id of Object.values(e2bDoomed)) {
      expect(left.filter((labels) => labels["metal.resource_id"] === id)).toEqual([])
      expect((await e2b("GET", `/sandboxes/${id}`)).status).toBe(404)
    }
    expect(left.filter((labels) => labels["metal.resource_id"] === duplicateName)).toEqual([])
    expect((await blaxel("GET", `/v0/sandboxes/${duplicateName}`)).status).toBe(404)
  }, 240_000)
})
