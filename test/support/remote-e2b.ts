/**
 * "E2B in the cloud" for tests of gateways in `remote` mode: the E2B emulator over a local runtime, in a process of
 * its own (so gateways that die leave it running, as a real provider would be), behind a front for the control API
 * that is the test's window into the cloud:
 *
 * - `GET /_test/created`: the `metal.sandbox_id` of every sandbox the cloud created, in order (one per create
 *   that succeeded: exactly-once is checked against it);
 * - `POST /_test/hold?ms=n`: from now on an answer to `POST /v2/sandboxes` is held back n ms after the sandbox was
 *   created (a slow network at the worst moment: the resource exists, its creator does not know yet);
 * - `POST /_test/fail?status=s&count=n`: the next n `POST /v2/sandboxes` are answered `s` (E2B's error body) and
 *   create nothing (a cloud failing for a moment).
 *
 * With `--framed`, envd is reached through a front that frames every answer of known length by Content-Length, as
 * E2B's envd (a Go server) does — a file download included, which Bun's server would send chunked — so a gateway
 * gets downloads it can pass on without counting them (bench/index.ts measures its memory that way).
 *
 * Usage: `bun test/support/remote-e2b.ts <data dir> [--framed]`; prints one JSON line `{apiUrl, sandboxUrl, apiKey}`
 * (set them as E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY) and runs until SIGTERM, then stops and removes its
 * sandboxes. `startRemoteE2B` runs it from a test.
 */
import { once } from "node:events"
import * as http from "node:http"
import type * as net from "node:net"
import * as path from "node:path"
import { Readable } from "node:stream"
import { startEmulation } from "../../providers/emulation.ts"

export interface RemoteE2B {
  /** The cloud's process (the emulator, its front and its runtime). */
  readonly pid: number
  readonly apiUrl: string
  readonly sandboxUrl: string
  readonly apiKey: string
  /** The gateway's env for remote E2B through this cloud. */
  readonly env: Record<string, string>
  readonly created: () => Promise<Array<string>>
  readonly hold: (ms: number) => Promise<void>
  readonly failCreates: (status: number, count: number) => Promise<void>
  readonly stop: () => Promise<void>
}

/** Starts the script as a child process on its own DATA_DIR and waits for its URLs. */
export const startRemoteE2B = async (dataDir: string, options: { readonly framed?: boolean } = {}): Promise<RemoteE2B> => {
  const child = Bun.spawn(["bun", "run", import.meta.filename, dataDir, ...(options.framed === true ? ["--framed"] : [])], { stdout: "pipe", stderr: "pipe", env: { ...process.env, LOG_LEVEL: "warning" } })
  const reader = child.stdout.getReader()
  let text = ""
  const deadline = Date.now() + 30_000
  while (!text.includes("\n")) {
    const chunk = await Promise.race([reader.read(), Bun.sleep(Math.max(0, deadline - Date.now())).then(() => undefined)])
    if (chunk === undefined || chunk.done) {
      child.kill("SIGKILL")
      throw new Error(`the remote E2B emulator did not start: ${text}${await new Response(child.stderr).text()}`)
    }
    text += new TextDecoder().decode(chunk.value)
  }
  reader.releaseLock()
  const info = JSON.parse(text.slice(0, text.indexOf("\n"))) as { apiUrl: string; sandboxUrl: string; apiKey: string }
  return {
    ...info,
    pid: child.pid,
    env: { E2B_API_KEY: info.apiKey, E2B_API_URL: info.apiUrl, E2B_SANDBOX_URL: info.sandboxUrl },
    created: async () => (await (await fetch(`${info.apiUrl}/_test/created`)).json()) as Array<string>,
    hold: async (ms) => void (await fetch(`${info.apiUrl}/_test/hold?ms=${ms}`, { method: "POST" })),
    failCreates: async (status, count) => void (await fetch(`${info.apiUrl}/_test/fail?status=${status}&count=${count}`, { method: "POST" })),
    stop: async () => {
      if (child.exitCode === null) child.kill("SIGTERM")
      await child.exited
    }
  }
}

/** The length an answer's body will have: its Content-Length, else the span of its Content-Range (a ranged file read). */
const lengthOf = (answer: Response) => {
  const stated = answer.headers.get("content-length")
  if (stated !== null) return stated
  const range = /^bytes (\d+)-(\d+)\//.exec(answer.headers.get("content-range") ?? "")
  return range === null ? undefined : String(Number(range[2]) - Number(range[1]) + 1)
}

/** A node:http server (it keeps a stated Content-Length on a streamed body; Bun's own server chunks it) in front of `target`. */
const framedFront = (target: string) =>
  new Promise<http.Server>((resolve) => {
    const server = http.createServer(async (req, res) => {
      try {
        const headers = new Headers()
        for (const [name, value] of Object.entries(req.headers)) if (typeof value === "string" && name !== "host") headers.set(name, value)
        const withBody = req.method !== "GET" && req.method !== "HEAD"
        const answer = await fetch(`${target}${req.url ?? "/"}`, {
          method: req.method ?? "GET",
          headers,
          ...(withBody ? { body: Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>, duplex: "half" } : {})
        } as RequestInit)
        const out: Record<string, string> = {}
        answer.headers.forEach((value, name) => {
          if (name !== "transfer-encoding" && name !== "content-length" && name !== "content-encoding") out[name] = value
        })
        const length = lengthOf(answer)
        res.writeHead(answer.status, length === undefined ? out : { ...out, "content-length": length })
        if (answer.body !== null) {
          for await (const chunk of answer.body) if (!res.write(chunk)) await once(res, "drain")
        }
        res.end()
      } catch {
        res.destroy()
      }
    })
    server.listen(0, "127.0.0.1", () => resolve(server))
  })

const main = async (dataDir: string, framed: boolean) => {
  // The emulator and its runtime as `sandbox-gateway emulate e2b` serves them; the front below is this test's window.
  const emulation = startEmulation(path.resolve(dataDir), ["e2b"])
  const emulator = emulation.emulators[0]!
  const apiUrl = emulator.urls["api"]!
  const created: Array<string> = []
  let holdMs = 0
  const failing = { status: 0, count: 0 }
  const front = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    fetch: async (request) => {
      const url = new URL(request.url)
      if (url.pathname === "/_test/created") return Response.json(created)
      if (url.pathname === "/_test/hold" && request.method === "POST") {
        holdMs = Number(url.searchParams.get("ms") ?? "0")
        return new Response(null, { status: 204 })
      }
      if (url.pathname === "/_test/fail" && request.method === "POST") {
        failing.status = Number(url.searchParams.get("status") ?? "503")
        failing.count = Number(url.searchParams.get("count") ?? "1")
        return new Response(null, { status: 204 })
      }
      if (request.method === "POST" && url.pathname === "/v2/sandboxes" && failing.count > 0) {
        failing.count--
        return Response.json({ code: failing.status, message: "the cloud failed this time (injected)" }, { status: failing.status })
      }
      const body = request.method === "GET" || request.method === "HEAD" ? undefined : await request.arrayBuffer()
      const headers = new Headers(request.headers)
      headers.delete("host")
      const answer = await fetch(`${apiUrl}${url.pathname}${url.search}`, { method: request.method, headers, ...(body === undefined ? {} : { body }) })
      const bytes = await answer.arrayBuffer()
      if (request.method === "POST" && url.pathname === "/v2/sandboxes" && answer.ok && body !== undefined) {
        const sent = JSON.parse(new TextDecoder().decode(body)) as { metadata?: Record<string, string> }
        created.push(sent.metadata?.["metal.sandbox_id"] ?? "")
        if (holdMs > 0) await Bun.sleep(holdMs)
      }
      return new Response(bytes, { status: answer.status, headers: answer.headers })
    }
  })
  const envd = framed ? await framedFront(emulator.urls["sandbox"]!) : undefined
  const stop = async () => {
    envd?.close()
    front.stop(true)
    await emulation.stop()
    process.exit(0)
  }
  process.on("SIGTERM", () => void stop())
  process.on("SIGINT", () => void stop())
  // Envd (processes, files) is reached directly (or through the framing front); only the control API passes the front.
  const sandboxUrl = envd === undefined ? emulator.urls["sandbox"]! : `http://127.0.0.1:${(envd.address() as net.AddressInfo).port}`
  process.stdout.write(`${JSON.stringify({ apiUrl: `http://127.0.0.1:${front.port}`, sandboxUrl, apiKey: emulator.apiKey })}\n`)
}

if (import.meta.main) await main(process.argv[2] ?? "", process.argv.includes("--framed"))
