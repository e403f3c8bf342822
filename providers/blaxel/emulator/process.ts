/**
 * The Blaxel emulator's sandbox runtime, processes, as Blaxel's SDK (`@blaxel/core`'s `sandbox.process`) and the
 * adapter drive them:
 * - `POST /process {command, name, workingDir, env, waitForCompletion, stdin}`: a shell command (a name already
 *   running is refused as Blaxel's runtime refuses it). `waitForCompletion: true` holds the answer until it ends
 *   (the status with its whole output); asked with `Accept: text/event-stream`, the answer is NDJSON instead:
 *   `{type: "stdout" | "stderr", data}` per line of output as it is written, then `{type: "result", data}` (the
 *   status, as JSON text), as the SDK's `exec` with `onLog`/`onStdout` reads it.
 * - `GET /process` (the sandbox's processes), `GET /process/{pid or name}` (the status; the output inlined once it
 *   is over), `GET …/logs` (the whole output), `GET …/logs/stream` (`stdout:`/`stderr:` lines as they are written,
 *   `[keepalive]` while it is quiet, ending with the process).
 * - `DELETE /process/{id}` stops it (SIGTERM: `stopped`), `DELETE …/kill` kills it (SIGKILL: `killed`).
 * - `POST …/stdin` writes the raw body to the input of a process started with `stdin: true`; `DELETE …/stdin`
 *   closes it.
 * Options Blaxel has but the emulator does not (waiting for ports, keep-alive, restarts) are refused when asked for.
 * What is relayed from a sandbox is bounded: the runtime keeps at most 10 MiB of a process's output, and a line of
 * a stream is cut at 1 MiB.
 */
import { Schema } from "effect"
import type { ExecEvent, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Books, EmulatedSandbox, ProcessRecord } from "./books.ts"
import { HttpFailure, json, readBody, StringMap } from "./http.ts"

/** What one process may keep of its output (Blaxel keeps a bounded log per process too). */
const MAX_OUTPUT_BYTES = 10 * 1024 * 1024
/** A status request waits this long for a running process to end, so a quick exit is seen at once. */
const STATUS_WAIT_MS = 50
/** The longest line a stream carries whole: a longer one is sent in pieces of this size. */
const MAX_LINE_BYTES = 1024 * 1024
/** A stream with nothing to send says so this often. */
const KEEPALIVE_MS = 15_000
/** The most one stdin write takes. */
const MAX_STDIN_BYTES = 1024 * 1024

const StartProcess = Schema.Struct({
  command: Schema.String.pipe(Schema.minLength(1)),
  name: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.-]{1,128}$/))),
  workingDir: Schema.optional(Schema.String),
  env: Schema.optional(StringMap),
  waitForCompletion: Schema.optional(Schema.Boolean),
  stdin: Schema.optional(Schema.Boolean),
  timeout: Schema.optional(Schema.Int),
  waitForPorts: Schema.optional(Schema.Array(Schema.Int)),
  restartOnFailure: Schema.optional(Schema.Boolean),
  maxRestarts: Schema.optional(Schema.Int),
  keepAlive: Schema.optional(Schema.Boolean)
})

const httpDate = (iso: string) => new Date(iso).toUTCString()

/**
 * Splits output into lines as they complete (per stream), a partial line held until its end or the exit. A line
 * longer than `MAX_LINE_BYTES` is passed on in pieces of that size, so nothing held or sent grows without end.
 */
const lineSplitter = () => {
  const pending = { stdout: "", stderr: "" }
  /** The pending line's start already went out in pieces: its end alone follows (nothing when it is empty). */
  const carried = { stdout: false, stderr: false }
  const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() }
  const cut = (type: "stdout" | "stderr", text: string, end: boolean): Array<string> => {
    pending[type] += text
    const parts = pending[type].split("\n")
    pending[type] = end ? "" : parts.pop()!
    if (end && parts.at(-1) === "") parts.pop()
    const out: Array<string> = []
    for (const line of parts) {
      const rest = carried[type]
      carried[type] = false
      if (line === "") {
        if (!rest) out.push("")
        continue
      }
      for (let at = 0; at < line.length; at += MAX_LINE_BYTES) out.push(line.slice(at, at + MAX_LINE_BYTES))
    }
    while (pending[type].length > MAX_LINE_BYTES) {
      out.push(pending[type].slice(0, MAX_LINE_BYTES))
      pending[type] = pending[type].slice(MAX_LINE_BYTES)
      carried[type] = true
    }
    return out
  }
  return {
    push: (type: "stdout" | "stderr", data: Uint8Array) => cut(type, decoders[type].decode(data, { stream: true }), false),
    end: (type: "stdout" | "stderr") => cut(type, decoders[type].decode(), true)
  }
}

export const makeProcesses = (books: Books, runtime: LocalRuntimeShape) => {
  const { processes } = books

  /** By name, or by pid among the sandbox's processes. */
  const find = (s: EmulatedSandbox, identifier: string): ProcessRecord | undefined =>
    processes.get(books.processKey(s.runtimeId, identifier)) ??
      processes.entries().map(([, p]) => p).find((p) => p.runtimeId === s.runtimeId && p.pid === identifier)
  const findOr404 = (s: EmulatedSandbox, identifier: string) => {
    const p = find(s, identifier)
    if (p === undefined) throw new HttpFailure(404, "process not found")
    return p
  }

  /** Waits up to `waitMs` for the process to end (the runtime wakes on its events; the exit is one of them). */
  const settle = async (s: EmulatedSandbox, p: ProcessRecord, waitMs: number, signal?: AbortSignal) => {
    let info = await run(runtime.getExec(s.runtimeId, p.execId))
    const deadline = Date.now() + waitMs
    for (let seen = 0; info.state === "running" && Date.now() < deadline && signal?.aborted !== true;) {
      const events = await run(runtime.execEvents(s.runtimeId, p.execId, seen, Math.min(5000, deadline - Date.now())))
      seen += events.length
      if (events.at(-1)?.type === "exit") info = await run(runtime.getExec(s.runtimeId, p.execId))
    }
    return info
  }

  const outputOf = async (s: EmulatedSandbox, p: ProcessRecord) => {
    const events = await run(runtime.execEvents(s.runtimeId, p.execId, 0))
    const text = (type?: "stdout" | "stderr") =>
      Buffer.concat(events.flatMap((e) => (e.type !== "exit" && (type === undefined || e.type === type) ? [e.data] : []))).toString("utf8")
    return { stdout: text("stdout"), stderr: text("stderr"), logs: text() }
  }

  const describe = async (s: EmulatedSandbox, p: ProcessRecord, waitMs = 0, signal?: AbortSignal) => {
    const info = await settle(s, p, waitMs, signal)
    const running = info.state === "running"
    const status = running ? "running" : p.killed ? "killed" : p.stopped ? "stopped" : info.exitCode === 0 ? "completed" : "failed"
    // A running process's output is read from its logs; one that is over carries it (bounded by the runtime).
    const output = running ? { logs: null, stdout: null, stderr: null } : await outputOf(s, p)
    return {
      pid: p.pid,
      name: p.name,
      command: p.command,
      status,
      startedAt: httpDate(p.startedAt),
      completedAt: running ? "" : httpDate(new Date().toISOString()),
      exitCode: running ? 0 : info.exitCode ?? (p.killed ? 137 : p.stopped ? 143 : -1),
      workingDir: p.workingDir,
      ...output,
      stdin: p.stdin,
      restartOnFailure: false,
      maxRestarts: 0,
      restartCount: 0,
      keepAlive: false
    }
  }

  /** NDJSON of a process waited for: its output line by line as it is written, then its status. */
  const completionStream = (s: EmulatedSandbox, p: ProcessRecord, signal: AbortSignal) => {
    const encoder = new TextEncoder()
    const lines = lineSplitter()
    let seen = 0
    let done = false
    return new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        try {
          while (!done && !signal.aborted) {
            const events: ReadonlyArray<ExecEvent> = await run(runtime.execEvents(s.runtimeId, p.execId, seen, KEEPALIVE_MS))
            seen += events.length
            const out: Array<string> = []
            for (const e of events) {
              if (e.type === "exit") {
                done = true
                for (const type of ["stdout", "stderr"] as const) for (const line of lines.end(type)) out.push(JSON.stringify({ type, data: line }))
                out.push(JSON.stringify({ type: "result", data: JSON.stringify(await describe(s, p)) }))
              } else {
                for (const line of lines.push(e.type, e.data)) out.push(JSON.stringify({ type: e.type, data: line }))
              }
            }
            if (out.length > 0) return controller.enqueue(encoder.encode(`${out.join("\n")}\n`))
          }
          controller.close()
        } catch {
          done = true
          controller.close()
        }
      },
      cancel: () => {
        done = true
      }
    })
  }

  const start = async (s: EmulatedSandbox, request: Request) => {
    const body = await readBody(request, StartProcess)
    for (const [field, value, none] of [
      ["restartOnFailure", body.restartOnFailure, false],
      ["keepAlive", body.keepAlive, false]
    ] as const) {
      if (value !== undefined && value !== none) throw new HttpFailure(400, `${field} is not emulated`)
    }
    if ((body.waitForPorts?.length ?? 0) > 0) throw new HttpFailure(400, "waitForPorts is not emulated")
    if (body.name !== undefined) {
      const existing = find(s, body.name)
      if (existing !== undefined && (await run(runtime.getExec(s.runtimeId, existing.execId))).state === "running") {
        throw new HttpFailure(400, `process with name '${body.name}' already exists and is running`)
      }
    }
    const workingDir = body.workingDir ?? s.workingDir ?? "/"
    const started = await run(runtime.exec(s.runtimeId, {
      command: ["sh", "-c", body.command],
      cwd: workingDir,
      env: body.env ?? {},
      maxOutputBytes: MAX_OUTPUT_BYTES,
      stdin: body.stdin === true
    }))
    const record: ProcessRecord = {
      runtimeId: s.runtimeId,
      name: body.name ?? String(started.pid),
      pid: String(started.pid),
      execId: started.execId,
      command: body.command,
      workingDir,
      startedAt: new Date().toISOString(),
      killed: false,
      stopped: false,
      stdin: body.stdin === true
    }
    processes.set(books.processKey(s.runtimeId, record.name), record)
    books.prune()
    if (body.waitForCompletion !== true) return json(await describe(s, record))
    if ((request.headers.get("accept") ?? "").includes("text/event-stream")) {
      return new Response(completionStream(s, record, request.signal), { headers: { "content-type": "application/x-ndjson" } })
    }
    while ((await settle(s, record, 5000, request.signal)).state === "running" && !request.signal.aborted);
    return json(await describe(s, record))
  }

  /** `stdout:`/`stderr:` lines from the start, as they are written, until the process ends. */
  const logStream = (s: EmulatedSandbox, identifier: string, signal: AbortSignal) => {
    const p = findOr404(s, identifier)
    const encoder = new TextEncoder()
    const lines = lineSplitter()
    let seen = 0
    let done = false
    const body = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        try {
          if (done || signal.aborted) return controller.close()
          const events = await run(runtime.execEvents(s.runtimeId, p.execId, seen, KEEPALIVE_MS))
          seen += events.length
          if (events.length === 0) return controller.enqueue(encoder.encode("[keepalive]\n"))
          const out: Array<string> = []
          for (const e of events) {
            if (e.type === "exit") {
              done = true
              for (const type of ["stdout", "stderr"] as const) for (const line of lines.end(type)) out.push(`${type}:${line}`)
            } else for (const line of lines.push(e.type, e.data)) out.push(`${e.type}:${line}`)
          }
          if (out.length > 0) controller.enqueue(encoder.encode(`${out.join("\n")}\n`))
          if (done) controller.close()
        } catch {
          done = true
          controller.close()
        }
      },
      cancel: () => {
        done = true
      }
    })
    return new Response(body, { headers: { "content-type": "text/plain; charset=utf-8" } })
  }

  const logs = async (s: EmulatedSandbox, identifier: string) => json(await outputOf(s, findOr404(s, identifier)))

  /** Ends a running process with `signal`, marked as killed (SIGKILL) or stopped (SIGTERM). */
  const end = async (s: EmulatedSandbox, identifier: string, signal: "SIGKILL" | "SIGTERM") => {
    const p = findOr404(s, identifier)
    if ((await run(runtime.getExec(s.runtimeId, p.execId))).state !== "running") throw new HttpFailure(404, `process ${identifier} is not running`)
    if (signal === "SIGKILL") p.killed = true
    else p.stopped = true
    processes.set(books.processKey(s.runtimeId, p.name), p)
    await run(runtime.kill(s.runtimeId, p.execId, signal))
    return json({ message: signal === "SIGKILL" ? "Process killed successfully" : "Process stopped successfully" })
  }

  const writeStdin = async (s: EmulatedSandbox, identifier: string, request: Request) => {
    const p = findOr404(s, identifier)
    if (!p.stdin) throw new HttpFailure(400, `process ${identifier} was not started with stdin`)
    if (Number(request.headers.get("content-length") ?? "0") > MAX_STDIN_BYTES) throw new HttpFailure(413, "the input is too large")
    const data = new Uint8Array(await request.arrayBuffer())
    if (data.length > MAX_STDIN_BYTES) throw new HttpFailure(413, "the input is too large")
    await run(runtime.sendInput(s.runtimeId, p.execId, data))
    return json({ message: "stdin written" })
  }

  const closeStdin = async (s: EmulatedSandbox, identifier: string) => {
    const p = findOr404(s, identifier)
    if (!p.stdin) throw new HttpFailure(400, `process ${identifier} was not started with stdin`)
    await run(runtime.sendInput(s.runtimeId, p.execId, new Uint8Array(0), true))
    return json({ message: "stdin closed" })
  }

  const list = async (s: EmulatedSandbox) =>
    json(await Promise.all(processes.entries().map(([, p]) => p).filter((p) => p.runtimeId === s.runtimeId).map((p) => describe(s, p))))

  return {
    start,
    list,
    get: async (s: EmulatedSandbox, identifier: string) => json(await describe(s, findOr404(s, identifier), STATUS_WAIT_MS)),
    logs,
    logStream,
    stop: (s: EmulatedSandbox, identifier: string) => end(s, identifier, "SIGTERM"),
    kill: (s: EmulatedSandbox, identifier: string) => end(s, identifier, "SIGKILL"),
    writeStdin,
    closeStdin
  }
}
