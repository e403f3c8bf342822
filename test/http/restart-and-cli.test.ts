/**
 * Data survives a restart on the same DATA_DIR; the operator CLI's contract (JSON keys, help, bad input, no
 * gateway database made by accident).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { USER_CLI_WORDS } from "../../client/src/cli.ts"
import { OPERATOR_WORDS, USER_WORDS } from "../../bin/CommandLine.ts"
import { OPERATOR_WORDS as OPERATOR_TABLE_WORDS } from "../../src/cli/Operator.ts"
import { onPostgres } from "../support/postgres.ts"
import { api, bootstrap, runCli, startServer, tempDataDir } from "../support/server.ts"

const ROOT = path.resolve(import.meta.dirname, "../..")

describe("restart", () => {
  it("keeps organizations, projects, keys, webhooks and balances across a restart", async () => {
    const dataDir = tempDataDir("restart")
    let server = await startServer({ dataDir })
    let http = api(server.url)
    // A fresh gateway says how to bootstrap it, from this checkout: the command the next line runs.
    expect(server.logs()).toMatch(new RegExp(`\n {2}DATA_DIR=${dataDir} (DATABASE_URL=\\S+ )?bun run cli bootstrap --email you@example\\.com --json\n`))
    const boot = await bootstrap(dataDir, "restart@example.com")
    const project = (await http.post(`/v1/organizations/${boot.organization_id}/projects`, { token: boot.user_token, body: { name: "Kept", slug: "kept" } })).body
    const key = (await http.post(`/v1/projects/${project.id}/api-keys`, { token: boot.user_token, body: { name: "kept-key" } })).body
    const hook = (await http.post(`/v1/organizations/${boot.organization_id}/webhooks`, { token: boot.user_token, body: { name: "h", url: "https://e.com/h" } })).body
    const before = (await http.get(`/v1/organizations/${boot.organization_id}/billing`, { token: boot.user_token })).body
    await server.stop()

    server = await startServer({ dataDir })
    http = api(server.url)
    try {
      expect(server.logs()).not.toContain("No user yet")
      expect((await http.get(`/v1/projects/${project.id}`, { token: boot.user_token })).body).toEqual(project)
      const keys = (await http.get(`/v1/projects/${project.id}/api-keys`, { token: boot.user_token })).body.api_keys
      expect(keys.map((k: any) => k.id)).toEqual([key.api_key.id])
      expect((await http.get("/v1/sandboxes", { token: key.key, project: project.id })).status).toBe(200)
      expect((await http.get("/v1/organizations", { token: boot.user_token })).body.organizations.map((o: any) => o.id)).toEqual([boot.organization_id])
      const { secret: _secret, ...hookWithoutSecret } = hook
      expect((await http.get(`/v1/organizations/${boot.organization_id}/webhooks/${hook.id}`, { token: boot.user_token })).body).toEqual(hookWithoutSecret)
      expect((await http.get(`/v1/organizations/${boot.organization_id}/billing`, { token: boot.user_token })).body).toEqual(before)
    } finally {
      await server.stop()
    }
  }, 180_000) // two gateway starts and a CLI run
})

describe("CLI", () => {
  it("the command line knows every command's first word (it loads a kind's modules only for its words)", () => {
    expect([...OPERATOR_WORDS].sort()).toEqual([...OPERATOR_TABLE_WORDS].sort())
    expect([...USER_WORDS].sort()).toEqual([...USER_CLI_WORDS].sort())
  })

  it("refuses a DATA_DIR that holds no gateway database unless told --init, saying which and why", async () => {
    const dataDir = path.join(tempDataDir("cli-none"), "data")
    const refused = await runCli(dataDir, ["bootstrap", "--email", "cli@example.com", "--json"])
    expect(refused.code).toBe(1)
    expect(refused.stdout).toBe("")
    // On the PostgreSQL run the database is DATABASE_URL's (one per DATA_DIR, empty until migrated).
    expect(refused.stderr).toContain(onPostgres() ? "DATABASE_URL postgres" : `DATA_DIR ${dataDir}`)
    expect(refused.stderr).toContain("holds no gateway database")
    expect(refused.stderr).toContain("--init")
    // Nothing was created: not the directory, not an empty database.
    expect(fs.existsSync(dataDir)).toBe(false)
    // Without DATA_DIR at all: the default ./data of the working directory, said so.
    const unset = Bun.spawnSync(["bun", "run", path.join(ROOT, "bin/cli.ts"), "users", "create", "--email", "u@example.com"], {
      cwd: tempDataDir("cli-cwd"),
      env: Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== "DATA_DIR" && name !== "DATABASE_URL"))
    })
    expect(unset.exitCode).toBe(1)
    expect(unset.stderr.toString()).toContain("DATA_DIR is not set, so ./data of this directory was used")
    expect((await runCli(dataDir, ["users", "create", "--email", "u@example.com", "--init"])).code).toBe(0)
    if (!onPostgres()) expect(fs.statSync(path.join(dataDir, "gateway.sqlite")).size).toBeGreaterThan(0)
    expect((await runCli(dataDir, ["users", "create", "--email", "v@example.com"])).code).toBe(0)
  })

  it("bootstrap --json prints exactly the documented keys and reuses the user, organization and project", async () => {
    const dataDir = tempDataDir("cli")
    const first = await runCli(dataDir, ["bootstrap", "--email", "cli@example.com", "--json", "--init"])
    expect(first.code).toBe(0)
    const a = JSON.parse(first.stdout)
    expect(Object.keys(a).sort()).toEqual(["api_key", "organization_id", "project_id", "user_id", "user_token"])
    expect(a.user_token).toMatch(/^metal_ut_/)
    expect(a.api_key).toMatch(/^metal_sk_[A-Za-z0-9_-]{43}$/)
    const b = JSON.parse((await runCli(dataDir, ["bootstrap", "--email", "CLI@example.com", "--json"])).stdout)
    expect([b.user_id, b.organization_id, b.project_id]).toEqual([a.user_id, a.organization_id, a.project_id])
    expect(b.api_key).not.toBe(a.api_key)
  })

  it("has --help for the CLI and each command, and fails clearly on bad input", async () => {
    const dataDir = tempDataDir("cli-help")
    expect((await runCli(dataDir, ["users", "create", "--email", "t@example.com", "--init"])).code).toBe(0)
    // Independent invocations run side by side: each is its own process on the same DATA_DIR.
    const cases: Array<{ args: Array<string>; code: number; out: "stdout" | "stderr"; text: string }> = [
      { args: ["--help"], code: 0, out: "stdout", text: "Usage: bun run cli <command>" },
      ...[["bootstrap"], ["users", "create"], ["tokens", "create"], ["tokens", "revoke"], ["credits", "grant"]].map((command) => ({ args: [...command, "--help"], code: 0, out: "stdout" as const, text: `Usage: bun run cli ${command.join(" ")}` })),
      { args: [], code: 2, out: "stdout", text: "Usage: bun run cli <command>" },
      { args: ["frobnicate"], code: 2, out: "stderr", text: "unknown command" },
      { args: ["users", "frobnicate"], code: 2, out: "stderr", text: "Usage: bun run cli users create" },
      { args: ["--version"], code: 0, out: "stdout", text: "sandbox-gateway " },
      { args: ["serve", "now"], code: 2, out: "stderr", text: "serve takes no arguments" },
      { args: ["bootstrap", "--json"], code: 1, out: "stderr", text: "--email is required" },
      { args: ["bootstrap", "--email", "not-an-email"], code: 1, out: "stderr", text: "must be an email address" },
      { args: ["bootstrap", "--email", "a@b.co", "--bogus"], code: 2, out: "stderr", text: "unknown option: --bogus" },
      { args: ["bootstrap", "now", "--email", "a@b.co"], code: 2, out: "stderr", text: "unexpected argument: now" },
      { args: ["tokens", "create", "--email", "a@b.co", "--name"], code: 2, out: "stderr", text: "--name needs a value" },
      { args: ["tokens", "create", "--email", "ghost@example.com"], code: 1, out: "stderr", text: "no user" },
      { args: ["tokens", "create", "--email", "t@example.com", "--expires-in", "2w"], code: 1, out: "stderr", text: "--expires-in must be one of" },
      { args: ["tokens", "create", "--email", "t@example.com", "--name", "x".repeat(121)], code: 1, out: "stderr", text: "--name must be 1-120" },
      { args: ["tokens", "revoke"], code: 1, out: "stderr", text: "give --id or --token" },
      { args: ["credits", "grant", "--org", "nope", "--amount-usd", "abc"], code: 1, out: "stderr", text: "--amount-usd must be dollars" }
    ]
    const results = await Promise.all(cases.map((c) => runCli(dataDir, c.args)))
    for (const command of ["bootstrap", "users create", "tokens create", "tokens revoke", "credits grant"]) expect(results[0]!.stdout).toContain(command)
    cases.forEach((c, i) => {
      const r = results[i]!
      expect({ args: c.args, code: r.code, has: r[c.out].includes(c.text) }).toEqual({ args: c.args, code: c.code, has: true })
    })
    // Bad flags are told as such before the database is opened: here a DATA_DIR with none at all.
    const empty = tempDataDir("cli-no-db")
    for (const [args, text] of [[["tokens", "revoke"], "give --id or --token"], [["credits", "grant", "--org", "x", "--amount-usd", "0"], "must not be zero"], [["bootstrap", "--email", "nope"], "must be an email address"]] as const) {
      const r = await runCli(empty, args)
      expect({ args, code: r.code, told: r.stderr.includes(text), database: r.stderr.includes("holds no gateway database") }).toEqual({ args, code: 1, told: true, database: false })
    }
    const token = JSON.parse((await runCli(dataDir, ["tokens", "create", "--email", "t@example.com", "--expires-in", "1h", "--json"])).stdout)
    expect(Object.keys(token).sort()).toEqual(["expires_at", "token", "token_id", "user_id"])
    expect(token.token).toMatch(/^metal_ut_[A-Za-z0-9_-]{43}$/)
    expect(Date.parse(token.expires_at) - Date.now()).toBeGreaterThan(3500_000)
    expect((await runCli(dataDir, ["tokens", "revoke", "--id", token.token_id])).code).toBe(0)
    const again = await runCli(dataDir, ["tokens", "revoke", "--id", token.token_id])
    expect([again.code, again.stderr.includes("no live token")]).toEqual([1, true])
  }, 180_000) // twenty-odd program starts, side by side
})
