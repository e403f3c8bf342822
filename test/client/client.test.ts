/**
 * The typed client (client/, issue 15 item 1) against a real gateway: create-and-wait → exec with live output →
 * a file round trip larger than one call → an endpoint → destroy; typed errors; a key revoked mid-stream ends its
 * follow and its terminal with the gateway's error; and a create whose answer is lost on the way back is retried
 * with the same Idempotency-Key and makes one sandbox.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createClient, GatewayError, type GatewayClient } from "../../client/src/index.ts"
import { bootstrap, type RunningServer, startServer } from "../support/server.ts"

let server: RunningServer
let gw: GatewayClient
let credentials: { apiKey: string; projectId: string }
let userToken: string

const request = (metadata: Record<string, string> = {}) => ({
  source: { kind: "environment" as const, environment: "metal/base" },
  resources: { vcpu: 1, memory_mb: 512 },
  lifecycle: { runtime_timeout_seconds: 600 },
  provider: "daytona" as const,
  metadata
})

beforeAll(async () => {
  server = await startServer()
  const owner = await bootstrap(server.dataDir, "client@example.com")
  credentials = { apiKey: owner.api_key, projectId: owner.project_id }
  userToken = owner.user_token
  gw = createClient({ baseUrl: server.url, ...credentials })
})
afterAll(() => server.stop())

describe("the client", () => {
  it("creates a ready sandbox, follows a command's output live, moves files, exposes a port and destroys it", async () => {
    const sandbox = await gw.sandboxes.create(request())
    expect(sandbox.record.state).toBe("ready")

    // The command waits for a file the test writes only after it has seen the first line: without live output,
    // exec would never hand the line over before the end, and the test would time out.
    const seen: Array<string> = []
    let released: Promise<unknown> | undefined
    const result = await sandbox.exec(["sh", "-c", "echo first; while [ ! -f /workspace/go ]; do sleep 0.05; done; echo second >&2; exit 7"], {
      onOutput: (stream, text) => {
        seen.push(`${stream}:${text}`)
        if (text.includes("first")) released = sandbox.files.write("/workspace/go", "")
      }
    })
    await released
    expect(seen).toEqual(["stdout:first\n", "stderr:second\n"])
    expect(result).toMatchObject({ state: "failed", exitCode: 7, stdout: "first\n", stderr: "second\n" })

    // 9.5 MiB: one write, two read pieces.
    const big = new Uint8Array(9.5 * 1024 * 1024 + 5)
    for (let i = 0; i < big.length; i += 65536) crypto.getRandomValues(big.subarray(i, Math.min(i + 65536, big.length)))
    await sandbox.files.write("/workspace/data/big.bin", big)
    expect(Buffer.from(await sandbox.files.read("/workspace/data/big.bin")).equals(Buffer.from(big))).toBe(true)
    expect((await sandbox.files.list("/workspace/data")).map((e: any) => e.path)).toEqual(["/workspace/data/big.bin"])
    // A range streams just those bytes; create refuses an existing file.
    const part = new Uint8Array(await new Response(await sandbox.files.readStream("/workspace/data/big.bin", { start: 10, end: 19 })).arrayBuffer())
    expect(Buffer.from(part).equals(Buffer.from(big.subarray(10, 20)))).toBe(true)
    expect(await sandbox.files.write("/workspace/data/big.bin", "x", { mode: "create" }).catch((e) => e)).toMatchObject({ code: "file_exists", status: 409 })

    await sandbox.files.write("/workspace/site/index.html", "hello from the sandbox")
    void sandbox.exec(["python3", "-m", "http.server", "8000", "--directory", "/workspace/site"]).catch(() => undefined)
    const endpoint = await sandbox.expose(8000)
    expect(endpoint.state).toBe("active")
    let body = ""
    for (let i = 0; i < 100 && body === ""; i++) {
      const res = await fetch(endpoint.url).catch(() => undefined)
      if (res?.status === 200) body = await res.text()
      else await Bun.sleep(100)
    }
    expect(body).toBe("hello from the sandbox")

    expect((await sandbox.metrics()).source).toBe("local_runtime")
    await sandbox.destroy()
    expect((await sandbox.refresh()).state).toBe("stopped")
  }, 120_000)

  it("exec with nothing to show live or feed is one call (the run-and-wait answer's output); past its cap, the events", async () => {
    const sandbox = await gw.sandboxes.create(request())
    const calls: Array<string> = []
    const counted = createClient({ baseUrl: server.url, ...credentials, fetch: ((input: RequestInfo | URL, init?: RequestInit) => {
      const url = new URL(input instanceof Request ? input.url : String(input))
      calls.push(`${input instanceof Request ? input.method : init?.method ?? "GET"} ${url.pathname}${url.search}`)
      return fetch(input, init)
    }) as typeof fetch })
    const handle = await counted.sandboxes.get(sandbox.id)
    calls.length = 0
    expect(await handle.exec(["sh", "-c", "echo out; echo err >&2; exit 4"])).toMatchObject({ state: "failed", exitCode: 4, stdout: "out\n", stderr: "err\n" })
    expect(calls).toEqual([`POST /v1/sandboxes/${sandbox.id}/processes?wait_seconds=300`])
    // 1.5 MiB is past the answer's 1 MiB: read whole from the events.
    calls.length = 0
    const big = await handle.exec(["sh", "-c", "head -c 1572864 /dev/zero | tr '\\0' x"])
    expect(big.stdout).toBe("x".repeat(1572864))
    expect(calls.some((c) => c.includes("/events"))).toBe(true)
    await sandbox.destroy()
  }, 60_000)

  it("exec feeds stdin (a string, bytes or a stream) to a provider that takes input, then closes it", async () => {
    const sandbox = await gw.sandboxes.create({ ...request(), provider: "e2b" })
    expect((await sandbox.exec(["wc", "-c"], { stdin: "hello" })).stdout.trim()).toBe("5")
    async function* chunks() {
      for (let i = 0; i < 3; i++) yield new TextEncoder().encode(`part ${i}\n`)
    }
    expect((await sandbox.exec(["cat"], { stdin: chunks() })).stdout).toBe("part 0\npart 1\npart 2\n")
    // More than one call's worth (1 MiB) arrives whole and in order.
    const big = new Uint8Array(2.5 * 1024 * 1024).map((_, i) => 97 + (i % 26))
    expect((await sandbox.exec(["sha256sum"], { stdin: big })).stdout.split(" ")[0]).toBe(new Bun.CryptoHasher("sha256").update(big).digest("hex"))
    await sandbox.destroy()
  }, 60_000)

  it("a shell on a terminal: a typed line is answered, a resize changes stty size, exit ends it with its code", async () => {
    const sandbox = await gw.sandboxes.create({ ...request(), provider: "auto", features: { pty: true } })
    expect(["daytona", "e2b"]).toContain(sandbox.record.provider) // a provider with terminals
    let output = ""
    const exits: Array<unknown> = []
    const shell = await sandbox.shell({ cols: 80, rows: 24, onOutput: (text) => (output += text), onExit: (exit) => exits.push(exit) })
    const waitFor = async (pattern: RegExp) => {
      for (let i = 0; i < 1500 && !pattern.test(output); i++) await Bun.sleep(10)
      expect(output).toMatch(pattern)
    }
    shell.write("echo sum=$((40+2)); stty size\n")
    await waitFor(/sum=42\r\n24 80\r\n/)
    shell.resize(132, 43)
    shell.write(new TextEncoder().encode("stty size\n"))
    await waitFor(/43 132\r\n/)
    shell.write("exit 3\n")
    expect(await shell.exit).toEqual({ state: "failed", exitCode: 3 })
    expect(exits).toEqual([{ state: "failed", exitCode: 3 }])
    expect(() => shell.write("more\n")).toThrow()

    // Leaving a terminal leaves its process running; attaching again replays its output and takes it from there.
    let first = ""
    const term = await sandbox.terminal(["sh", "-c", "echo ready; read line; echo got-$line; exit 0"], { onOutput: (text) => (first += text) })
    for (let i = 0; i < 1500 && !first.includes("ready"); i++) await Bun.sleep(10)
    term.close()
    expect(await term.exit.catch((e) => e)).toMatchObject({ code: "attach_closed" })
    let second = ""
    const again = await sandbox.attach(term.processId, { onOutput: (text) => (second += text) })
    again.write("yes\n")
    expect(await again.exit).toEqual({ state: "succeeded", exitCode: 0 })
    expect(second).toContain("ready")
    expect(second).toContain("got-yes")

    // A process that ended before the attach: its output and its end, at once.
    const quick = await sandbox.terminal(["sh", "-c", "echo quick-$((2*3)); exit 4"])
    expect(await quick.exit).toEqual({ state: "failed", exitCode: 4 })
    let replay = ""
    const late = await sandbox.attach(quick.processId, { onOutput: (text) => (replay += text) })
    expect(await late.exit).toEqual({ state: "failed", exitCode: 4 })
    expect(replay).toContain("quick-6")
    // No terminals on Modal: a typed error.
    const modal = await gw.sandboxes.create({ ...request(), provider: "modal" })
    expect(await modal.shell().catch((e) => e)).toBeInstanceOf(GatewayError)
    await Promise.all([sandbox.destroy(), modal.destroy()])
  }, 90_000)

  it("a key revoked while it follows a command and holds a terminal: both end with the gateway's unauthenticated", async () => {
    const issued = await fetch(`${server.url}/v1/projects/${credentials.projectId}/api-keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${userToken}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "revoked-in-use" })
    }).then((r) => r.json() as Promise<{ api_key: { id: string }; key: string }>)
    const doomed = createClient({ baseUrl: server.url, apiKey: issued.key, projectId: credentials.projectId })
    const sandbox = await doomed.sandboxes.create({ ...request(), provider: "auto", features: { pty: true } })
    let followed = ""
    const running = sandbox.exec(["sh", "-c", "echo up; sleep 300"], { onOutput: (_stream, text) => (followed += text) }).catch((e: unknown) => e)
    let typed = ""
    const shell = await sandbox.shell({ onOutput: (text) => (typed += text) })
    shell.write("echo in=$((6*7))\n")
    for (let i = 0; i < 1500 && !(followed.includes("up") && typed.includes("in=42")); i++) await Bun.sleep(10)
    expect([followed, typed.includes("in=42")]).toEqual(["up\n", true])
    const revoked = await fetch(`${server.url}/v1/projects/${credentials.projectId}/api-keys/${issued.api_key.id}/revoke`, { method: "POST", headers: { authorization: `Bearer ${userToken}` } })
    expect(revoked.status).toBe(200)
    expect(await shell.exit.catch((e: unknown) => e)).toMatchObject({ name: "GatewayError", code: "unauthenticated", retryable: false, details: { close_code: 4001 } })
    expect(await running).toMatchObject({ name: "GatewayError", code: "unauthenticated", retryable: false, details: { reason: "credential_revoked" } })
  }, 90_000)

  it("files of any size: upload in pieces (appended, or joined in the sandbox), download resumed after a break", async () => {
    const data = new Uint8Array(23 * 1024 * 1024 + 7)
    for (let i = 0; i < data.length; i += 65536) crypto.getRandomValues(data.subarray(i, Math.min(i + 65536, data.length)))
    const digest = new Bun.CryptoHasher("sha256").update(data).digest("hex")
    async function* stream() {
      for (let at = 0; at < data.length; at += 3 * 1024 * 1024 + 1) yield data.subarray(at, at + 3 * 1024 * 1024 + 1)
    }
    // Daytona writes create/overwrite only: the pieces after the first are joined by a command. Blaxel appends,
    // up to a total of one write: its first append is refused, and the rest are joined in the same way.
    const [daytona, blaxel] = await Promise.all([gw.sandboxes.create(request()), gw.sandboxes.create({ ...request(), provider: "blaxel", network: { internet_access: true } })])
    for (const sandbox of [daytona, blaxel]) {
      const progress: Array<number> = []
      expect(await sandbox.files.upload("/workspace/up/big.bin", stream(), { onProgress: (n) => progress.push(n) })).toEqual({ sizeBytes: data.length, pieces: 3 })
      expect(progress).toEqual([10 * 1024 * 1024, 20 * 1024 * 1024, data.length])
      const check = await sandbox.exec(["sh", "-c", "sha256sum /workspace/up/big.bin; ls -a /workspace/up"])
      expect(check.stdout).toBe(`${digest}  /workspace/up/big.bin\n.\n..\nbig.bin\n`)
    }
    // Within Blaxel's total, smaller pieces are appended; an append whose answer is lost is not sent twice (the
    // file's size says it was applied).
    const appends: Array<string> = []
    const losing: typeof fetch = Object.assign(async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = new Request(input, init)
      if (req.method !== "PUT" || new URL(req.url).searchParams.get("mode") !== "append") return fetch(req)
      appends.push(req.url)
      const response = await fetch(req)
      if (appends.length === 2) throw new TypeError("socket closed")
      return response
    }, { preconnect: fetch.preconnect })
    const viaLosing = await createClient({ baseUrl: server.url, ...credentials, fetch: losing }).sandboxes.get(blaxel.id)
    const small = data.subarray(0, 3.5 * 1024 * 1024)
    expect(await viaLosing.files.upload("/workspace/appended.bin", small, { pieceBytes: 1024 * 1024 })).toEqual({ sizeBytes: small.length, pieces: 4 })
    expect(appends).toHaveLength(3)
    expect(Buffer.from(await blaxel.files.read("/workspace/appended.bin")).equals(Buffer.from(small))).toBe(true)

    // A small one is one write; bytes as well as streams.
    expect(await daytona.files.upload("/workspace/small.txt", new TextEncoder().encode("small"))).toEqual({ sizeBytes: 5, pieces: 1 })
    expect(new TextDecoder().decode(await daytona.files.read("/workspace/small.txt"))).toBe("small")

    // The download's connection breaks twice mid-file: it goes on from where it stopped with a Range read.
    let breaks = 0
    const ranges: Array<string | null> = []
    const breaking: typeof fetch = Object.assign(async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = new Request(input, init)
      const response = await fetch(req)
      if (!new URL(req.url).pathname.endsWith("/files/content") || req.method !== "GET") return response
      ranges.push(req.headers.get("range"))
      if (breaks >= 2) return response
      breaks += 1
      let sent = 0
      const reader = response.body!.getReader()
      const body = new ReadableStream<Uint8Array>({
        pull: async (controller) => {
          const { done, value } = await reader.read()
          if (done) return controller.close()
          sent += value.length
          controller.enqueue(value)
          if (sent > 5 * 1024 * 1024) {
            await reader.cancel()
            controller.error(new TypeError("connection reset"))
          }
        }
      })
      return new Response(body, { status: response.status, headers: response.headers })
    }, { preconnect: fetch.preconnect })
    const viaBreaking = await createClient({ baseUrl: server.url, ...credentials, fetch: breaking }).sandboxes.get(daytona.id)
    const hasher = new Bun.CryptoHasher("sha256")
    let total: number | undefined
    for await (const chunk of viaBreaking.files.download("/workspace/up/big.bin", { onProgress: (_n, t) => (total = t) })) hasher.update(chunk)
    expect(hasher.digest("hex")).toBe(digest)
    expect(total).toBe(data.length)
    expect(ranges[0]).toBe("bytes=0-")
    expect(ranges.slice(1).every((r) => /^bytes=[1-9]\d+-$/.test(r ?? ""))).toBe(true)
    expect(ranges).toHaveLength(3)
    // An empty file is an empty stream.
    await daytona.files.write("/workspace/empty", "")
    const pieces: Array<Uint8Array> = []
    for await (const chunk of daytona.files.download("/workspace/empty")) pieces.push(chunk)
    expect(pieces).toEqual([])
    await Promise.all([daytona.destroy(), blaxel.destroy()])
  }, 120_000)

  it("throws typed errors carrying the envelope's code; a bad request is refused before it is sent", async () => {
    const missing = await gw.sandboxes.get("sbx_00000000000000000000000000").catch((e) => e)
    expect(missing).toBeInstanceOf(GatewayError)
    expect(missing).toMatchObject({ code: "not_found", status: 404, retryable: false })
    const invalid = await gw.sandboxes.create({ ...request(), resources: { vcpu: 0, memory_mb: 512 } }).catch((e) => e)
    expect(invalid).toMatchObject({ code: "validation_error", status: 422 })
    // Said as the gateway says it: one line naming the field and what it takes, never a schema dump.
    const unknownProvider = await gw.sandboxes.create({ ...request(), provider: "nope" as never }).catch((e) => e)
    expect(unknownProvider).toMatchObject({ code: "validation_error", status: 422 })
    expect(unknownProvider.message).toBe("provider must be one of: blaxel, cloudflare, codesandbox, daytona, e2b, freestyle, modal, northflank, prime, runloop, vercel, auto")
    const wrongKey = createClient({ baseUrl: server.url, apiKey: "metal_sk_wrong", projectId: credentials.projectId })
    expect(await wrongKey.sandboxes.list().catch((e) => e)).toMatchObject({ code: "unauthenticated", status: 401 })
    const nobody = createClient({ baseUrl: "http://127.0.0.1:9", ...credentials, attempts: 2 })
    expect(await nobody.sandboxes.list().catch((e) => e)).toMatchObject({ code: "network_error", status: 0, retryable: true })
  }, 30_000)

  it("a create whose answer is lost is retried with the same Idempotency-Key: one sandbox", async () => {
    const keys: Array<string> = []
    let dropped = false
    // The request reaches the gateway (which creates the sandbox); the answer is then lost, as on a dropped connection.
    const flaky: typeof fetch = Object.assign(async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = new Request(input, init)
      if (req.method === "POST" && new URL(req.url).pathname === "/v1/sandboxes") {
        keys.push(req.headers.get("idempotency-key") ?? "")
        if (!dropped) {
          dropped = true
          await fetch(req)
          throw new TypeError("socket closed")
        }
        return fetch(req)
      }
      return fetch(req)
    }, { preconnect: fetch.preconnect })
    const client = createClient({ baseUrl: server.url, ...credentials, fetch: flaky })
    const tag = `retry-${Date.now()}`
    const sandbox = await client.sandboxes.create(request({ tag }))
    expect(keys).toHaveLength(2)
    expect(keys[0]).toBe(keys[1])
    const listed = await gw.sandboxes.list()
    expect(listed.sandboxes.filter((s) => s.metadata["tag"] === tag).map((s) => s.id)).toEqual([sandbox.id])
    await sandbox.destroy()
  }, 60_000)
})
