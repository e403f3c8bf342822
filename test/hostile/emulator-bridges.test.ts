/**
 * The Daytona emulator's port bridges (issue 7, item 8). A bridge carries the emulator's preview proxy to a port
 * inside a sandbox. It must be reachable by the gateway only — a unix socket in a root-only directory, no TCP
 * port — and it must go away, with its connections, when its preview is revoked or expires and when the sandbox
 * stops or is deleted. An unprivileged local user (uid 65534) tries to connect to a live bridge.
 */
import { Database } from "bun:sqlite"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { activeEndpoint, expectCut, startSlowDownload, startWebServer } from "../support/endpoints.ts"
import { createReadySandbox, type KeyAuth, minimalSandbox, poll, waitOperation } from "../support/sandbox.ts"
import { api, bootstrap, type RunningServer, startServer } from "../support/server.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth
let sandbox: any
let resourceId: string
let emulator: { url: string; key: string }
let bridgeDir: string

const sockets = () => fs.readdirSync(bridgeDir).filter((name) => name.endsWith(".sock")).map((name) => path.join(bridgeDir, name))

/** Unix sockets listening right now, by path (`ss` reads the kernel's table). */
const listeningUnix = () => Bun.spawnSync(["ss", "-Hlx"]).stdout.toString()

/** The TCP ports the gateway process listens on. */
const gatewayTcpPorts = () =>
  Bun.spawnSync(["ss", "-Hltnp"]).stdout.toString().split("\n").filter((line) => line.includes(`pid=${server.pid},`))
    .map((line) => Number(/:(\d+)\s/.exec(line)?.[1]))

/** Connects to a unix socket as root (the gateway's user) and sends a request: what came back, or the error code. */
const connectAsRoot = (socketPath: string) =>
  new Promise<string>((resolve) => {
    let out = ""
    const socket = net.connect(socketPath, () => socket.write("GET /hello HTTP/1.0\r\n\r\n"))
    socket.on("data", (d) => (out += d.toString()))
    socket.on("close", () => resolve(out))
    socket.on("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"))
    setTimeout(() => socket.destroy(), 5_000)
  })

/** The same as uid/gid 65534 (nobody), in a separate process. */
const connectAsNobody = (socketPath: string) => {
  const script = `const s = require("node:net").connect(${JSON.stringify(socketPath)}, () => { console.log("CONNECTED"); s.write("GET /hello HTTP/1.0\\r\\n\\r\\n") });
s.on("data", (d) => console.log("DATA " + d)); s.on("error", (e) => console.log("ERROR " + e.code)); setTimeout(() => process.exit(0), 3000)`
  const result = Bun.spawnSync(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "env", "HOME=/tmp", process.execPath, "-e", script], { cwd: "/tmp" })
  return result.stdout.toString() + result.stderr.toString()
}

const emulatorCall = (method: string, route: string) =>
  fetch(`${emulator.url}${route}`, { method, headers: { authorization: `Bearer ${emulator.key}` } })

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  const boot = await bootstrap(server.dataDir, "bridges@example.com")
  auth = { token: boot.api_key, project: boot.project_id }
  sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
  await startWebServer(http, auth, sandbox.id, [8000, 8001, 8002])
  const home = path.join(server.dataDir, "emulators", "daytona")
  emulator = { url: `http://127.0.0.1:${fs.readFileSync(path.join(home, "port"), "utf8").trim()}`, key: fs.readFileSync(path.join(home, "api-key"), "utf8").trim() }
  bridgeDir = path.join(home, "bridges")
  const db = new Database(path.join(server.dataDir, "gateway.sqlite"), { readonly: true })
  resourceId = (JSON.parse((db.query("SELECT provider_resource FROM sandboxes WHERE id = ?").get(sandbox.id) as { provider_resource: string }).provider_resource) as { resourceId: string }).resourceId
  db.close()
})
afterAll(() => server.stop())

describe("daytona emulator port bridges", () => {
  it("are unix sockets only the gateway's user can reach, never TCP ports; a revoked endpoint's bridge is gone", async () => {
    const knownPorts = new Set([server.url, server.endpointUrl, emulator.url].map((u) => Number(new URL(u).port)))
    const emulators = path.join(server.dataDir, "emulators")
    // Emulators with a listener keep its port (Modal's is in-process: none).
    for (const name of fs.readdirSync(emulators)) {
      const port = path.join(emulators, name, "port")
      if (fs.existsSync(port)) knownPorts.add(Number(fs.readFileSync(port, "utf8")))
    }
    const endpoint = await activeEndpoint(http, auth, sandbox.id, 8000)
    // No TCP listener besides the API, the endpoint listener and the emulators' own APIs.
    const tcp = gatewayTcpPorts()
    expect(tcp).toContain(Number(new URL(server.url).port))
    expect(tcp.filter((p) => !knownPorts.has(p))).toEqual([])

    // Live: one bridge, in a root-only directory, mode 0600, answering root.
    const stat = fs.statSync(bridgeDir)
    expect(stat.mode & 0o777).toBe(0o700)
    expect(stat.uid).toBe(0)
    const live = sockets()
    expect(live).toHaveLength(1)
    expect(fs.statSync(live[0]!).mode & 0o777).toBe(0o600)
    expect(listeningUnix()).toContain(live[0]!)
    expect(await connectAsRoot(live[0]!)).toContain("hello")
    // Nobody else gets in, even when every folder above the bridges is open to others (DATA_DIR itself is 0700;
    // here the bridges' own folder is the only thing in the way).
    // (When DATA_DIR's path is too long for a socket, the bridges are in a folder of the temp dir: that one is open
    // already, and is never this test's to change.)
    for (const dir of [server.dataDir, path.join(server.dataDir, "emulators"), path.dirname(bridgeDir)]) {
      if (path.resolve(dir) !== path.resolve(os.tmpdir())) fs.chmodSync(dir, 0o755)
    }
    const attempt = connectAsNobody(live[0]!)
    expect(attempt).toContain("ERROR EACCES")
    expect(attempt).not.toContain("CONNECTED")
    // Control: the same unprivileged process does connect to a socket left open to everyone.
    const open = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-open-"))
    fs.chmodSync(open, 0o755)
    const control = net.createServer((socket) => socket.end("HTTP/1.0 200 OK\r\n\r\nopen")).listen(path.join(open, "open.sock"))
    await new Promise((resolve) => control.once("listening", resolve))
    fs.chmodSync(path.join(open, "open.sock"), 0o777)
    try {
      expect(connectAsNobody(path.join(open, "open.sock"))).toContain("CONNECTED")
    } finally {
      control.close()
      fs.rmSync(open, { recursive: true, force: true })
    }

    // Revoked: the bridge stops listening and its file goes.
    await http.delete(`/v1/sandboxes/${sandbox.id}/endpoints/${endpoint.id}`, auth)
    await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}/endpoints`, auth)).body.endpoints[0].state, (s) => s === "revoked")
    await poll(async () => sockets().length, (n) => n === 0, 5_000, 20)
    expect(listeningUnix()).not.toContain(live[0]!)
    expect(await connectAsRoot(live[0]!)).toBe("ENOENT")
  })

  it("a preview's bridge closes when the preview expires, cutting what goes through it", async () => {
    const preview = await (await emulatorCall("GET", `/sandbox/${resourceId}/ports/8001/signed-preview-url?expiresInSeconds=5`)).json() as { url: string }
    const expiresAt = Date.now() + 5_000
    const download = await startSlowDownload(`${preview.url}/`)
    const live = sockets()
    expect(live).toHaveLength(1)
    await expectCut(download, expiresAt, 3_000)
    await poll(async () => sockets().length, (n) => n === 0, 5_000, 20)
    expect(listeningUnix()).not.toContain(live[0]!)
    expect((await fetch(`${preview.url}/hello`)).status).toBe(404)
  })

  it("stopping the sandbox closes its bridges (cutting their connections); deleting it leaves none", async () => {
    const preview = await (await emulatorCall("GET", `/sandbox/${resourceId}/ports/8002/signed-preview-url?expiresInSeconds=600`)).json() as { url: string }
    const download = await startSlowDownload(`${preview.url}/`)
    const live = sockets()
    expect(live).toHaveLength(1)
    const since = Date.now()
    expect((await emulatorCall("POST", `/sandbox/${resourceId}/stop`)).status).toBe(200)
    await expectCut(download, since, 3_000)
    expect(sockets()).toEqual([])
    expect(listeningUnix()).not.toContain(live[0]!)
    expect((await fetch(`${preview.url}/hello`)).status).toBe(502) // the sandbox is not running
    expect((await emulatorCall("POST", `/sandbox/${resourceId}/start`)).status).toBe(200)
    expect((await fetch(`${preview.url}/hello`)).status).toBe(200) // a new bridge for the same preview

    // Through the API: an endpoint's bridge is live, then the sandbox is deleted.
    await activeEndpoint(http, auth, sandbox.id, 8000)
    const before = sockets()
    expect(before.length).toBeGreaterThan(0)
    const deleted = await http.delete(`/v1/sandboxes/${sandbox.id}`, auth)
    expect((await waitOperation(http, auth, deleted.body.operation.id)).state).toBe("succeeded")
    expect(sockets()).toEqual([])
    const listening = listeningUnix()
    for (const socket of before) expect(listening).not.toContain(socket)
  })
})
