/**
 * A Daytona emulator session's commands as read back from its shell (sessions.ts serves the routes): whether a
 * command ended and with what status (its exit file, else its shell's end), and its output, cut out of the shell's
 * own output by the command's markers (sessionLog.ts), piece by piece or held whole. The shell's output is the
 * sandbox's, so every read is bounded: by the markers' nonce, by BUFFERED_OUTPUT_BYTES, by a short wait for an end.
 */
import { Effect } from "effect"
import type { ExecEvent, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import type { Books, Session, SessionCommand } from "./books.ts"
import { BUFFERED_OUTPUT_BYTES } from "./execute.ts"
import { CommandExtract, commandFiles, labelled } from "./sessionLog.ts"

const FOLLOW_WAIT_MS = 1000
/** A command that ended has its end markers in flight to the runtime: a read waits this long for them. */
const END_WAIT_MS = 5000

type Output = Extract<ExecEvent, { type: "stdout" | "stderr" }>
type Piece = { readonly type: "stdout" | "stderr"; readonly data: Uint8Array }

const exitCodeOfShell = (info: { readonly exitCode: number | null }) => info.exitCode ?? 137

/** Where a session is kept in the books: its sandbox's id and its own. */
export const sessionKey = (sandboxId: string, id: string) => `${sandboxId}/${id}`

export const makeSessionOutput = (books: Books, runtime: LocalRuntimeShape) => {
  const { sessions } = books
  const keyOf = sessionKey
  const live = (session: Session) => sessions.get(keyOf(session.sandboxId, session.id)) === session
  const save = (session: Session) => {
    if (live(session)) sessions.set(keyOf(session.sandboxId, session.id), session)
  }

  /**
   * Whether the command ended, and its exit status: its exit file, once there; else, if the shell is gone, it ended
   * with the shell (the one the shell was running gets its status, those after it -1: they never ran).
   */
  const settle = async (session: Session, command: SessionCommand): Promise<number | undefined> => {
    if (command.exitCode !== undefined) return command.exitCode
    const file = await Effect.runPromise(Effect.either(runtime.readFile(session.sandboxId, `${commandFiles(command.nonce)}.exit`, 0, 32)))
    // Not there yet is an answer; a sandbox that cannot be asked is a failure of this call (the daemon's 5xx), never
    // a command that runs on forever.
    if (file._tag === "Left" && file.left.kind !== "not_found") throw file.left
    const status = file._tag === "Right" ? /^-?\d{1,10}$/.exec(Buffer.from(file.right.data).toString("latin1"))?.[0] : undefined
    if (status !== undefined) {
      command.exitCode = Number(status)
      save(session)
      return command.exitCode
    }
    const shell = await Effect.runPromise(Effect.either(runtime.getExec(session.sandboxId, session.shellExecId)))
    if (shell._tag === "Right" && shell.right.state === "running") return undefined
    if (shell._tag === "Left" && shell.left.kind !== "not_found") throw shell.left
    // The shell ended (or went with its sandbox's jail). A command before this one may have ended just before it.
    let running = true
    for (const c of session.commands) {
      if (c.exitCode !== undefined) continue
      const own = await Effect.runPromise(Effect.either(runtime.readFile(session.sandboxId, `${commandFiles(c.nonce)}.exit`, 0, 32)))
      const code = own._tag === "Right" ? /^-?\d{1,10}$/.exec(Buffer.from(own.right.data).toString("latin1"))?.[0] : undefined
      if (code !== undefined) c.exitCode = Number(code)
      else {
        c.exitCode = running && shell._tag === "Right" ? exitCodeOfShell(shell.right) : -1
        running = false
      }
    }
    save(session)
    return command.exitCode
  }

  /** Waits (at most END_WAIT_MS) until the command's exit status is known, or `stop` says to give up. */
  const exitWritten = async (session: Session, command: SessionCommand, stop: (() => boolean) | undefined) => {
    const until = Date.now() + END_WAIT_MS
    for (let pause = 5; (await settle(session, command)) === undefined && Date.now() < until && stop?.() !== true; pause = Math.min(pause * 2, 100)) {
      await Bun.sleep(pause)
    }
  }

  /**
   * The command's output pieces, in order, read from its shell's output. `follow`: waiting for more until it ends
   * (`stop` says when to give up); else up to what is there (and, for a command that ended, its end, which may be
   * in flight). Reading a command to its end records where the next one's output starts.
   */
  async function* piecesOf(session: Session, command: SessionCommand, options: { readonly follow: boolean; readonly stop?: () => boolean }): AsyncGenerator<Piece> {
    const from = await startOf(session, command, options)
    if (from === undefined) return
    const extract = new CommandExtract(command.nonce)
    let seq = from
    let endWait: number | undefined
    for (;;) {
      if (options.stop?.() === true) return
      const ended = command.exitCode !== undefined || (!options.follow && (await settle(session, command)) !== undefined)
      const wait = options.follow ? FOLLOW_WAIT_MS : ended ? Math.min(FOLLOW_WAIT_MS, Math.max(0, (endWait ??= Date.now() + END_WAIT_MS) - Date.now())) : 0
      const events = await Effect.runPromise(Effect.either(runtime.execEvents(session.sandboxId, session.shellExecId, seq, wait)))
      if (events._tag === "Left") return
      for (const event of events.right) {
        if (event.type === "exit" || (command.toSeq !== undefined && event.seq > command.toSeq)) return
        yield* extract.feed(event as Output)
        seq = event.seq + 1
        if (extract.ended) {
          if (command.toSeq === undefined) {
            command.toSeq = event.seq
            // The next command's markers come after this one's end on each stream.
            command.nextFromSeq = Math.min(extract.stdoutEndSeq ?? event.seq, extract.stderrEndSeq ?? event.seq)
            save(session)
          }
          // A follow ends once the command's exit status is there, as the daemon's does: the wrapper writes its
          // exit file just after the end markers, and a client asks for the status as soon as the follow ends.
          if (options.follow) await exitWritten(session, command, options.stop)
          return
        }
      }
      if (events.right.length > 0) continue
      // Nothing more yet: a read that does not follow ends here, unless the command ended and its end is in flight;
      // one that follows ends once the command ended and its end never came (its shell ended in it).
      if (!options.follow && (!ended || Date.now() >= endWait!)) return
      if (options.follow && (await settle(session, command)) !== undefined && Date.now() >= (endWait ??= Date.now() + END_WAIT_MS)) return
    }
  }

  /**
   * Where the command's output starts in its shell's: at the start for the first; after the one before it, once that
   * one was read to its end (read once, when it ended, then remembered). Undefined while the one before runs (with
   * `follow`: waited for), and when it ended without an end in its output (its shell ended in it: none after it ran).
   */
  const startOf = async (session: Session, command: SessionCommand, options: { readonly follow: boolean; readonly stop?: () => boolean }): Promise<number | undefined> => {
    const index = session.commands.indexOf(command)
    if (index === 0) return 0
    const before = session.commands[index - 1]!
    while (before.nextFromSeq === undefined) {
      if ((await settle(session, before)) !== undefined) {
        for await (const _ of piecesOf(session, before, { follow: false, ...(options.stop === undefined ? {} : { stop: options.stop }) })) void _
        return before.nextFromSeq
      }
      if (!options.follow || options.stop?.() === true || !live(session)) return undefined
      await Bun.sleep(100)
    }
    return before.nextFromSeq
  }

  /** The command's output held whole (at most BUFFERED_OUTPUT_BYTES of it). */
  const bufferedOf = async (session: Session, command: SessionCommand) => {
    const pieces: Array<Piece> = []
    let size = 0
    for await (const piece of piecesOf(session, command, { follow: false })) {
      if (size >= BUFFERED_OUTPUT_BYTES) continue
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

  return { live, save, settle, piecesOf, bufferedOf }
}
