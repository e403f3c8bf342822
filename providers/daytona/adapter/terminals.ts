/**
 * Daytona terminals: a process started with `pty` runs in a PTY session (`POST /process/pty {id: "metal-<process
 * id>", cols, rows, lazyStart: true}`), driven over its WebSocket (`GET /process/pty/{id}/connect`: a text frame
 * `{"type":"control","status":"connected"|"error"}` first, then the terminal's bytes both ways; the end is a close
 * whose reason is `{"exitCode": n}`), resized with `POST /process/pty/{id}/resize {cols, rows}` (410 once it
 * ended) and killed with `DELETE /process/pty/{id}` (the close then says exit 137).
 *
 * A PTY session starts the sandbox user's shell only (`<shell> -i -l`): there is no command field. So, once
 * connected (which starts the lazy session), the adapter types one line into that fresh shell:
 *
 *    printf '%s_%s\n' metal-<nonce> ready; [[mkdir -p -- <workspace>;] cd -- <dir> || exit 1;] exec env -- K=V… <argv> || exit 127
 *
 * (with a leading space, which keeps it out of bash's and zsh's history; <dir> is the process's cwd, else an
 * environment sandbox's workspace; an image sandbox's process without one starts where the PTY does, in its
 * WorkingDir). The shell prints `metal-<nonce>_ready`,
 * a marker the typed line does not contain (the format joins its two halves), then `exec`s the command, which thus
 * owns the terminal and whose exit is the session's. Everything before the marker — the shell's greeting, prompt
 * and the echo of the typed line — is dropped; output starts after the marker's line. The marker must come within
 * MAX_PREAMBLE_BYTES of output and READY_TIMEOUT_MS, else the session is deleted and the start fails: a sandbox
 * that never prints it costs no more than that (only the last few bytes are kept while looking for it).
 *
 * The daemon keeps no output for a client that is not connected, and forgets a session once it ends (its exit
 * is only in the close of a connected socket), so each terminal keeps one connection open while it runs; its
 * output is buffered here until `execEvents` hands it out (at most the process's max output bytes). After a
 * gateway restart the adapter connects again: output written meanwhile, and the exit of a terminal that ended
 * meanwhile, are lost (the latter is reported as `not_found`, as for E2B). Input goes as binary frames of at most
 * INPUT_FRAME_BYTES (the daemon reads at most 64 KiB per message); `eof` types ^D. The typed line is at most
 * MAX_TYPED_LINE_BYTES (a shell in canonical mode, like sh, reads at most 4095 bytes a line): a longer command or
 * environment is refused.
 */
import { HttpClientRequest } from "@effect/platform"
import { Deferred, Effect, Either, Exit } from "effect"
import * as crypto from "node:crypto"
import type { ExecEvent } from "../../../src/runtime/LocalRuntime.ts"
import { type ExecInput, FOLLOWED_EXECUTIONS, reattachFailed, type ProviderError, type ProviderSandbox, type SandboxProvider, type UnnumberedExecEvent } from "../../../src/providers/Provider.ts"
import { controlOf, exitOfClose, MAX_CONTROL_BYTES } from "./ptyMessages.ts"
import { type DaytonaContext, sessionName, shellQuote, startIn, terminalIds, type TerminalRef, WirePtySession } from "./wire.ts"

/** Output the shell may write before the marker (its greeting, prompt, the typed line's echo). */
export const MAX_PREAMBLE_BYTES = 1024 * 1024
const READY_TIMEOUT_MS = 30_000
/** The typed line's length: a shell reading in the terminal's canonical mode (sh) takes at most 4095 bytes a line. */
export const MAX_TYPED_LINE_BYTES = 4000
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/
const CONNECT_TIMEOUT_MS = 30_000
/** Half the daemon's read limit per message. */
export const INPUT_FRAME_BYTES = 32 * 1024
/** Input not yet sent on the socket beyond which a write waits (and, after SEND_WAIT_MS, fails). */
const MAX_UNSENT_BYTES = 4 * 1024 * 1024
const SEND_WAIT_MS = 30_000

interface Terminal {
  readonly key: string
  readonly ref: TerminalRef
  socket: WebSocket | null
  /** The marker is behind us (or this is a re-attach: there is nothing to drop). */
  ready: boolean
  /** The marker to wait for, and the last bytes seen while waiting (a marker may span two frames). */
  readonly marker: Uint8Array
  tail: Uint8Array
  preambleBytes: number
  /** The marker's line end may still be ahead ("\r\n" from a terminal). */
  lineEnd: boolean
  readonly started: Deferred.Deferred<void, ProviderError>
  /** One connection attempt at a time (a poll and a write may both find the terminal detached). */
  readonly lock: Effect.Semaphore
  /** Events not acknowledged yet; the first has seq `base` (null until a caller asked: after a restart). */
  base: number | null
  events: Array<UnnumberedExecEvent>
  outputBytes: number
  truncated: boolean
  done: boolean
  cancelled: boolean
  retryAt: number
  failingSince: number | null
}

const indexOf = (haystack: Uint8Array, needle: Uint8Array) => Buffer.from(haystack.buffer, haystack.byteOffset, haystack.length).indexOf(needle)

export const makeTerminals = (ctx: DaytonaContext) => {
  const { decode, fail, toolbox } = ctx
  const terminals = new Map<string, Terminal>()
  const keyOf = (sandbox: ProviderSandbox, ref: TerminalRef) => `${sandbox.resourceId}/${ref.sessionId}`
  const ptyPath = (ref: TerminalRef) => `/process/pty/${encodeURIComponent(ref.sessionId)}`
  const ended = () => fail("not_found", "the terminal has ended")

  const newTerminal = (key: string, ref: TerminalRef, fields: { readonly ready: boolean; readonly base: number | null; readonly marker?: string }): Terminal => {
    const t: Terminal = {
      key,
      ref,
      socket: null,
      ready: fields.ready,
      marker: new TextEncoder().encode(fields.marker ?? ""),
      tail: new Uint8Array(0),
      preambleBytes: 0,
      lineEnd: false,
      started: Effect.runSync(Deferred.make<void, ProviderError>()),
      lock: Effect.runSync(Effect.makeSemaphore(1)),
      base: fields.base,
      events: [],
      outputBytes: 0,
      truncated: false,
      done: false,
      cancelled: false,
      retryAt: 0,
      failingSince: null
    }
    terminals.set(key, t)
    return t
  }
  const terminalOf = (sandbox: ProviderSandbox, ref: TerminalRef) =>
    terminals.get(keyOf(sandbox, ref)) ?? newTerminal(keyOf(sandbox, ref), ref, { ready: true, base: null })

  const finish = (t: Terminal, exitCode: number | null) => {
    if (t.done) return
    t.done = true
    // A cancel is a DELETE, which the daemon does with SIGKILL (and reports as exit 137).
    t.events.push(t.cancelled
      ? { type: "exit", exitCode: null, signal: "SIGKILL", cancelled: true, timedOut: false, outputTruncated: t.truncated }
      : { type: "exit", exitCode, signal: null, cancelled: false, timedOut: false, outputTruncated: t.truncated })
    Deferred.unsafeDone(t.started, Exit.fail(fail("customer", `the sandbox's shell ended (exit ${exitCode ?? "unknown"}) before it ran the command`)))
    setTimeout(() => {
      if (terminals.get(t.key) === t) terminals.delete(t.key)
    }, FOLLOWED_EXECUTIONS.forgetAfterMs).unref()
  }

  /** Stops following `t` (its socket closes; the session itself is left alone). */
  const detach = (t: Terminal) => {
    const socket = t.socket
    t.socket = null
    socket?.close()
  }

  const keep = (t: Terminal, data: Uint8Array) => {
    const room = Math.max(0, t.ref.maxOutputBytes - t.outputBytes)
    const chunk = data.length > room ? data.subarray(0, room) : data
    if (chunk.length < data.length) t.truncated = true
    t.outputBytes += chunk.length
    if (chunk.length > 0) t.events.push({ type: "stdout", data: chunk.slice() })
  }

  /** Output from the terminal: dropped up to the marker's line, then kept. */
  const onOutput = (t: Terminal, data: Uint8Array) => {
    if (t.done) return
    if (!t.ready) {
      const seen = new Uint8Array(t.tail.length + data.length)
      seen.set(t.tail)
      seen.set(data, t.tail.length)
      const at = indexOf(seen, t.marker)
      if (at === -1) {
        t.preambleBytes += data.length
        t.tail = seen.slice(Math.max(0, seen.length - t.marker.length + 1))
        if (t.preambleBytes > MAX_PREAMBLE_BYTES) {
          Deferred.unsafeDone(t.started, Exit.fail(fail("customer", `the sandbox's shell wrote more than ${MAX_PREAMBLE_BYTES} bytes without starting the command`)))
          detach(t)
        }
        return
      }
      t.ready = true
      t.lineEnd = true
      t.tail = new Uint8Array(0)
      Deferred.unsafeDone(t.started, Exit.void)
      data = seen.subarray(at + t.marker.length)
    }
    if (t.lineEnd) {
      let i = data[0] === 0x0d ? 1 : 0
      if (i < data.length) {
        if (data[i] === 0x0a) i += 1
        t.lineEnd = false
      }
      data = data.subarray(i)
    }
    keep(t, data)
  }

  /**
   * Connects `t` to its session; resolves on the daemon's "connected". Its frames then go to `t` until the socket
   * closes: with an exit (the terminal's end), or without (a broken connection: the next call connects again).
   */
  const openConnection = (sandbox: ProviderSandbox, t: Terminal) =>
    Effect.flatMap(ctx.toolboxSocketUrl(sandbox, `${ptyPath(t.ref)}/connect`), (url) =>
      Effect.async<void, ProviderError>((resume) => {
        let settled = false
        let connected = false
        const settle = (error?: ProviderError) => {
          if (settled) return
          settled = true
          clearTimeout(timer)
          resume(error === undefined ? Effect.void : Effect.fail(error))
        }
        const socket = ctx.openSocket(url)
        socket.binaryType = "arraybuffer"
        t.socket = socket
        const timer = setTimeout(() => {
          settle(fail("unavailable", `daytona pty connect: no answer within ${CONNECT_TIMEOUT_MS / 1000} s`))
          if (t.socket === socket) detach(t)
        }, CONNECT_TIMEOUT_MS)
        socket.onmessage = (event) => {
          if (t.socket !== socket) return
          if (typeof event.data === "string") {
            const control = event.data.length <= MAX_CONTROL_BYTES ? controlOf(event.data) : undefined
            if (control?.status === "connected") {
              connected = true
              return settle()
            }
            if (control !== undefined) {
              // "not found" / "has terminated": the session is gone.
              const gone = /not found|terminated/i.test(control.error)
              settle(fail(gone ? "not_found" : "unavailable", `daytona pty connect: ${control.error.slice(0, 300)}`))
              return detach(t)
            }
            return onOutput(t, new TextEncoder().encode(event.data))
          }
          onOutput(t, new Uint8Array(event.data as ArrayBuffer))
        }
        socket.onclose = (event) => {
          settle(fail("unavailable", `the daytona pty connection closed (${event.code}) before it was ready`))
          if (t.socket !== socket) return
          t.socket = null
          // Only a connection the daemon accepted carries the session's exit in its close.
          const exitCode = connected ? exitOfClose(event.code, event.reason) : undefined
          if (exitCode !== undefined) finish(t, exitCode)
        }
        return Effect.sync(() => {
          clearTimeout(timer)
          if (t.socket === socket) detach(t)
        })
      }))
  /** Connects `t` unless it is connected (or ended) already. */
  const connect = (sandbox: ProviderSandbox, t: Terminal) =>
    t.lock.withPermits(1)(Effect.suspend(() => (t.socket !== null || t.done ? Effect.void : openConnection(sandbox, t))))

  /** The line typed into the fresh shell (see the header). */
  const typedLine = (sandbox: ProviderSandbox, input: ExecInput, nonce: string) => {
    const env = Object.entries(input.environment ?? {}).map(([k, v]) => shellQuote(`${k}=${v}`))
    return [
      ` printf '%s_%s\\n' metal-${nonce} ready;`,
      ` ${startIn(ctx, sandbox, input.cwd)}`,
      `exec env -- ${[...env, ...input.command.map(shellQuote)].join(" ")} || exit 127\n`
    ].join("")
  }

  /** Sends input as frames the daemon takes, waiting while too much is still unsent. */
  const send = (t: Terminal, bytes: Uint8Array) =>
    Effect.gen(function*() {
      for (let at = 0; at < bytes.length; at += INPUT_FRAME_BYTES) {
        const deadline = Date.now() + SEND_WAIT_MS
        while (t.socket !== null && t.socket.bufferedAmount > MAX_UNSENT_BYTES) {
          if (Date.now() > deadline) return yield* fail("unavailable", "the daytona terminal does not take its input")
          yield* Effect.sleep(10)
        }
        const socket = t.socket
        if (socket === null || socket.readyState !== WebSocket.OPEN) {
          return yield* (t.done ? ended() : fail("unavailable", "the connection to the daytona terminal broke; try again"))
        }
        socket.send(bytes.slice(at, Math.min(bytes.length, at + INPUT_FRAME_BYTES)) as Uint8Array<ArrayBuffer>)
      }
    })

  const refOf = (executionId: string) =>
    terminalIds.owns(executionId) ? terminalIds.decode(executionId) : Effect.fail(fail("invalid_request", "the process has no terminal"))

  const exec = (sandbox: ProviderSandbox, input: ExecInput & { readonly pty: { readonly cols: number; readonly rows: number } }) =>
    Effect.gen(function*() {
      if (input.command.length === 0 || input.command[0] === "") return yield* fail("invalid_request", "the command is empty")
      // The line is typed into a terminal, whose line discipline acts on control characters (^C, ^U, a carriage
      // return read as a newline …) before the shell sees them: such a command would not run as given.
      const typed = [...input.command, input.cwd ?? "", ...Object.entries(input.environment ?? {}).flat()]
      if (typed.some((part) => CONTROL_CHARACTER.test(part))) {
        return yield* fail("invalid_request", "a terminal's command, working directory and environment cannot hold control characters at Daytona (they are typed into its shell)")
      }
      const nonce = crypto.randomBytes(9).toString("hex")
      const line = new TextEncoder().encode(typedLine(sandbox, input, nonce))
      if (line.length > MAX_TYPED_LINE_BYTES) {
        return yield* fail("invalid_request", `a terminal's command, working directory and environment are at most ${MAX_TYPED_LINE_BYTES} bytes at Daytona (typed into its shell)`)
      }
      const ref: TerminalRef = { sessionId: sessionName(input.processId), maxOutputBytes: input.maxOutputBytes }
      const executionId = terminalIds.encode(ref)
      const key = keyOf(sandbox, ref)
      const known = terminals.get(key)
      if (known !== undefined && known.ready && (known.socket !== null || known.done)) return { executionId } // started by this process
      const created = yield* toolbox(sandbox, "POST", "/process/pty", "create pty", HttpClientRequest.bodyUnsafeJson({ id: ref.sessionId, cols: input.pty.cols, rows: input.pty.rows, lazyStart: true })).pipe(
        Effect.as(true),
        // It exists: a retry of this exec. Once started (by a connect), its line may have been typed: follow it.
        Effect.catchIf((e) => e.status === 409, () => Effect.succeed(false))
      )
      const typing = created || !(yield* toolbox(sandbox, "GET", ptyPath(ref), "get pty").pipe(Effect.flatMap(decode(WirePtySession, "get pty")))).active
      const t = newTerminal(key, ref, { ready: !typing, base: 0, marker: `metal-${nonce}_ready` })
      const forgetOnFailure = <A>(self: Effect.Effect<A, ProviderError>) =>
        Effect.tapError(self, () => Effect.sync(() => {
          detach(t)
          if (terminals.get(key) === t) terminals.delete(key)
        }))
      yield* connect(sandbox, t).pipe(forgetOnFailure)
      if (!typing) return { executionId }
      yield* send(t, line).pipe(
        Effect.zipRight(Deferred.await(t.started).pipe(
          Effect.timeoutFail({ duration: `${READY_TIMEOUT_MS} millis`, onTimeout: () => fail("customer", `the sandbox's shell did not start the command within ${READY_TIMEOUT_MS / 1000} s`) })
        )),
        // Nothing of a start that failed may linger running.
        Effect.tapError(() => Effect.ignore(toolbox(sandbox, "DELETE", ptyPath(ref), "delete pty"))),
        forgetOnFailure
      )
      return { executionId }
    })

  const lostMessage = (t: Terminal) =>
    `the terminal ${t.ref.sessionId} is no longer known to Daytona: it ended while no client was connected (Daytona forgets an ended PTY session), so its exit status and any output after event ${(t.base ?? 0) + t.events.length} are lost`

  const execEvents = (sandbox: ProviderSandbox, executionId: string, fromSeq: number) =>
    Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const t = terminalOf(sandbox, ref)
      t.base ??= fromSeq
      const next = t.base + t.events.length
      if (fromSeq < t.base || fromSeq > next) return yield* fail("invalid_request", `events from ${fromSeq} are not available (this terminal has ${t.base}..${next})`)
      // Asking from `fromSeq` acknowledges everything before it.
      t.events.splice(0, fromSeq - t.base)
      t.base = fromSeq
      if (t.events.length === 0 && !t.done && t.socket === null && Date.now() >= t.retryAt) {
        const attached = yield* Effect.either(connect(sandbox, t))
        if (Either.isRight(attached)) {
          t.failingSince = null
        } else if (attached.left.kind === "not_found") {
          if (!t.cancelled) {
            terminals.delete(t.key)
            return yield* fail("not_found", lostMessage(t))
          }
          finish(t, null) // we cancelled it and it is gone: that is the outcome
        } else if (attached.left.kind === "unavailable") {
          // Stopped or briefly unreachable: no events yet; try again shortly, and give up after a while.
          if (reattachFailed(t)) return yield* attached.left
        } else {
          return yield* attached.left
        }
      }
      const base = t.base
      return t.events.map((e, i) => ({ ...e, seq: base + i }) as ExecEvent)
    })

  const cancelExec = (sandbox: ProviderSandbox, executionId: string) =>
    Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const t = terminalOf(sandbox, ref)
      if (t.done) return { cancelled: false }
      const before = t.cancelled
      t.cancelled = true // before the kill, so the exit that follows says so
      const deleted = yield* toolbox(sandbox, "DELETE", ptyPath(ref), "delete pty").pipe(
        Effect.as(true),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(false)),
        Effect.tapError(() => Effect.sync(() => (t.cancelled = before)))
      )
      if (!deleted) t.cancelled = before
      return { cancelled: deleted }
    })

  /** Typed into the terminal over its connection (connected again if need be); `eof` is ^D. */
  const sendInput: NonNullable<SandboxProvider["sendInput"]> = (sandbox, executionId, data, eof) =>
    Effect.gen(function*() {
      const ref = yield* refOf(executionId)
      const t = terminalOf(sandbox, ref)
      if (t.done) return yield* ended()
      yield* connect(sandbox, t).pipe(Effect.mapError((e) => (e.kind === "not_found" ? ended() : e)))
      const bytes = eof ? Buffer.concat([data, Buffer.from([4])]) : data
      yield* send(t, bytes)
    })

  const resizeTerminal: NonNullable<SandboxProvider["resizeTerminal"]> = (sandbox, executionId, size) =>
    Effect.flatMap(refOf(executionId), (ref) =>
      toolbox(sandbox, "POST", `${ptyPath(ref)}/resize`, "resize pty", HttpClientRequest.bodyUnsafeJson({ cols: size.cols, rows: size.rows })).pipe(
        Effect.asVoid,
        // 410: the session ended (or is unknown).
        Effect.mapError((e) => (e.status === 410 || e.kind === "not_found" ? ended() : e))
      ))

  /** A destroyed sandbox's terminals: their connections close and they are forgotten. */
  const forget = (resourceId: string) => {
    for (const [key, t] of terminals) {
      if (!key.startsWith(`${resourceId}/`)) continue
      detach(t)
      terminals.delete(key)
    }
  }

  return { exec, execEvents, cancelExec, sendInput, resizeTerminal, forget }
}
