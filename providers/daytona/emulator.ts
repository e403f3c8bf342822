/**
 * A loopback emulator of the Daytona API subset the adapter uses, backed by the local runtime: the control API
 * (`/sandbox…`, signed preview URLs), the toolbox (`/toolbox/{id}/process/session…`, `/toolbox/{id}/files…`) and
 * the preview proxy. Its state (sandboxes and previews in DATA_DIR/emulators/daytona/state.json, one file per
 * session under sessions/) survives a gateway restart the way a provider's cloud would.
 */
import * as crypto from "node:crypto"
import * as path from "node:path"
import { Effect, Option } from "effect"
import { makePortBridges } from "../core/port-bridges.ts"
import { emulatorHome, emulatorMessage, emulatorKey, persistentRecords, persistentState, runOrThrow, servePersistent, statusOfRuntimeError } from "../core/emulator-support.ts"
import type { LocalRuntimeShape } from "../../src/runtime/LocalRuntime.ts"

interface EmulatedSandbox {
  id: string
  name: string
  labels: Record<string, string>
  state: "started" | "stopped"
  cpu: number
  memory: number
  disk: number
  env: Record<string, string>
  createdAt: string
}

/** A session: command id → runtime exec id. Sessions live until deleted, their sandbox goes, or a day passes. */
interface Session {
  sandboxId: string
  createdAt?: number
  commands: Record<string, { execId: string; command: string }>
}

interface State {
  sandboxes: Record<string, EmulatedSandbox>
  /** Only in state files of earlier versions: moved to the session records at start. */
  sessions?: Record<string, Session>
  previews: Record<string, { sandboxId: string; port: number; expiresAt: number }>
}

const json = (body: unknown, status = 200) => Response.json(body, { status })
const STATUS_WAIT_MS = 50
/** A mode as the daemon sends it: Go's `os.FileMode.String()`, e.g. `-rw-r--r--`, `drwxr-xr-x`, `Lrwxrwxrwx`. */
const goFileMode = (entry: { readonly type: "file" | "directory" | "symlink" | "other"; readonly mode: number }) => {
  const kind = entry.type === "file" ? "-" : entry.type === "directory" ? "d" : entry.type === "symlink" ? "L" : "?"
  const bits = "rwxrwxrwx".split("").map((c, i) => ((entry.mode >> (8 - i)) & 1 ? c : "-")).join("")
  return kind + bits
}
const STDOUT_MARK = Buffer.from([1, 1, 1])
const STDERR_MARK = Buffer.from([2, 2, 2])
const error = (status: number, message: string) => json({ statusCode: status, message, error: message }, status)

export interface DaytonaEmulator {
  readonly baseUrl: string
  readonly apiKey: string
  readonly stop: () => void
}

export const startDaytonaEmulator = (dataDir: string, runtime: LocalRuntimeShape): DaytonaEmulator => {
  const dir = emulatorHome(dataDir, "daytona")
  const apiKey = emulatorKey(dir)
  const { state, save } = persistentState<State>(dir, () => ({ sandboxes: {}, previews: {} }))
  const sessions = persistentRecords<Session>(dir, "sessions")
  let lastPrune = 0
  if (state.sessions !== undefined) {
    for (const [id, session] of Object.entries(state.sessions)) sessions.set(id, session)
    delete state.sessions
    save()
  }
  const run = runOrThrow
  // Port bridges: unix sockets in a root-only directory, one per preview, closed when the preview expires or is
  // expired, or its sandbox stops or goes (see providers/core/port-bridges.ts).
  const bridges = makePortBridges(dir)
  const previewTimers = new Map<string, ReturnType<typeof setTimeout>>()
  let baseUrl = ""

  const dropPreview = (token: string) => {
    clearTimeout(previewTimers.get(token))
    previewTimers.delete(token)
    bridges.close(token)
    if (state.previews[token] !== undefined) {
      delete state.previews[token]
      save()
    }
  }
  /** A preview ends at its expiry: its bridge closes then, whether or not anything uses it. */
  const armPreview = (token: string) => {
    const preview = state.previews[token]
    if (preview === undefined) return
    clearTimeout(previewTimers.get(token))
    previewTimers.set(token, setTimeout(() => dropPreview(token), Math.min(Math.max(0, preview.expiresAt - Date.now()), 2 ** 31 - 1)))
  }
  for (const token of Object.keys(state.previews)) armPreview(token)

  const toWire = (s: EmulatedSandbox) => ({
    id: s.id,
    name: s.name,
    organizationId: "emulated",
    labels: s.labels,
    state: s.state,
    cpu: s.cpu,
    memory: s.memory,
    disk: s.disk,
    env: s.env,
    public: false,
    target: "local",
    createdAt: s.createdAt,
    toolboxProxyUrl: `${baseUrl}/toolbox`
  })

  /** As Daytona reports a sandbox whose machine died: state `error`, with a reason. */
  const observed = async (s: EmulatedSandbox) => {
    const jail = await run(runtime.get(s.id)).catch(() => Option.none())
    const alive = Option.isSome(jail) && jail.value.state !== "stopped"
    return alive ? toWire(s) : { ...toWire(s), state: "error", errorReason: "The sandbox's machine is gone" }
  }

  const findSandbox = (idOrName: string) =>
    state.sandboxes[idOrName] ?? Object.values(state.sandboxes).find((s) => s.name === idOrName)

  const control = async (request: Request, parts: Array<string>, url: URL): Promise<Response> => {
    if (parts.length === 1 && request.method === "POST") {
      const body = (await request.json()) as { name?: string; labels?: Record<string, string>; cpu?: number; memory?: number; disk?: number; env?: Record<string, string>; networkBlockAll?: boolean }
      if (body.name !== undefined && findSandbox(body.name) !== undefined) return error(409, `Sandbox with name ${body.name} already exists`)
      const id = crypto.randomUUID()
      const sandbox: EmulatedSandbox = {
        id,
        name: body.name ?? id,
        labels: body.labels ?? {},
        state: "started",
        cpu: body.cpu ?? 1,
        memory: body.memory ?? 1,
        disk: body.disk ?? 3,
        env: body.env ?? {},
        createdAt: new Date().toISOString()
      }
      await run(runtime.create({
        id,
        vcpu: sandbox.cpu,
        memoryMb: Math.round(sandbox.memory * 1024),
        diskMb: sandbox.disk * 1024,
        internet: body.networkBlockAll === false,
        env: sandbox.env,
        labels: { provider: "daytona", ...sandbox.labels }
      }))
      state.sandboxes[id] = sandbox
      save()
      return json(toWire(sandbox))
    }
    if (parts.length === 1 && request.method === "GET") {
      const filter = url.searchParams.get("labels")
      const wanted = filter === null ? {} : (JSON.parse(filter) as Record<string, string>)
      const matching = Object.values(state.sandboxes).filter((s) => Object.entries(wanted).every(([k, v]) => s.labels[k] === v))
      return json(await Promise.all(matching.map(observed)))
    }
    const sandbox = findSandbox(decodeURIComponent(parts[1] ?? ""))
    if (sandbox === undefined) return error(404, "Sandbox not found")
    if (parts.length === 2 && request.method === "GET") return json(await observed(sandbox))
    if (parts.length === 2 && request.method === "DELETE") {
      await run(runtime.destroy(sandbox.id))
      delete state.sandboxes[sandbox.id]
      for (const [sid, session] of sessions.entries()) if (session.sandboxId === sandbox.id) sessions.delete(sid)
      for (const [token, preview] of Object.entries(state.previews)) if (preview.sandboxId === sandbox.id) dropPreview(token)
      bridges.closeSandbox(sandbox.id)
      save()
      return json({})
    }
    if (parts[2] === "toolbox-proxy-url" && parts.length === 3 && request.method === "GET") return json({ url: `${baseUrl}/toolbox` })
    if (parts[2] === "stop" && request.method === "POST") {
      // Nothing reaches a stopped sandbox: its bridges close (and their connections with them) before it freezes.
      bridges.closeSandbox(sandbox.id)
      await run(runtime.pause(sandbox.id))
      sandbox.state = "stopped"
      save()
      return json(toWire(sandbox))
    }
    if (parts[2] === "start" && request.method === "POST") {
      await run(runtime.resume(sandbox.id))
      sandbox.state = "started"
      save()
      return json(toWire(sandbox))
    }
    if (parts[2] === "ports" && parts[4] === "signed-preview-url") {
      const port = Number(parts[3])
      if (parts.length === 5 && request.method === "GET") {
        const expires = Number(url.searchParams.get("expiresInSeconds") ?? "60")
        const token = crypto.randomBytes(18).toString("base64url")
        state.previews[token] = { sandboxId: sandbox.id, port, expiresAt: Date.now() + expires * 1000 }
        save()
        armPreview(token)
        return json({ sandboxId: sandbox.id, port, token, url: `${baseUrl}/preview/${token}` })
      }
      if (parts[6] === "expire" && request.method === "POST") {
        const token = parts[5] ?? ""
        if (state.previews[token] === undefined) return error(404, "Preview not found")
        dropPreview(token)
        return json({})
      }
    }
    return error(404, "Not found")
  }

  const toolbox = async (request: Request, sandbox: EmulatedSandbox, parts: Array<string>, url: URL): Promise<Response> => {
    if (sandbox.state !== "started") return error(409, "Sandbox is not running")
    const route = parts.join("/")
    if (route === "process/session" && request.method === "POST") {
      const { sessionId } = (await request.json()) as { sessionId: string }
      // Kept in memory until its first command: an empty session holds nothing a restart would need (a caller
      // that finds it gone after one creates it again), so starting a process writes one small file, not two.
      if (typeof sessionId !== "string" || sessionId === "") return error(400, "sessionId is required")
      if (sessions.get(sessionId) !== undefined) return error(409, `Session ${sessionId} already exists`)
      sessions.remember(sessionId, { sandboxId: sandbox.id, createdAt: Date.now(), commands: {} })
      // Like the runtime's own retention, sessions older than a day are forgotten (looked for once a minute).
      if (Date.now() - lastPrune > 60_000) {
        lastPrune = Date.now()
        for (const [id, session] of sessions.entries()) if (lastPrune - (session.createdAt ?? 0) > 24 * 3600 * 1000) sessions.delete(id)
      }
      return json({})
    }
    if (parts[0] === "process" && parts[1] === "session" && parts[2] !== undefined) {
      const sessionId = parts[2]
      const session = sessions.get(sessionId)
      if (session === undefined || session.sandboxId !== sandbox.id) return error(404, "Session not found")
      if (parts.length === 3 && request.method === "GET") {
        const commands = await Promise.all(Object.entries(session.commands).map(async ([id, c]) => {
          const info = await run(runtime.getExec(sandbox.id, c.execId))
          return { id, command: c.command, exitCode: info.state === "exited" ? info.exitCode ?? -1 : null }
        }))
        return json({ sessionId, commands })
      }
      if (parts.length === 3 && request.method === "DELETE") {
        for (const command of Object.values(session.commands)) await run(Effect.ignore(runtime.kill(sandbox.id, command.execId, "SIGKILL")))
        sessions.delete(sessionId)
        return json({})
      }
      if (parts[3] === "exec" && request.method === "POST") {
        const body = (await request.json()) as { command: string; runAsync?: boolean }
        const cmdId = crypto.randomUUID()
        const exec = await run(runtime.exec(sandbox.id, { command: ["sh", "-c", body.command], maxOutputBytes: 100 * 1024 * 1024, tag: cmdId }))
        session.commands[cmdId] = { execId: exec.execId, command: body.command }
        sessions.set(sessionId, session)
        return json({ cmdId })
      }
      const command = parts[4] === undefined ? undefined : session.commands[parts[4]]
      if (parts[3] === "command" && command !== undefined) {
        if (parts.length === 5) {
          // A running command is watched briefly before answering (the runtime wakes on its events), so a
          // poller learns of a quick exit at once rather than on its next poll. The wire answer is unchanged.
          const deadline = Date.now() + STATUS_WAIT_MS
          const info = await run(runtime.getExec(sandbox.id, command.execId))
          let exitCode = info.state === "exited" ? info.exitCode ?? -1 : null
          let seen = 0
          while (exitCode === null && Date.now() < deadline) {
            const events = await run(runtime.execEvents(sandbox.id, command.execId, seen, deadline - Date.now()))
            seen += events.length
            const last = events.at(-1)
            if (last?.type === "exit") exitCode = last.exitCode ?? -1
          }
          return json({ id: parts[4], command: command.command, exitCode })
        }
        if (parts[5] === "logs") {
          const events = (await run(runtime.execEvents(sandbox.id, command.execId, 0))).filter((e) => e.type !== "exit") as Array<{ type: "stdout" | "stderr"; data: Uint8Array }>
          const text = (type: "stdout" | "stderr") => Buffer.concat(events.filter((e) => e.type === type).map((e) => e.data)).toString("utf8")
          // The daemon's answers: {stdout, stderr} to an SDK that asks for split output; the raw log (each piece of
          // output after a 3-byte marker, \x01 stdout and \x02 stderr, in the order written) to a caller that asks
          // for split output without an SDK version; plain combined text otherwise. (The daemon marks each line;
          // here each piece the runtime read, so bytes stay exact.)
          if (request.headers.get("x-daytona-split-output") === "true") {
            if (request.headers.get("x-daytona-sdk-version") !== null) return json({ stdout: text("stdout"), stderr: text("stderr") })
            const log = Buffer.concat(events.flatMap((e) => [e.type === "stdout" ? STDOUT_MARK : STDERR_MARK, e.data]))
            return new Response(log, { headers: { "content-type": "application/octet-stream" } })
          }
          return new Response(Buffer.concat(events.map((e) => e.data)), { headers: { "content-type": "text/plain; charset=utf-8" } })
        }
      }
      return error(404, "Command not found")
    }
    const p = url.searchParams.get("path") ?? ""
    if (route === "files/info" && request.method === "GET") {
      const stat = await run(runtime.statFile(sandbox.id, p))
      if (stat._tag === "None") return error(404, "File not found")
      return json({ name: path.basename(p), size: stat.value.sizeBytes, isDir: stat.value.type === "directory", modTime: stat.value.modifiedAt, mode: goFileMode(stat.value) })
    }
    if (route === "files/download" && request.method === "GET") {
      const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.get("range") ?? "")
      const offset = range ? Number(range[1]) : 0
      const end = range && range[2] !== "" ? Number(range[2]) + 1 : Number.MAX_SAFE_INTEGER
      const read = await run(runtime.readFile(sandbox.id, p, offset, Math.min(end - offset, 100 * 1024 * 1024)))
      return new Response(read.data.slice(), {
        status: range ? 206 : 200,
        headers: { "content-type": "application/octet-stream", ...(range ? { "content-range": `bytes ${offset}-${offset + read.data.length - 1}/${read.size}` } : {}) }
      })
    }
    if (route === "files/upload" && request.method === "POST") {
      const form = await request.formData()
      const file = form.get("file")
      if (!(file instanceof Blob)) return error(400, "file is required")
      await run(runtime.writeFile(sandbox.id, p, new Uint8Array(await file.arrayBuffer()), { mode: "overwrite", createParents: false }))
      return json({})
    }
    if (route === "files/folder" && request.method === "POST") {
      await run(runtime.makeDir(sandbox.id, p, { parents: true }))
      return json({})
    }
    if (route === "files" && request.method === "GET") {
      const listed = await run(runtime.listFiles(sandbox.id, p, { recursive: false, maxEntries: 10_000 }))
      return json(listed.entries.map((e) => ({ name: path.basename(e.path), size: e.sizeBytes, isDir: e.type === "directory", modTime: e.modifiedAt, mode: goFileMode(e) })))
    }
    if (route === "files" && request.method === "DELETE") {
      const deleted = await run(runtime.deleteFile(sandbox.id, p, { recursive: url.searchParams.get("recursive") === "true" }))
      return deleted ? json({}) : error(404, "File not found")
    }
    return error(404, "Not found")
  }

  const preview = async (request: Request, parts: Array<string>, url: URL): Promise<Response> => {
    const token = parts[1] ?? ""
    const entry = state.previews[token]
    if (entry === undefined || entry.expiresAt <= Date.now()) return error(404, "Preview not found or expired")
    if (state.sandboxes[entry.sandboxId]?.state !== "started") return error(502, "The sandbox is not running")
    const bridge = bridges.open(token, entry.sandboxId, () => run(runtime.connectPort(entry.sandboxId, entry.port)))
    const rest = `/${parts.slice(2).join("/")}${url.search}`
    try {
      await bridge.ready
      const upstream = await fetch(`http://sandbox${rest}`, {
        unix: bridge.socketPath,
        method: request.method,
        headers: request.headers,
        redirect: "manual",
        // The caller going away ends the exchange with the sandbox too.
        signal: request.signal,
        ...(request.method === "GET" || request.method === "HEAD" ? {} : { body: request.body, duplex: "half" } as RequestInit)
      } as RequestInit)
      return new Response(upstream.body, { status: upstream.status, headers: upstream.headers })
    } catch {
      return error(502, "Nothing answers on that port")
    }
  }

  // Stored sandboxes carry the toolbox URL, so the port stays the same across restarts.
  const serve = (port: number) => Bun.serve({
    hostname: "127.0.0.1",
    port,
    idleTimeout: 60,
    fetch: async (request) => {
      const url = new URL(request.url)
      const parts = url.pathname.split("/").filter(Boolean).map(decodeURIComponent)
      try {
        if (parts[0] === "preview") return await preview(request, parts, url)
        if (request.headers.get("authorization") !== `Bearer ${apiKey}`) return error(401, "Unauthorized")
        if (parts[0] === "sandbox") return await control(request, parts, url)
        if (parts[0] === "toolbox" && parts[1] !== undefined) {
          const sandbox = findSandbox(parts[1])
          if (sandbox === undefined) return error(404, "Sandbox not found")
          return await toolbox(request, sandbox, parts.slice(2), url)
        }
        return error(404, "Not found")
      } catch (e) {
        return error(statusOfRuntimeError(e), emulatorMessage(e, "daytona"))
      }
    }
  })
  const server = servePersistent(dir, serve)
  baseUrl = `http://127.0.0.1:${server.port}`
  return {
    baseUrl,
    apiKey,
    stop: () => {
      for (const timer of previewTimers.values()) clearTimeout(timer)
      bridges.closeAll()
      server.stop(true)
    }
  }
}
