/**
 * `sandbox-gateway emulate` (providers/emulate.ts): what it refuses, before anything is served (exit 2 with the
 * reason), and what it serves: the named emulators on the ports asked for, described for their SDKs, stopped with
 * every sandbox they made on SIGTERM.
 */
import { afterAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { emulateProblem } from "./emulation.ts"

const MAIN = path.resolve(import.meta.dirname, "../bin/main.ts")
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "emulate-"))
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }))

/** `emulate …` to its end: exit status and output. */
const emulate = async (...args: Array<string>) => {
  const child = Bun.spawn(["bun", MAIN, "emulate", ...args], { stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { status: child.exitCode, stdout, stderr }
}

/** A free loopback port and the one after it (both free when asked). */
const freePorts = () => {
  for (;;) {
    const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() })
    const port = probe.port!
    probe.stop(true)
    try {
      Bun.serve({ hostname: "127.0.0.1", port: port + 1, fetch: () => new Response() }).stop(true)
      return port
    } catch {}
  }
}

describe("emulate refuses what it cannot serve", () => {
  it("names the problem: no provider, an unknown or repeated one, Modal (with why)", () => {
    expect(emulateProblem([])).toBe("name at least one provider")
    expect(emulateProblem(["e2b", "nope"])).toMatch(/^unknown provider: nope \(one of blaxel, /)
    expect(emulateProblem(["e2b", "e2b"])).toBe("e2b is named twice")
    expect(emulateProblem(["modal"])).toMatch(/^modal cannot be served: .*gRPC.*in-process fake/)
    expect(emulateProblem(["e2b", "daytona", "runloop", "vercel", "blaxel", "freestyle", "codesandbox", "northflank", "prime", "cloudflare"])).toBeUndefined()
  })

  it("exits 2 with the reason and the usage: Modal, a bad port, an unknown option, a gateway's DATA_DIR", async () => {
    const gatewayDir = path.join(scratch, "gateway")
    fs.mkdirSync(gatewayDir)
    fs.writeFileSync(path.join(gatewayDir, "gateway.sqlite"), "")
    const [modal, badPort, unknown, gateway] = await Promise.all([
      emulate("modal", "--data-dir", path.join(scratch, "m")),
      emulate("e2b", "runloop", "--port", "65535", "--data-dir", path.join(scratch, "p")),
      emulate("e2b", "--verbose"),
      emulate("e2b", "--data-dir", gatewayDir)
    ])
    expect(modal.status).toBe(2)
    expect(modal.stderr).toMatch(/^error: modal cannot be served: /)
    expect(modal.stderr).toContain("Usage: sandbox-gateway emulate <provider…>")
    // Two providers from 65535 would need 65536.
    expect([badPort.status, badPort.stderr.split("\n")[0]]).toEqual([2, "error: --port must be a port number (1-65535), with room for one port per provider"])
    expect([unknown.status, unknown.stderr.split("\n")[0]]).toEqual([2, "error: unknown option: --verbose"])
    expect([gateway.status, gateway.stderr.split("\n")[0]]).toEqual([2, `error: ${gatewayDir} is a gateway's DATA_DIR: give emulate a directory of its own`])
    expect(fs.existsSync(path.join(scratch, "p"))).toBe(false)
  }, 180_000)

  it("a port that is taken stops it before it serves anything", async () => {
    const port = freePorts()
    const taken = Bun.serve({ hostname: "127.0.0.1", port: port + 1, fetch: () => new Response("someone else") })
    try {
      const run = await emulate("e2b", "runloop", "--port", String(port), "--data-dir", path.join(scratch, "taken"))
      expect(run.status).toBe(2)
      expect(run.stderr.split("\n")[0]).toBe(`error: port ${port + 1} (for runloop) is taken`)
      // The emulator started before it is stopped again: its port is free.
      Bun.serve({ hostname: "127.0.0.1", port, fetch: () => new Response() }).stop(true)
    } finally {
      taken.stop(true)
    }
  }, 120_000)
})

describe("emulate serves", () => {
  it("the named emulators on the ports asked for, with each SDK's environment; SIGTERM stops them and their sandboxes", async () => {
    const port = freePorts()
    const dataDir = path.join(scratch, "served")
    const envFile = path.join(scratch, "served.env")
    const child = Bun.spawn(["bun", MAIN, "emulate", "e2b", "runloop", "--port", String(port), "--data-dir", dataDir, "--json", "--env-file", envFile], { stdout: "pipe", stderr: "pipe" })
    const reader = child.stdout.getReader()
    let line = ""
    while (!line.includes("\n")) {
      const chunk = await reader.read()
      if (chunk.done) throw new Error(`emulate ended: ${await new Response(child.stderr).text()}`)
      line += new TextDecoder().decode(chunk.value)
    }
    const { emulators } = JSON.parse(line) as { emulators: Array<{ provider: string; urls: Record<string, string>; apiKey: string; sdkEnv: Record<string, string>; gatewayEnv: Record<string, string> }> }
    const [e2b, runloop] = emulators
    expect(emulators.map((e) => e.provider)).toEqual(["e2b", "runloop"])
    expect(e2b!.urls).toEqual({ api: `http://127.0.0.1:${port}`, sandbox: `http://127.0.0.1:${port}` })
    expect(e2b!.sdkEnv).toEqual({ E2B_API_URL: e2b!.urls["api"], E2B_SANDBOX_URL: e2b!.urls["sandbox"], E2B_API_KEY: e2b!.apiKey })
    expect(runloop!.urls).toEqual({ api: `http://127.0.0.1:${port + 1}` })
    expect(runloop!.gatewayEnv).toEqual({ RUNLOOP_API_URL: `http://127.0.0.1:${port + 1}`, RUNLOOP_API_KEY: runloop!.apiKey })
    expect(runloop!.sdkEnv).toEqual({ RUNLOOP_BASE_URL: runloop!.urls["api"], RUNLOOP_API_KEY: runloop!.apiKey })
    expect(fs.readFileSync(envFile, "utf8")).toBe(
      `export E2B_API_URL=${e2b!.urls["api"]}\nexport E2B_SANDBOX_URL=${e2b!.urls["sandbox"]}\nexport E2B_API_KEY=${e2b!.apiKey}\n` +
        `export RUNLOOP_BASE_URL=${runloop!.urls["api"]}\nexport RUNLOOP_API_KEY=${runloop!.apiKey}\n`
    )

    // A sandbox made through the emulator is a jail of the data dir, and goes when emulate stops.
    const created = await fetch(`${e2b!.urls["api"]}/v2/sandboxes`, {
      method: "POST",
      headers: { "x-api-key": e2b!.apiKey, "content-type": "application/json" },
      body: JSON.stringify({ templateID: "base", allow_internet_access: false })
    })
    expect(created.status).toBe(201)
    const { sandboxID } = (await created.json()) as { sandboxID: string }
    expect(fs.readdirSync(path.join(dataDir, "sandboxes"))).toEqual([sandboxID])
    child.kill("SIGTERM")
    expect(await child.exited).toBe(0)
    expect(fs.readdirSync(path.join(dataDir, "sandboxes"))).toEqual([])
    expect(await fetch(e2b!.urls["api"]!).then(() => "answered", () => "closed")).toBe("closed")
  }, 120_000)
})
