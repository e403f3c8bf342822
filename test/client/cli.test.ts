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

/**
 * Runs the binary in a pseudo-terminal of its own (Bun's `terminal` spawn option): what it draws is kept, keys
 * are typed, and the terminal can be resized (the CLI gets SIGWINCH).
 */
const interactive = (args: ReadonlyArray<string>, size = { cols: 80, rows: 24 }) => {
  let output = ""
  // Line ends as lines (the sandbox's terminal sends \r\n, which this local one, in raw mode as Node leaves it
  // with ONLCR on, shows as \r\r\n: the same on a screen).
  const plain = () => output.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "").replaceAll("\r", "")
  const decoder = new TextDecoder()
  const child = Bun.spawn([binary, ...args], {
    env: { ...process.env, SGW_CONFIG_DIR: configDir, TERM: "xterm" },
    terminal: { ...size, data: (_t, data) => (output += decoder.decode(data, { stream: true })) }
  })
  return {
    type: (text: string) => child.terminal!.write(text),
    resize: (cols: number, rows: number) => child.terminal!.resize(cols, rows),
    /** What was drawn, without escape sequences (bracketed paste mode, colours) and carriage returns. */
    output: () => plain(),
    waitOutput: async (pattern: RegExp) => {
      for (let i = 0; i < 2000 && !pattern.test(plain()); i++) await Bun.sleep(10)
      expect(plain()).toMatch(pattern)
    },
    /** Whether the output matches within `ms` (no failure: for a step retried until the sandbox has caught up). */
    seen: async (pattern: RegExp, ms: number) => {
      for (let waited = 0; waited < ms && !pattern.test(plain()); waited += 10) await Bun.sleep(10)
      return pattern.test(plain())
    },
    exited: async () => {
      const code = await child.exited
      child.terminal!.close()
      return code
    }
  }
}
const sha256 = (data: Uint8Array) => new Bun.CryptoHasher("sha256").update(data).digest("hex")

beforeAll(async () => {
  const dir = tempDataDir("cli-bin")
  binary = path.join(dir, "sandbox-gateway")
  const build = Bun.spawnSync(["bun", "build", "--compile", "bin/main.ts", "--outfile", binary], { cwd: path.resolve(import.meta.dirname, "../..") })
  if (build.exitCode !== 0) throw new Error(build.stderr.toString())
  configDir = path.join(tempDataDir("cli-config"), "conf")
  server = await startServer()
  owner = await bootstrap(server.dataDir, "cli@example.com")
}, 120_000)
afterAll(() => server.stop())

describe("the user CLI", () => {
  it("logs in to a profile file only its owner reads, after checking the key; the key never in argv or output", async () => {
    // A key in argv is refused before anything is sent (it would stay in the shell's history and the process list).
    const inArgv = piped(["login", "--url", server.url, "--key", owner.api_key, "--project", owner.project_id])
    expect(inArgv.code).toBe(2)
    expect(inArgv.stderr).toContain("--key-stdin")
    expect(inArgv.stdout + inArgv.stderr).not.toContain(owner.api_key)
    expect(piped(["login", "--url", server.url, `--key=${owner.api_key}`, "--project", owner.project_id]).code).toBe(2)
    // No terminal to ask on, and no --key-stdin: said so.
    const noTerminal = piped(["login", "--url", server.url, "--project", owner.project_id])
    expect(noTerminal.code).toBe(2)
    expect(noTerminal.stderr).toContain("--key-stdin")

    const wrongKey = "metal_sk_wrongwrongwrongwrongwrongwrongwrongwrong123"
    const wrong = piped(["login", "--url", server.url, "--key-stdin", "--project", owner.project_id], `${wrongKey}\n`)
    expect(wrong.code).toBe(1)
    expect(wrong.stderr).toContain("error:")
    expect(wrong.stdout + wrong.stderr).not.toContain(wrongKey)
    expect(fs.existsSync(path.join(configDir, "profiles.json"))).toBe(false)
    const ok = piped(["login", "--url", server.url, "--key-stdin", "--project", owner.project_id, "--json"], `${owner.api_key}\n`)
    expect(ok.code, ok.stderr).toBe(0)
    expect(JSON.parse(ok.stdout)).toEqual({ profile: "default", url: server.url, project_id: owner.project_id })
    expect(ok.stdout + ok.stderr).not.toContain(owner.api_key)
    // The key is kept only in the profile file, which only its owner reads, in a directory only its owner opens.
    expect(fs.statSync(path.join(configDir, "profiles.json")).mode & 0o777).toBe(0o600)
    expect(fs.statSync(configDir).mode & 0o777).toBe(0o700)
    expect(fs.readdirSync(configDir)).toEqual(["profiles.json"])
    expect(fs.readFileSync(path.join(configDir, "profiles.json"), "utf8")).toContain(owner.api_key)

    // On a terminal it asks, and what is typed is not echoed.
    const prompt = interactive(["login", "--url", server.url, "--project", owner.project_id, "--profile", "typed"])
    await prompt.waitOutput(/API key \(metal_sk_…, not shown\): $/)
    prompt.type(`${owner.api_key}\r`)
    expect(await prompt.exited()).toBe(0)
    expect(prompt.output()).toContain("logged in to")
    expect(prompt.output()).not.toContain(owner.api_key)
    expect(prompt.output()).not.toContain(owner.api_key.slice(9, 20))
    expect(JSON.parse(piped(["sandbox", "list", "--profile", "typed", "--json"]).stdout)).toHaveProperty("sandboxes")
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
    // Vercel takes no input: piping to it is refused, saying so.
    const vercel = JSON.parse(piped(["sandbox", "create", "--provider", "vercel", "--json"]).stdout)
    const refused = piped(["sandbox", "exec", vercel.id, "--", "cat"], "x")
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain("cannot take standard input")
  }, 60_000)

  it("shell: an interactive terminal in raw mode, resized with the local one, exiting with the shell's code", async () => {
    const created = piped(["sandbox", "create", "--pty", "--json"])
    expect(created.code, created.stderr).toBe(0)
    const sandbox = JSON.parse(created.stdout)
    expect(["daytona", "e2b"]).toContain(sandbox.provider) // a provider with terminals

    const shell = interactive(["sandbox", "shell", sandbox.id])
    await shell.waitOutput(/\$ $/) // the sandbox's prompt: the CLI is attached, the local terminal raw
    shell.type("stty size\r")
    await shell.waitOutput(/\n24 80\n/)
    shell.resize(100, 30)
    // SIGWINCH reaches the CLI, which resizes the sandbox's terminal: asked again until it has (a loaded host is slow).
    let resized = false
    for (let tries = 0; tries < 20 && !resized; tries++) {
      shell.type("stty size\r")
      resized = await shell.seen(/\n30 100\n/, 500)
    }
    expect(resized).toBe(true)
    // Raw mode: each key goes to the sandbox as it is typed (echoed there, once), ^C included — sent once the
    // sleep runs (it says so first).
    shell.type("echo sleep-$((2+3)); sleep 30\r")
    await shell.waitOutput(/\nsleep-5\n/)
    await Bun.sleep(100)
    shell.type("\x03")
    await shell.waitOutput(/\^C\n[^\n]*\$ $/) // the sleep was interrupted: a new prompt
    shell.type("echo hi-$((1+1))\r")
    await shell.waitOutput(/\nhi-2\n/)
    expect(shell.output().match(/echo hi-\$\(\(1\+1\)\)/g)).toHaveLength(1)
    shell.type("exit 3\r")
    expect(await shell.exited()).toBe(3)

    // A command instead of the shell; the local terminal is back in its own mode afterwards.
    const script = interactive(["sandbox", "shell", sandbox.id, "--", "sh", "-c", "read x; echo got-$x; exit 0"])
    script.type("yes\r")
    await script.waitOutput(/got-yes/)
    expect(await script.exited()).toBe(0)
    const wrapped = Bun.spawnSync(["script", "-qec", `${quote(binary)} sandbox shell ${sandbox.id} -- true; stty -a`, "/dev/null"], { env: { ...process.env, SGW_CONFIG_DIR: configDir } })
    expect(wrapped.stdout.toString()).toMatch(/ icanon .* echo /s)

    // Piped input (no terminal): typed as it comes, its end a ^D; --json leaves stdout to the result.
    const fed = piped(["sandbox", "shell", sandbox.id, "--json", "--", "sh", "-c", "read x; echo got-$x; exit 5"], "fed\n")
    expect(fed.code).toBe(5)
    expect(JSON.parse(fed.stdout)).toMatchObject({ state: "failed", exit_code: 5 })
    expect(fed.stderr).toContain("got-fed")
    // Modal has no terminals: said so, exit 1.
    const modal = JSON.parse(piped(["sandbox", "create", "--provider", "modal", "--json"]).stdout)
    const refused = piped(["sandbox", "shell", modal.id])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain("error:")
  }, 120_000)

  it("cp moves a 24 MiB file both ways, in pieces of the provider's largest write (10 MiB: three), with a progress bar on a terminal", async () => {
    const sandbox = JSON.parse(piped(["sandbox", "create", "--provider", "daytona", "--json"]).stdout)
    const dir = tempDataDir("cli-cp-big")
    const local = path.join(dir, "big.bin")
    const data = Buffer.alloc(24 * 1024 * 1024 + 123)
    for (let i = 0; i < data.length; i += 65536) crypto.getRandomValues(data.subarray(i, Math.min(i + 65536, data.length)))
    fs.writeFileSync(local, data)

    const up = tty(["sandbox", "cp", local, `${sandbox.id}:/workspace/in/`])
    expect(up.code, up.output).toBe(0)
    expect(up.output).toContain("24.0/24.0 MiB")
    const inside = piped(["sandbox", "exec", sandbox.id, "--json", "--", "sh", "-c", "sha256sum /workspace/in/big.bin; ls -a /workspace/in"])
    expect(JSON.parse(inside.stdout).stdout).toBe(`${sha256(data)}  /workspace/in/big.bin\n.\n..\nbig.bin\n`) // no pieces left behind

    const back = path.join(dir, "back.bin")
    const down = piped(["sandbox", "cp", `${sandbox.id}:/workspace/in/big.bin`, back, "--json"])
    expect(down.code, down.stderr).toBe(0)
    expect(JSON.parse(down.stdout)).toEqual({ from: `${sandbox.id}:/workspace/in/big.bin`, to: back, size_bytes: data.length })
    expect(down.stderr).toBe("") // no progress bar off a terminal
    expect(sha256(fs.readFileSync(back))).toBe(sha256(data))
    // Into a local directory: the file's own name; the progress bar on a terminal.
    const shown = tty(["sandbox", "cp", `${sandbox.id}:/workspace/in/big.bin`, dir])
    expect(shown.output).toContain("24.0/24.0 MiB")
    expect(sha256(fs.readFileSync(path.join(dir, "big.bin")))).toBe(sha256(data))
    expect(fs.readdirSync(dir).sort()).toEqual(["back.bin", "big.bin"])

    const json = piped(["sandbox", "cp", local, `${sandbox.id}:/workspace/again.bin`, "--json"])
    expect(JSON.parse(json.stdout)).toEqual({ from: local, to: `${sandbox.id}:/workspace/again.bin`, size_bytes: data.length, pieces: 3 })
    expect(piped(["sandbox", "cp", `${sandbox.id}:/workspace/missing.bin`, path.join(dir, "x")]).stderr).toContain("(file_not_found)")
    expect(fs.existsSync(path.join(dir, "x"))).toBe(false)
  }, 180_000)

  it("says what is wrong and exits non-zero", () => {
    const missing = piped(["sandbox", "get", "sbx_00000000000000000000000000"])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain("(not_found)")
    expect(piped(["sandbox", "exec", "sbx_abc"]).code).toBe(2)
    expect(piped(["sandbox", "cp", "a", "b"]).stderr).toContain("one side is <id>:/path")
    expect(piped(["sandbox", "frobnicate"]).code).toBe(2)
    // The envelope's message and code, never a schema dump.
    const unknownProvider = piped(["sandbox", "create", "--provider", "nope"])
    expect(unknownProvider.code).toBe(1)
    expect(unknownProvider.stderr).toBe("error: provider must be one of: blaxel, cloudflare, codesandbox, daytona, e2b, freestyle, modal, northflank, prime, runloop, vercel, auto (validation_error)\n")
  })
})
