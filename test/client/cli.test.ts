/**
 * The user CLI (issue 15 item 2) in the compiled binary, driven in a pseudo-terminal (`script`): login keeps a
 * 0600 profile, create/list/get/expose/pause/resume/rm speak to a real gateway, `exec` streams the output and
 * exits with the command's code, `cp` round-trips a file, `--json` parses, and mistakes exit non-zero with the
 * envelope's message.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bootstrap, type RunningServer, startServer, tempDataDir } from "../support/server.ts"

let server: RunningServer
let binary: string
let configDir: string
let owner: { api_key: string; project_id: string }

const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`

/** Runs the binary with `args` in a pseudo-terminal; stdout and stderr arrive together, as on a terminal. */
const tty = (args: ReadonlyArray<string>) => {
  const r = Bun.spawnSync(["script", "-qefc", [binary, ...args].map(quote).join(" "), "/dev/null"], { env: { ...process.env, SGW_CONFIG_DIR: configDir, TERM: "dumb" } })
  return { code: r.exitCode, output: r.stdout.toString().replaceAll("\r\n", "\n") }
}
/** Runs the binary without a terminal (for --json, read from a pipe). */
const piped = (args: ReadonlyArray<string>, stdin?: string) => {
  const r = Bun.spawnSync([binary, ...args], { env: { ...process.env, SGW_CONFIG_DIR: configDir }, stdin: stdin === undefined ? "ignore" : Buffer.from(stdin) })
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() }
}

beforeAll(async () => {
  const dir = tempDataDir("cli-bin")
  binary = path.join(dir, "sandbox-gateway")
  const build = Bun.spawnSync(["bun", "build", "--compile", "src/main.ts", "--outfile", binary], { cwd: path.resolve(import.meta.dirname, "../..") })
  if (build.exitCode !== 0) throw new Error(build.stderr.toString())
  configDir = path.join(tempDataDir("cli-config"), "conf")
  server = await startServer()
  owner = await bootstrap(server.dataDir, "cli@example.com")
}, 120_000)
afterAll(() => server.stop())

describe("the user CLI", () => {
  it("logs in to a profile file only its owner reads, after checking the key", () => {
    const wrong = piped(["login", "--url", server.url, "--key", "metal_sk_wrong", "--project", owner.project_id])
    expect(wrong.code).toBe(1)
    expect(wrong.stderr).toContain("error:")
    expect(fs.existsSync(path.join(configDir, "profiles.json"))).toBe(false)
    const ok = piped(["login", "--url", server.url, "--key", owner.api_key, "--project", owner.project_id, "--json"])
    expect(ok.code).toBe(0)
    expect(JSON.parse(ok.stdout)).toMatchObject({ profile: "default", project_id: owner.project_id })
    expect(fs.statSync(path.join(configDir, "profiles.json")).mode & 0o777).toBe(0o600)
    expect(fs.statSync(configDir).mode & 0o777).toBe(0o700)
    const other = piped(["sandbox", "list", "--profile", "nobody"])
    expect(other.code).toBe(2)
    expect(other.stderr).toContain('no profile "nobody"')
  })

  it("creates, lists, runs (streaming, with the command's exit code), copies, exposes, pauses, resumes and removes", async () => {
    const created = piped(["sandbox", "create", "--provider", "daytona", "--json"])
    expect(created.code, created.stderr).toBe(0)
    const sandbox = JSON.parse(created.stdout)
    expect(sandbox).toMatchObject({ state: "ready", provider: "daytona" })

    expect(tty(["sandbox", "list"]).output).toContain(sandbox.id)
    expect(JSON.parse(piped(["sandbox", "get", sandbox.id, "--json"]).stdout).id).toBe(sandbox.id)

    const exec = tty(["sandbox", "exec", sandbox.id, "--", "sh", "-c", "echo one; sleep 0.2; echo two >&2; exit 5"])
    expect(exec.code).toBe(5)
    expect(exec.output).toContain("one\ntwo\n")
    expect(tty(["sandbox", "exec", sandbox.id, "--", "true"]).code).toBe(0)

    const local = path.join(tempDataDir("cli-cp"), "blob.bin")
    const data = Buffer.alloc(9 * 1024 * 1024)
    for (let i = 0; i < data.length; i += 65536) crypto.getRandomValues(data.subarray(i, i + 65536))
    fs.writeFileSync(local, data)
    const up = tty(["sandbox", "cp", local, `${sandbox.id}:/workspace/blob.bin`])
    expect(up.code, up.output).toBe(0)
    expect(up.output).toContain("MiB") // the progress bar, on a terminal
    const back = `${local}.back`
    expect(piped(["sandbox", "cp", `${sandbox.id}:/workspace/blob.bin`, back]).code).toBe(0)
    expect(fs.readFileSync(back).equals(data)).toBe(true)

    const server8000 = Bun.spawn([binary, "sandbox", "exec", sandbox.id, "--", "python3", "-m", "http.server", "8000"], { env: { ...process.env, SGW_CONFIG_DIR: configDir }, stdin: "ignore" })
    const exposed = piped(["sandbox", "expose", sandbox.id, "8000", "--json"])
    expect(exposed.code, exposed.stderr).toBe(0)
    expect(JSON.parse(exposed.stdout)).toMatchObject({ state: "active", port: 8000 })
    server8000.kill()

    expect(piped(["sandbox", "pause", sandbox.id]).code).toBe(0)
    expect(JSON.parse(piped(["sandbox", "get", sandbox.id, "--json"]).stdout).state).toBe("paused")
    expect(piped(["sandbox", "resume", sandbox.id]).code).toBe(0)
    expect(tty(["sandbox", "rm", sandbox.id]).output).toContain("destroyed")
    expect(JSON.parse(piped(["sandbox", "get", sandbox.id, "--json"]).stdout).state).toBe("stopped")
  }, 120_000)

  it("exec forwards piped stdin to a provider that takes input; a terminal's or /dev/null's is not forwarded", async () => {
    const created = JSON.parse(piped(["sandbox", "create", "--provider", "e2b", "--json"]).stdout)
    const sum = piped(["sandbox", "exec", created.id, "--", "python3", "-c", "import sys; print(sum(int(l) for l in sys.stdin))"], "1\n2\n39\n")
    expect(sum.stderr).toBe("")
    expect(sum.stdout).toBe("42\n")
    expect(sum.code).toBe(0)
    // No input to forward: the command reads end-of-file.
    expect(piped(["sandbox", "exec", created.id, "--", "cat"]).code).toBe(0)
    // Daytona takes no input: piping to it is refused, saying so.
    const daytona = JSON.parse(piped(["sandbox", "create", "--provider", "daytona", "--json"]).stdout)
    const refused = piped(["sandbox", "exec", daytona.id, "--", "cat"], "x")
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain("cannot take standard input")
  }, 60_000)

  it("says what is wrong and exits non-zero", () => {
    const missing = piped(["sandbox", "get", "sbx_00000000000000000000000000"])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain("(not_found)")
    expect(piped(["sandbox", "exec", "sbx_abc"]).code).toBe(2)
    expect(piped(["sandbox", "cp", "a", "b"]).stderr).toContain("one side is <id>:/path")
    expect(piped(["sandbox", "frobnicate"]).code).toBe(2)
  })
})
