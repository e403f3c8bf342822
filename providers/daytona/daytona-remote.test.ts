/**
 * The Daytona adapter in `remote` mode against a scripted HttpClient: the requests it sends to Daytona's control
 * API and toolbox (bodies, paths, headers) and how it reads the answers (states, pages, the multiplexed log,
 * error codes). The emulator-backed suite (daytona.test.ts) covers behaviour; this covers the wire.
 */
import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import { conformanceInput } from "../testing/conformance.ts"
import type { ExecEvent } from "../../src/runtime/LocalRuntime.ts"
import type { ProviderError, ProviderSandbox, SandboxProvider } from "../../src/providers/Provider.ts"
import { bodyBytes, bodyJson, type Call, json, scripted, type Step } from "../testing/scripted-client.ts"
import { demuxLog, eventsFromPieces, executionIds, makeDaytonaProvider, terminalIds } from "./adapter/index.ts"
import { INPUT_CHUNK_BYTES, octalLine } from "./adapter/processes.ts"
import { MAX_PREAMBLE_BYTES, MAX_TYPED_LINE_BYTES } from "./adapter/terminals.ts"
import type { HttpClient } from "@effect/platform"

const BASE = "https://daytona.test/api"
const TOOLBOX = "https://proxy.daytona.test/toolbox"
const provider = (client: HttpClient.HttpClient, extra: { snapshot?: string; target?: string } = {}) =>
  makeDaytonaProvider({ baseUrl: BASE, apiKey: "dtn_key", mode: "remote", httpClient: client, pollIntervalMs: 1, logPollMs: 0, ...extra })
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>) => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (result._tag === "Right") throw new Error("expected a failure")
  return result.left
}

const wireSandbox = (fields: Record<string, unknown> = {}) => ({
  id: "dsbx1",
  name: "metal-sbx_1",
  labels: { "metal.sandbox_id": "sbx_1" },
  state: "started",
  cpu: 1,
  memory: 1,
  disk: 3,
  toolboxProxyUrl: TOOLBOX,
  ...fields
})
const SANDBOX: ProviderSandbox = {
  resourceId: "dsbx1",
  resolvedResources: { vcpu: 1, memoryMb: 1024, diskMb: 3072, architecture: "x86_64", providerSize: null },
  metadata: { name: "metal-sbx_1", toolboxProxyUrl: TOOLBOX }
}
const step = (method: string, path: string, reply: Step["reply"]): Step => ({ method, path, reply })
const log = (...pieces: Array<[1 | 2, string]>) =>
  new Response(Buffer.concat(pieces.flatMap(([m, text]) => [Buffer.from([m, m, m]), Buffer.from(text)])), { headers: { "content-type": "application/octet-stream" } })
const commandPath = (session: string, command: string) => `/toolbox/dsbx1/process/session/${session}/command/${command}`
const text = (e: { type: string; data?: Uint8Array }) => (e.data === undefined ? e.type : `${e.type}:${Buffer.from(e.data).toString()}`)

describe("daytona remote: sandboxes", () => {
  it("create looks the name up, posts labels, the snapshot and no auto-stop, then polls until started", async () => {
    const s = scripted([
      step("GET", "/api/sandbox/metal-sbx_1", () => json({ statusCode: 404, message: "Sandbox not found" }, 404)),
      step("POST", "/api/sandbox", (call: Call) => {
        expect(call.headers["authorization"]).toBe("Bearer dtn_key")
        expect(bodyJson(call)).toEqual({
          name: "metal-sbx_1",
          labels: { suite: "conformance", "metal.sandbox_id": "sbx_1", "metal.project_id": "prj_conformance", "metal.organization_id": "00000000-0000-4000-8000-000000000000" },
          env: { CONFORMANCE_SANDBOX: "yes" },
          public: false,
          networkBlockAll: true,
          autoStopInterval: 0,
          autoDeleteInterval: -1,
          target: "eu",
          snapshot: "metal-base"
        })
        return json(wireSandbox({ state: "creating" }))
      }),
      step("GET", "/api/sandbox/dsbx1", () => json(wireSandbox({ state: "starting" }))),
      step("GET", "/api/sandbox/dsbx1", () => json(wireSandbox()))
    ])
    const created = await run(provider(s.client, { snapshot: "metal-base", target: "eu" }).create(conformanceInput("sbx_1")))
    expect(created.resourceId).toBe("dsbx1")
    expect(created.metadata["toolboxProxyUrl"]).toBe(TOOLBOX)
    expect(s.left()).toBe(0)
  })

  it("a first create posts at once (no earlier create can have taken the name); a taken name is found after the 409", async () => {
    const first = scripted([step("POST", "/api/sandbox", () => json(wireSandbox()))])
    expect((await run(provider(first.client).create({ ...conformanceInput("sbx_1"), firstCreate: true }))).resourceId).toBe("dsbx1")
    expect(first.left()).toBe(0)
    const taken = scripted([
      step("POST", "/api/sandbox", () => json({ statusCode: 409, message: "Sandbox with name metal-sbx_1 already exists" }, 409)),
      step("GET", "/api/sandbox/metal-sbx_1", () => json(wireSandbox()))
    ])
    expect((await run(provider(taken.client).create({ ...conformanceInput("sbx_1"), firstCreate: true }))).resourceId).toBe("dsbx1")
    expect(taken.left()).toBe(0)
  })

  it("an OCI image is a declarative build sized in whole units; a failed build is removed and is the customer's", async () => {
    const s = scripted([
      step("GET", "/api/sandbox/metal-sbx_1", () => json({ message: "not found" }, 404)),
      step("POST", "/api/sandbox", (call) => {
        expect(bodyJson(call)).toMatchObject({ buildInfo: { dockerfileContent: "FROM python:3.12\n" }, cpu: 2, memory: 2, disk: 4 })
        return json(wireSandbox({ state: "pending_build" }))
      }),
      step("GET", "/api/sandbox/dsbx1", () => json(wireSandbox({ state: "build_failed", errorReason: "no such image" }))),
      step("DELETE", "/api/sandbox/dsbx1", () => json({}))
    ])
    const input = { ...conformanceInput("sbx_1"), source: { kind: "oci_image" as const, image: "python:3.12" }, resources: { vcpu: 1.5, memoryMb: 1536, diskMb: 3500, architecture: "any" as const } }
    const failure = await failureOf(provider(s.client).create(input))
    expect(failure.kind).toBe("customer")
    expect(failure.message).toContain("no such image")
    expect(s.left()).toBe(0)
  })

  it("a domain allow list goes as Daytona's domainAllowList (names and wildcards, comma-separated), with the internet on", async () => {
    const s = scripted([
      step("GET", "/api/sandbox/metal-sbx_1", () => json({ message: "not found" }, 404)),
      step("POST", "/api/sandbox", (call) => {
        expect(bodyJson(call)).toMatchObject({ networkBlockAll: false, domainAllowList: "api.openai.com,*.pypi.org" })
        return json(wireSandbox())
      })
    ])
    const input = { ...conformanceInput("sbx_1"), internetAccess: true, domainPolicy: { mode: "allow" as const, domains: ["api.openai.com", "*.pypi.org"] } }
    expect((await run(provider(s.client).create(input))).resourceId).toBe("dsbx1")
    expect(s.left()).toBe(0)
  })

  it("reconcile finds the resource by our label (paged list), and nothing for an unknown id", async () => {
    const s = scripted([
      step("GET", "/api/sandbox", (call) => {
        expect(JSON.parse(call.url.searchParams.get("labels")!)).toEqual({ "metal.sandbox_id": "sbx_1" })
        return json({ items: [wireSandbox()], nextCursor: null })
      }),
      // A list item lacks `buildInfo`: the sandbox itself says whether it runs an image.
      step("GET", "/api/sandbox/dsbx1", () => json(wireSandbox({ buildInfo: { dockerfileContent: "FROM python:3.12\n" } }))),
      step("GET", "/api/sandbox", () => json({ items: [], nextCursor: null })),
      step("GET", "/api/sandbox/metal-sbx_2", () => json({ message: "not found" }, 404))
    ])
    const p = provider(s.client)
    const found = await run(p.reconcileCreate("sbx_1"))
    expect([found?.resourceId, found?.metadata["image"]]).toEqual(["dsbx1", true])
    expect(await run(p.reconcileCreate("sbx_2"))).toBeNull()
    expect(s.left()).toBe(0)
  })

  it("upstream codes say more than the status; a create whose answer is lost has an unknown outcome", async () => {
    const s = scripted([
      step("GET", "/api/sandbox/metal-sbx_1", () => json({ message: "not found" }, 404)),
      step("POST", "/api/sandbox", () => json({ message: "Total CPU quota exceeded", code: "ORGANIZATION_QUOTA_EXCEEDED" }, 403)),
      step("GET", "/api/sandbox/metal-sbx_1", () => json({ message: "not found" }, 404)),
      step("POST", "/api/sandbox", () => "transport-error")
    ])
    const p = provider(s.client)
    expect((await failureOf(p.create(conformanceInput("sbx_1")))).kind).toBe("quota")
    expect((await failureOf(p.create(conformanceInput("sbx_1")))).kind).toBe("unknown_outcome")
    expect(s.left()).toBe(0)
  })
})

describe("daytona remote: processes", () => {
  it("exec opens a session and runs the command in a subshell in the home-relative workspace, with the env quoted and no input, then ends the session's shell", async () => {
    const s = scripted([
      step("POST", "/toolbox/dsbx1/process/session", (call) => {
        expect(bodyJson(call)).toEqual({ sessionId: "metal-proc_1" })
        return json({}, 201)
      }),
      step("POST", "/toolbox/dsbx1/process/session/metal-proc_1/exec", (call) => {
        expect(bodyJson(call)).toEqual({
          command: "(mkdir -p -- workspace 2>/dev/null; cd -- workspace || exit 1; exec env -- 'GREETING=it'\"'\"'s me' echo 'a b') < /dev/null",
          runAsync: true,
          suppressInputEcho: true
        })
        return json({ cmdId: "cmd1" }, 202)
      }),
      // Queued behind the command: its shell ends once the command is done.
      step("POST", "/toolbox/dsbx1/process/session/metal-proc_1/exec", (call) => {
        expect(bodyJson(call)).toEqual({ command: "exit 0", runAsync: true, suppressInputEcho: true })
        return json({ cmdId: "cmd2" }, 202)
      })
    ])
    const started = await run(provider(s.client).exec(SANDBOX, {
      command: ["echo", "a b"],
      environment: { GREETING: "it's me" },
      timeoutSeconds: 60,
      maxOutputBytes: 1000,
      processId: "proc_1"
    }))
    expect(Either.getOrUndefined(executionIds.parse(started.executionId))).toEqual({ sessionId: "metal-proc_1", commandId: "cmd1", maxOutputBytes: 1000 })
    expect(s.left()).toBe(0)
  })

  it("a retried exec finds its session's command instead of running it twice (and queues the exit if that had not been done)", async () => {
    const s = scripted([
      step("POST", "/toolbox/dsbx1/process/session", () => json({ message: "session already exists" }, 409)),
      step("GET", "/toolbox/dsbx1/process/session/metal-proc_1", () => json({ sessionId: "metal-proc_1", commands: [{ id: "cmd1", command: "x" }] })),
      step("POST", "/toolbox/dsbx1/process/session/metal-proc_1/exec", (call) => {
        expect(bodyJson(call)).toMatchObject({ command: "exit 0" })
        return json({ cmdId: "cmd2" }, 202)
      }),
      step("POST", "/toolbox/dsbx1/process/session", () => json({ message: "session already exists" }, 409)),
      step("GET", "/toolbox/dsbx1/process/session/metal-proc_1", () => json({ sessionId: "metal-proc_1", commands: [{ id: "cmd1", command: "x" }, { id: "cmd2", command: "exit 0" }] }))
    ])
    const p = provider(s.client)
    const input = { command: ["sleep", "9"], timeoutSeconds: 60, maxOutputBytes: 1000, processId: "proc_1" }
    expect(Either.getOrUndefined(executionIds.parse((await run(p.exec(SANDBOX, input))).executionId))?.commandId).toBe("cmd1")
    expect(Either.getOrUndefined(executionIds.parse((await run(p.exec(SANDBOX, input))).executionId))?.commandId).toBe("cmd1")
    expect(s.left()).toBe(0)
  })

  it("an image sandbox's process without a cwd starts where the image says (no cd); with one, there", async () => {
    const s = scripted([
      step("POST", "/toolbox/dsbx1/process/session", () => json({}, 201)),
      step("POST", "/toolbox/dsbx1/process/session/metal-proc_1/exec", (call) => {
        expect(bodyJson(call)).toMatchObject({ command: "(exec pwd) < /dev/null" })
        return json({ cmdId: "cmd1" }, 202)
      }),
      step("POST", "/toolbox/dsbx1/process/session/metal-proc_1/exec", () => json({ cmdId: "cmd2" }, 202)),
      // A cwd is looked up first (a missing one is cwd_not_found before anything runs).
      step("GET", "/toolbox/dsbx1/files/info", (call) => {
        expect(call.url.searchParams.get("path")).toBe("/srv")
        return json({ name: "srv", size: 0, isDir: true, mode: "drwxr-xr-x", modTime: "2026-11-22T10:00:00Z" })
      }),
      step("POST", "/toolbox/dsbx1/process/session", () => json({}, 201)),
      step("POST", "/toolbox/dsbx1/process/session/metal-proc_2/exec", (call) => {
        expect(bodyJson(call)).toMatchObject({ command: "(cd -- /srv || exit 1; exec pwd) < /dev/null" })
        return json({ cmdId: "cmd1" }, 202)
      }),
      step("POST", "/toolbox/dsbx1/process/session/metal-proc_2/exec", () => json({ cmdId: "cmd2" }, 202))
    ])
    const p = provider(s.client)
    const image: ProviderSandbox = { ...SANDBOX, metadata: { ...SANDBOX.metadata, image: true } }
    await run(p.exec(image, { command: ["pwd"], timeoutSeconds: 60, maxOutputBytes: 1000, processId: "proc_1" }))
    await run(p.exec(image, { command: ["pwd"], cwd: "/srv", timeoutSeconds: 60, maxOutputBytes: 1000, processId: "proc_2" }))
    expect(s.left()).toBe(0)
  })

  it("standard input: the process reads it through a decoder; input goes as lines of octal escapes (chunked), end of input as E; an ended process's input is closed", async () => {
    const id = executionIds.encode({ sessionId: "metal-proc_1", commandId: "cmd1", maxOutputBytes: 1000 })
    const big = new Uint8Array(INPUT_CHUNK_BYTES + 2).map((_, i) => i % 256)
    const inputs: Array<string> = []
    const s = scripted([
      step("POST", "/toolbox/dsbx1/process/session", () => json({}, 201)),
      step("POST", "/toolbox/dsbx1/process/session/metal-proc_1/exec", (call) => {
        const command = (bodyJson(call) as { command: string }).command
        expect(command.startsWith("sh -c ")).toBe(true)
        expect(command).toContain("printf \"$l\"")
        expect(command.endsWith(" sh sh -c 'mkdir -p -- workspace 2>/dev/null; cd -- workspace || exit 1; exec cat'")).toBe(true)
        return json({ cmdId: "cmd1" }, 202)
      }),
      step("POST", "/toolbox/dsbx1/process/session/metal-proc_1/exec", () => json({ cmdId: "cmd2" }, 202)),
      ...[0, 1, 2].map(() =>
        step("POST", `${commandPath("metal-proc_1", "cmd1")}/input`, (call) => {
          inputs.push((bodyJson(call) as { data: string }).data)
          return new Response(null, { status: 204 })
        })),
      step("POST", `${commandPath("metal-proc_1", "cmd1")}/input`, () => json({ statusCode: 410, message: "command has already completed with exit code 0", code: "COMMAND_ALREADY_COMPLETED" }, 410))
    ])
    const p = provider(s.client)
    await run(p.exec(SANDBOX, { command: ["cat"], timeoutSeconds: 60, maxOutputBytes: 1000, processId: "proc_1", stdin: true }))
    await run(p.sendInput!(SANDBOX, id, big, true))
    expect(inputs.map((line) => line.length)).toEqual([INPUT_CHUNK_BYTES * 4 + 1, 2 * 4 + 1, 2])
    expect(inputs[1]).toBe(`${octalLine(big.subarray(INPUT_CHUNK_BYTES))}\n`)
    expect(inputs[1]).toBe(`\\000\\001\n`)
    expect(inputs[2]).toBe("E\n")
    expect((await failureOf(p.sendInput!(SANDBOX, id, new Uint8Array([1]), false))).kind).toBe("not_found")
    expect(s.left()).toBe(0)
  })

  it("reads the multiplexed log while the command runs (complete pieces only), then everything and the exit", async () => {
    const id = executionIds.encode({ sessionId: "metal-proc_1", commandId: "cmd1", maxOutputBytes: 1000 })
    const s = scripted([
      step("GET", commandPath("metal-proc_1", "cmd1"), () => json({ id: "cmd1", exitCode: null })),
      step("GET", `${commandPath("metal-proc_1", "cmd1")}/logs`, (call) => {
        expect(call.headers["x-daytona-split-output"]).toBe("true")
        return log([1, "one\n"], [2, "warn\n"], [1, "tw"])
      }),
      step("GET", commandPath("metal-proc_1", "cmd1"), () => json({ id: "cmd1", exitCode: 3 })),
      step("GET", `${commandPath("metal-proc_1", "cmd1")}/logs`, () => log([1, "one\n"], [2, "warn\n"], [1, "two"]))
    ])
    const p = provider(s.client)
    expect((await run(p.execEvents(SANDBOX, id, 0))).map(text)).toEqual(["stdout:one\n", "stderr:warn\n"])
    const rest = await run(p.execEvents(SANDBOX, id, 2))
    expect(rest.map(text)).toEqual(["stdout:two", "exit"])
    expect(rest.map((e) => e.seq)).toEqual([2, 3])
    expect(rest[1]).toMatchObject({ exitCode: 3, cancelled: false, outputTruncated: false })
    expect(s.left()).toBe(0)
  })

  it("a JSON log (a daemon answering as to an SDK) is used once the command is over: stdout, then stderr", async () => {
    const id = executionIds.encode({ sessionId: "metal-proc_1", commandId: "cmd1", maxOutputBytes: 1000 })
    const s = scripted([
      step("GET", commandPath("metal-proc_1", "cmd1"), () => json({ id: "cmd1", exitCode: null })),
      step("GET", `${commandPath("metal-proc_1", "cmd1")}/logs`, () => json({ stdout: "out\n", stderr: "err\n" })),
      step("GET", commandPath("metal-proc_1", "cmd1"), () => json({ id: "cmd1", exitCode: 0 })),
      step("GET", `${commandPath("metal-proc_1", "cmd1")}/logs`, () => json({ stdout: "out\n", stderr: "err\n" }))
    ])
    const p = provider(s.client)
    expect(await run(p.execEvents(SANDBOX, id, 0))).toEqual([])
    expect((await run(p.execEvents(SANDBOX, id, 0))).map(text)).toEqual(["stdout:out\n", "stderr:err\n", "exit"])
    expect(s.left()).toBe(0)
  })

  it("cancel deletes a running command's session; its exit then reads as cancelled; a finished one is left alone", async () => {
    const id = executionIds.encode({ sessionId: "metal-proc_1", commandId: "cmd1", maxOutputBytes: 1000 })
    const s = scripted([
      step("GET", commandPath("metal-proc_1", "cmd1"), () => json({ id: "cmd1", exitCode: null })),
      step("DELETE", "/toolbox/dsbx1/process/session/metal-proc_1", () => json({})),
      step("GET", commandPath("metal-proc_1", "cmd1"), () => json({ message: "session not found" }, 404)),
      step("GET", commandPath("metal-proc_1", "cmd2"), () => json({ id: "cmd2", exitCode: 0 }))
    ])
    const p = provider(s.client)
    expect(await run(p.cancelExec(SANDBOX, id))).toEqual({ cancelled: true })
    expect(await run(p.execEvents(SANDBOX, id, 4))).toEqual([{ seq: 4, type: "exit", exitCode: null, signal: "SIGTERM", cancelled: true, timedOut: false, outputTruncated: false }])
    const done = executionIds.encode({ sessionId: "metal-proc_1", commandId: "cmd2", maxOutputBytes: 1000 })
    expect(await run(p.cancelExec(SANDBOX, done))).toEqual({ cancelled: false })
    expect(s.left()).toBe(0)
  })
})

describe("daytona remote: files", () => {
  it("/workspace is the home-relative workspace on the wire; listings come back under /workspace", async () => {
    const s = scripted([
      step("GET", "/toolbox/dsbx1/files", (call) => {
        expect(call.url.searchParams.get("path")).toBe("workspace/src")
        return json([{ name: "b.txt", size: 2, isDir: false, mode: "-rw-r--r--", modTime: "2026-11-22T10:00:00Z" }, { name: "a", size: 0, isDir: true, mode: "drwxr-xr-x" }])
      })
    ])
    const listed = await run(provider(s.client).listFiles(SANDBOX, { path: "/workspace/src", recursive: false, maxEntries: 10 }))
    expect(listed.entries.map((e) => [e.path, e.type])).toEqual([["/workspace/src/a", "directory"], ["/workspace/src/b.txt", "file"]])
    expect(s.left()).toBe(0)
  })

  it("a write is one upload-v2 of the raw bytes (no multipart), after the checks", async () => {
    const s = scripted([
      step("GET", "/toolbox/dsbx1/files/info", () => json({ message: "file not found", code: "FILE_NOT_FOUND" }, 404)),
      step("POST", "/toolbox/dsbx1/files/folder", (call) => {
        expect(call.url.searchParams.get("path")).toBe("workspace/out")
        return new Response(null, { status: 201 })
      }),
      step("POST", "/toolbox/dsbx1/files/upload-v2", (call) => {
        expect(call.url.searchParams.get("path")).toBe("workspace/out/a.bin")
        expect(call.headers["content-type"]).toBe("application/octet-stream")
        expect([...bodyBytes(call)]).toEqual([0, 255, 10])
        return json({ name: "a.bin", path: "/home/daytona/workspace/out/a.bin", type: "file" })
      })
    ])
    const written = await run(provider(s.client).writeFile(SANDBOX, { path: "/workspace/out/a.bin", data: new Uint8Array([0, 255, 10]), mode: "create", createParents: true }))
    expect(written).toEqual({ bytesWritten: 3, created: true })
    expect(s.left()).toBe(0)
  })
})

describe("daytona log format", () => {
  it("splits at each 3-byte marker and keeps bytes exact; only complete pieces while running; cut at the output limit", () => {
    const raw = Buffer.concat([Buffer.from([1, 1, 1]), Buffer.from([0, 255, 10]), Buffer.from([2, 2, 2]), Buffer.from("e\n"), Buffer.from([1, 1, 1]), Buffer.from("part")])
    const pieces = demuxLog(raw)
    expect(pieces.map((p) => [p.type, [...p.data]])).toEqual([["stdout", [0, 255, 10]], ["stderr", [101, 10]], ["stdout", [112, 97, 114, 116]]])
    expect(eventsFromPieces(pieces, { maxOutputBytes: 100, exit: null }).map((e) => e.type)).toEqual(["stdout", "stderr"])
    const cut = eventsFromPieces(pieces, { maxOutputBytes: 4, exit: { exitCode: 0 } })
    expect(cut.map((e) => (e.type === "exit" ? e.outputTruncated : e.data.length))).toEqual([3, 1, true])
  })
})

/**
 * The daemon's side of a PTY connect, scripted on a loopback WebSocket server: the adapter's `openSocket` is
 * pointed there, and what it asked for (address, headers) is kept.
 */
const ptyDaemon = (script: (socket: Bun.ServerWebSocket<unknown>, received: Array<Uint8Array>) => { readonly open?: () => void; readonly message?: (data: Uint8Array) => void }) => {
  const opened: Array<{ url: string; headers: Readonly<Record<string, string>> }> = []
  const received: Array<Uint8Array> = []
  const handlers = new Map<Bun.ServerWebSocket<unknown>, ReturnType<typeof script>>()
  const closed: Array<number> = []
  const server = Bun.serve<unknown>({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (request, srv) => (srv.upgrade(request, { data: {} }) ? undefined : new Response("no", { status: 400 })),
    websocket: {
      open: (ws) => {
        const h = script(ws, received)
        handlers.set(ws, h)
        h.open?.()
      },
      message: (ws, message) => {
        const data = typeof message === "string" ? new TextEncoder().encode(message) : new Uint8Array(message)
        received.push(data)
        handlers.get(ws)?.message?.(data)
      },
      close: (_ws, code) => void closed.push(code)
    }
  })
  const openSocket = (url: string, headers: Readonly<Record<string, string>>) => {
    opened.push({ url, headers })
    return new WebSocket(`ws://127.0.0.1:${server.port}/`)
  }
  /** The daemon closes every connection (a session's end: its exit in the reason). */
  const closeAll = (code: number, reason: string) => {
    for (const ws of handlers.keys()) ws.close(code, reason)
  }
  return { openSocket, opened, received, closed, closeAll, stop: () => server.stop(true) }
}
const connected = JSON.stringify({ type: "control", status: "connected" })
const TTY = { command: ["sh", "-i"], environment: { GREETING: "it's me" }, timeoutSeconds: 0, maxOutputBytes: 1000, processId: "proc_tty", pty: { cols: 80, rows: 24 } }
const ttyProvider = (client: HttpClient.HttpClient, openSocket: ReturnType<typeof ptyDaemon>["openSocket"]) =>
  makeDaytonaProvider({ baseUrl: BASE, apiKey: "dtn_key", mode: "remote", httpClient: client, pollIntervalMs: 1, logPollMs: 0, openSocket })
/** Events from `from`, asked for until `done` says they are what the test waits for. */
const eventsUntil = async (p: SandboxProvider, executionId: string, from: number, done: (events: ReadonlyArray<ExecEvent>) => boolean) => {
  const deadline = Date.now() + 5000
  for (;;) {
    const events = await run(p.execEvents(SANDBOX, executionId, from))
    if (done(events)) return events
    if (Date.now() > deadline) throw new Error(`timed out; events so far ${JSON.stringify(events.map(text))}`)
    await Bun.sleep(5)
  }
}
const untilTrue = async (what: string, done: () => boolean) => {
  const deadline = Date.now() + 5000
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(5)
  }
}

describe("daytona remote: terminals", () => {
  it("a lazy PTY session, connected with the key; the typed line runs the command after a marker; output from after it; resize, input in frames, eof as ^D; the exit from the close", async () => {
    let nonce = ""
    const daemon = ptyDaemon((ws) => ({
      open: () => {
        ws.send("Welcome!\r\n$ ")
        ws.send(connected)
      },
      message: (data) => {
        const line = Buffer.from(data).toString()
        if (nonce !== "") return
        nonce = /metal-([0-9a-f]+) ready/.exec(line)?.[1] ?? "?"
        // The terminal echoes the line, then the shell prints the marker — here split across frames — and the command runs.
        ws.send(new TextEncoder().encode(line.replace("\n", "\r\n")))
        ws.send(new TextEncoder().encode(`metal-${nonce}_re`))
        ws.send(new TextEncoder().encode("ady\r"))
        ws.send(new TextEncoder().encode("\n$ "))
      }
    }))
    const s = scripted([
      step("POST", "/toolbox/dsbx1/process/pty", (call) => {
        expect(bodyJson(call)).toEqual({ id: "metal-proc_tty", cols: 80, rows: 24, lazyStart: true })
        return json({ sessionId: "metal-proc_tty" }, 201)
      }),
      step("POST", "/toolbox/dsbx1/process/pty/metal-proc_tty/resize", (call) => {
        expect(bodyJson(call)).toEqual({ cols: 120, rows: 40 })
        return json({ id: "metal-proc_tty", active: true, cols: 120, rows: 40 })
      }),
      step("POST", "/toolbox/dsbx1/process/pty/metal-proc_tty/resize", () => json({ error: "PTY session 'metal-proc_tty' has terminated and cannot be resized" }, 410))
    ])
    try {
      const p = ttyProvider(s.client, daemon.openSocket)
      const { executionId } = await run(p.exec(SANDBOX, TTY))
      expect(daemon.opened).toEqual([{ url: "wss://proxy.daytona.test/toolbox/dsbx1/process/pty/metal-proc_tty/connect", headers: { authorization: "Bearer dtn_key" } }])
      expect(Buffer.from(daemon.received[0]!).toString()).toBe(
        ` printf '%s_%s\\n' metal-${nonce} ready; mkdir -p -- workspace 2>/dev/null; cd -- workspace || exit 1; exec env -- 'GREETING=it'"'"'s me' sh -i || exit 127\n`
      )
      expect((await eventsUntil(p, executionId, 0, (e) => e.length > 0)).map(text)).toEqual(["stdout:$ "])
      await run(p.resizeTerminal!(SANDBOX, executionId, { cols: 120, rows: 40 }))
      // Input goes in frames the daemon reads (at most 32 KiB each); eof types ^D.
      const input = new Uint8Array(70 * 1024).fill(0x61)
      await run(p.sendInput!(SANDBOX, executionId, input, true))
      await untilTrue("the input", () => daemon.received.slice(1).reduce((n, f) => n + f.length, 0) === input.length + 1)
      const frames = daemon.received.slice(1)
      expect(frames.map((f) => f.length)).toEqual([32 * 1024, 32 * 1024, 6 * 1024 + 1])
      expect(frames.at(-1)!.at(-1)).toBe(4)
      // The shell ends: the daemon closes with its exit.
      daemon.closeAll(1011, JSON.stringify({ exitCode: 3, exitReason: "non-zero exit" }))
      const rest = await eventsUntil(p, executionId, 1, (e) => e.at(-1)?.type === "exit")
      expect(rest).toEqual([{ seq: 1, type: "exit", exitCode: 3, signal: null, cancelled: false, timedOut: false, outputTruncated: false }])
      // Ended: a resize is refused (410), input is refused without a connection.
      expect((await failureOf(p.resizeTerminal!(SANDBOX, executionId, { cols: 80, rows: 24 }))).kind).toBe("not_found")
      expect((await failureOf(p.sendInput!(SANDBOX, executionId, new Uint8Array([1]), false))).kind).toBe("not_found")
      expect(daemon.opened.length).toBe(1)
      expect(s.left()).toBe(0)
    } finally {
      daemon.stop()
    }
  })

  it("a shell that never prints the marker: the start fails once it wrote 1 MiB, its session is deleted, nothing more is kept", async () => {
    const daemon = ptyDaemon((ws) => ({
      open: () => ws.send(connected),
      // A hostile sandbox: endless output, never the marker (its halves, but never joined).
      message: () => {
        const chunk = new TextEncoder().encode(`${"x".repeat(64 * 1024 - 12)}metal- ready`)
        for (let i = 0; i < 40; i++) ws.send(chunk)
      }
    }))
    const s = scripted([
      step("POST", "/toolbox/dsbx1/process/pty", () => json({ sessionId: "metal-proc_tty" }, 201)),
      step("DELETE", "/toolbox/dsbx1/process/pty/metal-proc_tty", () => json({ message: "PTY session deleted" }))
    ])
    try {
      const failure = await failureOf(ttyProvider(s.client, daemon.openSocket).exec(SANDBOX, TTY))
      expect(failure.kind).toBe("customer")
      expect(failure.message).toContain(`more than ${MAX_PREAMBLE_BYTES} bytes`)
      await untilTrue("the socket's close", () => daemon.closed.length === 1)
      expect(s.left()).toBe(0)
    } finally {
      daemon.stop()
    }
  })

  it("a command too long to type is refused before anything is created", async () => {
    const s = scripted([])
    const failure = await failureOf(ttyProvider(s.client, ptyDaemon(() => ({})).openSocket).exec(SANDBOX, { ...TTY, command: ["echo", "x".repeat(MAX_TYPED_LINE_BYTES)] }))
    expect(failure.kind).toBe("invalid_request")
    expect(s.calls).toEqual([])
  })

  it("a command, cwd or environment with control characters (which the terminal would act on) is refused before anything is created", async () => {
    for (const input of [
      { ...TTY, command: ["printf", "a\rb"] },
      { ...TTY, command: ["echo", "x\u0003"] },
      { ...TTY, command: ["sh"], cwd: "/tmp/\u0015x" },
      { ...TTY, command: ["sh"], environment: { A: "\u007f" } }
    ]) {
      const s = scripted([])
      const failure = await failureOf(ttyProvider(s.client, ptyDaemon(() => ({})).openSocket).exec(SANDBOX, input))
      expect(failure.kind).toBe("invalid_request")
      expect(failure.message).toContain("control characters")
      expect(s.calls).toEqual([])
    }
  })

  it("a retried exec: a session started already is followed (nothing typed again); one never connected is started now", async () => {
    const daemon = ptyDaemon((ws) => ({ open: () => ws.send(connected) }))
    const s = scripted([
      step("POST", "/toolbox/dsbx1/process/pty", () => json({ error: "PTY session with ID 'metal-proc_tty' already exists" }, 409)),
      step("GET", "/toolbox/dsbx1/process/pty/metal-proc_tty", () => json({ id: "metal-proc_tty", cwd: "/home/daytona", envs: {}, cols: 80, rows: 24, createdAt: "2026-01-01T00:00:00Z", active: true, lazyStart: true }))
    ])
    try {
      const { executionId } = await run(ttyProvider(s.client, daemon.openSocket).exec(SANDBOX, TTY))
      expect(Either.getOrUndefined(terminalIds.parse(executionId))).toEqual({ sessionId: "metal-proc_tty", maxOutputBytes: 1000 })
      expect(daemon.opened.length).toBe(1)
      await Bun.sleep(50)
      expect(daemon.received).toEqual([])
      expect(s.left()).toBe(0)
    } finally {
      daemon.stop()
    }
  })

  it("after a restart: a session Daytona no longer knows is lost (not_found); a cancelled one ends as cancelled (SIGKILL)", async () => {
    const daemon = ptyDaemon((ws) => ({
      open: () => {
        ws.send(JSON.stringify({ type: "control", status: "error", error: "Failed to connect to PTY session: PTY session metal-proc_tty not found" }))
        ws.close()
      }
    }))
    const s = scripted([
      step("DELETE", "/toolbox/dsbx1/process/pty/metal-proc_tty", () => json({ error: "PTY session not found" }, 404)),
      step("DELETE", "/toolbox/dsbx1/process/pty/metal-proc_gone", () => json({ message: "PTY session deleted" }))
    ])
    try {
      const p = ttyProvider(s.client, daemon.openSocket)
      const id = terminalIds.encode({ sessionId: "metal-proc_tty", maxOutputBytes: 1000 })
      const lost = await failureOf(p.execEvents(SANDBOX, id, 5))
      expect(lost.kind).toBe("not_found")
      expect(lost.message).toContain("after event 5 are lost")
      // Gone already: nothing to cancel.
      expect(await run(p.cancelExec(SANDBOX, id))).toEqual({ cancelled: false })
      const gone = terminalIds.encode({ sessionId: "metal-proc_gone", maxOutputBytes: 1000 })
      expect(await run(p.cancelExec(SANDBOX, gone))).toEqual({ cancelled: true })
      expect(await run(p.execEvents(SANDBOX, gone, 2))).toEqual([{ seq: 2, type: "exit", exitCode: null, signal: "SIGKILL", cancelled: true, timedOut: false, outputTruncated: false }])
      // Not a terminal's id: refused without a call.
      expect((await failureOf(p.resizeTerminal!(SANDBOX, "daytona-pty:!!", { cols: 1, rows: 1 }))).kind).toBe("invalid_request")
      expect(s.left()).toBe(0)
    } finally {
      daemon.stop()
    }
  })

  it("declares terminals and standard input for plain processes", () => {
    const p = provider(scripted([]).client)
    expect(p.capabilities.process).toMatchObject({ terminal: true })
    expect(p.capabilities.process?.stdin).not.toBe(false)
    expect(p.sendInput).toBeDefined()
    expect(p.resizeTerminal).toBeDefined()
  })
})
