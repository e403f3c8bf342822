/**
 * What the gateway reads from a hostile sandbox, through the real API (issue 22): the gateway is a child process
 * (its RSS read from /proc), the sandboxes are real jails of the Daytona emulator, and the attacks are made from
 * inside them.
 *   - a sandbox replaces its agent with one that answers every call with a gzip bomb (a ~0.9 MB body, declared
 *     with its Content-Length and `Content-Encoding: gzip`, that inflates to 900 MiB): every call fails with an
 *     envelope, and the gateway's memory stays flat (nothing is inflated);
 *   - a sandbox's web server answers a gzip bomb through an endpoint: the bytes pass through compressed, as sent,
 *     and the gateway's memory stays flat; one that answers 1 GiB as fast as it is read: passed on as it comes;
 *   - a full disk: a command still runs, and ends with its exit status and its output;
 *   - a dead agent: every call answers at once with an envelope (503, retryable), never a hang or a closed
 *     connection.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { diskPath, type JailState } from "../../src/runtime/Jail.ts"
import { BOMB_INFLATED_BYTES, gzipBomb } from "../support/bombs.ts"
import { activeEndpoint } from "../support/endpoints.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, poll, runProcess, waitProcess, waitRuntimeOperation } from "../support/sandbox.ts"
import { api, bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"
import { jailOfSandbox } from "../support/jails.ts"

const TAKEOVER = fs.readFileSync(path.join(import.meta.dirname, "fixtures", "takeover.js"))
/** How much the gateway may grow while a sandbox throws bombs at it (a bomb inflated once is 900 MiB). */
const MAX_GROWTH = 50 * 1024 * 1024

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => {
  // Three runs of a retryable failure, not eight: what is checked is how each ends, and the sandbox's calls wait
  // in one order behind each other's back-off.
  server = await startServer({ env: { JOB_MAX_ATTEMPTS: "3" } })
  http = api(server.url)
  const boot = await bootstrap(server.dataDir, "answers@example.com")
  auth = { token: boot.api_key, project: boot.project_id }
})
afterAll(() => server.stop())

const jailOf = (sandboxId: string): JailState => jailOfSandbox(server.dataDir, sandboxId)

/** A path in a running sandbox's disk, as the host reaches it. */
const inSandbox = (sandboxId: string, ...rel: Array<string>) => diskPath(jailOf(sandboxId), "root", ...rel)

const writeFile = async (sandboxId: string, file: string, data: Uint8Array | string) => {
  const write = await http.post(`/v1/sandboxes/${sandboxId}/filesystem/write`, {
    ...auth,
    body: { path: file, data_base64: Buffer.from(data).toString("base64") },
    headers: { "idempotency-key": idempotencyKey("w") }
  })
  expect((await waitRuntimeOperation(http, auth, sandboxId, write.body.id)).state).toBe("succeeded")
}

const startProcess = (sandboxId: string, command: Array<string>) =>
  http.post(`/v1/sandboxes/${sandboxId}/processes`, { ...auth, body: { command }, headers: { "idempotency-key": idempotencyKey("p") } })

/** Runs the takeover script inside the sandbox (it stops the sandbox's own agent) and waits until it is done. */
const takeOver = async (sandboxId: string, action: string) => {
  await writeFile(sandboxId, "/workspace/takeover.js", TAKEOVER)
  const started = await startProcess(sandboxId, [
    "sh",
    "-c",
    `setsid -f sh -c 'touch /workspace/escaped; exec /opt/agent/bun /workspace/takeover.js ${action}' </dev/null >/workspace/takeover.log 2>&1
while [ ! -e /workspace/escaped ]; do sleep 0.02; done`
  ])
  expect(started.status).toBe(202)
  await waitProcess(http, auth, sandboxId, started.body.id)
  await poll(() => Promise.resolve(fs.existsSync(inSandbox(sandboxId, "workspace", "takeover-ready"))), (ready) => ready, 60_000, 50)
}

/** The gateway process's resident memory, in bytes. */
const gatewayRss = () => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${server.pid}/status`, "utf8"))?.[1] ?? NaN) * 1024

/** Runs `f` while sampling the gateway's RSS; returns what `f` returned and how far the RSS rose above where it started. */
const growthDuring = async <A>(f: () => Promise<A>): Promise<{ readonly value: A; readonly growth: number }> => {
  const before = gatewayRss()
  let peak = before
  const sampler = setInterval(() => (peak = Math.max(peak, gatewayRss())), 5)
  try {
    const value = await f()
    peak = Math.max(peak, gatewayRss())
    return { value, growth: peak - before }
  } finally {
    clearInterval(sampler)
  }
}

/** A raw write's body. */
const OCTETS = { method: "PUT", body: "data", headers: { "content-type": "application/octet-stream" } }

const raw = (sandboxId: string, file: string, init: RequestInit = {}) =>
  fetch(`${server.url}/v1/sandboxes/${sandboxId}/files/content?path=${encodeURIComponent(file)}`, {
    ...init,
    headers: { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project, ...(init.headers as Record<string, string> | undefined) }
  })

const envelopeOf = async (response: Response) => {
  const text = await response.text()
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = text
  }
  return { status: response.status, body, headers: response.headers }
}

/** What a call that could not reach the sandbox's agent fails with: worth retrying, and why. */
const UNAVAILABLE = { retryable: true, details: { reason: "provider_unavailable" } }

/**
 * Until a failure the gateway may retry has been retried (with back-off) and the operation or process fails. Asked
 * every 200 ms: the gateway's own work for the questions stays small beside what is measured.
 */
const untilFinal = <T>(route: string, final: (value: T) => boolean) => poll(async () => (await http.get(route, auth)).body as T, final, 150_000, 200)
const followProcess = (sandboxId: string, processId: string) =>
  untilFinal<any>(`/v1/sandboxes/${sandboxId}/processes/${processId}`, (p) => ["succeeded", "failed", "cancelled", "timed_out"].includes(p?.state))

/** A runtime operation (filesystem read, write, list) started and waited for: its final state. */
const runtimeOperation = async (sandboxId: string, kind: "read" | "write" | "list", body: Record<string, unknown>) => {
  const started = await http.post(`/v1/sandboxes/${sandboxId}/filesystem/${kind}`, { ...auth, body, headers: { "idempotency-key": idempotencyKey(kind) } })
  expect(started.status).toBe(202)
  return untilFinal<any>(`/v1/sandboxes/${sandboxId}/runtime-operations/${started.body.id}`, (r) => r?.state === "succeeded" || r?.state === "failed")
}

/** A process started and waited for. */
const processOutcome = async (sandboxId: string, command: Array<string>) => {
  const started = await startProcess(sandboxId, command)
  expect(started.status).toBe(202)
  return followProcess(sandboxId, started.body.id)
}

describe("an agent that answers gzip bombs", () => {
  let sandbox: { id: string }
  let following: string

  beforeAll(async () => {
    sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
    await writeFile(sandbox.id, "/workspace/mode", "gzip")
    await writeFile(sandbox.id, "/workspace/bomb.gz", await gzipBomb())
    // A process the gateway follows across the takeover: its next events come from the fake agent.
    const started = await startProcess(sandbox.id, ["sh", "-c", "while :; do echo tick; sleep 0.2; done"])
    following = started.body.id
    await takeOver(sandbox.id, "fake")
  }, 120_000)

  it("raw reads and writes, file reads and listings, processes and their events: errors, nothing inflated", async () => {
    const { growth, value } = await growthDuring(async () => {
      const [get, put] = [await envelopeOf(await raw(sandbox.id, "/workspace/x")), await envelopeOf(await raw(sandbox.id, "/workspace/x", OCTETS))]
      const [read, list, process, followed] = await Promise.all([
        runtimeOperation(sandbox.id, "read", { path: "/workspace/x" }),
        runtimeOperation(sandbox.id, "list", { path: "/workspace" }),
        processOutcome(sandbox.id, ["echo", "hi"]),
        followProcess(sandbox.id, following)
      ])
      // Measured on the host (cgroups, the disk's filesystem), never asked of the agent: it still answers.
      const metrics = await http.get(`/v1/sandboxes/${sandbox.id}/metrics`, auth)
      return { get, put, read, list, process, followed, metrics }
    })
    console.log(`gateway RSS growth under the bombs: ${Math.round(growth / 1e6)} MB`)
    expect(growth).toBeLessThan(MAX_GROWTH)
    for (const answer of [value.get, value.put]) expect(expectEnvelope(answer, 503, "runtime_operation_failed")).toMatchObject(UNAVAILABLE)
    for (const operation of [value.read, value.list]) {
      expect(operation).toMatchObject({ state: "failed", error: { code: "runtime_operation_failed", ...UNAVAILABLE } })
    }
    expect(value.process).toMatchObject({ state: "failed", error: { code: "provider_unavailable", ...UNAVAILABLE } })
    expect(value.followed.state).toBe("failed")
    expect(value.metrics.status).toBe(200)
  }, 180_000)
})

/** A web server for an endpoint: `/bomb` answers /workspace/bomb.gz (a gzip bomb) as gzip, with its Content-Length; anything else `hello`. */
const BOMB_SERVER_PY = `
import http.server
bomb = open("/workspace/bomb.gz", "rb").read()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        body = bomb if self.path.endswith("/bomb") else b"hello"
        self.send_response(200)
        if body is bomb:
            self.send_header("content-encoding", "gzip")
            self.send_header("x-bomb-bytes", str(len(bomb)))
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
`

describe("an endpoint that answers a gzip bomb", () => {
  it("passes through compressed, with its Content-Encoding, never inflated in the gateway", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
    await writeFile(sandbox.id, "/workspace/bomb.gz", await gzipBomb())
    await writeFile(sandbox.id, "/workspace/bomb.py", BOMB_SERVER_PY)
    expect((await startProcess(sandbox.id, ["python3", "/workspace/bomb.py"])).status).toBe(202)
    const endpoint = await activeEndpoint(http, auth, sandbox.id, 8000)
    const { growth, value } = await growthDuring(async () => {
      // As a browser asks; the bytes are counted as they come, not inflated here either.
      const response = await fetch(`${endpoint.url}bomb`, { headers: { "accept-encoding": "gzip" }, decompress: false } as RequestInit)
      let bytes = 0
      for await (const chunk of response.body!) bytes += chunk.length
      return { status: response.status, encoding: response.headers.get("content-encoding"), sent: Number(response.headers.get("x-bomb-bytes")), bytes }
    })
    console.log(`gateway RSS growth through the endpoint: ${Math.round(growth / 1e6)} MB`)
    expect(value.status).toBe(200)
    expect(value.encoding).toBe("gzip")
    expect(value.sent).toBe((await gzipBomb()).length)
    expect(value.sent).toBeLessThan(BOMB_INFLATED_BYTES / 500)
    expect(value.bytes).toBe(value.sent)
    expect(growth).toBeLessThan(MAX_GROWTH)
  }, 120_000)
})

/** A web server for an endpoint that answers 1 GiB of zeros, chunked, as fast as it is read. */
const FLOOD_SERVER_PY = `
import http.server
piece = bytes(1 << 20)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if not self.path.endswith("/flood"):
            self.send_response(200)
            self.send_header("content-length", "5")
            self.end_headers()
            return self.wfile.write(b"hello")
        self.send_response(200)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for _ in range(1024):
            self.wfile.write(b"100000\\r\\n" + piece + b"\\r\\n")
        self.wfile.write(b"0\\r\\n\\r\\n")
http.server.ThreadingHTTPServer(("127.0.0.1", 8001), H).serve_forever()
`

describe("an endpoint that floods", () => {
  it("1 GiB through an endpoint passes as it comes, never held: the gateway's memory stays far below what went through", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
    await writeFile(sandbox.id, "/workspace/flood.py", FLOOD_SERVER_PY)
    expect((await startProcess(sandbox.id, ["python3", "/workspace/flood.py"])).status).toBe(202)
    const endpoint = await activeEndpoint(http, auth, sandbox.id, 8001)
    const { growth, value } = await growthDuring(async () => {
      const response = await fetch(`${endpoint.url}flood`)
      let bytes = 0
      for await (const chunk of response.body!) bytes += chunk.length
      return { status: response.status, bytes }
    })
    console.log(`gateway RSS growth through a flooding endpoint: ${Math.round(growth / 1e6)} MB`)
    expect(value).toEqual({ status: 200, bytes: 1024 * 1024 * 1024 })
    // Measured 55-99 MB (the hops in this one process: the emulator's preview bridge, the runtime's port bridge,
    // the endpoint's relay, each a first transfer of this size here); a body held anywhere would be 1 GB more.
    expect(growth).toBeLessThan(3 * MAX_GROWTH)
  }, 180_000)
})

describe("an agent that is dead", () => {
  let sandbox: { id: string }

  beforeAll(async () => {
    sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
    await takeOver(sandbox.id, "dead")
  }, 120_000)

  it("every call answers with an envelope (503, retryable), never a hang or a closed connection", async () => {
    expect(expectEnvelope(await envelopeOf(await raw(sandbox.id, "/workspace/x")), 503, "runtime_operation_failed")).toMatchObject(UNAVAILABLE)
    expect(expectEnvelope(await envelopeOf(await raw(sandbox.id, "/workspace/x", OCTETS)), 503, "runtime_operation_failed")).toMatchObject(UNAVAILABLE)
    const [read, list, process] = await Promise.all([
      runtimeOperation(sandbox.id, "read", { path: "/workspace/x" }),
      runtimeOperation(sandbox.id, "list", { path: "/workspace" }),
      processOutcome(sandbox.id, ["echo", "hi"])
    ])
    for (const operation of [read, list]) {
      expect(operation).toMatchObject({ state: "failed", error: { code: "runtime_operation_failed", ...UNAVAILABLE } })
    }
    expect(process).toMatchObject({ state: "failed", error: { code: "provider_unavailable", ...UNAVAILABLE } })
  }, 180_000)
})

describe("an agent that is frozen (SIGSTOP)", () => {
  it("a raw read or write answers a 503 envelope (retryable) before the listener's idle close, never a closed connection", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
    // From inside: the sandbox stops its own agent once this command has been answered.
    await writeFile(sandbox.id, "/workspace/freeze.sh", [
      "touch /workspace/escaped",
      "sleep 0.5",
      "for p in /proc/[0-9]*; do",
      "  case \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" in *agent/lib/main.js*) kill -STOP \"${p#/proc/}\";; esac",
      "done",
      "touch /workspace/frozen"
    ].join("\n"))
    // setsid -f: out of this command's process group (the agent kills the group when the command ends); the
    // command ends only once the child is in its own session (it has written "escaped"), else a loaded machine can
    // end the command, and kill the child with it, before the child has left the group.
    const started = await startProcess(sandbox.id, ["sh", "-c", "setsid -f sh /workspace/freeze.sh </dev/null >/dev/null 2>&1\nwhile [ ! -e /workspace/escaped ]; do sleep 0.02; done"])
    expect(started.status).toBe(202)
    await poll(() => Promise.resolve(fs.existsSync(inSandbox(sandbox.id, "workspace", "frozen"))), (frozen) => frozen, 30_000, 50)
    const [read, write] = await Promise.all([raw(sandbox.id, "/workspace/x"), raw(sandbox.id, "/workspace/y", OCTETS)])
    // Whichever gives up first answers: the provider's call to the stopped agent (Daytona's emulator reads with the
    // runtime's 15 s call timeout: runtime_operation_failed) or the route's own head budget (sandbox_unresponsive).
    const readEnvelope = expectEnvelope(await envelopeOf(read), 503)
    expect(["runtime_operation_failed", "sandbox_unresponsive"]).toContain(readEnvelope.code)
    expect(readEnvelope).toMatchObject({ retryable: true })
    expect(expectEnvelope(await envelopeOf(write), 503)).toMatchObject({ retryable: true })
  }, 120_000)
})

describe("a full disk", () => {
  it("a command still runs and ends with its exit status and its output", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
    // Every block taken: all that is free at once, then the last ones in 512-byte writes.
    const fill = await runProcess(http, auth, sandbox.id, ["sh", "-c", "fallocate -l $(df -B1 --output=avail / | tail -1) /workspace/fill; dd if=/dev/zero of=/workspace/f2 bs=512 2>/dev/null; df -k --output=avail / | tail -1"])
    expect(fill.stdout.trim()).toBe("0")
    const hi = await runProcess(http, auth, sandbox.id, ["sh", "-c", "echo hi; echo there >&2; exit 3"])
    expect(hi.process).toMatchObject({ state: "failed", exit_code: 3, error: { code: "process_exit_nonzero" } })
    expect(hi.stdout).toBe("hi\n")
    expect(hi.stderr).toBe("there\n")
  }, 120_000)
})
