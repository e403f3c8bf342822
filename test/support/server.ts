/**
 * Real servers for tests: the gateway as a child process (the run's bundle of bin/main.ts, see bundle-global-setup.ts) on a free loopback port with
 * its own DATA_DIR (a real SQLite file; on the PostgreSQL run, a database of its own: test/support/postgres.ts),
 * and the CLI as a child process against the same DATA_DIR.
 */
import { Database } from "bun:sqlite"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { databaseFile } from "../../src/db/Sql.ts"
import { testDns } from "./dns.ts"
import { databaseEnv } from "./postgres.ts"

const ROOT = path.resolve(import.meta.dirname, "../..")

/**
 * How a test runs the program: the run's bundle of the entry (test/support/bundle-global-setup.ts) when there is one,
 * else its source (a script outside vitest, such as the bench).
 */
const program = (entry: "main" | "cli"): Array<string> => {
  const bundle = process.env["SGW_TEST_BUNDLE"]
  return bundle === undefined ? ["bun", "run", path.join(ROOT, `bin/${entry}.ts`)] : ["bun", path.join(bundle, `${entry}.js`)]
}

export const tempDataDir = (label = "gw"): string => fs.mkdtempSync(path.join(os.tmpdir(), `sgw-${label}-`))

export interface RunningServer {
  readonly url: string
  /** The endpoint listener's own address (endpoints are never served on the API's origin). */
  readonly endpointUrl: string
  readonly dataDir: string
  readonly pid: number
  readonly logs: () => string
  /**
   * SIGTERM and wait for exit, then destroy the sandboxes' jails (they outlive the gateway by design, so a test
   * must clean them up). `{ kill: true }` is a SIGKILL, and like `{ keepJails: true }` leaves the jails running
   * for a restart on the same DATA_DIR.
   */
  readonly stop: (options?: { readonly kill?: boolean; readonly keepJails?: boolean }) => Promise<void>
}

export const startServer = async (
  options: { readonly dataDir?: string; readonly env?: Record<string, string>; readonly command?: ReadonlyArray<string> } = {}
): Promise<RunningServer> => {
  const dataDir = options.dataDir ?? tempDataDir()
  // Webhook and registry host names are resolved by the test's own DNS server, never by a real resolver.
  const dns = await testDns()
  let output = ""
  const child = Bun.spawn(options.command ? [...options.command] : program("main"), {
    // A given command (the compiled binary) runs outside the checkout, so it cannot lean on it.
    cwd: options.command ? dataDir : ROOT,
    // No warm jails unless a test asks (RUNTIME_WARM_POOL), and no growth with demand unless it asks for that too
    // (RUNTIME_WARM_POOL_MAX): a test server's spares are started, never used, and destroyed, CPU the suite cannot
    // spare; the tests of the pool itself set them.
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "warning", RUNTIME_WARM_POOL: "0", RUNTIME_WARM_POOL_MAX: "0", WEBHOOK_DNS_SERVERS: dns.server, REGISTRY_DNS_SERVERS: dns.server, ...databaseEnv(dataDir), ...options.env },
    stdout: "pipe",
    stderr: "pipe"
  })
  const decoder = new TextDecoder()
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream) output += decoder.decode(chunk)
  }
  void pump(child.stdout)
  void pump(child.stderr)
  // Generous: on a loaded machine (CI on 2 cores, other suites' jails) a start can take tens of seconds.
  const deadline = Date.now() + 60_000
  let url: string | undefined
  let endpointUrl: string | undefined
  while (url === undefined || endpointUrl === undefined) {
    const match = /Listening on (http:\/\/[^\s]+)/.exec(output)
    const endpoints = /Serving endpoints on (http:\/\/[^\s]+)/.exec(output)
    if (match?.[1] !== undefined && endpoints?.[1] !== undefined) {
      url = match[1].replace(/\/$/, "")
      endpointUrl = endpoints[1].replace(/\/$/, "")
    }
    else if (child.exitCode !== null) throw new Error(`server exited early (${child.exitCode}):\n${output}`)
    else if (Date.now() > deadline) {
      // Not left running: a server still starting on a loaded machine would load it further for the next tests.
      child.kill("SIGKILL")
      await child.exited
      await destroyJails(dataDir)
      throw new Error(`server did not start:\n${output}`)
    } else await Bun.sleep(20)
  }
  return {
    url,
    endpointUrl,
    dataDir,
    pid: child.pid,
    logs: () => output,
    stop: async (stopOptions = {}) => {
      if (child.exitCode === null) child.kill(stopOptions.kill === true ? "SIGKILL" : "SIGTERM")
      await child.exited
      if (stopOptions.kill !== true && stopOptions.keepJails !== true) await destroyJails(dataDir)
    }
  }
}

/**
 * The gateway's SQLite file opened beside its running server (as the operator's CLI would be): it waits up to 5 s
 * for the write lock the server's transactions hold instead of failing at once (bun:sqlite's default).
 */
export const openGatewayDatabase = (dataDir: string): Database => {
  const db = new Database(databaseFile(dataDir))
  db.run("PRAGMA busy_timeout = 5000")
  return db
}

/** Removes every jail under a DATA_DIR (processes, cgroups, files). */
export const destroyJails = async (dataDir: string) => {
  if (!fs.existsSync(path.join(dataDir, "sandboxes"))) return
  const { makeLocalRuntime } = await import("../../src/runtime/LocalRuntimeLive.ts")
  await Effect.runPromise(makeLocalRuntime(dataDir).reap(new Set()))
}

export interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * The program's command line (`bun run cli …`) on `dataDir`. The operator's commands refuse a DATA_DIR that holds
 * no gateway database unless given `--init`: run them once a server has started there (as `bootstrap` below is).
 */
export const runCli = async (dataDir: string, args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<CliResult> => {
  const child = Bun.spawn([...program("cli"), ...args], {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: "warning", ...databaseEnv(dataDir), ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { code, stdout, stderr }
}

export interface Bootstrap {
  readonly user_id: string
  readonly user_token: string
  readonly organization_id: string
  readonly project_id: string
  readonly api_key: string
}

/** `init`: create the gateway database when no server has made it yet (a test that runs no server). */
export const bootstrap = async (dataDir: string, email: string, options: { readonly init?: boolean } = {}): Promise<Bootstrap> => {
  const result = await runCli(dataDir, ["bootstrap", "--email", email, "--json", ...(options.init ? ["--init"] : [])])
  if (result.code !== 0) throw new Error(`bootstrap failed (${result.code}): ${result.stderr}${result.stdout}`)
  return JSON.parse(result.stdout) as Bootstrap
}

/** A small fetch wrapper: JSON in, `{ status, body, headers }` out. */
export const api = (baseUrl: string) => {
  const call = async (
    method: string,
    route: string,
    options: { readonly token?: string; readonly project?: string; readonly body?: unknown; readonly headers?: Record<string, string>; readonly rawBody?: string } = {}
  ) => {
    const headers: Record<string, string> = { ...options.headers }
    if (options.token !== undefined) headers["authorization"] = `Bearer ${options.token}`
    if (options.project !== undefined) headers["x-metal-project-id"] = options.project
    let body: string | undefined = options.rawBody
    if (options.body !== undefined) {
      body = JSON.stringify(options.body)
      headers["content-type"] ??= "application/json"
    }
    const response = await fetch(baseUrl + route, { method, headers, ...(body !== undefined ? { body } : {}) })
    const text = await response.text()
    let json: any = undefined
    try {
      json = text === "" ? undefined : JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: response.status, body: json, text, headers: response.headers }
  }
  return {
    call,
    get: (route: string, o?: Parameters<typeof call>[2]) => call("GET", route, o),
    post: (route: string, o?: Parameters<typeof call>[2]) => call("POST", route, o),
    put: (route: string, o?: Parameters<typeof call>[2]) => call("PUT", route, o),
    patch: (route: string, o?: Parameters<typeof call>[2]) => call("PATCH", route, o),
    delete: (route: string, o?: Parameters<typeof call>[2]) => call("DELETE", route, o)
  }
}

/** Asserts the error envelope shape and returns it. */
export const expectEnvelope = (response: { status: number; body: any; headers: Headers }, status: number, code?: string) => {
  const problems: Array<string> = []
  if (response.status !== status) problems.push(`status ${response.status} !== ${status}`)
  const b = response.body
  if (b === undefined || typeof b !== "object") problems.push("body is not a JSON object")
  else {
    if (typeof b.code !== "string") problems.push("code missing")
    if (code !== undefined && b.code !== code) problems.push(`code ${b.code} !== ${code}`)
    if (typeof b.message !== "string") problems.push("message missing")
    if (typeof b.request_id !== "string" || b.request_id !== response.headers.get("x-request-id")) problems.push("request_id does not match x-request-id")
    if (typeof b.retryable !== "boolean") problems.push("retryable missing")
  }
  if (problems.length > 0) throw new Error(`bad error response: ${problems.join("; ")}\n${JSON.stringify(b)}`)
  return b as { code: string; message: string; request_id: string; retryable: boolean; details?: any }
}

/**
 * A gateway for one test file: started, with an owner bootstrapped; `http` calls it, `auth` is the owner's project
 * key (the shape of test/support/sandbox.ts's KeyAuth). The caller stops `server` after its tests.
 */
export const openGateway = async (email: string, options: Parameters<typeof startServer>[0] = {}) => {
  const server = await startServer(options)
  const owner = await bootstrap(server.dataDir, email)
  return { server, http: api(server.url), owner, auth: { token: owner.api_key, project: owner.project_id } }
}
