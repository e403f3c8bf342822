/**
 * Terminals (issue 13, item 5): attaching a client to a process started with `pty`. One attach at a time per
 * process — a second one takes over and the first is closed (4000) — and closing an attach never touches the
 * process. What the session does:
 * - output: the process's stored output events (so nothing typed before the attach is lost: it replays from
 *   `after`, 0 = everything kept), then each new one as it is stored, as binary frames; when the process ends, a
 *   text frame `{"type":"exit","state","exit_code"}` and a normal close. The stored output is the buffer: the
 *   session reads the next batch only while the client has taken what it was sent (at most `MAX_BUFFERED` bytes
 *   queued), so a slow client costs no memory here;
 * - input: binary frames are typed into the terminal (Stdin.ts, in order with `…/stdin` writes), text frames
 *   `{"type":"resize","cols","rows"}` resize it; a bad frame gets `{"type":"error","code","message"}` back;
 * - activity: a process one can attach to is running, which keeps its sandbox from the idle timeout already
 *   (Lifecycle.ts); input touches the sandbox as well.
 */
import { Effect, Either, Fiber, Schema } from "effect"
import { Db } from "../../db/Db.ts"
import { ProcessesRepo } from "../../db/repos/Processes.ts"
import { type SandboxRow, SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { conflict } from "../../domain/Errors.ts"
import { TerminalSize } from "../../domain/Runtime.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import { nextSignal, processTopic } from "../Signals.ts"
import { processOf } from "./ProcessCommands.ts"
import { type Caller, sandboxOf } from "./SandboxAccess.ts"
import { TERMINAL_PROCESS_STATES } from "./Processes.ts"
import { actionFailure, logProviderFailure } from "./ProviderErrors.ts"
import { sendInput } from "./Stdin.ts"
import type { ProcessId, SandboxId } from "../../domain/Ids.ts"

/** What a session needs of its WebSocket. */
export interface AttachSocket {
  readonly send: (data: Uint8Array | string) => void
  readonly close: (code: number, reason: string) => void
  /** Bytes sent but not yet taken by the client. */
  readonly buffered: () => number
  readonly ping: () => void
}

export interface AttachSession {
  /** A frame from the client. */
  readonly receive: (message: Uint8Array | string) => void
  /** The client went away (or was taken over): the session stops; the process goes on. */
  readonly closed: () => void
}

/** Input frames: as much as one `…/stdin` write. */
export const MAX_INPUT_FRAME_BYTES = 1024 * 1024
/** Close codes of our own (RFC 6455 §7.4.2 leaves 4000–4999 to applications). */
export const TAKEN_OVER = 4000
const MAX_BUFFERED = 1024 * 1024
const BATCH = 100
const PING_EVERY_MS = 30_000

const Resize = Schema.Struct({ type: Schema.Literal("resize"), ...TerminalSize.fields })
const decodeResize = Schema.decodeUnknownEither(Schema.parseJson(Resize))

/** The process, if a client may attach to it: the caller's, started on a terminal and not ended. */
export const attachable = (caller: Caller, sandboxId: SandboxId, processId: ProcessId) =>
  Effect.gen(function*() {
    yield* sandboxOf(caller, sandboxId)
    const row = yield* processOf(caller, sandboxId, processId)
    if (row.pty_cols === null) return yield* conflict("invalid_process_state", "The process was not started on a terminal (\"pty\"); nothing to attach to", { state: row.state })
    if (TERMINAL_PROCESS_STATES.includes(row.state)) return yield* conflict("invalid_process_state", `The process is ${row.state}: its terminal is closed`, { state: row.state })
    return row
  })

/** The open session of each process, so that a new attach can take over. */
const sessions = new Map<string, { readonly takeOver: () => void }>()

type Run = <A, E>(effect: Effect.Effect<A, E, ProcessesRepo | SandboxesRepo | ProviderAccounts | Db>) => Promise<A>
type Fork = (effect: Effect.Effect<void, never, ProcessesRepo | SandboxesRepo | ProviderAccounts | Db>) => Fiber.RuntimeFiber<void, never>

/**
 * Starts a session for a process `attachable` accepted. `run` / `fork` run effects with the services (the HTTP
 * layer's runtime); the session ends by itself when the process ends, or when `closed` is called.
 */
export const openAttach = (sandbox: SandboxRow, processId: ProcessId, after: number, socket: AttachSocket, run: Run, fork: Fork): AttachSession => {
  let open = true
  const errorFrame = (code: string, message: string) => {
    if (open) socket.send(JSON.stringify({ type: "error", code, message }))
  }
  const close = (code: number, reason: string) => {
    if (!open) return
    open = false
    socket.close(code, reason)
  }

  const output = Effect.gen(function*() {
    let cursor = after
    let pinged = Date.now()
    for (;;) {
      // Read the state before the events: a process seen ended here has all its events stored already.
      const row = yield* ProcessesRepo.get(processId)
      const ended = row === undefined || TERMINAL_PROCESS_STATES.includes(row.state)
      const events = yield* ProcessesRepo.eventsAfter(processId, cursor, BATCH)
      for (const event of events) {
        cursor = event.seq
        if (event.type !== "stdout" && event.type !== "stderr") continue
        while (open && socket.buffered() > MAX_BUFFERED) yield* Effect.sleep(10)
        if (!open) return
        socket.send(Buffer.from(String(event.data["data_base64"] ?? ""), "base64"))
      }
      if (events.length > 0) continue
      if (ended) {
        if (open) socket.send(JSON.stringify({ type: "exit", state: row?.state ?? null, exit_code: row?.exit_code ?? null }))
        return close(1000, "the process ended")
      }
      if (Date.now() - pinged >= PING_EVERY_MS) {
        socket.ping()
        pinged = Date.now()
      }
      yield* nextSignal(processTopic(processId), PING_EVERY_MS)
    }
  }).pipe(Effect.catchAllCause((cause) => Effect.zipRight(Effect.logError("terminal attach failed", cause), Effect.sync(() => close(1011, "the gateway could not read the output")))))

  const resize = (size: { readonly cols: number; readonly rows: number }) =>
    Effect.gen(function*() {
      const target = (yield* ProviderAccounts).target(sandbox)
      const row = yield* ProcessesRepo.get(processId)
      if (target?.provider.resizeTerminal === undefined || row?.execution_id == null) {
        return yield* conflict("invalid_process_state", "The terminal cannot be resized now (the process has not started, or its sandbox is not running)")
      }
      yield* target.provider.resizeTerminal(target.resource, row.execution_id, size).pipe(
        Effect.tapError((e) => logProviderFailure("resize", e)),
        Effect.mapError((e) => {
          const error = actionFailure("resize_failed", "resize the terminal", e)
          return conflict(error.code, error.message, error.details)
        })
      )
      yield* ProcessesRepo.resizeTerminal(processId, size)
    })

  /** Input and resizes, one after the other in the order they came; a failure is told to the client. */
  let chain: Promise<void> = Promise.resolve()
  const inOrder = (effect: Effect.Effect<unknown, { readonly code: string; readonly message: string }, ProcessesRepo | SandboxesRepo | ProviderAccounts | Db>) => {
    chain = chain.then(async () => {
      if (!open) return
      const result = await run(Effect.either(effect))
      if (Either.isLeft(result)) errorFrame(result.left.code, result.left.message)
    }).catch(() => errorFrame("internal_error", "The input could not be delivered"))
  }

  sessions.get(processId)?.takeOver()
  const fiber = fork(output)
  const session = {
    takeOver: () => {
      close(TAKEN_OVER, "another client attached")
      stop()
    }
  }
  const stop = () => {
    open = false
    if (sessions.get(processId) === session) sessions.delete(processId)
    void run(Fiber.interrupt(fiber))
  }
  sessions.set(processId, session)

  return {
    receive: (message) => {
      if (!open) return
      if (typeof message === "string") {
        const size = decodeResize(message)
        if (Either.isLeft(size)) return errorFrame("validation_error", "text frames are {\"type\":\"resize\",\"cols\":1-1000,\"rows\":1-1000}; input goes in binary frames")
        return inOrder(resize(size.right))
      }
      if (message.length > MAX_INPUT_FRAME_BYTES) return close(1009, `input frames are at most ${MAX_INPUT_FRAME_BYTES} bytes`)
      if (message.length > 0) inOrder(sendInput(sandbox, processId, message, false))
    },
    closed: stop
  }
}
