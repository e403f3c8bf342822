/**
 * The TypeScript client as a package (issue 24 item 7): `npm pack` in client/ builds it (ESM and declarations) into
 * a tarball; a fresh project outside the checkout installs that tarball and its peers offline (their tarballs are
 * made from the checkout's node_modules: no registry), then the first script of docs/clients/typescript.md creates
 * a sandbox, runs commands, writes and reads a file, meets a typed error and destroys the sandbox, under Node and
 * under Bun; and a TypeScript file that uses the package type-checks there, so the contract's types came with it
 * and nothing of the checkout is needed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { bootstrap, type RunningServer, startServer } from "../support/server.ts"

const ROOT = path.resolve(import.meta.dirname, "../..")
const PEERS = ["effect", "@effect/platform"]

let server: RunningServer
let credentials: { apiKey: string; projectId: string }
let scratch: string
let app: string
/** A second project that installed the package from its directory (`npm install --install-links <dir>`). */
let fromPath: string

/**
 * PATH without Bun's stand-in for node (`bun --bun` puts one first), so `node` and npm run on the real Node.
 */
const PATH = (process.env["PATH"] ?? "").split(":").filter((dir) => {
  const node = path.join(dir, "node")
  return !fs.existsSync(node) || !path.basename(fs.realpathSync(node)).startsWith("bun")
}).join(":")

/**
 * Runs a command to its end. npm never looks for a newer npm (a request off this machine); a command that has not
 * ended within `timeoutMs` is killed, and the error names it with what it said (not only the hook's timeout).
 */
const run = async (command: ReadonlyArray<string>, cwd: string, env: Record<string, string> = {}, timeoutMs = 150_000) => {
  const [program, ...args] = command
  const child = Bun.spawn([Bun.which(program!, { PATH }) ?? program!, ...args], {
    cwd,
    env: { ...process.env, PATH, NPM_CONFIG_UPDATE_NOTIFIER: "false", ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    child.kill("SIGKILL")
  }, timeoutMs)
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  clearTimeout(timer)
  const how = timedOut ? `did not end within ${timeoutMs / 1000} s` : `exited ${code}`
  if (timedOut || code !== 0) throw new Error(`${command.join(" ")} ${how}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`)
  return stdout
}

/** The directory a package resolves to from `from` (node_modules nested first, then the checkout's). */
const packageDir = (name: string, from: string) => {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "node_modules", name)
    if (fs.existsSync(path.join(candidate, "package.json"))) return candidate
    if (dir === ROOT || dir === path.dirname(dir)) throw new Error(`${name} is not installed under ${from}`)
  }
}

/**
 * Tarballs of the peers and of everything they depend on, made from the installed copies (what npm would fetch);
 * optional dependencies are left out, as npm leaves them out when they cannot be had.
 */
const packPeers = async (into: string) => {
  const seen = new Set<string>()
  const tarballs: Array<string> = []
  const visit = async (name: string, from: string) => {
    const dir = packageDir(name, from)
    if (seen.has(dir)) return
    seen.add(dir)
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as { version: string; dependencies?: Record<string, string> }
    const tarball = path.join(into, `${name.replace("/", "-").replace("@", "")}-${manifest.version}.tgz`)
    await run(["tar", "-czf", tarball, "--exclude=./node_modules", "--transform=s,^\\.,package,", "-C", dir, "."], into)
    tarballs.push(tarball)
    for (const dependency of Object.keys(manifest.dependencies ?? {})) await visit(dependency, dir)
  }
  for (const peer of PEERS) await visit(peer, ROOT)
  return tarballs
}

/** The first script of docs/clients/typescript.md, as it is there: the docs' example is what runs here. */
const SCRIPT = (() => {
  const doc = fs.readFileSync(path.join(ROOT, "docs/clients/typescript.md"), "utf8")
  const block = /<!-- tested: test\/client\/package\.test\.ts -->\n```js\n([\s\S]*?)\n```/.exec(doc)
  if (block === null) throw new Error("docs/clients/typescript.md has no example marked <!-- tested: test/client/package.test.ts -->")
  return block[1]!
})()

/** Uses the package's types: a mistake in a create request (a wrong source kind) must be a type error. */
const TYPED = `
import { createClient, GatewayError, type ExecResult, type SandboxRecord } from "@sandbox-gateway/client"
const gw = createClient({ baseUrl: "http://127.0.0.1:8080", apiKey: "metal_sk_x", projectId: "prj_x" })
export const use = async (): Promise<number | null> => {
  const sandbox = await gw.sandboxes.create({ source: { kind: "environment", environment: "metal/base" }, resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 60 } })
  const state: SandboxRecord["state"] = sandbox.record.state
  const result: ExecResult = await sandbox.exec(["true"])
  try {
    await sandbox.files.read("/x")
  } catch (e) {
    if (e instanceof GatewayError) console.log(e.code, e.status, e.retryable, state)
  }
  // @ts-expect-error the contract's types came with the package: there is no source kind "nope"
  await gw.sandboxes.create({ source: { kind: "nope" }, resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 60 } })
  return result.exitCode
}
`

beforeAll(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-client-package-"))
  // Kept as soon as it runs, so that afterAll stops it even when the packing beside it fails or hangs.
  const [started] = await Promise.all([
    startServer().then((s) => (server = s)),
    (async () => {
      // npm pack runs the package's prepack: the build.
      const packed = (await run(["npm", "pack", "--silent", "--pack-destination", scratch], path.join(ROOT, "client"))).trim().split("\n").pop()!
      const peers = await packPeers(scratch)
      app = path.join(scratch, "app")
      fs.mkdirSync(app)
      fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }))
      // Offline, with a cache of its own: everything comes from the tarballs.
      const install = ["npm", "install", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--cache", path.join(scratch, "npm-cache")]
      await run([...install, path.join(scratch, packed), ...peers], app)
      // From the directory, built by the pack above: --install-links copies it as a tarball would.
      fromPath = path.join(scratch, "from-path")
      fs.mkdirSync(fromPath)
      fs.writeFileSync(path.join(fromPath, "package.json"), JSON.stringify({ name: "from-path", private: true, type: "module" }))
      await run([...install, "--install-links", path.join(ROOT, "client"), ...peers], fromPath)
    })()
  ])
  server = started
  const owner = await bootstrap(server.dataDir, "client-package@example.com")
  credentials = { apiKey: owner.api_key, projectId: owner.project_id }
  fs.writeFileSync(path.join(app, "agent.mjs"), SCRIPT)
}, 480_000)
afterAll(async () => {
  await server?.stop()
  if (scratch !== undefined) fs.rmSync(scratch, { recursive: true, force: true })
})

describe("the TypeScript client as a package", () => {
  it("installs from its tarball alone: built JavaScript and declarations, no source, the peers as peers", () => {
    const installed = path.join(app, "node_modules/@sandbox-gateway/client")
    const manifest = JSON.parse(fs.readFileSync(path.join(installed, "package.json"), "utf8"))
    expect(manifest.peerDependencies).toEqual({ effect: expect.any(String), "@effect/platform": expect.any(String) })
    expect(fs.existsSync(path.join(installed, "src"))).toBe(false)
    expect(fs.existsSync(path.join(installed, manifest.exports["."].import))).toBe(true)
    expect(fs.existsSync(path.join(installed, manifest.exports["."].types))).toBe(true)
    // The bundle imports only its peers: none of the gateway's server code (SQL, the credential store) came along.
    const bundle = fs.readFileSync(path.join(installed, manifest.exports["."].import), "utf8")
    const imports = new Set([...bundle.matchAll(/^import .* from "([^"]+)";?$/gm)].map((m) => m[1]!.split("/").slice(0, m[1]!.startsWith("@") ? 2 : 1).join("/")))
    expect([...imports].sort()).toEqual(["@effect/platform", "effect"])
  })

  it("installs from its directory too (--install-links): a copy, not a link into the checkout", async () => {
    const installed = path.join(fromPath, "node_modules/@sandbox-gateway/client")
    expect(fs.lstatSync(installed).isSymbolicLink()).toBe(false)
    expect(fs.existsSync(path.join(installed, "src"))).toBe(false)
    const output = await run(["node", "--input-type=module", "-e", `import { createClient, GatewayError } from "@sandbox-gateway/client"; console.log(typeof createClient, typeof GatewayError)`], fromPath)
    expect(output).toBe("function function\n")
  }, 120_000)

  for (const runtime of ["node", "bun"] as const) {
    it(`runs the docs' first script: a sandbox, commands with live output, a file, a typed error, destroyed (${runtime})`, async () => {
      const output = await run([runtime, "agent.mjs"], app, { GW: server.url, KEY: credentials.apiKey, PRJ: credentials.projectId })
      expect(output.split("\n")).toEqual(["0 42", "tick 1", "tick 2", "tick 3", `hello from ${runtime}`, "file_not_found 404 false", "stopped", ""])
    }, 120_000)
  }

  it("on Node 20 (no global WebSocket) a terminal asks for a WebSocket to be passed instead of failing obscurely", async () => {
    const check = `
      import { createClient } from "@sandbox-gateway/client"
      const gw = createClient({ baseUrl: process.env.GW, apiKey: process.env.KEY, projectId: process.env.PRJ })
      const sandbox = await gw.sandboxes.create({ source: { kind: "environment", environment: "metal/base" }, resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 600 } })
      try {
        await sandbox.attach("proc_any")
        console.log("attached")
      } catch (e) {
        console.log(e.code, e.message)
      } finally {
        await sandbox.destroy()
      }
    `
    fs.writeFileSync(path.join(app, "no-websocket.mjs"), check)
    const env = { GW: server.url, KEY: credentials.apiKey, PRJ: credentials.projectId }
    const hasWebSocket = (await run(["node", "-e", "console.log(typeof WebSocket)"], app)).trim() !== "undefined"
    // Where the Node here has one (22 and later), the same is asked of it without: --no-experimental-websocket.
    const output = await run(["node", ...(hasWebSocket ? ["--no-experimental-websocket"] : []), "no-websocket.mjs"], app, env)
    expect(output).toMatch(/^client_error No WebSocket here to attach a terminal with: pass createClient's `webSocket`/)
  }, 120_000)

  it("its declarations type-check a project that uses it (Node's module resolution), the contract's types included", async () => {
    fs.writeFileSync(path.join(app, "use.ts"), TYPED)
    fs.writeFileSync(path.join(app, "tsconfig.json"), JSON.stringify({
      compilerOptions: { target: "ES2022", lib: ["ES2023", "DOM"], module: "nodenext", moduleResolution: "nodenext", strict: true, noEmit: true, skipLibCheck: false, types: [] },
      files: ["use.ts"]
    }))
    await run([path.join(ROOT, "node_modules/.bin/tsc"), "-p", "tsconfig.json"], app)
  }, 120_000)
})
