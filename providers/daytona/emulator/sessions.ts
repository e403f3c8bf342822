/**
 * The Daytona emulator's sessions (`/toolbox/{id}/process/session…`), as the daemon serves them
 * (apps/daemon/pkg/session): a session is one shell, started at its creation, that runs its commands one after
 * another (sessionLog.ts: each written to it as a wrapper, so `export` and `cd` carry over; its output told apart by
 * markers, its exit status left in a file of its own; sessionOutput.ts reads both back); the shell is a runtime
 * execution of the sandbox, so sessions outlive the emulator.
 * - `POST /process/session {sessionId}` 201 (409 taken, 400 for `entrypoint`, reserved), `GET` (a list), `GET
 *   /{id}`, `DELETE /{id}` 204 (its shell and everything it started killed);
 * - `POST /{id}/exec {command, runAsync?, suppressInputEcho?}`: with `runAsync` 202 `{cmdId}` at once; without, once
 *   the command ended, 200 `{cmdId, output, exitCode, stdout, stderr}` (a synchronous command reads end-of-file);
 *   400 once the shell has exited (`exit` in a command ends it, as at Daytona), naming its exit status and quoting
 *   what it said on its stderr before its first command started (a shell that could not start says why there);
 * - `GET /{id}/command/{cmd}` `{id, command, exitCode?}` (one small read of its exit file, whatever it wrote);
 *   `POST …/input {data}` 204 — only an asynchronous command reads input (a newline is added when missing; echoed to
 *   its stdout unless `suppressInputEcho`), 410 once it ended;
 * - `GET …/logs`: JSON `{output, stdout, stderr}` to an SDK of 0.167 or later, the raw multiplexed log (each piece
 *   of output after its stream's label) to a caller asking for split output without an SDK version, plain text
 *   otherwise (the daemon's three answers); as a WebSocket (`?follow=true`: until the command ends), binary frames
 *   of the raw log, read from the runtime only as fast as the client takes them.
 * Answers that hold output whole carry at most BUFFERED_OUTPUT_BYTES of it; the raw log answer and the WebSocket
 * stream it all, read as they are sent. A session keeps at most SESSION_OUTPUT_BYTES of output in all (the daemon's
 * log files have no such bound): a command's output past it is not kept, nor is any later command's.
 */
import { Effect, Option, Schema } from "effect"
import * as crypto from "node:crypto"
import { cleanMessage } from "../../../src/runtime/AgentWire.ts"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import { keyedSerial } from "../../../src/domain/KeyedSerial.ts"
import type { Books, EmulatedSandbox, Session, SessionCommand } from "./books.ts"
import { runToExit } from "./execute.ts"
import { makeSessionOutput, sessionKey } from "./sessionOutput.ts"
import { commandFileNames, commandFiles, INPUT_SCRIPT, labelled, newNonce, wrapperLine } from "./sessionLog.ts"
import { decodeBody, json, HttpFailure, userShell } from "./wire.ts"

/**
 * What a session's shell may write in all; past it, its output is dropped (its commands still end: their exit files).
 * Below what the runtime's agent keeps of a finished execution's output (256 MiB, newest first), so that a session's
 * log stays readable after its shell ended (an `exit` in it), as the daemon keeps its log files.
 */
const SESSION_OUTPUT_BYTES = 224 * 1024 * 1024
/** The logs WebSocket reads on only while the client has less than this not yet taken. */
const SOCKET_HIGH_WATER_BYTES = 1024 * 1024
/** Input to a command its shell has not started yet waits this long for it. */
const INPUT_WAIT_MS = 30_000
const RESERVED_SESSION = "entrypoint"
/** What a refusal quotes of a shell's stderr when it ended before its first command. */
const STARTUP_WORDS_BYTES = 512

/** What a logs WebSocket carries. */
export interface LogsSocketData {
  readonly logs: {
    readonly key: string
    readonly commandId: string
    readonly follow: boolean
    /** Stripped of the stream labels (an old SDK's combined output). */
    readonly combined: boolean
    closed: boolean
    /** Resolved when the client has taken what was queued (Bun's `drain`). */
    drained: (() => void) | null
  }
}

/** `a < b` for versions like `0.167.0` (the daemon's util.CompareVersions, prerelease ignored). */
const older = (a: string, b: string) => {
  const pa = a.split(/[.-]/).slice(0, 3).map((n) => Number.parseInt(n, 10) || 0)
  const pb = b.split(/[.-]/).slice(0, 3).map((n) => Number.parseInt(n, 10) || 0)
  for (let i = 0; i < 3; i++) if (pa[i]! !== pb[i]!) return pa[i]! < pb[i]!
  return false
}

/** Which of its answers the daemon gives a caller (session/common.go). */
const answerKind = (request: Request) => {
  const sdk = request.headers.get("x-daytona-sdk-version") ?? ""
  const dev = sdk.includes("dev")
  const combined = (sdk !== "" && !dev && older(sdk, "0.27.0")) || (sdk === "" && request.headers.get("x-daytona-split-output") !== "true")
  const skipServerDemux = sdk === "" || (!dev && older(sdk, "0.167.0"))
  return { combined, skipServerDemux }
}

const SessionBody = Schema.Struct({ sessionId: Schema.String })
const ExecBody = Schema.Struct({
  command: Schema.String,
  runAsync: Schema.optional(Schema.NullOr(Schema.Boolean)),
  async: Schema.optional(Schema.NullOr(Schema.Boolean)),
  suppressInputEcho: Schema.optional(Schema.NullOr(Schema.Boolean))
})
const InputBody = Schema.Struct({ data: Schema.String })

export const makeSessions = (books: Books, runtime: LocalRuntimeShape) => {
  const { sessions } = books
  const keyOf = sessionKey
  const { live, save, settle, piecesOf, bufferedOf } = makeSessionOutput(books, runtime)
  /** Commands are written to a session's shell one at a time, in the order taken. */
  const writing = keyedSerial()

  const sessionOf = (sandbox: EmulatedSandbox, id: string): Session => {
    const session = sessions.get(keyOf(sandbox.id, id))
    if (session === undefined) throw new HttpFailure(404, "session not found")
    return session
  }
  const commandOf = (session: Session, commandId: string): SessionCommand => {
    const command = session.commands.find((c) => c.id === commandId)
    if (command === undefined) throw new HttpFailure(404, "command not found")
    return command
  }
  const create = async (request: Request, sandbox: EmulatedSandbox) => {
    const { sessionId } = await decodeBody(request, SessionBody)
    if (sessionId === "") throw new HttpFailure(400, "sessionId is required")
    if (sessionId === RESERVED_SESSION) throw new HttpFailure(400, "provided session ID is reserved and cannot be created/overridden")
    const key = keyOf(sandbox.id, sessionId)
    if (sessions.get(key) !== undefined) throw new HttpFailure(409, "session already exists")
    const shell = await run(runtime.exec(sandbox.id, {
      command: userShell(),
      stdin: true,
      maxOutputBytes: SESSION_OUTPUT_BYTES,
      tag: `daytona-session-${crypto.randomUUID()}`
    }))
    // Created meanwhile by a concurrent request: this shell goes.
    if (sessions.get(key) !== undefined) {
      await run(Effect.ignore(runtime.kill(sandbox.id, shell.execId, "SIGKILL")))
      throw new HttpFailure(409, "session already exists")
    }
    sessions.set(key, { sandboxId: sandbox.id, id: sessionId, createdAt: Date.now(), shellExecId: shell.execId, commands: [] })
    return new Response(null, { status: 201 })
  }

  const dto = async (session: Session) => {
    for (const c of session.commands) await settle(session, c)
    return {
      sessionId: session.id,
      commands: session.commands.map((c) => ({ id: c.id, command: c.command, ...(c.exitCode === undefined ? {} : { exitCode: c.exitCode }) }))
    }
  }

  const list = async (sandbox: EmulatedSandbox) => {
    const own = sessions.entries().filter(([, s]) => s.sandboxId === sandbox.id).map(([, s]) => s)
    return json(await Promise.all(own.map(dto)))
  }

  const get = async (sandbox: EmulatedSandbox, id: string) => json(await dto(sessionOf(sandbox, id)))

  const remove = async (sandbox: EmulatedSandbox, id: string) => {
    if (id === RESERVED_SESSION) throw new HttpFailure(400, "can't delete entrypoint session")
    const session = sessionOf(sandbox, id)
    sessions.delete(keyOf(sandbox.id, id))
    // Its shell's process group: the shell and everything its commands started; then what it left in the sandbox.
    await run(Effect.ignore(runtime.kill(sandbox.id, session.shellExecId, "SIGTERM")))
    for (const c of session.commands) for (const file of commandFileNames(c.nonce)) await run(Effect.ignore(runtime.deleteFile(sandbox.id, file, { recursive: false })))
    return new Response(null, { status: 204 })
  }

  /**
   * What a shell wrote to its stderr before its first command started (its start marker): its own words, as when it
   * could not start (`sh: exec: …: Permission denied`). One read of the shell's first events, at most
   * STARTUP_WORDS_BYTES of it quoted, made printable (AgentWire's `cleanMessage`): the sandbox may have written there too.
   */
  const startupWords = async (session: Session) => {
    const events = await Effect.runPromise(Effect.either(runtime.execEvents(session.sandboxId, session.shellExecId, 0)))
    if (events._tag === "Left") return ""
    const first = session.commands[0]
    const marker = first === undefined ? undefined : Buffer.from(`\x1e${first.nonce}:S\x1e`)
    const limit = STARTUP_WORDS_BYTES + (marker?.length ?? 0)
    const head: Array<Uint8Array> = []
    let size = 0
    for (const e of events.right) {
      if (e.type !== "stderr" || size >= limit) continue
      head.push(e.data.subarray(0, limit - size))
      size += head.at(-1)!.length
    }
    const stderr = Buffer.concat(head)
    const before = marker === undefined ? stderr : stderr.subarray(0, stderr.indexOf(marker) === -1 ? stderr.length : stderr.indexOf(marker))
    return cleanMessage(before.subarray(0, STARTUP_WORDS_BYTES).toString("utf8"))
  }

  const exec = async (request: Request, sandbox: EmulatedSandbox, id: string) => {
    if (id === RESERVED_SESSION) throw new HttpFailure(400, "can't execute command in entrypoint session")
    const session = sessionOf(sandbox, id)
    const body = await decodeBody(request, ExecBody)
    if (body.command.trim() === "") throw new HttpFailure(400, "command cannot be empty")
    const async = body.runAsync === true || body.async === true
    const command: SessionCommand = { id: crypto.randomUUID(), command: body.command, nonce: newNonce(), async, suppressInputEcho: body.suppressInputEcho === true }
    // Written in the order the commands are taken: the shell runs them one after another.
    const key = keyOf(sandbox.id, id)
    await writing.run(key, async () => {
      const shell = await Effect.runPromise(Effect.either(runtime.getExec(sandbox.id, session.shellExecId)))
      if (shell._tag === "Left" || shell.right.state !== "running") {
        // How it ended, or why it could not be asked: what an operator reading the refusal needs.
        const how = shell._tag === "Left" ? ` (${shell.left.message})` : shell.right.exitCode !== null ? ` (exit status ${shell.right.exitCode})` : ""
        // A shell that ended before its first command started said why on its stderr, if anywhere.
        const said = await startupWords(session)
        throw new HttpFailure(400, `failed to execute command: the session's shell has exited${how}${said === "" ? "" : `: ${said}`}`)
      }
      session.commands.push(command)
      save(session)
      await run(runtime.sendInput(sandbox.id, session.shellExecId, new TextEncoder().encode(wrapperLine(command.nonce, command.command, { async, echo: !command.suppressInputEcho }))))
    })
    if (async) return json({ cmdId: command.id }, 202)
    for (let pause = 10; (await settle(session, command)) === undefined; pause = Math.min(pause * 2, 200)) {
      if (!live(session)) throw new HttpFailure(400, "session cancelled")
      await Bun.sleep(pause)
    }
    const kind = answerKind(request)
    const output = await bufferedOf(session, command)
    if (kind.combined) return json({ cmdId: command.id, output: output.plain, exitCode: command.exitCode })
    return json({
      cmdId: command.id,
      output: output.raw,
      exitCode: command.exitCode,
      ...(kind.skipServerDemux ? {} : { stdout: output.stdout, stderr: output.stderr })
    })
  }

  const commandStatus = async (sandbox: EmulatedSandbox, id: string, commandId: string) => {
    const session = sessionOf(sandbox, id)
    const command = commandOf(session, commandId)
    await settle(session, command)
    return json({ id: command.id, command: command.command, ...(command.exitCode === undefined ? {} : { exitCode: command.exitCode }) })
  }

  const commandLogs = async (request: Request, sandbox: EmulatedSandbox, id: string, commandId: string) => {
    const session = sessionOf(sandbox, id)
    const command = commandOf(session, commandId)
    const kind = answerKind(request)
    if (!kind.skipServerDemux && !kind.combined) {
      const output = await bufferedOf(session, command)
      return json({ output: output.raw, stdout: output.stdout, stderr: output.stderr })
    }
    // Text, streamed from the shell's output as it is read (never held whole): labelled, or not (combined).
    const pieces = piecesOf(session, command, { follow: false })
    const body = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        const next = await pieces.next()
        if (next.done === true) return controller.close()
        controller.enqueue(kind.combined ? next.value.data.slice() : labelled(next.value))
      },
      cancel: async () => void (await pieces.return(undefined))
    })
    return new Response(body, { headers: { "content-type": "text/plain; charset=utf-8" } })
  }

  const sendInput = async (request: Request, sandbox: EmulatedSandbox, id: string, commandId: string) => {
    if (id === RESERVED_SESSION) throw new HttpFailure(400, "can't send input to entrypoint session")
    const session = sessionOf(sandbox, id)
    const { data } = await decodeBody(request, InputBody)
    const command = commandOf(session, commandId)
    const ended = () => new HttpFailure(410, `command has already completed with exit code ${command.exitCode}`, "COMMAND_ALREADY_COMPLETED")
    if ((await settle(session, command)) !== undefined) {
      const shell = await Effect.runPromise(Effect.either(runtime.getExec(sandbox.id, session.shellExecId)))
      if (shell._tag === "Left" || shell.right.state !== "running") throw new HttpFailure(410, "session process has exited", "SESSION_ENDED")
      throw ended()
    }
    // A synchronous command reads end-of-file: what is sent to it goes nowhere, as at the daemon.
    if (!command.async) return new Response(null, { status: 204 })
    // Its FIFO is there once its shell started it (a command queued behind another is waited for, a while).
    const fifo = `${commandFiles(command.nonce)}.in`
    for (let waited = 0, pause = 10; ; waited += pause, pause = Math.min(pause * 2, 200)) {
      const found = await Effect.runPromise(Effect.either(runtime.statFile(sandbox.id, fifo)))
      if (found._tag === "Right" && Option.isSome(found.right)) break
      if ((await settle(session, command)) !== undefined) throw ended()
      if (waited > INPUT_WAIT_MS || !live(session)) throw new HttpFailure(500, "failed to open input pipe: the command has not started")
      await Bun.sleep(pause)
    }
    const input = new TextEncoder().encode(data.endsWith("\n") ? data : `${data}\n`)
    const { exit } = await runToExit(runtime, sandbox.id, {
      command: ["sh", "-c", INPUT_SCRIPT, "sh", commandFiles(command.nonce), command.suppressInputEcho ? "1" : "0"],
      stdin: true,
      maxOutputBytes: 4096,
      timeoutMs: 60_000
    }, input)
    if (exit.exitCode === 3) throw ended()
    if (exit.exitCode !== 0) throw new HttpFailure(500, "failed to write to input pipe")
    return new Response(null, { status: 204 })
  }

  /** `GET …/logs` as a WebSocket: the session and command are checked first, as the daemon does before upgrading. */
  const connectLogs = (request: Request, url: URL, server: Bun.Server<LogsSocketData>, sandbox: EmulatedSandbox, id: string, commandId: string): Response | undefined => {
    commandOf(sessionOf(sandbox, id), commandId)
    const data: LogsSocketData = {
      logs: { key: keyOf(sandbox.id, id), commandId, follow: url.searchParams.get("follow") === "true", combined: answerKind(request).combined, closed: false, drained: null }
    }
    return server.upgrade(request, { data }) ? undefined : new Response(null, { status: 400 })
  }

  /** Sends the command's log to the socket, reading on only while the client keeps up; closes 1000 at its end. */
  const streamLogs = async (ws: Bun.ServerWebSocket<LogsSocketData>) => {
    const c = ws.data.logs
    const session = sessions.get(c.key)
    const command = session?.commands.find((x) => x.id === c.commandId)
    if (session === undefined || command === undefined) return ws.close(1000)
    for await (const piece of piecesOf(session, command, { follow: c.follow, stop: () => c.closed || !live(session) })) {
      if (c.closed) return
      ws.send(c.combined ? piece.data : labelled(piece))
      while (!c.closed && ws.getBufferedAmount() > SOCKET_HIGH_WATER_BYTES) await new Promise<void>((resolve) => (c.drained = resolve))
    }
    if (!c.closed) ws.close(1000)
  }

  const socketHandlers = {
    open: (ws: Bun.ServerWebSocket<LogsSocketData>) => {
      void streamLogs(ws).catch(() => {
        if (!ws.data.logs.closed) ws.close(1011)
      })
    },
    drain: (ws: Bun.ServerWebSocket<LogsSocketData>) => {
      const resolve = ws.data.logs.drained
      ws.data.logs.drained = null
      resolve?.()
    },
    close: (ws: Bun.ServerWebSocket<LogsSocketData>) => {
      ws.data.logs.closed = true
      const resolve = ws.data.logs.drained
      ws.data.logs.drained = null
      resolve?.()
    }
  }

  /** A deleted sandbox's sessions go with it. */
  const forgetSandbox = (sandboxId: string) => {
    for (const [key, session] of sessions.entries()) {
      if (session.sandboxId !== sandboxId) continue
      sessions.delete(key)
    }
  }

  return { create, list, get, remove, exec, commandStatus, commandLogs, sendInput, connectLogs, socketHandlers, forgetSandbox }
}

export type Sessions = ReturnType<typeof makeSessions>
