/** The Daytona adapter against its emulator over the real local runtime: the shared conformance suite, plus wire checks. */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { conformance, conformanceInput, emulatedTarget } from "../testing/conformance.ts"
import type { ExecEvent } from "../../src/runtime/LocalRuntime.ts"
import { makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { alpineLike, startRegistry } from "../../test/support/registry.ts"
import { makeDaytonaProvider } from "./adapter/index.ts"
import { startDaytonaEmulator } from "./emulator/index.ts"

const setup = emulatedTarget("daytona", startDaytonaEmulator, (emulator) => makeDaytonaProvider({ baseUrl: emulator.baseUrl, apiKey: emulator.apiKey, mode: "emulated" }))

conformance("daytona (emulated)", setup)

/** The emulator's session routes of one sandbox, as its toolbox serves them, with the emulator's key. */
const sessionRoutes = (emulator: { readonly baseUrl: string; readonly apiKey: string }, sandbox: { readonly resourceId: string }) => {
  const base = `${emulator.baseUrl}/toolbox/${sandbox.resourceId}/process/session`
  const headers = { authorization: `Bearer ${emulator.apiKey}`, "content-type": "application/json" }
  const post = (path: string, body: unknown) => fetch(`${base}${path}`, { method: "POST", headers, body: JSON.stringify(body) })
  return { base, headers, post }
}

describe("daytona wire", () => {
  it("refuses a wrong API key with an auth error, and maps 404 to absent", async () => {
    const { emulator, teardown } = await setup()
    try {
      const wrong = makeDaytonaProvider({ baseUrl: emulator.baseUrl, apiKey: "wrong", mode: "emulated" })
      const result = await Effect.runPromise(Effect.either(wrong.reconcileCreate("sbx_x")))
      expect(result._tag === "Left" && result.left.kind).toBe("auth")
      const response = await fetch(`${emulator.baseUrl}/sandbox/nope`, { headers: { authorization: `Bearer ${emulator.apiKey}` } })
      expect(response.status).toBe(404)
      expect(await response.json()).toMatchObject({ statusCode: 404 })
    } finally {
      await teardown()
    }
  })

  it("hands out a running command's output before it exits, each stream in the order written, and the exit after", async () => {
    const { provider, teardown } = await setup()
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_live${Date.now()}`)))
      // It goes on only once the test saw its first output (a file it waits for): nothing here depends on timing.
      const { executionId } = await Effect.runPromise(provider.exec(sandbox, {
        command: ["sh", "-c", "echo first; echo oops >&2; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo second"],
        timeoutSeconds: 60,
        maxOutputBytes: 1 << 20,
        processId: `proc_live${Date.now()}`
      }))
      let early: ReadonlyArray<ExecEvent> = []
      while (early.length < 2) early = await Effect.runPromise(provider.execEvents(sandbox, executionId, 0))
      // Across its two streams the order is the reading's (the daemon's labellers read each stream on its own too).
      const textOf = (events: ReadonlyArray<ExecEvent>, type: string) => events.filter((e) => e.type === type).map((e) => (e.type === "exit" ? "" : Buffer.from(e.data).toString())).join("")
      expect([textOf(early, "stdout"), textOf(early, "stderr"), early.length]).toEqual(["first\n", "oops\n", 2])
      await Effect.runPromise(provider.writeFile(sandbox, { path: "/workspace/go", data: new Uint8Array(), mode: "overwrite", createParents: false }))
      let all: ReadonlyArray<ExecEvent> = early
      while (all.at(-1)?.type !== "exit") all = [...all, ...(await Effect.runPromise(provider.execEvents(sandbox, executionId, all.length)))]
      expect(all.map((e) => e.seq)).toEqual([0, 1, 2, 3])
      expect(Buffer.from((all[2] as { data: Uint8Array }).data).toString()).toBe("second\n")
      expect(all[3]).toMatchObject({ type: "exit", exitCode: 0 })
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 60_000)

  it("a session whose shell has exited refuses the next command with 400 naming the shell's exit status", async () => {
    const { emulator, provider, teardown } = await setup()
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_sx${Date.now()}`)))
      const { base, headers, post } = sessionRoutes(emulator, sandbox)
      expect((await post("", { sessionId: "ends" })).status).toBe(201)
      const { cmdId } = await (await post("/ends/exec", { command: "echo said >&2; exit 3", runAsync: true })).json() as { cmdId: string }
      while ((await (await fetch(`${base}/ends/command/${cmdId}`, { headers })).json() as { exitCode?: number }).exitCode === undefined) await Bun.sleep(20)
      const refused = await post("/ends/exec", { command: "echo late", runAsync: true })
      expect(refused.status).toBe(400)
      // What its command wrote to stderr is the command's, not the shell's: not quoted.
      expect((await refused.json() as { message: string }).message).toMatch(/the session's shell has exited \(exit status 3\)$/)
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 60_000)

  it("a followed log ends once the command's exit status is there, not at its end markers alone", async () => {
    const { emulator, provider, teardown } = await setup()
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_fe${Date.now()}`)))
      const { base, headers, post } = sessionRoutes(emulator, sandbox)
      expect((await post("", { sessionId: "ends" })).status).toBe(201)
      // The command writes what its end markers look like (its nonce is in the wrapper's variable), then runs on: the
      // window between the markers and the exit file, held open. A follow must not end in it.
      const fake = `n=\${__dtn_p##*-}; printf '\\036%s:E:0\\036' "$n"; printf '\\036%s:E:0\\036' "$n" >&2; sleep 1.5`
      const { cmdId } = await (await post("/ends/exec", { command: fake, runAsync: true })).json() as { cmdId: string }
      const socket = new WebSocket(`${base.replace(/^http/, "ws")}/ends/command/${cmdId}/logs?follow=true`, { headers } as unknown as Array<string>)
      await new Promise((resolve) => (socket.onclose = resolve))
      const status = await (await fetch(`${base}/ends/command/${cmdId}`, { headers })).json() as { exitCode?: number }
      expect(status.exitCode).toBe(0)
      // Hostile: the markers forged by a command that then never ends. The follow waits for its exit status a few
      // seconds at most, not for as long as the sandbox likes.
      const forged = await (await post("/ends/exec", { command: fake.replace("sleep 1.5", "sleep 300"), runAsync: true })).json() as { cmdId: string }
      const held = new WebSocket(`${base.replace(/^http/, "ws")}/ends/command/${forged.cmdId}/logs?follow=true`, { headers } as unknown as Array<string>)
      await new Promise((resolve) => (held.onclose = resolve))
      expect(((await (await fetch(`${base}/ends/command/${forged.cmdId}`, { headers })).json()) as { exitCode?: number }).exitCode).toBeUndefined()
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 60_000)

  it("a session whose shell could not even start: the refusal quotes what the shell said on its stderr", async () => {
    // An image sandbox (its root is its own): it puts a `sh` first on its PATH that says why it cannot start and exits
    // 126, as a shell that cannot execute does. Its next session's shell is that one.
    const registry = startRegistry()
    registry.push("test/alpine", "1", { env: ["PATH=/usr/local/bin:/usr/bin:/bin"], layers: [[...alpineLike()]] })
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-daytona-shell-"))
    const runtime = makeLocalRuntime(dataDir, { registryAllowPrivate: true })
    const emulator = startDaytonaEmulator(dataDir, runtime)
    const provider = makeDaytonaProvider({ baseUrl: emulator.baseUrl, apiKey: emulator.apiKey, mode: "emulated" })
    try {
      const sandbox = await Effect.runPromise(provider.create({ ...conformanceInput(`sbx_sh${Date.now()}`), source: { kind: "oci_image", image: `${registry.host}/test/alpine:1` } }))
      const { post } = sessionRoutes(emulator, sandbox)
      // Written through the file API (no shell of a session needed), made executable by a command whose session
      // starts before it is. With /tmp/flood there, it floods its stderr first (the hostile case below).
      const script = [
        "#!/bin/busybox sh",
        "if [ -e /tmp/flood ]; then",
        "  head -c 2000000 /dev/zero | tr '\\000' '\\033' >&2",
        "  printf '\\033]0;title\\007\\033[31mred' >&2",
        "else",
        "  printf 'sh: 0: cannot start\\tthis shell\\n' >&2",
        "fi",
        "exit 126",
        ""
      ].join("\n")
      const write = (file: string, text: string) =>
        Effect.runPromise(provider.writeFile(sandbox, { path: file, data: new TextEncoder().encode(text), mode: "overwrite", createParents: true }))
      await write("/usr/local/bin/sh", script)
      const { executionId } = await Effect.runPromise(provider.exec(sandbox, { command: ["chmod", "755", "/usr/local/bin/sh"], timeoutSeconds: 60, maxOutputBytes: 4096, processId: `proc_sh${Date.now()}` }))
      let events: ReadonlyArray<ExecEvent> = []
      while (events.at(-1)?.type !== "exit") events = [...events, ...(await Effect.runPromise(provider.execEvents(sandbox, executionId, events.length)))]
      expect(events.at(-1)).toMatchObject({ exitCode: 0 })
      const refusal = async (sessionId: string) => {
        expect((await post("", { sessionId })).status).toBe(201)
        let refused: Response
        do refused = await post(`/${sessionId}/exec`, { command: "echo hi", runAsync: true })
        while (refused.status === 202)
        expect(refused.status).toBe(400)
        return (await refused.json() as { message: string }).message
      }
      // Its words, control characters as spaces.
      expect(await refusal("broken")).toContain("the session's shell has exited (exit status 126): sh: 0: cannot start this shell")
      // Hostile: a shell that floods its stderr with 2 MB of escape characters and terminal sequences before it dies.
      // The refusal quotes a bounded, printable part of it, whatever the sandbox wrote.
      await write("/tmp/flood", "")
      const flooded = await refusal("flooding")
      expect(flooded).toContain("(exit status 126)")
      expect(flooded.length).toBeLessThan(1024)
      // eslint-disable-next-line no-control-regex
      expect(flooded).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/)
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      emulator.stop()
      await Effect.runPromise(runtime.reap(new Set()))
      registry.stop()
    }
  }, 90_000)

  it("serves a download past a piece as a stream of the file's exact bytes, and a range of it whole", async () => {
    const { emulator, provider, teardown } = await setup()
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_dl${Date.now()}`)))
      const bytes = new Uint8Array(20 << 20).map((_, i) => (i * 31) % 253)
      await Effect.runPromise(provider.writeFile(sandbox, { path: "/workspace/big.bin", data: bytes.subarray(0, 10 << 20), mode: "overwrite", createParents: false }))
      await Effect.runPromise(provider.writeFile(sandbox, { path: "/workspace/big2.bin", data: bytes.subarray(10 << 20), mode: "overwrite", createParents: false }))
      const exec = await Effect.runPromise(provider.exec(sandbox, { command: ["sh", "-c", "cat /workspace/big2.bin >> /workspace/big.bin"], timeoutSeconds: 30, maxOutputBytes: 1024, processId: `proc_cat${Date.now()}` }))
      let events: ReadonlyArray<ExecEvent> = []
      while (events.at(-1)?.type !== "exit") events = [...events, ...(await Effect.runPromise(provider.execEvents(sandbox, exec.executionId, events.length)))]
      const url = `${emulator.baseUrl}/toolbox/${sandbox.resourceId}/files/download?path=${encodeURIComponent("/workspace/big.bin")}`
      const headers = { authorization: `Bearer ${emulator.apiKey}` }
      const whole = await fetch(url, { headers })
      expect(whole.status).toBe(200)
      expect(Buffer.compare(Buffer.from(await whole.arrayBuffer()), Buffer.from(bytes))).toBe(0)
      const range = await fetch(url, { headers: { ...headers, range: "bytes=5-9" } })
      expect(range.status).toBe(206)
      expect(range.headers.get("content-range")).toBe(`bytes 5-9/${20 << 20}`)
      expect([...new Uint8Array(await range.arrayBuffer())]).toEqual([...bytes.subarray(5, 10)])
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 30_000)
})

describe("daytona request bodies", () => {
  it("a body or filter not of the daemon's shape is refused in its own error format before the sandbox is asked: computer use 400 {error}, a label filter 400", async () => {
    const { emulator, provider, teardown } = await setup()
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_body${Date.now()}`)))
      const headers = { authorization: `Bearer ${emulator.apiKey}`, "content-type": "application/json" }
      const post = (path: string, body: string) => fetch(`${emulator.baseUrl}/toolbox/${sandbox.resourceId}/computeruse${path}`, { method: "POST", headers, body })
      for (const [path, body, field] of [
        ["/mouse/move", '{"x": "10", "y": 5}', /x/],
        ["/mouse/click", '{"x": 1, "y": 2, "button": "thumb"}', /button/],
        ["/mouse/scroll", '{"x": 1, "y": 2, "direction": "sideways"}', /direction/],
        ["/keyboard/type", '{"text": 5}', /text/],
        ["/keyboard/key", '{"key": "a", "modifiers": "ctrl"}', /modifiers/],
        ["/keyboard/hotkey", "not json", /not valid JSON/],
        ["/recordings/stop", "{}", /id/]
      ] as const) {
        const response = await post(path, body)
        const answer = (await response.json()) as { error?: unknown }
        expect([path, response.status, Object.keys(answer)]).toEqual([path, 400, ["error"]])
        expect(String(answer.error)).toMatch(/^(invalid request body|the request body is not valid JSON)/)
        expect(String(answer.error)).toMatch(field)
      }
      for (const labels of ['{"team": 5}', "[1]", "{"]) {
        const response = await fetch(`${emulator.baseUrl}/sandbox?labels=${encodeURIComponent(labels)}`, { headers })
        expect([labels, response.status, await response.json()]).toEqual([labels, 400, { statusCode: 400, message: "labels must be a JSON object", error: "labels must be a JSON object" }])
      }
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 60_000)
})

describe("daytona terminals (PTY sessions over the emulator's real pseudo-terminal)", () => {
  const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
  const failureOf = async <A>(effect: Effect.Effect<A, { readonly kind: string; readonly message: string }>) => {
    const result = await Effect.runPromise(Effect.either(effect))
    if (result._tag === "Right") throw new Error("expected a failure")
    return result.left
  }
  const text = (events: ReadonlyArray<ExecEvent>) => events.map((e) => (e.type === "exit" ? "" : Buffer.from(e.data).toString())).join("")

  it("runs the command on the session's terminal: only its own output, input typed, resized, its exit code; ended or unknown sessions refuse", async () => {
    const { emulator, provider, teardown } = await setup()
    try {
      const sandbox = await run(provider.create(conformanceInput(`sbx_tty${Date.now()}`)))
      const processId = `proc_tty${Date.now()}`
      const { executionId } = await run(provider.exec(sandbox, {
        command: ["sh", "-c", "printf 'size:'; stty size; echo \"g=$GREETING in $(pwd)\"; read x; echo got-$x; stty size; exit 3"],
        environment: { GREETING: "it's me" },
        timeoutSeconds: 0,
        maxOutputBytes: 1 << 20,
        processId,
        pty: { cols: 80, rows: 24 }
      }))
      expect(executionId.startsWith("daytona-pty:")).toBe(true)
      let events: Array<ExecEvent> = []
      const until = async (done: () => boolean) => {
        const deadline = Date.now() + 15_000
        while (!done()) {
          if (Date.now() > deadline) throw new Error(`timed out; output so far ${JSON.stringify(text(events))}`)
          events = [...events, ...(await run(provider.execEvents(sandbox, executionId, events.length)))]
          await Bun.sleep(20)
        }
      }
      await until(() => text(events).includes("24 80"))
      // Nothing of the shell's greeting, prompt or the typed line: the output starts with the command's.
      expect(text(events).startsWith("size:24 80")).toBe(true)
      await run(provider.resizeTerminal!(sandbox, executionId, { cols: 100, rows: 30 }))
      await run(provider.sendInput!(sandbox, executionId, new TextEncoder().encode("hi\n"), false))
      await until(() => events.at(-1)?.type === "exit")
      expect(text(events)).toContain("got-hi")
      expect(text(events)).toContain("g=it's me in /workspace\r\n")
      expect(text(events)).toContain("30 100")
      expect(events.at(-1)).toMatchObject({ type: "exit", exitCode: 3, cancelled: false })
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))

      // The session is gone at the daemon once ended: resize and input say the terminal ended.
      expect((await failureOf(provider.resizeTerminal!(sandbox, executionId, { cols: 80, rows: 24 }))).kind).toBe("not_found")
      expect((await failureOf(provider.sendInput!(sandbox, executionId, new TextEncoder().encode("x"), false))).kind).toBe("not_found")
      const headers = { authorization: `Bearer ${emulator.apiKey}` }
      const base = `${emulator.baseUrl}/toolbox/${sandbox.resourceId}/process/pty`
      expect((await fetch(`${base}/metal-${processId}`, { headers })).status).toBe(404)

      // An unknown session: a new gateway following it learns it is lost; its resize and input fail the same way.
      const fresh = makeDaytonaProvider({ baseUrl: emulator.baseUrl, apiKey: emulator.apiKey, mode: "emulated" })
      const unknown = executionId.replace(/^daytona-pty:.*/, `daytona-pty:${Buffer.from(JSON.stringify(["metal-proc_nope", 1000])).toString("base64url")}`)
      expect((await failureOf(fresh.execEvents(sandbox, unknown, 0))).kind).toBe("not_found")
      expect((await failureOf(fresh.resizeTerminal!(sandbox, unknown, { cols: 80, rows: 24 }))).kind).toBe("not_found")
      expect((await failureOf(fresh.sendInput!(sandbox, unknown, new Uint8Array([1]), false))).kind).toBe("not_found")
      // A plain process has no terminal; once it ended, its input is closed.
      const plain = await run(provider.exec(sandbox, { command: ["true"], timeoutSeconds: 10, maxOutputBytes: 100, processId: `proc_plain${Date.now()}` }))
      let plainEvents: ReadonlyArray<ExecEvent> = []
      while (plainEvents.at(-1)?.type !== "exit") plainEvents = await run(provider.execEvents(sandbox, plain.executionId, 0))
      expect((await failureOf(provider.resizeTerminal!(sandbox, plain.executionId, { cols: 80, rows: 24 }))).kind).toBe("invalid_request")
      expect((await failureOf(provider.sendInput!(sandbox, plain.executionId, new Uint8Array([1]), false))).kind).toBe("not_found")
      await run(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 60_000)

  it("cancel deletes the session: the exit says cancelled; a second cancel finds nothing to cancel", async () => {
    const { provider, teardown } = await setup()
    try {
      const sandbox = await run(provider.create(conformanceInput(`sbx_ttyc${Date.now()}`)))
      const { executionId } = await run(provider.exec(sandbox, { command: ["sleep", "60"], timeoutSeconds: 0, maxOutputBytes: 1000, processId: `proc_ttyc${Date.now()}`, pty: { cols: 80, rows: 24 } }))
      expect(await run(provider.cancelExec(sandbox, executionId))).toEqual({ cancelled: true })
      let events: ReadonlyArray<ExecEvent> = []
      const deadline = Date.now() + 10_000
      while (events.at(-1)?.type !== "exit" && Date.now() < deadline) {
        events = await run(provider.execEvents(sandbox, executionId, 0))
        await Bun.sleep(10) // (the close that carries the exit arrives as an event of the loop)
      }
      expect(events.at(-1)).toMatchObject({ type: "exit", exitCode: null, signal: "SIGKILL", cancelled: true })
      expect(await run(provider.cancelExec(sandbox, executionId))).toEqual({ cancelled: false })
      await run(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 60_000)

  it("a client connected when the shell ends gets all of its output before the close, however often the session is asked about meanwhile", async () => {
    const { emulator, provider, teardown } = await setup()
    try {
      const sandbox = await run(provider.create(conformanceInput(`sbx_ttye${Date.now()}`)))
      const base = `${emulator.baseUrl}/toolbox/${sandbox.resourceId}/process/pty`
      const headers = { authorization: `Bearer ${emulator.apiKey}` }
      const flood = 40_000_000
      const socket = new WebSocket(`${base.replace(/^http/, "ws")}/create-connect?id=ender&cols=80&rows=24`, { headers } as unknown as Array<string>)
      socket.binaryType = "arraybuffer"
      let as = 0
      const closed = new Promise<number>((resolve) => {
        socket.onmessage = (e) => {
          if (typeof e.data === "string") return
          // A plain loop: a reduce over 40 MB took the event loop ~0.3 s, enough for the emulator to find this
          // client behind by its slow-consumer bound on a loaded machine and close it 1008.
          const bytes = new Uint8Array(e.data as ArrayBuffer)
          for (let i = 0; i < bytes.length; i++) if (bytes[i] === 0x61) as++
        }
        socket.onclose = (e) => resolve(e.code)
      })
      await new Promise((resolve) => (socket.onopen = resolve))
      // Typed in one line. Its echo and the prompt add a few "a"s of their own: at least the flood's count must come.
      socket.send(`head -c ${flood} /dev/zero | tr '\\0' a; exit 0\n`)
      // Asked about as fast as an impatient client can ask, from the moment the shell may have ended.
      while ((await fetch(`${base}/ender`, { headers })).status !== 404) await Bun.sleep(2)
      expect(await closed).toBe(1000)
      expect(as).toBeGreaterThanOrEqual(flood)
      await run(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 60_000)

  it("the emulator's PTY routes answer as the daemon: 201 (unknown fields ignored), 409 for a taken id, 400 for a bad size, 410 for resizing an unknown one, a control error for connecting to it", async () => {
    const { emulator, provider, teardown } = await setup()
    try {
      const sandbox = await run(provider.create(conformanceInput(`sbx_ttyw${Date.now()}`)))
      const headers = { authorization: `Bearer ${emulator.apiKey}`, "content-type": "application/json" }
      const base = `${emulator.baseUrl}/toolbox/${sandbox.resourceId}/process/pty`
      const post = (path: string, body: unknown) => fetch(`${base}${path}`, { method: "POST", headers, body: JSON.stringify(body) })
      // A field the daemon does not know is ignored, as its JSON decoding ignores it.
      const created = await post("", { id: "s1", cols: 80, rows: 24, lazyStart: true, command: "ls" })
      expect([created.status, await created.json()]).toEqual([201, { sessionId: "s1" }])
      expect((await post("", { id: "s1" })).status).toBe(409)
      expect((await post("", { id: "s2", cols: 1001 })).status).toBe(400)
      expect((await post("", { id: "" })).status).toBe(400)
      expect((await post("", { id: "s3", cols: "wide" })).status).toBe(400)
      expect(await (await fetch(base, { headers })).json()).toMatchObject({ sessions: [{ id: "s1", active: false, lazyStart: true, cols: 80, rows: 24 }] })
      expect((await post("/nope/resize", { cols: 80, rows: 24 })).status).toBe(410)
      expect((await post("/s1/resize", { cols: 0, rows: 24 })).status).toBe(400)
      expect((await fetch(`${base}/s1/connect`, { headers })).status).toBe(400) // not a WebSocket
      const socket = new WebSocket(`${base.replace(/^http/, "ws")}/nope/connect`, { headers } as unknown as Array<string>)
      const first = await new Promise<string>((resolve, reject) => {
        socket.onmessage = (e) => resolve(String(e.data))
        socket.onerror = () => reject(new Error("the socket failed"))
      })
      expect(JSON.parse(first)).toMatchObject({ type: "control", status: "error" })
      expect((await fetch(`${base}/s1`, { method: "DELETE", headers })).status).toBe(200)
      expect((await fetch(`${base}/s1`, { method: "DELETE", headers })).status).toBe(404)
      await run(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 60_000)
})

describe("daytona log follow (push for a quiet command)", () => {
  it("a quiet command's waits share one socket and last their time; a socket that breaks is news once and is not reopened in a loop", async () => {
    let opened = 0
    const { emulator, teardown } = await setup()
    const counting = (broken: boolean) => makeDaytonaProvider({
      baseUrl: emulator.baseUrl,
      apiKey: emulator.apiKey,
      mode: "emulated",
      openSocket: (url, headers) => {
        opened++
        return new WebSocket(broken ? "ws://127.0.0.1:1/" : url, { headers } as unknown as Array<string>)
      }
    })
    const provider = counting(false)
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_news${Date.now()}`)))
      const { executionId } = await Effect.runPromise(provider.exec(sandbox, { command: ["sleep", "30"], timeoutSeconds: 60, maxOutputBytes: 1 << 20, processId: `proc_nn${Date.now()}` }))
      for (let i = 0; i < 3; i++) {
        const started = Date.now()
        await Effect.runPromise(provider.execNews!(sandbox, executionId, 300))
        expect(Date.now() - started).toBeGreaterThanOrEqual(280)
      }
      expect(opened).toBe(1)
      // A socket that cannot connect: its close is news once; the waits after it do not open one each.
      const broken = counting(true)
      opened = 0
      const until = Date.now() + 2_500
      let waits = 0
      while (Date.now() < until) {
        await Effect.runPromise(broken.execNews!(sandbox, executionId, 5_000))
        waits++
      }
      expect(opened).toBeLessThanOrEqual(3)
      expect(waits).toBeLessThanOrEqual(8)
      // A socket that cannot even be made (the constructor throws): the wait still ends, as a poll's would.
      const refusing = makeDaytonaProvider({ baseUrl: emulator.baseUrl, apiKey: emulator.apiKey, mode: "emulated", openSocket: () => {
        throw new SyntaxError("not a WebSocket URL")
      } })
      expect(await Effect.runPromise(Effect.exit(refusing.execNews!(sandbox, executionId, 5_000)))).toMatchObject({ _tag: "Success" })
      await Effect.runPromise(provider.cancelExec(sandbox, executionId))
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 60_000)

  it("a sandbox that floods a followed log: the socket is closed once it carried what a log read would take, and the command is polled", async () => {
    const { emulator, teardown } = await setup()
    const sockets: Array<{ bytes: number; closed: boolean }> = []
    const provider = makeDaytonaProvider({
      baseUrl: emulator.baseUrl,
      apiKey: emulator.apiKey,
      mode: "emulated",
      openSocket: (url, headers) => {
        const socket = new WebSocket(url, { headers } as unknown as Array<string>)
        const seen = { bytes: 0, closed: false }
        sockets.push(seen)
        socket.addEventListener("message", (event) => void (seen.bytes += (event.data as ArrayBuffer).byteLength ?? String(event.data).length))
        socket.addEventListener("close", () => void (seen.closed = true))
        return socket
      }
    })
    try {
      const sandbox = await Effect.runPromise(provider.create(conformanceInput(`sbx_flood${Date.now()}`)))
      const maxOutputBytes = 16 * 1024
      const { executionId } = await Effect.runPromise(provider.exec(sandbox, {
        command: ["sh", "-c", "while [ ! -e /workspace/go ]; do sleep 0.05; done; head -c 20000000 /dev/zero; while [ ! -e /workspace/end ]; do sleep 0.05; done"],
        timeoutSeconds: 60,
        maxOutputBytes,
        processId: `proc_flood${Date.now()}`
      }))
      const waiting = Effect.runPromise(provider.execNews!(sandbox, executionId, 60_000))
      await Effect.runPromise(provider.writeFile(sandbox, { path: "/workspace/go", data: new Uint8Array(), mode: "overwrite", createParents: false }))
      await waiting
      const deadline = Date.now() + 30_000
      while (sockets[0]?.closed !== true && Date.now() < deadline) await Effect.runPromise(provider.execNews!(sandbox, executionId, 1_000))
      expect(sockets[0]?.closed).toBe(true)
      // Four times the max output (what a log read takes), and what was in flight: far from the 20 MB written.
      expect(sockets[0]!.bytes).toBeLessThan(4 * 1024 * 1024)
      // Polled from now on: a wait is short, and opens nothing.
      const started = Date.now()
      await Effect.runPromise(provider.execNews!(sandbox, executionId, 60_000))
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(sockets).toHaveLength(1)
      await Effect.runPromise(provider.writeFile(sandbox, { path: "/workspace/end", data: new Uint8Array(), mode: "overwrite", createParents: false }))
      let all: ReadonlyArray<ExecEvent> = []
      while (all.at(-1)?.type !== "exit") all = [...all, ...(await Effect.runPromise(provider.execEvents(sandbox, executionId, all.length)))]
      expect(all.at(-1)).toMatchObject({ type: "exit", exitCode: 0, outputTruncated: true })
      await Effect.runPromise(provider.destroy(sandbox))
    } finally {
      await teardown()
    }
  }, 90_000)
})
