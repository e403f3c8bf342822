/**
 * The Daytona emulator's sessions (`/toolbox/{id}/process/session…`), as the daemon serves them
 * (apps/daemon/pkg/session): a session is one shell, started at its creation, that runs its commands one after
 * another (sessionLog.ts: each written to it as a wrapper, so `export` and `cd` carry over; its output told apart by
 * markers); the shell is a runtime execution of the sandbox, so sessions outlive the emulator.
 * - `POST /process/session {sessionId}` 201 (409 taken, 400 for `entrypoint`, reserved), `GET` (a list), `GET
 *   /{id}`, `DELETE /{id}` 204 (its shell and everything it started killed);
 * - `POST /{id}/exec {command, runAsync?, suppressInputEcho?}`: with `runAsync` 202 `{cmdId}` at once; without, once
 *   the command ended, 200 `{cmdId, output, exitCode, stdout, stderr}` (a synchronous command reads end-of-file);
 *   400 once the shell has exited (`exit` in a command ends it, as at Daytona);
 * - `GET /{id}/command/{cmd}` `{id, command, exitCode?}`; `POST …/input {data}` 204 — only an asynchronous command
 *   reads input (a newline is added when missing; echoed to its stdout unless `suppressInputEcho`), 410 once it
 *   ended;
 * - `GET …/logs`: JSON `{output, stdout, stderr}` to an SDK of 0.167 or later, the raw multiplexed log (each piece
 *   of output after its stream's label) to a caller asking for split output without an SDK version, plain text
 *   otherwise (the daemon's three answers); as a WebSocket (`?follow=true`: until the command ends), binary frames
 *   of the raw log, read only as fast as the client takes them.
 * Answers that hold output whole carry at most BUFFERED_OUTPUT_BYTES of it; the raw log answer and the WebSocket
 * stream it all.
 */
import { Effect, Schema } from "effect"
import * as crypto from "node:crypto"
import type { ExecEvent, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Books, EmulatedSandbox, Session, SessionCommand } from "./books.ts"
import { BUFFERED_OUTPUT_BYTES, runToExit } from "./execute.ts"
import { CommandExtract, fifoDir, INPUT_SCRIPT, labelled, newNonce, wrapperLine } from "./sessionLog.ts"
import { decodeBody, json, Refused, userShell } from "./wire.ts"

/** What a session's shell may write in all (its sandbox's disk bounds it first: the runtime keeps it there). */
const SESSION_OUTPUT_BYTES = 64 * 1024 * 1024 * 1024
/** A status read waits this long for the command to end or write, so a poller learns of either at once. */
const STATUS_WAIT_MS = 50
/** The logs WebSocket reads on only while the client has less than this not yet taken. */
const SOCKET_HIGH_WATER_BYTES = 1024 * 1024
const FOLLOW_WAIT_MS = 1000
/** Input to a command its shell has not started yet waits this long for it. */
const INPUT_WAIT_MS = 30_000
const RESERVED_SESSION = "entrypoint"

type Output = Extract<ExecEvent, { type: "stdout" | "stderr" }>
type Piece = { readonly type: "stdout" | "stderr"; readonly data: Uint8Array }

/** What a logs WebSocket carries. */
export interface LogsSocketData {
  readonly logs: {
    readonly sandboxId: string
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

const exitCodeOfShell = (event: Extract<ExecEvent, { type: "exit" }>) => event.exitCode ?? 128 + (event.signal === "SIGKILL" ? 9 : 15)

export const makeSessions = (books: Books, runtime: LocalRuntimeShape) => {
  const { sessions } = books
  const keyOf = (sandboxId: string, id: string) => `${sandboxId}/${id}`

  /** Per session in memory: where the scan of its shell's output is, and one scan at a time. */
  const live = new Map<string, { scan: { readonly commandId: string; seq: number; readonly extract: CommandExtract } | null; lock: Promise<unknown> }>()
  const liveOf = (key: string) => {
    let l = live.get(key)
    if (l === undefined) live.set(key, l = { scan: null, lock: Promise.resolve() })
    return l
  }
  const serially = <A>(key: string, f: () => Promise<A>): Promise<A> => {
    const l = liveOf(key)
    const next = l.lock.then(f, f)
    l.lock = next.catch(() => undefined)
    return next
  }

  const sessionOf = (sandbox: EmulatedSandbox, id: string): Session => {
    const session = sessions.get(keyOf(sandbox.id, id))
    if (session === undefined) throw new Refused(404, "session not found")
    return session
  }
  const commandOf = (session: Session, commandId: string): SessionCommand => {
    const command = session.commands.find((c) => c.id === commandId)
    if (command === undefined) throw new Refused(404, "command not found")
    return command
  }
  const save = (session: Session) => {
    if (sessions.get(keyOf(session.sandboxId, session.id)) === session) sessions.set(keyOf(session.sandboxId, session.id), session)
  }

  /**
   * Reads the shell's output on from where the scan is (waiting up to `waitMs` for some), finding where commands
   * end: each ended one gets its exit status, and the next one where its markers are to be looked for.
   */
  const advance = (session: Session, waitMs: number) =>
    serially(keyOf(session.sandboxId, session.id), async () => {
      const l = liveOf(keyOf(session.sandboxId, session.id))
      let wait = waitMs
      for (;;) {
        const command = session.commands.find((c) => c.exitCode === undefined)
        if (command === undefined || command.fromSeq === undefined) return
        if (l.scan === null || l.scan.commandId !== command.id) l.scan = { commandId: command.id, seq: command.fromSeq, extract: new CommandExtract(command.nonce) }
        const scan = l.scan
        const read = await Effect.runPromise(Effect.either(runtime.execEvents(session.sandboxId, session.shellExecId, scan.seq, wait)))
        wait = 0
        if (read._tag === "Left") {
          // The shell is gone with its sandbox's jail: so are its commands.
          if (read.left.kind === "not_found") endFrom(session, command, -1)
          return
        }
        if (read.right.length === 0) return
        for (const event of read.right) {
          if (event.type === "exit") {
            // The shell ended (an `exit` in the command): so did the command, with its status; those after never run.
            endFrom(session, command, exitCodeOfShell(event))
            l.scan = null
            return
          }
          scan.extract.feed(event)
          scan.seq = event.seq + 1
          if (scan.extract.ended) {
            command.exitCode = scan.extract.exitCode ?? -1
            command.toSeq = event.seq
            // The next command's markers come after this one's end on each stream.
            const next = Math.min(scan.extract.stdoutEndSeq ?? event.seq, scan.extract.stderrEndSeq ?? event.seq)
            session.nextFromSeq = next
            const following = session.commands[session.commands.indexOf(command) + 1]
            if (following !== undefined) following.fromSeq = next
            save(session)
            l.scan = null
            break
          }
        }
      }
    })

  /** `command` and every one after it are over with `exitCode` (their shell is gone). */
  const endFrom = (session: Session, command: SessionCommand, exitCode: number) => {
    for (const c of session.commands.slice(session.commands.indexOf(command))) {
      if (c.exitCode !== undefined) continue
      c.exitCode = c === command ? exitCode : -1
      c.fromSeq ??= session.nextFromSeq
    }
    save(session)
  }

  /**
   * The command's output pieces, in order, read from its shell's output (`follow`: waiting for more until it ends,
   * `stop` says when to give up).
   */
  async function* piecesOf(session: Session, command: SessionCommand, options: { readonly follow: boolean; readonly stop?: () => boolean }): AsyncGenerator<Piece> {
    if (command.fromSeq === undefined) {
      if (!options.follow) return
      // Queued behind another command: its output starts once that one ends.
      while (command.fromSeq === undefined && command.exitCode === undefined) {
        if (options.stop?.() === true || sessions.get(keyOf(session.sandboxId, session.id)) !== session) return
        await advance(session, FOLLOW_WAIT_MS)
      }
    }
    const extract = new CommandExtract(command.nonce)
    let seq = command.fromSeq ?? 0
    for (;;) {
      if (options.stop?.() === true) return
      const events = await Effect.runPromise(Effect.either(runtime.execEvents(session.sandboxId, session.shellExecId, seq, options.follow ? FOLLOW_WAIT_MS : 0)))
      if (events._tag === "Left") return
      for (const event of events.right) {
        if (event.type === "exit" || (command.toSeq !== undefined && event.seq > command.toSeq)) return
        yield* extract.feed(event as Output)
        seq = event.seq + 1
        if (extract.ended) return
      }
      if (events.right.length === 0 && !options.follow) return
    }
  }

  /** The command's output held whole (at most BUFFERED_OUTPUT_BYTES of it). */
  const bufferedOf = async (session: Session, command: SessionCommand) => {
    const pieces: Array<Piece> = []
    let size = 0
    for await (const piece of piecesOf(session, command, { follow: false })) {
      if (size >= BUFFERED_OUTPUT_BYTES) break
      const data = piece.data.length > BUFFERED_OUTPUT_BYTES - size ? piece.data.subarray(0, BUFFERED_OUTPUT_BYTES - size) : piece.data
      pieces.push({ type: piece.type, data: data.slice() })
      size += data.length
    }
    const of = (type: "stdout" | "stderr") => Buffer.concat(pieces.filter((p) => p.type === type).map((p) => p.data)).toString("utf8")
    return {
      raw: Buffer.concat(pieces.map(labelled)).toString("utf8"),
      plain: Buffer.concat(pieces.map((p) => p.data)).toString("utf8"),
      stdout: of("stdout"),
      stderr: of("stderr")
    }
  }

  const create = async (request: Request, sandbox: EmulatedSandbox) => {
    const { sessionId } = await decodeBody(request, SessionBody)
    if (sessionId === "") throw new Refused(400, "sessionId is required")
    if (sessionId === RESERVED_SESSION) throw new Refused(400, "provided session ID is reserved and cannot be created/overridden")
    const key = keyOf(sandbox.id, sessionId)
    if (sessions.get(key) !== undefined) throw new Refused(409, "session already exists")
    const shell = await run(runtime.exec(sandbox.id, {
      command: userShell(),
      stdin: true,
      maxOutputBytes: SESSION_OUTPUT_BYTES,
      tag: `daytona-session-${crypto.randomUUID()}`
    }))
    // Created meanwhile by a concurrent request: this shell goes.
    if (sessions.get(key) !== undefined) {
      await run(Effect.ignore(runtime.kill(sandbox.id, shell.execId, "SIGKILL")))
      throw new Refused(409, "session already exists")
    }
    sessions.set(key, { sandboxId: sandbox.id, id: sessionId, createdAt: Date.now(), shellExecId: shell.execId, nextFromSeq: 0, commands: [] })
    return new Response(null, { status: 201 })
  }

  const dto = (session: Session) => ({
    sessionId: session.id,
    commands: session.commands.map((c) => ({ id: c.id, command: c.command, ...(c.exitCode === undefined ? {} : { exitCode: c.exitCode }) }))
  })

  const list = async (sandbox: EmulatedSandbox) => {
    const own = sessions.entries().filter(([, s]) => s.sandboxId === sandbox.id).map(([, s]) => s)
    for (const session of own) await advance(session, 0)
    return json(own.map(dto))
  }

  const get = async (sandbox: EmulatedSandbox, id: string) => {
    const session = sessionOf(sandbox, id)
    await advance(session, 0)
    return json(dto(session))
  }

  const remove = async (sandbox: EmulatedSandbox, id: string) => {
    if (id === RESERVED_SESSION) throw new Refused(400, "can't delete entrypoint session")
    const session = sessionOf(sandbox, id)
    sessions.delete(keyOf(sandbox.id, id))
    live.delete(keyOf(sandbox.id, id))
    // Its shell's process group: the shell and everything its commands started.
    await run(Effect.ignore(runtime.kill(sandbox.id, session.shellExecId, "SIGTERM")))
    return new Response(null, { status: 204 })
  }

  const shellRunning = async (session: Session) => {
    const info = await Effect.runPromise(Effect.either(runtime.getExec(session.sandboxId, session.shellExecId)))
    return info._tag === "Right" && info.right.state === "running"
  }

  const exec = async (request: Request, sandbox: EmulatedSandbox, id: string) => {
    if (id === RESERVED_SESSION) throw new Refused(400, "can't execute command in entrypoint session")
    const session = sessionOf(sandbox, id)
    const body = await decodeBody(request, ExecBody)
    if (body.command.trim() === "") throw new Refused(400, "command cannot be empty")
    const async = body.runAsync === true || body.async === true
    const command: SessionCommand = {
      id: crypto.randomUUID(),
      command: body.command,
      nonce: newNonce(),
      async,
      suppressInputEcho: body.suppressInputEcho === true
    }
    // Written in the order the commands are taken: the shell runs them one after another.
    await serially(keyOf(sandbox.id, id), async () => {
      if (!(await shellRunning(session))) throw new Refused(400, "failed to execute command: the session's shell has exited")
      if (session.commands.every((c) => c.exitCode !== undefined)) command.fromSeq = session.nextFromSeq
      session.commands.push(command)
      save(session)
      await run(runtime.sendInput(sandbox.id, session.shellExecId, new TextEncoder().encode(wrapperLine(command.nonce, command.command, async))))
    })
    if (async) return json({ cmdId: command.id }, 202)
    while (command.exitCode === undefined) {
      if (sessions.get(keyOf(sandbox.id, id)) !== session) throw new Refused(400, "session cancelled")
      await advance(session, FOLLOW_WAIT_MS)
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

  /** A running command is watched briefly (see STATUS_WAIT_MS); the wire answer is the daemon's. */
  const commandStatus = async (sandbox: EmulatedSandbox, id: string, commandId: string) => {
    const session = sessionOf(sandbox, id)
    const command = commandOf(session, commandId)
    await advance(session, command.exitCode === undefined ? STATUS_WAIT_MS : 0)
    return json({ id: command.id, command: command.command, ...(command.exitCode === undefined ? {} : { exitCode: command.exitCode }) })
  }

  const commandLogs = async (request: Request, sandbox: EmulatedSandbox, id: string, commandId: string) => {
    const session = sessionOf(sandbox, id)
    const command = commandOf(session, commandId)
    await advance(session, 0)
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
    if (id === RESERVED_SESSION) throw new Refused(400, "can't send input to entrypoint session")
    const session = sessionOf(sandbox, id)
    const { data } = await decodeBody(request, InputBody)
    if (!(await shellRunning(session))) throw new Refused(410, "session process has exited", "SESSION_ENDED")
    const command = commandOf(session, commandId)
    await advance(session, 0)
    if (command.exitCode !== undefined) throw new Refused(410, `command has already completed with exit code ${command.exitCode}`, "COMMAND_ALREADY_COMPLETED")
    // A synchronous command reads end-of-file: what is sent to it goes nowhere, as at the daemon.
    if (!command.async) return new Response(null, { status: 204 })
    // Its FIFOs are there once the shell started it (a command queued behind another is waited for, a while).
    const deadline = Date.now() + INPUT_WAIT_MS
    const started = () => command.exitCode !== undefined || (live.get(keyOf(sandbox.id, id))?.scan?.commandId === command.id && live.get(keyOf(sandbox.id, id))!.scan!.extract.stdout.started)
    while (!started() && Date.now() < deadline && sessions.get(keyOf(sandbox.id, id)) === session) await advance(session, FOLLOW_WAIT_MS)
    if (command.exitCode !== undefined) throw new Refused(410, `command has already completed with exit code ${command.exitCode}`, "COMMAND_ALREADY_COMPLETED")
    if (!started()) throw new Refused(500, "failed to open input pipe: the command has not started")
    const input = new TextEncoder().encode(data.endsWith("\n") ? data : `${data}\n`)
    const { exit } = await runToExit(runtime, sandbox.id, {
      command: ["sh", "-c", INPUT_SCRIPT, "sh", fifoDir(command.nonce), command.suppressInputEcho ? "1" : "0"],
      stdin: true,
      maxOutputBytes: 4096,
      timeoutMs: 60_000
    }, input)
    if (exit.exitCode === 3) throw new Refused(410, "command has already completed", "COMMAND_ALREADY_COMPLETED")
    if (exit.exitCode !== 0) throw new Refused(500, "failed to write to input pipe")
    return new Response(null, { status: 204 })
  }

  /** `GET …/logs` as a WebSocket: the session and command are checked first, as the daemon does before upgrading. */
  const connectLogs = (request: Request, url: URL, server: Bun.Server<LogsSocketData>, sandbox: EmulatedSandbox, id: string, commandId: string): Response | undefined => {
    commandOf(sessionOf(sandbox, id), commandId)
    const data: LogsSocketData = {
      logs: { sandboxId: sandbox.id, key: keyOf(sandbox.id, id), commandId, follow: url.searchParams.get("follow") === "true", combined: answerKind(request).combined, closed: false, drained: null }
    }
    return server.upgrade(request, { data }) ? undefined : new Response(null, { status: 400 })
  }

  /** Sends the command's log to the socket, reading on only while the client keeps up; closes 1000 at its end. */
  const streamLogs = async (ws: Bun.ServerWebSocket<LogsSocketData>) => {
    const c = ws.data.logs
    const session = sessions.get(c.key)
    const command = session?.commands.find((x) => x.id === c.commandId)
    if (session === undefined || command === undefined) return ws.close(1000)
    for await (const piece of piecesOf(session, command, { follow: c.follow, stop: () => c.closed || sessions.get(c.key) !== session })) {
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
      live.delete(key)
    }
  }

  return { create, list, get, remove, exec, commandStatus, commandLogs, sendInput, connectLogs, socketHandlers, forgetSandbox }
}

export type Sessions = ReturnType<typeof makeSessions>
