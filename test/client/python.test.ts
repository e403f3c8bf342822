/**
 * The Python client (clients/python, issue 24 item 7) against a real gateway: a virtual environment on Debian's
 * python3 (its python3-httpx and python3-pytest visible through --system-site-packages), the package installed
 * into it by Debian's pip from a copy of its source, offline (--no-index: no PyPI), then its pytest suite
 * (clients/python/tests), one file per test here, importing the installed package.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { bootstrap, type RunningServer, startServer } from "../support/server.ts"

const ROOT = path.resolve(import.meta.dirname, "../..")
const SOURCE = path.join(ROOT, "clients/python")
/** Debian's interpreter, whatever else is first on PATH (a pyenv shim would not see Debian's packages). */
const PYTHON = "/usr/bin/python3"

let server: RunningServer
let scratch: string
let venvPython: string
let env: Record<string, string>

const run = async (command: ReadonlyArray<string>, cwd: string, extra: Record<string, string> = {}) => {
  const { PYTHONPATH: _path, PYTHONHOME: _home, VIRTUAL_ENV: _venv, ...inherited } = process.env
  const child = Bun.spawn([...command], { cwd, env: { ...inherited, PYTHONDONTWRITEBYTECODE: "1", ...extra }, stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { code, stdout, stderr }
}

const must = async (command: ReadonlyArray<string>, cwd: string) => {
  const result = await run(command, cwd)
  if (result.code !== 0) throw new Error(`${command.join(" ")} exited ${result.code}\n${result.stdout}\n${result.stderr}`)
  return result
}

beforeAll(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-python-client-"))
  const [started] = await Promise.all([
    startServer(),
    (async () => {
      // A copy: pip builds in the source tree, and the checkout stays as it is.
      const copy = path.join(scratch, "src")
      fs.cpSync(SOURCE, copy, { recursive: true, filter: (p) => !/(__pycache__|\.egg-info|\/build)$/.test(p) })
      // Without a pip of its own (seeding one costs more than the install): Debian's pip installs into it.
      await must([PYTHON, "-m", "venv", "--system-site-packages", "--without-pip", path.join(scratch, "venv")], scratch)
      venvPython = path.join(scratch, "venv/bin/python")
      await must([PYTHON, "-m", "pip", "--python", venvPython, "install", "--quiet", "--no-index", "--no-build-isolation", "--disable-pip-version-check", copy], scratch)
    })()
  ])
  server = started
  const owner = await bootstrap(server.dataDir, "python-client@example.com")
  // The type check's cache in the checkout's .tmp/ (git-ignored), kept from one run to the next.
  const mypyCache = path.join(ROOT, ".tmp/mypy-cache")
  env = { SGW_URL: server.url, SGW_API_KEY: owner.api_key, SGW_PROJECT: owner.project_id, SGW_SOURCE: SOURCE, SGW_MYPY_CACHE: mypyCache }
}, 300_000)
afterAll(async () => {
  await server?.stop()
  if (scratch !== undefined) fs.rmSync(scratch, { recursive: true, force: true })
})

describe("the Python client", () => {
  const files = fs.readdirSync(path.join(SOURCE, "tests")).filter((f) => /^test_.*\.py$/.test(f)).sort()

  it("has its suite", () => {
    expect(files).toEqual(["test_async.py", "test_errors.py", "test_package.py", "test_sync.py"])
  })

  // The files at once: the type check (CPU) overlaps the suites that mostly wait on sandboxes.
  for (const file of files) {
    it.concurrent(`tests/${file}`, async () => {
      // Run from the scratch directory, so `import sandbox_gateway` finds the installed package, not the source.
      const result = await run([venvPython, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE", path.join(SOURCE, "tests", file)], scratch, env)
      if (result.code !== 0) throw new Error(`pytest ${file} exited ${result.code}\n${result.stdout.slice(-8000)}\n${result.stderr.slice(-2000)}`)
      expect(result.stdout).toMatch(/\d+ passed/)
      expect(result.stdout).not.toMatch(/failed|error/)
    }, 300_000)
  }
})
