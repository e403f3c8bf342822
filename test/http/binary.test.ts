/**
 * `bun run build` makes one self-contained binary that starts the server like `bun run start` and carries every
 * command: it says on start how to bootstrap it, bootstraps itself, answers --help and --version, and never
 * serves on a word it does not know.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { databaseEnv, onPostgres } from "../support/postgres.ts"
import { api, startServer, tempDataDir } from "../support/server.ts"

let outfile: string

beforeAll(() => {
  outfile = path.join(tempDataDir("bin"), "sandbox-gateway")
  const build = Bun.spawnSync(["bun", "build", "--compile", "--minify", "bin/main.ts", "--outfile", outfile], { cwd: path.resolve(import.meta.dirname, "../..") })
  if (build.exitCode !== 0) throw new Error(build.stderr.toString())
}, 120_000)

/** Runs the binary from a directory outside the checkout (nothing may be read from it). */
const binary = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const cwd = tempDataDir("bin-cwd")
  const child = Bun.spawn([outfile, ...args], { cwd, env: { ...process.env, HOME: os.tmpdir(), ...env }, stdin: "ignore", stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { code, stdout, stderr, cwd }
}

describe("compiled binary", () => {
  it("serves a fresh DATA_DIR with no arguments, says how to bootstrap it, bootstraps itself, and serves the dashboard at /", async () => {
    const dataDir = tempDataDir("bin-data")
    const server = await startServer({ dataDir, command: [outfile], env: { HOME: os.tmpdir() } })
    try {
      const http = api(server.url)
      expect((await http.get("/ready")).body).toMatchObject({ status: "ready", checks: { database: "ok" } })
      expect((await http.get("/docs")).status).toBe(200)
      // The banner: where everything is, and the command that makes the first user, for this binary and DATA_DIR.
      const logs = server.logs()
      expect(logs).toContain(`API        ${server.url}/v1`)
      expect(logs).toContain(`Docs       ${server.url}/docs`)
      expect(logs).toContain(`Dashboard  ${server.url}/`)
      expect(logs).toContain(`Endpoints  ${server.endpointUrl}`)
      const command = /^ {2}(DATA_DIR=.* bootstrap --email you@example\.com --json)$/m.exec(logs)?.[1]
      expect(command).toEqual(onPostgres() ? expect.stringMatching(new RegExp(`^DATA_DIR=${dataDir} DATABASE_URL=\\S+ ${outfile} bootstrap`)) : `DATA_DIR=${dataDir} ${outfile} bootstrap --email you@example.com --json`)
      // GET / is the front door: the dashboard, embedded in the binary (HEAD too); other methods are the API's 404.
      const front = await fetch(`${server.url}/`, { redirect: "manual" })
      expect([front.status, front.headers.get("content-type")]).toEqual([200, "text/html; charset=utf-8"])
      expect(front.headers.get("x-request-id")).toMatch(/.+/)
      const script = /<script[^>]* src="(\/assets\/[^"]+\.js)"/.exec(await front.text())?.[1]
      expect((await fetch(`${server.url}${script}`)).status).toBe(200)
      expect((await fetch(`${server.url}/`, { method: "HEAD", redirect: "manual" })).status).toBe(200)
      expect((await http.post("/")).status).toBe(404)

      // The printed command, run as printed (the binary's own operator commands).
      const booted = await binary(["bootstrap", "--email", "binary@example.com", "--json"], { DATA_DIR: dataDir, ...databaseEnv(dataDir) })
      expect(booted.code, booted.stderr).toBe(0)
      const boot = JSON.parse(booted.stdout)
      expect((await http.get("/v1/organizations", { token: boot.user_token })).body.organizations).toHaveLength(1)
      expect((await http.get("/v1/sandboxes", { token: boot.api_key, project: boot.project_id })).status).toBe(200)
    } finally {
      await server.stop()
    }
    // With a user, no bootstrap hint.
    const again = await startServer({ dataDir, command: [outfile], env: { HOME: os.tmpdir() } })
    try {
      expect(again.logs()).toContain("Sandbox Gateway")
      expect(again.logs()).not.toContain("No user yet")
    } finally {
      await again.stop()
    }
  }, 120_000)

  it("answers --help and --version, and a word it does not know is a usage error: exit 2, no server, no DATA_DIR", async () => {
    const help = await binary(["--help"])
    expect(help.code).toBe(0)
    for (const text of ["Usage: sandbox-gateway <command>", "serve", "bootstrap --email", "users create", "tokens create", "tokens revoke", "login-link --email", "credits grant", "db copy", "login --url", "sandbox exec", "--version"]) {
      expect(help.stdout).toContain(text)
    }
    const version = await binary(["--version"])
    expect([version.code, version.stdout]).toEqual([0, `sandbox-gateway ${(await Bun.file(path.resolve(import.meta.dirname, "../../package.json")).json()).version}\n`])
    expect((await binary(["serve", "--help"])).stdout).toContain("Usage: sandbox-gateway serve")
    expect((await binary(["bootstrap", "--help"])).stdout).toContain("Usage: sandbox-gateway bootstrap --email <email>")

    // The port the server would take is held here: a binary that tried to serve would fail to bind it (and say so).
    const held = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("held") })
    try {
      for (const args of [["bootstrapp"], ["--halp"], ["serve", "now"], ["sandbox-gateway"], ["-x"]]) {
        const dataDir = path.join(tempDataDir("bin-unknown"), "data")
        const r = await binary(args, { DATA_DIR: dataDir, PORT: String(held.port), HOST: "127.0.0.1" })
        expect({ args, code: r.code, stdout: r.stdout }).toEqual({ args, code: 2, stdout: "" })
        expect(r.stderr).toContain("Usage: sandbox-gateway")
        expect(r.stderr).not.toMatch(/Listening|EADDRINUSE|in use/i)
        expect(fs.existsSync(dataDir)).toBe(false)
      }
      // An operator command on a DATA_DIR without a gateway database: refused (exit 1), nothing created.
      const dataDir = path.join(tempDataDir("bin-none"), "data")
      const refused = await binary(["users", "create", "--email", "a@example.com"], { DATA_DIR: dataDir, DATABASE_URL: "" })
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain(`DATA_DIR ${dataDir} holds no gateway database`)
      expect(fs.existsSync(dataDir)).toBe(false)
    } finally {
      held.stop(true)
    }
  }, 120_000)
})
