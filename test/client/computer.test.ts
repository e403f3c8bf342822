/**
 * Computer use through the TypeScript client and the user CLI (issue 29): actions that resolve once performed,
 * a screenshot as PNG bytes, a recording started, stopped and downloaded as an mp4, the live view's page; the CLI's
 * `sandbox screenshot`, `click`, `type` and `key`, and a refusal for a sandbox without a desktop.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runUserCli } from "../../client/src/cli.ts"
import { createClient, GatewayError, type GatewayClient, type SandboxHandle } from "../../client/src/index.ts"
import { bootstrap, type RunningServer, startServer, tempDataDir } from "../support/server.ts"

let server: RunningServer
let gw: GatewayClient
let sandbox: SandboxHandle
let configDir: string

const request = (computer: boolean) => ({
  provider: "daytona" as const,
  source: { kind: "environment" as const, environment: "metal/base" },
  resources: { vcpu: 1, memory_mb: 512 },
  lifecycle: { runtime_timeout_seconds: 900 },
  ...(computer ? { features: { computer_use: true } } : {})
})

/** The CLI in-process, with the profile written as `login` would. */
const cli = async (args: ReadonlyArray<string>) => {
  let out = ""
  let err = ""
  const code = await runUserCli([...args, "--json"], { out: (t) => (out += t), err: (t) => (err += t), env: { SGW_CONFIG_DIR: configDir }, errIsTty: false })
  return { code, out, err, json: () => JSON.parse(out) }
}

beforeAll(async () => {
  server = await startServer()
  const owner = await bootstrap(server.dataDir, "computer-client@example.com")
  gw = createClient({ baseUrl: server.url, apiKey: owner.api_key, projectId: owner.project_id })
  sandbox = await gw.sandboxes.create(request(true))
  configDir = tempDataDir("cli-config")
  fs.writeFileSync(path.join(configDir, "profiles.json"), JSON.stringify({ profiles: { default: { url: server.url, api_key: owner.api_key, project_id: owner.project_id } } }), { mode: 0o600 })
}, 120_000)
afterAll(() => server.stop())

describe("computer use in the client", () => {
  it("acts, takes a screenshot, records and downloads an mp4, and opens the live view", async () => {
    expect(await sandbox.computer.click(20, 30)).toEqual({ cursor: { x: 20, y: 30 } })
    await sandbox.computer.type("hi")
    await sandbox.computer.key("Return")
    await sandbox.computer.scroll("down", 2)
    const shot = await sandbox.computer.screenshot({ show_cursor: true })
    expect(shot.format).toBe("png")
    expect(Buffer.from(shot.data.subarray(1, 4)).toString("latin1")).toBe("PNG")
    expect(shot.cursor).toEqual({ x: 20, y: 30 })
    await expect(sandbox.computer.click(-1, 5)).rejects.toMatchObject({ code: "validation_error" })

    const recording = await sandbox.computer.recordings.start({ label: "client" })
    expect(recording.state).toBe("recording")
    await sandbox.computer.move(200, 200)
    const stopped = await sandbox.computer.recordings.stop(recording.id)
    expect(stopped).toMatchObject({ state: "stopped", label: "client" })
    const mp4 = await sandbox.computer.recordings.download(recording.id)
    expect(mp4.length).toBe(stopped.byte_length)
    expect(Buffer.from(mp4.subarray(4, 8)).toString("latin1")).toBe("ftyp")
    expect((await sandbox.computer.recordings.list()).map((r) => r.id)).toContain(recording.id)

    const view = await sandbox.computer.liveView({ leaseSeconds: 300 })
    expect(view.url).toContain("vnc.html?autoconnect=1")
    let page = ""
    for (let i = 0; i < 100 && !page.includes("noVNC"); i++) {
      const res = await fetch(view.url).catch(() => undefined)
      page = res?.status === 200 ? await res.text() : ""
      if (!page.includes("noVNC")) await Bun.sleep(100)
    }
    expect(page).toContain("noVNC")
  }, 120_000)

  it("the CLI: screenshot to a file, click, type, key; a sandbox without a desktop is refused", async () => {
    const out = path.join(configDir, "shot.png")
    const shot = await cli(["sandbox", "screenshot", sandbox.id, "--out", out])
    expect(shot.code, shot.err).toBe(0)
    expect(shot.json()).toMatchObject({ path: out, format: "png" })
    expect(fs.readFileSync(out).subarray(1, 4).toString("latin1")).toBe("PNG")
    expect((await cli(["sandbox", "click", sandbox.id, "50", "60", "--button", "right"])).json()).toEqual({ cursor: { x: 50, y: 60 } })
    expect((await cli(["sandbox", "key", sandbox.id, "Escape"])).code).toBe(0)
    expect((await cli(["sandbox", "type", sandbox.id, "echo hi"])).code).toBe(0)
    expect((await cli(["sandbox", "click", sandbox.id, "x", "1"])).code).toBe(2)

    const plain = await gw.sandboxes.create(request(false))
    const refused = await plain.computer.screenshot().catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(GatewayError)
    expect(refused).toMatchObject({ code: "capability_unsupported", status: 409 })
    const viaCli = await cli(["sandbox", "click", plain.id, "1", "1"])
    expect(viaCli.code).toBe(1)
    expect(viaCli.err).toContain("features.computer_use")
  }, 120_000)
})
