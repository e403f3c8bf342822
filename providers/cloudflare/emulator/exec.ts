/**
 * The bridge emulator's commands: `POST /v1/sandbox/{id}/exec {argv, timeout_ms?, cwd?}` runs one and answers its
 * output as server-sent events on that response: `stdout`/`stderr` frames with base64 data in the order written,
 * then `exit` `{exit_code}` (128 + the signal's number for a command a signal ended), or `error` `{error, code}`
 * when the bridge's timeout ended it (`COMMAND_TIMEOUT`). As the reference bridge does, it refuses a non-empty
 * `env` and any `stdin` (400 `UNSUPPORTED`), and caps `timeout_ms` at its request timeout (30 s). The command is
 * killed when the caller goes away: nothing is kept of it after its stream. The stream opens with an SSE comment, so
 * the answer leaves as soon as the command has started.
 */
import { Schema } from "effect"
import * as path from "node:path"
import type { ExecEvent, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { EmulatedSandbox } from "./books.ts"
import { HttpFailure, readBody } from "./http.ts"

export const REQUEST_TIMEOUT_MS = 30_000
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024
const SIGNALS: Readonly<Record<string, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 }

const ExecBody = Schema.Struct({
  argv: Schema.Array(Schema.String).pipe(Schema.minItems(1)),
  timeout_ms: Schema.optional(Schema.Int.pipe(Schema.positive())),
  cwd: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  env: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  stdin: Schema.optional(Schema.Unknown)
})

const frame = (event: string, data: string) => `event: ${event}\ndata: ${data}\n\n`

export const makeExec = (runtime: LocalRuntimeShape) => {
  const exec = async (s: EmulatedSandbox, request: Request) => {
    const body = await readBody(request, ExecBody)
    if (body.env !== undefined && Object.keys(body.env).length > 0) throw new HttpFailure(400, "the bridge runs commands without environment overrides", "UNSUPPORTED")
    if (body.stdin !== undefined) throw new HttpFailure(400, "the bridge runs commands without standard input", "UNSUPPORTED")
    const timeoutMs = Math.min(body.timeout_ms ?? REQUEST_TIMEOUT_MS, REQUEST_TIMEOUT_MS)
    const cwd = path.posix.resolve("/workspace", body.cwd ?? "/workspace")
    const started = await run(runtime.exec(s.runtimeId, { command: body.argv, cwd, env: {}, timeoutMs, maxOutputBytes: MAX_OUTPUT_BYTES, stdin: false }))
    const encoder = new TextEncoder()
    const signal = request.signal
    let seen = 0
    let done = false
    const kill = () => {
      if (!done) void run(runtime.kill(s.runtimeId, started.execId, "SIGKILL")).catch(() => undefined)
    }
    signal.addEventListener("abort", kill, { once: true })
    const stream = new ReadableStream<Uint8Array>({
      // A comment first, so the answer (and its headers) leaves at once, before any output.
      start: (controller) => controller.enqueue(encoder.encode(": started\n\n")),
      pull: async (controller) => {
        while (!done) {
          let events: ReadonlyArray<ExecEvent>
          try {
            events = await run(runtime.execEvents(s.runtimeId, started.execId, seen, 1000))
          } catch {
            done = true
            controller.enqueue(encoder.encode(frame("error", JSON.stringify({ error: "the sandbox stopped", code: "SANDBOX_STOPPED" }))))
            break
          }
          seen += events.length
          const out: Array<string> = []
          for (const e of events) {
            if (e.type !== "exit") {
              out.push(frame(e.type, Buffer.from(e.data).toString("base64")))
              continue
            }
            done = true
            if (e.timedOut) out.push(frame("error", JSON.stringify({ error: `the command ran longer than ${timeoutMs} ms`, code: "COMMAND_TIMEOUT" })))
            else out.push(frame("exit", JSON.stringify({ exit_code: e.exitCode ?? 128 + (SIGNALS[e.signal ?? ""] ?? 9) })))
          }
          if (out.length > 0) {
            controller.enqueue(encoder.encode(out.join("")))
            if (!done) return
          }
          if (signal.aborted) {
            done = true
            break
          }
        }
        signal.removeEventListener("abort", kill)
        controller.close()
      },
      cancel: () => {
        kill()
        done = true
      }
    })
    return new Response(stream, { headers: { "content-type": "text/event-stream", "cache-control": "no-store" } })
  }
  return { exec }
}
