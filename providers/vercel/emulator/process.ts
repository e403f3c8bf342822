/**
 * The Vercel emulator's commands in a session: `POST …/cmd {command, args, cwd, env, sudo, timeout}` answers the
 * command at once (detached), or with `wait: true` (what the SDK's `runCommand` sends) as NDJSON: the command, its
 * `{stream, data}` log lines as they are written when `logs: true`, then the command again with its exit code;
 * `sudo` is refused (the jail has no root). `GET …/cmd/{cmdId}` (`?wait=true` answers once the command has exited),
 * `GET …/cmd/{cmdId}/logs` (NDJSON `{stream, data}` lines from the start, in the order written, ending when the
 * command does), `POST …/cmd/{cmdId}/kill {signal}`. What a stream relays from the sandbox is bounded by what the
 * runtime keeps of a command's output (16 MiB). A command ended by a signal exits
 * with 128 + its number, as a shell reports it; one past its `timeout` is killed and exits 137, as Vercel
 * SIGKILLs it (the local runtime's grace period before SIGKILL does not show).
 */
import { Schema } from "effect"
import * as crypto from "node:crypto"
import * as path from "node:path"
import type { ExecEvent, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Books, CommandRecord, EmulatedSandbox } from "./books.ts"
import { sessionCwd } from "./control.ts"
import { HttpFailure, json, readBody, signalName, signalNumber, StringMap } from "./http.ts"

/** What one command may keep of its output (Vercel keeps a command's logs whole; the emulator bounds them). */
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024
const MAX_TIMEOUT_MS = 5 * 3600 * 1000

const RunCommand = Schema.Struct({
  command: Schema.String.pipe(Schema.minLength(1)),
  args: Schema.optional(Schema.Array(Schema.String)),
  cwd: Schema.optional(Schema.String),
  env: Schema.optional(StringMap),
  sudo: Schema.optional(Schema.Boolean),
  wait: Schema.optional(Schema.Boolean),
  logs: Schema.optional(Schema.Boolean),
  timeout: Schema.optional(Schema.Int.pipe(Schema.between(1, MAX_TIMEOUT_MS)))
})
const Kill = Schema.Struct({ signal: Schema.Int.pipe(Schema.between(1, 64)) })

export const makeCommands = (books: Books, runtime: LocalRuntimeShape) => {
  const { commands } = books

  const recordOr404 = (s: EmulatedSandbox, cmdId: string) => {
    const c = commands.get(books.commandKey(s.sessionId, cmdId))
    if (c === undefined) throw new HttpFailure(404, `Command ${cmdId} not found`, "not_found")
    return c
  }

  const wire = (c: CommandRecord, exitCode: number | null) => ({
    id: c.cmdId,
    name: c.name,
    args: c.args,
    cwd: c.cwd,
    sessionId: c.sessionId,
    exitCode,
    startedAt: c.startedAt,
    ...(exitCode === null ? {} : { durationMs: (c.finishedAt ?? Date.now()) - c.startedAt })
  })

  /**
   * The exit code once the command is over (128 + the signal for one killed, 137 past its timeout), else null;
   * kept in the command's record when first seen.
   */
  const exitCodeOf = async (c: CommandRecord): Promise<number | null> => {
    const key = books.commandKey(c.sessionId, c.cmdId)
    const known = commands.get(key)?.exitCode
    if (known !== undefined) return known
    const info = await run(runtime.getExec(c.runtimeId, c.execId))
    if (info.state === "running") return null
    const events = await run(runtime.execEvents(c.runtimeId, c.execId, 0))
    const exit = events.at(-1)
    const code = exit?.type === "exit" && exit.timedOut
      ? 137
      : info.exitCode ?? 128 + ((exit?.type === "exit" ? signalNumber(exit.signal) : undefined) ?? 9)
    if (commands.get(key) !== undefined) commands.set(key, { ...c, finishedAt: Date.now(), exitCode: code })
    return code
  }
  const current = (c: CommandRecord) => commands.get(books.commandKey(c.sessionId, c.cmdId)) ?? c

  const start = async (s: EmulatedSandbox, request: Request) => {
    const body = await readBody(request, RunCommand)
    if (body.sudo === true) throw new HttpFailure(400, "sudo is not emulated (the sandbox has no root)", "bad_request")
    const cwd = path.posix.resolve(sessionCwd(s), body.cwd ?? ".")
    const cmdId = `cmd_${crypto.randomBytes(12).toString("hex")}`
    const started = await run(runtime.exec(s.runtimeId, {
      command: [body.command, ...(body.args ?? [])],
      cwd,
      env: body.env ?? {},
      maxOutputBytes: MAX_OUTPUT_BYTES,
      ...(body.timeout === undefined ? {} : { timeoutMs: body.timeout }),
      tag: cmdId
    }))
    const record: CommandRecord = {
      sessionId: s.sessionId,
      cmdId,
      runtimeId: s.runtimeId,
      execId: started.execId,
      name: body.command,
      args: [...(body.args ?? [])],
      cwd,
      startedAt: Date.now()
    }
    commands.set(books.commandKey(s.sessionId, cmdId), record)
    books.prune()
    if (body.wait !== true) return json({ command: wire(record, null) })
    return ndjson(outputLines(record, request.signal, { head: { command: wire(record, null) }, logs: body.logs === true, finished: true }))
  }

  const get = async (s: EmulatedSandbox, cmdId: string, url: URL, signal: AbortSignal) => {
    const c = recordOr404(s, cmdId)
    if (url.searchParams.get("wait") === "true") {
      // The runtime wakes on the command's events; the exit is the last of them.
      for (let seen = 0; !signal.aborted;) {
        const events = await run(runtime.execEvents(c.runtimeId, c.execId, seen, 1000))
        seen += events.length
        if (events.at(-1)?.type === "exit") break
      }
    }
    const code = await exitCodeOf(c)
    return json({ command: wire(current(c), code) })
  }

  /**
   * NDJSON lines of a command: `head` first, then (with `logs`) one line per output event, until the exit (or the
   * caller goes away), then (with `finished`) the command with its exit code.
   */
  const outputLines = (
    c: CommandRecord,
    signal: AbortSignal,
    options: { readonly head?: unknown; readonly logs: boolean; readonly finished: boolean }
  ): ReadableStream<Uint8Array> => {
    const encoder = new TextEncoder()
    // One decoder per stream, so a character split between two events is kept whole.
    const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() }
    let seen = 0
    let done = false
    let headSent = options.head === undefined
    return new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        if (!headSent) {
          headSent = true
          controller.enqueue(encoder.encode(`${JSON.stringify(options.head)}\n`))
          return
        }
        while (!done && !signal.aborted) {
          let events: ReadonlyArray<ExecEvent>
          try {
            events = await run(runtime.execEvents(c.runtimeId, c.execId, seen, 1000))
          } catch {
            controller.enqueue(encoder.encode(`${JSON.stringify({ stream: "error", data: { code: "sandbox_stopped", message: "the sandbox stopped" } })}\n`))
            return controller.close()
          }
          seen += events.length
          const lines: Array<string> = []
          for (const e of events) {
            if (e.type === "exit") {
              done = true
              if (!options.logs) continue
              for (const type of ["stdout", "stderr"] as const) {
                const rest = decoders[type].decode()
                if (rest !== "") lines.push(JSON.stringify({ stream: type, data: rest }))
              }
            } else if (options.logs) {
              const data = decoders[e.type].decode(e.data, { stream: true })
              if (data !== "") lines.push(JSON.stringify({ stream: e.type, data }))
            }
          }
          if (done && options.finished && !signal.aborted) {
            const code = await exitCodeOf(c).catch(() => null)
            lines.push(JSON.stringify(code === null ? { stream: "error", data: { code: "command_lost", message: "the command's exit is not known" } } : { command: wire(current(c), code) }))
          }
          if (lines.length > 0) {
            controller.enqueue(encoder.encode(`${lines.join("\n")}\n`))
            return
          }
        }
        controller.close()
      },
      cancel: () => {
        done = true
      }
    })
  }
  const ndjson = (body: ReadableStream<Uint8Array>) => new Response(body, { headers: { "content-type": "application/x-ndjson" } })

  /** NDJSON, one line per output event, until the exit (or the caller goes away). */
  const logs = (s: EmulatedSandbox, cmdId: string, signal: AbortSignal) => ndjson(outputLines(recordOr404(s, cmdId), signal, { logs: true, finished: false }))

  const kill = async (s: EmulatedSandbox, cmdId: string, request: Request) => {
    const c = recordOr404(s, cmdId)
    const body = await readBody(request, Kill)
    const name = signalName(body.signal)
    if (name === undefined) throw new HttpFailure(400, `signal ${body.signal} is not supported`, "bad_request")
    // Killing a command that is over changes nothing.
    if ((await exitCodeOf(c)) === null) await run(runtime.kill(c.runtimeId, c.execId, name))
    const code = await exitCodeOf(c)
    return json({ command: wire(current(c), code) })
  }

  return { start, get, logs, kill }
}
