/**
 * What a Daytona sandbox writes crosses the emulator's WebSockets and the adapter's log reads (issue 25): each is
 * bounded, from inside a real sandbox flooding its output.
 * - A session command's logs WebSocket is read from the runtime only as fast as its client takes it: a client that
 *   does not read leaves the emulator's memory flat (`sandbox-gateway emulate daytona`, a child process whose peak
 *   RSS is read from /proc), and once it reads it gets every byte, uncompressed (no permessage-deflate is agreed).
 * - A PTY's client that does not keep up is dropped (1008, as the daemon drops it; PTY output is not kept), and the
 *   emulator's memory stays flat.
 * - The gateway reads at most four times a process's max output of a command's log, however much the sandbox
 *   wrote: its memory stays flat while a process floods.
 * The clients are raw TCP sockets speaking WebSocket, so that they can stop reading (a browser or Bun client cannot).
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, readProcessOutput, waitProcess } from "../support/sandbox.ts"
import { api, openGateway, type RunningServer } from "../support/server.ts"

const MAIN = path.resolve(import.meta.dirname, "../../bin/main.ts")
const MiB = 1024 * 1024
/** How far a process may grow while a sandbox floods it with more than twice as much. */
const MAX_GROWTH = 100 * MiB
/**
 * How far the gateway, with its in-process emulator, may grow while a process floods a log of 224 MiB: read whole,
 * that log would be held at least twice over (448 MiB). Read in 8 MiB answers, the growth is their garbage, which
 * the collector leaves for later: 170–220 MiB on a machine that floods fast (192 failed one run in three, before
 * and after the morning of 2026-11-28).
 */
const GATEWAY_MAX_GROWTH = 256 * MiB

/** A process's peak resident memory so far (VmHWM), in bytes. */
const peakRss = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN) * 1024

/**
 * A WebSocket client on a raw TCP socket: the handshake's status and headers, then the frames counted as they come
 * (payload bytes of data frames, less `labelBytes` each; text frames kept; the close code). `pause` stops reading
 * from the socket (the kernel's buffers fill, then the server's), `resume` reads on.
 */
const rawWebSocket = (baseUrl: string, target: string, headers: Record<string, string>) => {
  const url = new URL(baseUrl)
  const socket = net.connect(Number(url.port), url.hostname)
  const key = crypto.randomBytes(16).toString("base64")
  socket.write([
    `GET ${target} HTTP/1.1`,
    `Host: ${url.host}`,
    "Upgrade: websocket",
    "Connection: Upgrade",
    `Sec-WebSocket-Key: ${key}`,
    "Sec-WebSocket-Version: 13",
    "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits",
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    "",
    ""
  ].join("\r\n"))
  let handshake: { status: number; headers: Record<string, string> } | undefined
  let pending: Buffer = Buffer.alloc(0)
  let skip = 0
  let current: { opcode: number; remaining: number; kept: Array<Buffer> } | null = null
  const counted = { dataBytes: 0, frames: 0, texts: [] as Array<string>, closeCode: undefined as number | undefined }
  const { promise: opened, resolve: open } = Promise.withResolvers<{ status: number; headers: Record<string, string> }>()
  const { promise: ended, resolve: end } = Promise.withResolvers<typeof counted>()
  const parse = () => {
    for (;;) {
      if (current !== null) {
        const take = Math.min(current.remaining, pending.length)
        if (current.opcode === 1 || current.opcode === 8) current.kept.push(pending.subarray(0, take))
        else counted.dataBytes += Math.max(0, take - Math.max(0, skip))
        skip = Math.max(0, skip - take)
        current.remaining -= take
        pending = pending.subarray(take)
        if (current.remaining > 0) return
        const payload = Buffer.concat(current.kept)
        if (current.opcode === 1) counted.texts.push(payload.toString("utf8"))
        if (current.opcode === 8) {
          counted.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005
          socket.destroy()
          return end(counted)
        }
        current = null
      }
      if (pending.length < 2) return
      const opcode = pending[0]! & 0x0f
      let length = pending[1]! & 0x7f
      let at = 2
      if (length === 126) {
        if (pending.length < 4) return
        length = pending.readUInt16BE(2)
        at = 4
      } else if (length === 127) {
        if (pending.length < 10) return
        length = Number(pending.readBigUInt64BE(2))
        at = 10
      }
      pending = pending.subarray(at)
      if (opcode === 0 || opcode === 2) {
        counted.frames += 1
        skip = labelBytes
      }
      current = { opcode, remaining: length, kept: [] }
    }
  }
  let labelBytes = 0
  socket.on("data", (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    if (handshake === undefined) {
      const headEnd = pending.indexOf("\r\n\r\n")
      if (headEnd < 0) return
      const [status, ...lines] = pending.subarray(0, headEnd).toString("latin1").split("\r\n")
      const h: Record<string, string> = {}
      for (const line of lines) h[line.slice(0, line.indexOf(":")).toLowerCase()] = line.slice(line.indexOf(":") + 1).trim()
      handshake = { status: Number(/^HTTP\/1\.1 (\d+)/.exec(status ?? "")?.[1]), headers: h }
      pending = pending.subarray(headEnd + 4)
      open(handshake)
    }
    parse()
  })
  socket.on("close", () => end(counted))
  return {
    opened,
    ended,
    /** Each data frame starts with this many bytes that are not output (the daemon's stream label). */
    labels: (n: number) => void (labelBytes = n),
    /** Sends a text frame (masked, as a client's frames are). */
    send: (text: string) => {
      const payload = Buffer.from(text)
      const mask = crypto.randomBytes(4)
      const head = payload.length < 126 ? Buffer.from([0x81, 0x80 | payload.length]) : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff])
      socket.write(Buffer.concat([head, mask, Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!))]))
    },
    pause: () => socket.pause(),
    resume: () => socket.resume(),
    close: () => socket.destroy()
  }
}

describe("the Daytona emulator's WebSockets, against a sandbox flooding its output", () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "daytona-streams-"))
  let child: ReturnType<typeof Bun.spawn>
  let baseUrl = ""
  let headers: Record<string, string> = {}
  let toolbox = ""

  beforeAll(async () => {
    child = Bun.spawn(["bun", MAIN, "emulate", "daytona", "--json", "--data-dir", dataDir], { stdout: "pipe", stderr: "inherit" })
    const reader = (child.stdout as ReadableStream<Uint8Array>).getReader()
    let text = ""
    while (!text.includes("\n")) {
      const { done, value } = await reader.read()
      if (done) throw new Error(`emulate ended before it served: ${text}`)
      text += new TextDecoder().decode(value)
    }
    reader.releaseLock()
    const served = JSON.parse(text.slice(0, text.indexOf("\n"))) as { emulators: Array<{ urls: { api: string }; apiKey: string }> }
    baseUrl = served.emulators[0]!.urls.api
    headers = { authorization: `Bearer ${served.emulators[0]!.apiKey}`, "content-type": "application/json" }
    const sandbox = (await (await fetch(`${baseUrl}/sandbox`, { method: "POST", headers, body: JSON.stringify({ disk: 3 }) })).json()) as { id: string }
    toolbox = `/toolbox/${sandbox.id}`
  }, 60_000)
  afterAll(async () => {
    child.kill("SIGTERM")
    await child.exited
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  const call = async (method: string, route: string, body?: unknown) => {
    const answer = await fetch(`${baseUrl}${toolbox}${route}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    return { status: answer.status, body: answer.headers.get("content-type")?.includes("json") === true ? await answer.json() as any : await answer.text() }
  }
  const until = async (what: string, check: () => Promise<boolean>) => {
    const deadline = Date.now() + 120_000
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`${what}: not within 120 s`)
      await Bun.sleep(100)
    }
  }

  it("a logs client that does not read: the emulator reads no further ahead (its memory flat while the client stalls); reading on, it gets every byte, uncompressed", async () => {
    const flood = 208 * MiB
    expect((await call("POST", "/process/session", { sessionId: "flood" })).status).toBe(201)
    const { body: { cmdId } } = await call("POST", "/process/session/flood/exec", { command: `head -c ${flood} /dev/zero`, runAsync: true })
    const before = peakRss(child.pid)
    const client = rawWebSocket(baseUrl, `${toolbox}/process/session/flood/command/${cmdId}/logs?follow=true`, {
      Authorization: headers["authorization"]!,
      // As the SDK asks: the labelled log (each frame's output after its stream's 3-byte label).
      "X-Daytona-SDK-Version": "0.218.0"
    })
    client.labels(3)
    const handshake = await client.opened
    expect(handshake.status).toBe(101)
    expect(handshake.headers["sec-websocket-extensions"]).toBeUndefined()
    client.pause()
    await until("the flood ends", async () => (await call("GET", `/process/session/flood/command/${cmdId}`)).body.exitCode !== undefined)
    // All of it is written by now: an emulator reading ahead of its client would hold it.
    const grewWhileStalled = peakRss(child.pid) - before
    client.resume()
    const got = await client.ended
    expect([got.dataBytes, got.closeCode]).toEqual([flood, 1000])
    expect(grewWhileStalled).toBeLessThan(MAX_GROWTH)
  }, 300_000)

  it("a PTY client that does not keep up is dropped (1008), the emulator's memory flat", async () => {
    const before = peakRss(child.pid)
    const client = rawWebSocket(baseUrl, `${toolbox}/process/pty/create-connect?id=flood&cols=80&rows=24`, { Authorization: headers["authorization"]! })
    expect((await client.opened).status).toBe(101)
    client.send("head -c 96000000 /dev/zero | tr '\\0' a; exit 0\n")
    client.pause()
    await until("the PTY session ends", async () => (await call("GET", "/process/pty/flood")).status === 404)
    client.resume()
    const got = await client.ended
    // Closed 1008; the close frame waits behind what was queued, and Bun drops the connection when the client still
    // does not read it in time: either way the client is dropped, having got only what was queued before.
    expect([1008, undefined]).toContain(got.closeCode)
    expect(got.dataBytes).toBeLessThan(32 * MiB)
    expect(peakRss(child.pid) - before).toBeLessThan(MAX_GROWTH)
  }, 300_000)
})

describe("the gateway reading a flooding Daytona process's log", () => {
  let server: RunningServer
  let http: ReturnType<typeof api>
  let auth: KeyAuth
  beforeAll(async () => {
    ;({ server, http, auth } = await openGateway("daytona-streams@example.com"))
  }, 60_000)
  afterAll(() => server.stop())

  it("reads at most four times the process's max output of the log: its memory stays flat, the output is cut at the max", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
    const before = peakRss(server.pid)
    const started = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, {
      ...auth,
      body: { command: ["sh", "-c", `head -c ${256 * MiB} /dev/zero | tr '\\0' a`], max_output_bytes: MiB },
      headers: { "idempotency-key": idempotencyKey("flood") }
    })
    expect(started.status).toBe(202)
    const done = await waitProcess(http, auth, sandbox.id, started.body.id, 240_000)
    expect(done).toMatchObject({ state: "succeeded", exit_code: 0 })
    expect((await readProcessOutput(http, auth, sandbox.id, started.body.id)).stdout.length).toBe(MiB)
    // The emulator runs in the gateway here, reading the runtime's events (8 MiB answers) for each log read; the log
    // it keeps is 224 MiB (sessions.ts): read whole, it would be held at least twice over.
    expect(peakRss(server.pid) - before).toBeLessThan(GATEWAY_MAX_GROWTH)
  }, 300_000)
})
