/**
 * The Daytona emulator's toolbox (`/toolbox/{id}/…`): sessions with async commands, their status and logs (the
 * daemon's three answers: `{stdout, stderr}` to an SDK, the raw multiplexed log to a caller that asks for split
 * output without an SDK version, plain combined text otherwise), and files (info, Range download, multipart
 * upload, folders, list, delete), PTY sessions (`pty.ts`) and computer use (`computer.ts`) — all over the local runtime.
 */
import { asBody } from "../../../src/domain/Bodies.ts"
import * as crypto from "node:crypto"
import * as path from "node:path"
import { Cause, Effect, Option } from "effect"
import { boundaryOf, multipartFile } from "../../core/emulator/multipart.ts"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { makeRouter, route, runOrThrow as run } from "../../core/emulator/server.ts"
import type { Books, EmulatedSandbox, Session } from "./books.ts"
import { makeComputerUse } from "./computer.ts"
import type { Pty } from "./pty.ts"
import { error, goFileMode, json, Refused } from "./wire.ts"

/**
 * The provider lists a directory whole; the emulator bounds it (memory) far above the 10,000 entries an adapter
 * keeps, so an adapter still sees that a large directory has more than it kept.
 */
const LIST_ENTRIES = 100_000

const STATUS_WAIT_MS = 50
const OUTPUT_GRACE_MS = 2
const STDOUT_MARK = Buffer.from([1, 1, 1])
const STDERR_MARK = Buffer.from([2, 2, 2])
const MAX_OUTPUT_BYTES = 100 * 1024 * 1024
/** A download up to this size is read whole; a larger one is streamed. */
const WHOLE_READ_BYTES = 16 * 1024 * 1024
/** The largest upload this emulator takes (real Daytona takes what the sandbox's disk holds). */
const MAX_UPLOAD_BYTES = 16 * 1024 * 1024 * 1024

interface Call {
  readonly request: Request
  readonly url: URL
  readonly sandbox: EmulatedSandbox
  /** The `path` query parameter of file routes. */
  readonly path: string
}

export const makeToolbox = (books: Books, runtime: LocalRuntimeShape, pty: Pty) => {
  const { sessions } = books

  const sessionOf = (sandbox: EmulatedSandbox, sessionId: string): Session => {
    const session = sessions.get(sessionId)
    if (session === undefined || session.sandboxId !== sandbox.id) throw new Refused(404, "Session not found")
    return session
  }
  const commandOf = (session: Session, commandId: string) => {
    const command = session.commands[commandId]
    if (command === undefined) throw new Refused(404, "Command not found")
    return command
  }

  const createSession = async ({ request, sandbox }: Call) => {
    const { sessionId } = (await request.json()) as { sessionId: string }
    // Kept in memory until its first command: an empty session holds nothing a restart would need (a caller
    // that finds it gone after one creates it again), so starting a process writes one small file, not two.
    if (typeof sessionId !== "string" || sessionId === "") return error(400, "sessionId is required")
    if (sessions.get(sessionId) !== undefined) return error(409, `Session ${sessionId} already exists`)
    sessions.remember(sessionId, { sandboxId: sandbox.id, createdAt: Date.now(), commands: {} })
    books.pruneSessions()
    return json({})
  }

  const getSession = async ({ sandbox }: Call, sessionId: string) => {
    const session = sessionOf(sandbox, sessionId)
    const commands = await Promise.all(Object.entries(session.commands).map(async ([id, c]) => {
      const info = await run(runtime.getExec(sandbox.id, c.execId))
      return { id, command: c.command, exitCode: info.state === "exited" ? info.exitCode ?? -1 : null }
    }))
    return json({ sessionId, commands })
  }

  const deleteSession = async ({ sandbox }: Call, sessionId: string) => {
    const session = sessionOf(sandbox, sessionId)
    for (const command of Object.values(session.commands)) await run(Effect.ignore(runtime.kill(sandbox.id, command.execId, "SIGKILL")))
    sessions.delete(sessionId)
    return json({})
  }

  const exec = async ({ request, sandbox }: Call, sessionId: string) => {
    const session = sessionOf(sandbox, sessionId)
    const body = (await request.json()) as { command: string; runAsync?: boolean }
    const cmdId = crypto.randomUUID()
    // Daytona's session commands take no input: they read end-of-file (as E2B's do without `stdin: true`).
    const started = await run(runtime.exec(sandbox.id, { command: ["sh", "-c", body.command], maxOutputBytes: MAX_OUTPUT_BYTES, tag: cmdId, stdin: false }))
    session.commands[cmdId] = { execId: started.execId, command: body.command }
    sessions.set(sessionId, session)
    return json({ cmdId })
  }

  /**
   * A running command is watched briefly before answering (the runtime wakes on its events), so a poller learns
   * of a quick exit or of new output at once rather than on its next poll: the answer comes when the command
   * exits, or shortly after it writes something this status has not yet seen, or after STATUS_WAIT_MS. The wire
   * answer is unchanged. What each command's status has seen is kept in memory only (a restart starts over).
   */
  const statusSeen = new Map<string, number>()
  const commandStatus = async ({ sandbox }: Call, sessionId: string, commandId: string) => {
    const command = commandOf(sessionOf(sandbox, sessionId), commandId)
    let deadline = Date.now() + STATUS_WAIT_MS
    const info = await run(runtime.getExec(sandbox.id, command.execId))
    let exitCode = info.state === "exited" ? info.exitCode ?? -1 : null
    let seen = statusSeen.get(command.execId) ?? 0
    while (exitCode === null && Date.now() < deadline) {
      const events = await run(runtime.execEvents(sandbox.id, command.execId, seen, deadline - Date.now()))
      seen += events.length
      const last = events.at(-1)
      if (last?.type === "exit") exitCode = last.exitCode ?? -1
      // New output: answer soon, after a moment's grace in which a command that is ending exits.
      else if (events.length > 0) deadline = Math.min(deadline, Date.now() + OUTPUT_GRACE_MS)
    }
    if (exitCode === null) {
      statusSeen.delete(command.execId)
      statusSeen.set(command.execId, seen)
      if (statusSeen.size > 4096) statusSeen.delete(statusSeen.keys().next().value!)
    } else statusSeen.delete(command.execId)
    return json({ id: commandId, command: command.command, exitCode })
  }

  const commandLogs = async ({ request, sandbox }: Call, sessionId: string, commandId: string) => {
    const command = commandOf(sessionOf(sandbox, sessionId), commandId)
    const events = (await run(runtime.execEvents(sandbox.id, command.execId, 0))).filter((e) => e.type !== "exit") as Array<{ type: "stdout" | "stderr"; data: Uint8Array }>
    const text = (type: "stdout" | "stderr") => Buffer.concat(events.filter((e) => e.type === type).map((e) => e.data)).toString("utf8")
    // (The daemon marks each line; here each piece the runtime read, so bytes stay exact.)
    if (request.headers.get("x-daytona-split-output") === "true") {
      if (request.headers.get("x-daytona-sdk-version") !== null) return json({ stdout: text("stdout"), stderr: text("stderr") })
      const log = Buffer.concat(events.flatMap((e) => [e.type === "stdout" ? STDOUT_MARK : STDERR_MARK, e.data]))
      return new Response(log, { headers: { "content-type": "application/octet-stream" } })
    }
    return new Response(Buffer.concat(events.map((e) => e.data)), { headers: { "content-type": "text/plain; charset=utf-8" } })
  }

  const info = async ({ sandbox, path: p }: Call) => {
    const stat = await run(runtime.statFile(sandbox.id, p))
    if (stat._tag === "None") return error(404, "File not found")
    return json({ name: path.basename(p), size: stat.value.sizeBytes, isDir: stat.value.type === "directory", modTime: stat.value.modifiedAt, mode: goFileMode(stat.value) })
  }

  const download = async ({ request, sandbox, path: p }: Call) => {
    const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.get("range") ?? "")
    const offset = range ? Number(range[1]) : 0
    const end = range && range[2] !== "" ? Number(range[2]) + 1 : Number.MAX_SAFE_INTEGER
    const wanted = end - offset
    const headers = (length: number, size: number) => ({ "content-type": "application/octet-stream", ...(range ? { "content-range": `bytes ${offset}-${offset + length - 1}/${size}` } : {}) })
    // Up to a piece, read whole (one native copy each way is faster than a piped stream); beyond, streamed from
    // the jail as it is read, so the emulator never holds a large file whole.
    if (wanted <= WHOLE_READ_BYTES) {
      const read = await run(runtime.readFile(sandbox.id, p, offset, wanted))
      return new Response(asBody(read.data), { status: range ? 206 : 200, headers: headers(read.data.length, read.size) })
    }
    const read = await run(runtime.readFileStream(sandbox.id, p, offset, wanted))
    return new Response(read.stream, { status: range ? 206 : 200, headers: headers(read.length, read.size) })
  }

  /** The `file` part is written as it comes (the runtime puts it in place only once whole). */
  const upload = async ({ request, sandbox, path: p }: Call) => {
    const boundary = boundaryOf(request.headers.get("content-type") ?? "")
    if (boundary === undefined || request.body === null) return error(400, "file is required")
    const { stream } = multipartFile(request.body, boundary, "file")
    const written = await Effect.runPromiseExit(runtime.writeFileStream(sandbox.id, p, stream, { mode: "overwrite", createParents: false, maxBytes: MAX_UPLOAD_BYTES }))
    if (written._tag === "Failure") {
      const failure = Cause.failureOption(written.cause)
      // The form itself was bad (no file part, cut short): the request's fault, as Go's multipart reader says.
      if (Option.isNone(failure)) return error(400, "file is required")
      throw failure.value
    }
    return json({})
  }

  const router = makeRouter<Call>([
    route("POST", "/process/session", createSession),
    route("GET", "/process/session/:session", (call, { session }) => getSession(call, session!)),
    route("DELETE", "/process/session/:session", (call, { session }) => deleteSession(call, session!)),
    route("POST", "/process/session/:session/exec", (call, { session }) => exec(call, session!)),
    route("GET", "/process/session/:session/command/:command", (call, { command, session }) => commandStatus(call, session!, command!)),
    route("GET", "/process/session/:session/command/:command/logs", (call, { command, session }) => commandLogs(call, session!, command!)),
    route("POST", "/process/pty", ({ request, sandbox }) => pty.create(request, sandbox)),
    route("GET", "/process/pty", ({ sandbox }) => pty.list(sandbox)),
    route("GET", "/process/pty/:id", ({ sandbox }, { id }) => pty.get(sandbox, id!)),
    route("DELETE", "/process/pty/:id", ({ sandbox }, { id }) => pty.kill(sandbox, id!)),
    route("POST", "/process/pty/:id/resize", ({ request, sandbox }, { id }) => pty.resize(request, sandbox, id!)),
    // A WebSocket upgrade of it is taken before the router (index.ts); a plain request is refused as Go's upgrader does.
    route("GET", "/process/pty/:id/connect", () => error(400, "websocket: the client is not using the websocket protocol")),
    route("GET", "/files/info", info),
    route("GET", "/files/download", download),
    route("POST", "/files/upload", upload),
    route("POST", "/files/folder", async ({ sandbox, path: p }) => {
      await run(runtime.makeDir(sandbox.id, p, { parents: true }))
      return json({})
    }),
    route("GET", "/files", async ({ sandbox, path: p }) => {
      const listed = await run(runtime.listFiles(sandbox.id, p, { recursive: false, maxEntries: LIST_ENTRIES }))
      return json(listed.entries.map((e) => ({ name: path.basename(e.path), size: e.sizeBytes, isDir: e.type === "directory", modTime: e.modifiedAt, mode: goFileMode(e) })))
    }),
    route("DELETE", "/files", async ({ sandbox, path: p, url }) => {
      const deleted = await run(runtime.deleteFile(sandbox.id, p, { recursive: url.searchParams.get("recursive") === "true" }))
      return deleted ? json({}) : error(404, "File not found")
    }),
    ...makeComputerUse(runtime)
  ])

  /** `rest`: the path after `/toolbox/{id}`. */
  return async (request: Request, url: URL, sandbox: EmulatedSandbox, rest: string): Promise<Response> => {
    if (sandbox.state !== "started") return error(409, "Sandbox is not running")
    const found = router.match(request.method, rest)
    if (found._tag !== "Found") return error(404, "Not found")
    return found.handle({ request, url, sandbox, path: url.searchParams.get("path") ?? "" })
  }
}
