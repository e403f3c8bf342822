/**
 * The Blaxel emulator's sandbox runtime, processes: `POST /process` (a shell command, `waitForCompletion: false`;
 * a name already running is refused as Blaxel's runtime refuses it), `GET /process/{pid or name}` (the status;
 * output tails are not inlined here: `null`, as Blaxel sends when it has none), `GET …/logs` (the whole output),
 * `DELETE …/kill`. Options Blaxel has but the emulator does not (waiting for completion or ports, keep-alive,
 * restarts) are refused when asked for.
 */
import { Schema } from "effect"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Books, EmulatedSandbox, ProcessRecord } from "./books.ts"
import { HttpFailure, json, readBody, StringMap } from "./http.ts"

/** What one process may keep of its output (Blaxel keeps a bounded log per process too). */
const MAX_OUTPUT_BYTES = 10 * 1024 * 1024
/** A status request waits this long for a running process to end, so a quick exit is seen at once. */
const STATUS_WAIT_MS = 50

const StartProcess = Schema.Struct({
  command: Schema.String.pipe(Schema.minLength(1)),
  name: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.-]{1,128}$/))),
  workingDir: Schema.optional(Schema.String),
  env: Schema.optional(StringMap),
  waitForCompletion: Schema.optional(Schema.Boolean),
  timeout: Schema.optional(Schema.Int),
  waitForPorts: Schema.optional(Schema.Array(Schema.Int)),
  restartOnFailure: Schema.optional(Schema.Boolean),
  maxRestarts: Schema.optional(Schema.Int),
  keepAlive: Schema.optional(Schema.Boolean)
})

const httpDate = (iso: string) => new Date(iso).toUTCString()

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

  const describe = async (s: EmulatedSandbox, p: ProcessRecord, waitMs = 0) => {
    let info = await run(runtime.getExec(s.runtimeId, p.execId))
    if (info.state === "running" && waitMs > 0) {
      // The runtime wakes on the process's events; the exit is one of them.
      const deadline = Date.now() + waitMs
      for (let seen = 0; info.state === "running" && Date.now() < deadline;) {
        const events = await run(runtime.execEvents(s.runtimeId, p.execId, seen, deadline - Date.now()))
        seen += events.length
        if (events.at(-1)?.type === "exit") info = await run(runtime.getExec(s.runtimeId, p.execId))
      }
    }
    const status = info.state === "running" ? "running" : p.killed ? "killed" : info.exitCode === 0 ? "completed" : "failed"
    return {
      pid: p.pid,
      name: p.name,
      command: p.command,
      status,
      startedAt: httpDate(p.startedAt),
      completedAt: info.state === "running" ? "" : httpDate(new Date().toISOString()),
      exitCode: info.state === "running" ? 0 : info.exitCode ?? (p.killed ? 137 : -1),
      workingDir: p.workingDir,
      logs: null,
      stdout: null,
      stderr: null,
      restartOnFailure: false,
      maxRestarts: 0,
      restartCount: 0,
      keepAlive: false
    }
  }

  const start = async (s: EmulatedSandbox, request: Request) => {
    const body = await readBody(request, StartProcess)
    for (const [field, value, none] of [
      ["waitForCompletion", body.waitForCompletion, false],
      ["restartOnFailure", body.restartOnFailure, false],
      ["keepAlive", body.keepAlive, false]
    ] as const) {
      if (value !== undefined && value !== none) throw new HttpFailure(400, `${field} is not emulated`)
    }
    if ((body.waitForPorts?.length ?? 0) > 0) throw new HttpFailure(400, "waitForPorts is not emulated")
    if (body.name !== undefined) {
      const existing = find(s, body.name)
      if (existing !== undefined && (await describe(s, existing)).status === "running") {
        throw new HttpFailure(400, `process with name '${body.name}' already exists and is running`)
      }
    }
    const workingDir = body.workingDir ?? s.workingDir ?? "/"
    const started = await run(runtime.exec(s.runtimeId, {
      command: ["sh", "-c", body.command],
      cwd: workingDir,
      env: body.env ?? {},
      maxOutputBytes: MAX_OUTPUT_BYTES
    }))
    const record: ProcessRecord = {
      runtimeId: s.runtimeId,
      name: body.name ?? String(started.pid),
      pid: String(started.pid),
      execId: started.execId,
      command: body.command,
      workingDir,
      startedAt: new Date().toISOString(),
      killed: false
    }
    processes.set(books.processKey(s.runtimeId, record.name), record)
    books.prune()
    return json(await describe(s, record))
  }

  const logs = async (s: EmulatedSandbox, identifier: string) => {
    const p = findOr404(s, identifier)
    const events = await run(runtime.execEvents(s.runtimeId, p.execId, 0))
    const text = (type?: "stdout" | "stderr") =>
      Buffer.concat(events.flatMap((e) => (e.type !== "exit" && (type === undefined || e.type === type) ? [e.data] : []))).toString("utf8")
    return json({ stdout: text("stdout"), stderr: text("stderr"), logs: text() })
  }

  const kill = async (s: EmulatedSandbox, identifier: string) => {
    const p = findOr404(s, identifier)
    if ((await describe(s, p)).status !== "running") throw new HttpFailure(404, `process ${identifier} is not running`)
    p.killed = true
    processes.set(books.processKey(s.runtimeId, p.name), p)
    await run(runtime.kill(s.runtimeId, p.execId, "SIGKILL"))
    return json({ message: "Process killed successfully" })
  }

  return {
    start,
    get: async (s: EmulatedSandbox, identifier: string) => json(await describe(s, findOr404(s, identifier), STATUS_WAIT_MS)),
    logs,
    kill
  }
}
