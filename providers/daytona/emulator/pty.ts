/**
 * The Daytona emulator's PTY sessions (`/toolbox/{id}/process/pty…`), as the daemon serves them
 * (apps/daemon/pkg/toolbox/process/pty), over a real pseudo-terminal of the local runtime:
 * - `POST /process/pty {id, cwd?, envs?, cols?, rows?, lazyStart?}` → 201 {sessionId} (409 for a taken id, 400 for
 *   a size over 1000); the session runs the user's shell, `-i -l` — the first of zsh and bash listed in
 *   /etc/shells, else $SHELL, else sh, as the daemon picks — with TERM=xterm-256color unless `envs` says; a lazy
 *   session starts at its first connect;
 * - `GET /process/pty` {sessions}, `GET /process/pty/{id}` (its info), `DELETE` (SIGKILL; connected clients are
 *   closed 1011 with `{"exitCode":137,"exitReason":"SIGKILL"}`), `POST …/resize {cols, rows}` (410 once ended);
 * - `GET …/connect`, a WebSocket: `{"type":"control","status":"connected"}` (or `"error"` and a close, for an
 *   unknown or ended session), then the terminal's output as binary frames to every client connected — output
 *   while none is connected is not kept, as the daemon keeps none — and every client frame typed into the
 *   terminal (a frame over 64 KiB closes that client with 1009, as the daemon's read limit does); when the shell
 *   ends, after the last of its output, a client that offered the `X-Daytona-Pty-Exit-Control` subprotocol is first
 *   sent `{"type":"control","status":"exited","exitCode":n}`, then every client is closed 1000 `{"exitCode":0}` or
 *   1011 `{"exitCode":n,"exitReason":…}` and the session is forgotten. A client that does not keep up is closed 1008
 *   ("slow consumer"). One of the subprotocols a client offers is accepted (the exit-control one first), as the
 *   daemon echoes one back;
 * - `GET …/process/pty/create-connect?id&cols&rows&cwd`, a WebSocket that creates the session (409 for a taken id,
 *   400 for a size over 1000) and connects to it in one round trip; its `envs` come in a subprotocol,
 *   `X-Daytona-Pty-Envs~<base64url of the JSON object>`.
 * A session's working directory is, unless given, the sandbox's (its image's WorkingDir, else /workspace).
 * Sessions are kept in the books, so they outlive a gateway restart as they outlive a client at Daytona (the
 * output written while the emulator was down is not replayed).
 */
import { Effect, Schema } from "effect"
import * as crypto from "node:crypto"
import * as os from "node:os"
import type { ExecEvent, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { decodeJsonBody, runOrThrow as run } from "../../core/emulator/server.ts"
import type { Books, EmulatedSandbox, PtySession } from "./books.ts"
import type { Execute } from "./execute.ts"
import { error, json, userShell } from "./wire.ts"

/** What a connected PTY WebSocket carries. */
export interface PtySocketData {
  readonly pty: {
    readonly key: string
    readonly sandboxId: string
    readonly id: string
    /** It offered the exit-control subprotocol: it is sent the "exited" control message. */
    readonly exitControl: boolean
    /** A create-connect: the session, registered, starts when the client is there. */
    readonly starts: boolean
    ready: Promise<boolean>
    input: Promise<void>
  }
}

const EXIT_CONTROL = "X-Daytona-Pty-Exit-Control"
const ENVS_PROTOCOL = "X-Daytona-Pty-Envs~"

const MAX_OUTPUT_BYTES = 100 * 1024 * 1024
/** The daemon's read limit per client message. */
const READ_LIMIT = 64 * 1024
/** The daemon drops a client whose 256-message queue is full; this is that much of 32 KiB reads. */
const SLOW_CONSUMER_BYTES = 8 * 1024 * 1024
const WAIT_MS = 1_000
const Size = Schema.Int.pipe(Schema.greaterThanOrEqualTo(0), Schema.lessThanOrEqualTo(65535))
const CreateBody = Schema.Struct({
  id: Schema.String,
  cwd: Schema.optional(Schema.String),
  envs: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String }))),
  cols: Schema.optional(Schema.NullOr(Size)),
  rows: Schema.optional(Schema.NullOr(Size)),
  lazyStart: Schema.optional(Schema.Boolean)
})
const ResizeBody = Schema.Struct({ cols: Size, rows: Size })

const info = (s: PtySession, active: boolean) => ({
  id: s.id,
  cwd: s.cwd,
  envs: s.envs,
  cols: s.cols,
  rows: s.rows,
  createdAt: s.createdAt,
  active,
  lazyStart: s.lazyStart
})

/** The exit as the daemon reports it: the code, or 128 + the signal's number. */
const exitCodeOf = (event: Extract<ExecEvent, { type: "exit" }>) =>
  event.exitCode ?? (event.signal !== null ? 128 + ((os.constants.signals as Record<string, number>)[event.signal] ?? 0) : 1)
/** The close the daemon sends its clients at the end (closeClientsWithExitCode). */
const closeOf = (exitCode: number): [number, string] => {
  if (exitCode === 0) return [1000, JSON.stringify({ exitCode })]
  const reason = exitCode === 130 ? "Ctrl+C" : exitCode === 137 ? "SIGKILL" : exitCode === 143 ? "SIGTERM" : exitCode > 128 ? `signal ${exitCode - 128}` : "non-zero exit"
  return [1011, JSON.stringify({ exitCode, exitReason: reason })]
}

/** The subprotocols a client offered. */
const offered = (request: Request) => (request.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) => p.trim()).filter((p) => p !== "")

/** The upgrade's options: the subprotocol accepted (exit control first, else the SDK version's), and what the socket carries. */
const upgradeOptions = (request: Request, data: Omit<PtySocketData["pty"], "exitControl">) => {
  const protocols = offered(request)
  const chosen = protocols.find((p) => p === EXIT_CONTROL) ?? protocols.find((p) => p.startsWith("X-Daytona-SDK-Version~"))
  return {
    data: { pty: { ...data, exitControl: chosen === EXIT_CONTROL } } satisfies PtySocketData,
    ...(chosen === undefined ? {} : { headers: { "Sec-WebSocket-Protocol": chosen } })
  }
}

export const makePty = (books: Books, runtime: LocalRuntimeShape, execute: Execute) => {
  const { ptys } = books
  /** Live state of started sessions: their connected clients, and whether their output is being read. */
  const live = new Map<string, { readonly clients: Set<Bun.ServerWebSocket<PtySocketData>>; pumping: boolean; positioned: Promise<void> }>()
  let stopped = false
  const keyOf = (sandboxId: string, id: string) => `${sandboxId}/${id}`
  const liveOf = (key: string) => {
    let l = live.get(key)
    if (l === undefined) live.set(key, l = { clients: new Set(), pumping: false, positioned: Promise.resolve() })
    return l
  }

  /**
   * The session is over: its clients are told (those that asked, when its shell ended rather than was killed), then
   * closed with its exit, and it is forgotten.
   */
  const end = (key: string, exitCode: number, announce: boolean) => {
    if (ptys.get(key) === undefined) return
    ptys.delete(key)
    const [code, reason] = closeOf(exitCode)
    const exited = JSON.stringify({ type: "control", status: "exited", exitCode, ...(exitCode === 0 ? {} : { exitReason: JSON.parse(reason).exitReason }) })
    for (const client of live.get(key)?.clients ?? []) {
      if (announce && client.data.pty.exitControl) client.send(exited)
      client.close(code, reason)
    }
    live.delete(key)
  }

  /**
   * Reads the shell's output for as long as it runs, to every client connected (and nowhere when none is), from
   * `from` (a shell just started), else from now on: what was written before (while the emulator was down) is not
   * replayed. Resolves once it knows where it starts, so a client told "connected" after it misses nothing.
   */
  const pump = (key: string, session: PtySession, from?: number): Promise<void> => {
    const l = liveOf(key)
    if (l.pumping || session.execId === undefined) return l.positioned
    l.pumping = true
    let positioned = () => {}
    l.positioned = new Promise<void>((resolve) => (positioned = resolve))
    // A failed first read stops it; the next use of the session starts it again.
    void follow(key, session, session.execId, l, from, positioned).catch(() => {}).finally(() => {
      l.pumping = false
      positioned()
    })
    return l.positioned
  }
  const follow = async (key: string, session: PtySession, execId: string, l: ReturnType<typeof liveOf>, from: number | undefined, positioned: () => void) => {
    let seq = from ?? 0
    if (from === undefined) {
      const before = await run(runtime.execEvents(session.sandboxId, execId, 0))
      seq = (before.at(-1)?.seq ?? -1) + 1
      const exited = before.find((e) => e.type === "exit")
      if (exited?.type === "exit") return end(key, exitCodeOf(exited), true)
    }
    positioned()
    while (!stopped && ptys.get(key) === session) {
      const events = await Effect.runPromise(Effect.either(runtime.execEvents(session.sandboxId, execId, seq, WAIT_MS)))
      if (events._tag === "Left") {
        // Gone with its sandbox; else (a stopped sandbox's frozen agent) try again shortly.
        if (books.state.sandboxes[session.sandboxId] === undefined || events.left.kind === "not_found") return end(key, 137, false)
        await Bun.sleep(WAIT_MS)
        continue
      }
      for (const event of events.right) {
        seq = event.seq + 1
        if (event.type === "exit") return end(key, exitCodeOf(event), true)
        for (const client of l.clients) {
          if (client.getBufferedAmount() > SLOW_CONSUMER_BYTES) {
            l.clients.delete(client)
            client.close(1008, "slow consumer")
          } else client.send(event.data)
        }
      }
    }
  }

  const start = async (session: PtySession) => {
    const started = await run(runtime.exec(session.sandboxId, {
      command: userShell(" -i -l"),
      cwd: session.cwd,
      env: { TERM: "xterm-256color", ...session.envs },
      maxOutputBytes: MAX_OUTPUT_BYTES,
      tag: `pty-${session.id}-${crypto.randomUUID()}`,
      pty: { cols: session.cols, rows: session.rows }
    }))
    session.execId = started.execId
    ptys.set(keyOf(session.sandboxId, session.id), session)
  }

  /** The session, if it exists (an ended one is forgotten here), and whether its shell runs. */
  const find = async (sandboxId: string, id: string): Promise<{ readonly session: PtySession; readonly active: boolean } | undefined> => {
    const key = keyOf(sandboxId, id)
    const session = ptys.get(key)
    if (session === undefined) return undefined
    if (session.execId === undefined) return { session, active: false }
    const exec = await Effect.runPromise(Effect.either(runtime.getExec(sandboxId, session.execId)))
    // Gone with its sandbox, or ended; any other failure (a stopped sandbox's frozen agent) leaves it be.
    if (exec._tag === "Left" ? exec.left.kind === "not_found" : exec.right.state === "exited") {
      // A shell that ended while its output is still being handed to the clients is ended by that pump, after the
      // last of it: ended here, its clients would be closed short of output the daemon would have sent them.
      if (exec._tag === "Right" && live.get(key)?.pumping === true) return { session, active: false }
      end(key, exec._tag === "Right" ? exec.right.exitCode ?? 1 : 137, true)
      return undefined
    }
    void pump(key, session)
    return { session, active: true }
  }

  const create = async (request: Request, sandbox: EmulatedSandbox) => {
    const body = await decodeJsonBody(request, CreateBody)
    if (!body.ok) return error(400, body.message)
    const { id, lazyStart = false } = body.value
    if (id === "") return error(400, "session ID is required")
    if ((await find(sandbox.id, id)) !== undefined) return error(409, `PTY session with ID '${id}' already exists`)
    const cols = body.value.cols ?? 80
    const rows = body.value.rows ?? 24
    for (const [name, value] of [["cols", cols], ["rows", rows]] as const) {
      if (value > 1000) return error(400, `invalid value for ${name} - must be less than 1000`)
      if (value < 1) return error(400, `invalid value for ${name} - must be at least 1`)
    }
    const session = await register(sandbox, { id, cwd: body.value.cwd, envs: body.value.envs ?? {}, cols, rows, lazyStart })
    if (!lazyStart) {
      try {
        await start(session)
        void pump(keyOf(sandbox.id, id), session, 0)
      } catch {
        ptys.delete(keyOf(sandbox.id, id))
        return error(500, "failed to start PTY session")
      }
    }
    return json({ sessionId: id }, 201)
  }

  /** A new session in the books (not started). */
  const register = async (sandbox: EmulatedSandbox, fields: Omit<PtySession, "sandboxId" | "createdAt" | "cwd" | "execId"> & { readonly cwd: string | undefined }) => {
    // Sessions of sandboxes that are gone go too (the daemon's went with its sandbox).
    for (const [key, s] of ptys.entries()) if (books.state.sandboxes[s.sandboxId] === undefined) ptys.delete(key)
    const session: PtySession = {
      ...fields,
      sandboxId: sandbox.id,
      cwd: fields.cwd === undefined || fields.cwd === "" ? (await execute.dirsOf(sandbox)).workDir : await execute.resolvePath(sandbox, fields.cwd),
      createdAt: new Date().toISOString()
    }
    ptys.set(keyOf(sandbox.id, fields.id), session)
    return session
  }

  const list = async (sandbox: EmulatedSandbox) => {
    const sessions = []
    for (const [, s] of ptys.entries()) {
      if (s.sandboxId !== sandbox.id) continue
      const found = await find(sandbox.id, s.id)
      if (found !== undefined) sessions.push(info(found.session, found.active))
    }
    return json({ sessions })
  }

  const get = async (sandbox: EmulatedSandbox, id: string) => {
    const found = await find(sandbox.id, id)
    return found === undefined ? error(404, "PTY session not found") : json(info(found.session, found.active))
  }

  const kill = async (sandbox: EmulatedSandbox, id: string) => {
    const found = await find(sandbox.id, id)
    if (found === undefined) return error(404, "PTY session not found")
    if (found.session.execId !== undefined) await run(Effect.ignore(runtime.kill(sandbox.id, found.session.execId, "SIGKILL")))
    end(keyOf(sandbox.id, id), 137, false)
    return json({ message: "PTY session deleted" })
  }

  const resize = async (request: Request, sandbox: EmulatedSandbox, id: string) => {
    const body = await decodeJsonBody(request, ResizeBody)
    if (!body.ok) return error(400, body.message)
    const { cols, rows } = body.value
    if (cols < 1 || rows < 1 || cols > 1000 || rows > 1000) return error(400, "cols and rows must be 1-1000")
    const found = await find(sandbox.id, id)
    if (found === undefined) return error(410, `PTY session ${id} not found`)
    if (!found.active && !found.session.lazyStart) return error(410, `PTY session '${id}' has terminated and cannot be resized`)
    if (found.session.execId !== undefined) await run(runtime.resize(sandbox.id, found.session.execId, { cols, rows }))
    found.session.cols = cols
    found.session.rows = rows
    ptys.set(keyOf(sandbox.id, id), found.session)
    return json(info(found.session, found.active))
  }

  /**
   * The session's readiness for a client (the daemon's VerifyPTYSessionReady): a lazy one (or one a create-connect
   * registered: `starts`) starts now.
   */
  const ready = async (sandboxId: string, id: string, starts: boolean): Promise<string | null> => {
    const found = await find(sandboxId, id)
    if (found === undefined) return `PTY session ${id} not found`
    if (found.active) {
      await pump(keyOf(sandboxId, id), found.session)
      return null
    }
    if (found.session.execId !== undefined || !(found.session.lazyStart || starts)) return `PTY session '${id}' has terminated and is no longer available`
    try {
      await start(found.session)
    } catch (e) {
      if (starts) ptys.delete(keyOf(sandboxId, id))
      return `failed to start PTY session: ${e instanceof Error ? e.message : String(e)}`
    }
    await pump(keyOf(sandboxId, id), found.session, 0)
    return null
  }

  /** `GET …/connect`: upgraded at once (the daemon upgrades first, then says whether the session is there). */
  const connect = (request: Request, server: Bun.Server<PtySocketData>, sandbox: EmulatedSandbox, id: string): Response | undefined =>
    server.upgrade(request, upgradeOptions(request, { key: keyOf(sandbox.id, id), sandboxId: sandbox.id, id, starts: false, ready: Promise.resolve(false), input: Promise.resolve() }))
      ? undefined
      : error(400, "Bad Request")

  /** `GET …/create-connect`: the session is checked and registered, then the connection upgraded; it starts once open. */
  const createConnect = async (request: Request, url: URL, server: Bun.Server<PtySocketData>, sandbox: EmulatedSandbox): Promise<Response | undefined> => {
    const id = url.searchParams.get("id") ?? ""
    if (id === "") return error(400, "session ID is required (query param 'id')")
    if ((await find(sandbox.id, id)) !== undefined) return error(409, `PTY session with ID '${id}' already exists`)
    // An unreadable size is the default, as the daemon parses it.
    const size = (name: string, fallback: number) => {
      const value = Number(url.searchParams.get(name) ?? "")
      return url.searchParams.get(name) !== null && Number.isInteger(value) && value >= 0 && value <= 65535 ? value : fallback
    }
    const cols = size("cols", 80)
    const rows = size("rows", 24)
    if (cols > 1000 || rows > 1000) return error(400, "cols and rows must be less than 1000")
    if (cols < 1 || rows < 1) return error(400, "cols and rows must be at least 1")
    const envsToken = offered(request).find((p) => p.startsWith(ENVS_PROTOCOL))
    let envs: Record<string, string> = {}
    if (envsToken !== undefined) {
      const decoded = Schema.decodeUnknownEither(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.String })))(Buffer.from(envsToken.slice(ENVS_PROTOCOL.length), "base64url").toString("utf8"))
      if (decoded._tag === "Left") return error(400, "invalid envs subprotocol: not a JSON object of strings")
      envs = decoded.right
    }
    await register(sandbox, { id, cwd: url.searchParams.get("cwd") ?? undefined, envs, cols, rows, lazyStart: false })
    const upgraded = server.upgrade(request, upgradeOptions(request, { key: keyOf(sandbox.id, id), sandboxId: sandbox.id, id, starts: true, ready: Promise.resolve(false), input: Promise.resolve() }))
    if (upgraded) return undefined
    ptys.delete(keyOf(sandbox.id, id))
    return error(400, "Bad Request")
  }

  const socketHandlers = {
    open: (ws: Bun.ServerWebSocket<PtySocketData>) => {
      const c = ws.data.pty
      c.ready = ready(c.sandboxId, c.id, c.starts).then((problem) => {
        if (problem !== null) {
          ws.send(JSON.stringify({ type: "control", status: "error", error: `${c.starts ? "Failed to start" : "Failed to connect to"} PTY session: ${problem}` }))
          ws.close()
          return false
        }
        liveOf(c.key).clients.add(ws)
        ws.send(JSON.stringify({ type: "control", status: "connected" }))
        return true
      }, () => {
        ws.close(1011, "PTY session unavailable")
        return false
      })
    },
    message: (ws: Bun.ServerWebSocket<PtySocketData>, message: string | Buffer) => {
      const c = ws.data.pty
      const data = typeof message === "string" ? Buffer.from(message) : message
      if (data.length > READ_LIMIT) {
        live.get(c.key)?.clients.delete(ws)
        return ws.close(1009, "message too big")
      }
      // Typed in the order received, once the session is ready; a failure ends this client, as the daemon's does.
      c.input = c.input.then(async () => {
        if (!(await c.ready)) return
        const session = ptys.get(c.key)
        if (session?.execId === undefined) return
        const sent = await Effect.runPromise(Effect.either(runtime.sendInput(c.sandboxId, session.execId, new Uint8Array(data))))
        if (sent._tag === "Left") ws.close(1011, "PTY session unavailable")
      })
    },
    close: (ws: Bun.ServerWebSocket<PtySocketData>) => {
      live.get(ws.data.pty.key)?.clients.delete(ws)
    }
  }

  return {
    create,
    list,
    get,
    kill,
    resize,
    connect,
    createConnect,
    socketHandlers,
    stop: () => {
      stopped = true
    }
  }
}

export type Pty = ReturnType<typeof makePty>
