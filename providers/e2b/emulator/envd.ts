/**
 * The E2B emulator's envd, for requests carrying `E2b-Sandbox-Id` (or a `49983-<id>.` host), guarded by the
 * sandbox's access token: Connect JSON streams `process.Process/Start` and `/Connect` (keepalives when asked),
 * unary `List`, `SendSignal`, `SendInput`, `CloseStdin`, `filesystem.Filesystem/Stat|ListDir|Remove|MakeDir`, and
 * `/files`. A paused or unknown sandbox answers 502, as E2B's proxy does. Each call runs as the user it names, as
 * envd's do: the default user `user` is honoured, `root` refused (http.ts `userProblem`).
 *
 * Deviations, on purpose: `Connect` replays a process's output from the start (the runtime keeps it), even after
 * the process ended, and says so with the replay header; real envd streams only what comes next and forgets
 * finished processes. Start's `Connect-Timeout-Ms` kills the process like envd's deadline does.
 */
import * as path from "node:path"
import type { FileEntry } from "../../../src/runtime/LocalRuntime.ts"
import { emulatorMessage, runOrThrow as run } from "../../core/emulator/server.ts"
import { ENVD_PORT, REPLAY_HEADER } from "../adapter/wire.ts"
import { type ConnectCode, encodeEnvelope, END_STREAM, EnvelopeDecoder, STREAM_CONTENT_TYPE } from "../connect.ts"
import type { Books, EmulatedSandbox, ProcessConfig, ProcessRecord } from "./books.ts"
import { desktopCommand } from "./desktop.ts"
import { makeFiles } from "./files.ts"
import {
  answerFailure,
  apiError,
  ConnectFailure,
  connectCodeOf,
  connectError,
  endEvent,
  entryInfo,
  HttpFailure,
  isNonNegativeInt,
  isStringRecord,
  json,
  readJson,
  resolvePath,
  rpcUser,
  userProblem
} from "./http.ts"

const MAX_OUTPUT_BYTES = 100 * 1024 * 1024

/** envd's `PTY.Size`: cols and rows; null when either is missing or out of range. */
const terminalSize = (size: unknown): { cols: number; rows: number } | null => {
  const s = size as { cols?: unknown; rows?: unknown } | null | undefined
  const ok = (n: unknown): n is number => typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= 1000
  return typeof s === "object" && s !== null && ok(s.cols) && ok(s.rows) ? { cols: s.cols, rows: s.rows } : null
}
const LONG_POLL_MS = 5_000

export const makeEnvd = (books: Books) => {
  const { runtime, sandboxes, save } = books
  const { download, upload } = makeFiles(books)

  const selectProcess = (sandbox: EmulatedSandbox, selector: unknown): [string, ProcessRecord] => {
    const s = (selector ?? {}) as { pid?: unknown; tag?: unknown }
    if (typeof s.pid === "number") {
      const record = sandbox.processes[String(s.pid)]
      if (record === undefined) throw new ConnectFailure("not_found", `process with pid ${s.pid} not found`)
      return [String(s.pid), record]
    }
    if (typeof s.tag === "string") {
      const found = Object.entries(sandbox.processes).find(([, r]) => r.tag === s.tag)
      if (found === undefined) throw new ConnectFailure("not_found", `process with tag ${s.tag} not found`)
      return found
    }
    throw new ConnectFailure("invalid_argument", "a process selector needs a pid or a tag")
  }
  /** The process as envd sees it: only while it runs (envd forgets a process once it ends). */
  const liveProcess = async (sandbox: EmulatedSandbox, selector: unknown) => {
    const [pid, record] = selectProcess(sandbox, selector)
    const info = record.ended ? null : await run(runtime.getExec(sandbox.sandboxID, record.execId)).catch(() => null)
    if (info === null || info.state !== "running") throw new ConnectFailure("not_found", `process with pid ${pid} not found`)
    return record
  }

  /** A Connect server stream of a process's events, as envd's Start/Connect responses. */
  const processStream = (
    sandbox: EmulatedSandbox,
    record: ProcessRecord,
    pid: number,
    options: { readonly keepaliveMs: number | null; readonly deadlineOnTimeout: boolean; readonly replay: boolean }
  ) => {
    const id = sandbox.sandboxID
    let closed = false
    let unregister = () => {}
    const body = new ReadableStream<Uint8Array>({
      start: async (controller) => {
        const finish = (trailer: unknown) => {
          if (closed) return
          closed = true
          unregister()
          controller.enqueue(encodeEnvelope(trailer, END_STREAM))
          controller.close()
        }
        unregister = books.openStream(id, (reason) => finish({ error: { code: "unavailable", message: reason } }))
        controller.enqueue(encodeEnvelope({ event: { start: { pid } } }))
        let seq = 0
        let lastSent = Date.now()
        try {
          while (!closed) {
            // Short long-polls: the in-jail agent drops connections that stay silent for long.
            const events = await run(runtime.execEvents(id, record.execId, seq, Math.min(LONG_POLL_MS, options.keepaliveMs ?? LONG_POLL_MS)))
            if (closed) return
            if (events.length > 0) lastSent = Date.now()
            else if (options.keepaliveMs !== null && Date.now() - lastSent >= options.keepaliveMs) {
              controller.enqueue(encodeEnvelope({ event: { keepalive: {} } }))
              lastSent = Date.now()
            }
            for (const event of events) {
              seq = event.seq + 1
              if (event.type !== "exit") {
                const stream = record.pty ? "pty" : event.type
                controller.enqueue(encodeEnvelope({ event: { data: { [stream]: Buffer.from(event.data).toString("base64") } } }))
                continue
              }
              // envd's deadline ends the Start call itself, ahead of the end event.
              if (event.timedOut && options.deadlineOnTimeout) return finish({ error: { code: "deadline_exceeded", message: "context deadline exceeded" } })
              record.ended = true
              controller.enqueue(encodeEnvelope({ event: { end: endEvent(event) } }))
              return finish({})
            }
          }
        } catch (e) {
          finish({ error: { code: connectCodeOf(e), message: emulatorMessage(e, "e2b") } })
        }
      },
      cancel: () => {
        closed = true
        unregister()
      }
    })
    return new Response(body, { headers: { "content-type": STREAM_CONTENT_TYPE, ...(options.replay ? { [REPLAY_HEADER]: "start" } : {}) } })
  }

  /** A server-streaming call that fails answers 200 with only the end-of-stream error. */
  const streamError = (code: ConnectCode, message: string) =>
    new Response(encodeEnvelope({ error: { code, message } }, END_STREAM), { headers: { "content-type": STREAM_CONTENT_TYPE } })

  const streaming = async (request: Request, sandbox: EmulatedSandbox, method: string): Promise<Response> => {
    if (!(request.headers.get("content-type") ?? "").startsWith(STREAM_CONTENT_TYPE)) {
      return new Response(null, { status: 415, headers: { "accept-post": STREAM_CONTENT_TYPE } })
    }
    let body: Record<string, unknown>
    try {
      const envelopes = new EnvelopeDecoder().push(new Uint8Array(await request.arrayBuffer()))
      const first = envelopes[0]?.message
      if (typeof first !== "object" || first === null) return streamError("invalid_argument", "the request has no message")
      body = first as Record<string, unknown>
    } catch (e) {
      return streamError("invalid_argument", (e as Error).message)
    }
    const keepalive = Number(request.headers.get("keepalive-ping-interval") ?? "")
    const keepaliveMs = Number.isInteger(keepalive) && keepalive > 0 ? Math.min(keepalive, 60) * 1000 : null
    try {
      if (method === "Start") {
        const proc = body["process"] as { cmd?: unknown; args?: unknown; envs?: unknown; cwd?: unknown } | undefined
        if (typeof proc?.cmd !== "string" || proc.cmd === "") return streamError("invalid_argument", "process.cmd is required")
        if (proc.args !== undefined && !(Array.isArray(proc.args) && proc.args.every((a) => typeof a === "string"))) {
          return streamError("invalid_argument", "process.args must be strings")
        }
        if (proc.envs !== undefined && !isStringRecord(proc.envs)) return streamError("invalid_argument", "process.envs must map strings to strings")
        if (proc.cwd !== undefined && typeof proc.cwd !== "string") return streamError("invalid_argument", "process.cwd must be a string")
        const tag = typeof body["tag"] === "string" ? body["tag"] : null
        const timeoutHeader = request.headers.get("connect-timeout-ms")
        const timeoutMs = timeoutHeader === null ? undefined : Number(timeoutHeader)
        if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0)) return streamError("invalid_argument", "Connect-Timeout-Ms must be a positive integer")
        const pty = body["pty"] === undefined ? undefined : terminalSize((body["pty"] as { size?: unknown } | null)?.size)
        if (pty === null) return streamError("invalid_argument", "pty.size needs cols and rows (1-1000)")
        const config: ProcessConfig = {
          cmd: proc.cmd,
          args: (proc.args as Array<string> | undefined) ?? [],
          envs: (proc.envs as Record<string, string> | undefined) ?? {},
          ...(proc.cwd === undefined ? {} : { cwd: resolvePath(proc.cwd as string) })
        }
        const exec = await run(runtime.exec(sandbox.sandboxID, {
          // The desktop template's display server and session are the runtime's desktop (desktop.ts).
          command: await desktopCommand(runtime, sandbox, [config.cmd, ...config.args]),
          cwd: config.cwd,
          env: config.envs,
          timeoutMs,
          maxOutputBytes: MAX_OUTPUT_BYTES,
          tag: tag ?? undefined,
          // Without `stdin: true` the process reads end-of-file at once.
          stdin: body["stdin"] === true,
          pty
        }))
        sandbox.processes[String(exec.pid)] = { execId: exec.execId, tag, config, pty: pty !== undefined, ended: false }
        save()
        return processStream(sandbox, sandbox.processes[String(exec.pid)]!, exec.pid, { keepaliveMs, deadlineOnTimeout: timeoutMs !== undefined, replay: false })
      }
      const [pid, record] = selectProcess(sandbox, body["process"])
      await run(runtime.getExec(sandbox.sandboxID, record.execId)).catch(() => {
        throw new ConnectFailure("not_found", `process with pid ${pid} not found`)
      })
      return processStream(sandbox, record, Number(pid), { keepaliveMs, deadlineOnTimeout: false, replay: true })
    } catch (e) {
      if (e instanceof ConnectFailure) return streamError(e.code, e.message)
      return streamError(connectCodeOf(e), emulatorMessage(e, "e2b"))
    }
  }

  const unary = async (request: Request, sandbox: EmulatedSandbox, route: string): Promise<Response> => {
    if (!(request.headers.get("content-type") ?? "").startsWith("application/json")) {
      return new Response(null, { status: 415, headers: { "accept-post": "application/json" } })
    }
    let body: Record<string, unknown>
    try {
      body = await readJson(request)
    } catch {
      return connectError("invalid_argument", "the request body is not a JSON object")
    }
    const id = sandbox.sandboxID
    const pathField = () => {
      if (typeof body["path"] !== "string") throw new ConnectFailure("invalid_argument", "path is required")
      return resolvePath(body["path"])
    }
    switch (route) {
      case "process.Process/List": {
        const processes = []
        for (const [pid, record] of Object.entries(sandbox.processes)) {
          if (record.ended) continue
          const info = await run(runtime.getExec(id, record.execId)).catch(() => null)
          if (info === null) {
            delete sandbox.processes[pid] // the runtime forgot it: so does envd
            continue
          }
          if (info.state === "running") processes.push({ config: record.config, pid: Number(pid), ...(record.tag === null ? {} : { tag: record.tag }) })
          else record.ended = true
        }
        save()
        return json({ processes })
      }
      case "process.Process/SendSignal": {
        const record = await liveProcess(sandbox, body["process"])
        const signal = body["signal"] === "SIGNAL_SIGKILL" || body["signal"] === 9 ? "SIGKILL" : body["signal"] === "SIGNAL_SIGTERM" || body["signal"] === 15 ? "SIGTERM" : null
        if (signal === null) throw new ConnectFailure("invalid_argument", "signal must be SIGNAL_SIGTERM or SIGNAL_SIGKILL")
        await run(runtime.kill(id, record.execId, signal))
        return json({})
      }
      case "process.Process/SendInput": {
        const record = await liveProcess(sandbox, body["process"])
        const input = body["input"] as { stdin?: unknown; pty?: unknown } | undefined
        // As envd: a terminal takes `pty` bytes, a plain process `stdin` bytes.
        const bytes = record.pty ? input?.pty : input?.stdin
        if (typeof bytes !== "string") throw new ConnectFailure("invalid_argument", `input.${record.pty ? "pty" : "stdin"} (base64) is required`)
        await run(runtime.sendInput(id, record.execId, Buffer.from(bytes, "base64")))
        return json({})
      }
      case "process.Process/Update": {
        const record = await liveProcess(sandbox, body["process"])
        const size = terminalSize((body["pty"] as { size?: unknown } | null | undefined)?.size)
        if (size === null) throw new ConnectFailure("invalid_argument", "pty.size needs cols and rows (1-1000)")
        if (!record.pty) throw new ConnectFailure("failed_precondition", "the process has no pty")
        await run(runtime.resize(id, record.execId, size))
        return json({})
      }
      case "process.Process/CloseStdin": {
        const record = await liveProcess(sandbox, body["process"])
        await run(runtime.sendInput(id, record.execId, new Uint8Array(), true))
        return json({})
      }
      case "filesystem.Filesystem/Stat": {
        const p = pathField()
        const entry = await run(runtime.statFile(id, p))
        if (entry._tag === "None") throw new ConnectFailure("not_found", `no such file or directory: ${p}`)
        return json({ entry: entryInfo(entry.value) })
      }
      case "filesystem.Filesystem/ListDir": {
        const p = pathField()
        const depth = body["depth"] === undefined || body["depth"] === 0 ? 1 : body["depth"]
        if (!isNonNegativeInt(depth)) throw new ConnectFailure("invalid_argument", "depth must be a non-negative integer")
        const listed = await run(runtime.listFiles(id, p, { recursive: depth > 1, maxEntries: 100_000 }))
        const within = (e: FileEntry) => path.posix.relative(p, e.path).split("/").length <= depth
        return json({ entries: listed.entries.filter(within).map(entryInfo) })
      }
      case "filesystem.Filesystem/Remove": {
        // envd removes like `rm -rf`: a missing path is fine.
        await run(runtime.deleteFile(id, pathField(), { recursive: true }))
        return json({})
      }
      case "filesystem.Filesystem/MakeDir": {
        const p = pathField()
        const existing = await run(runtime.statFile(id, p))
        if (existing._tag === "Some") {
          throw existing.value.type === "directory"
            ? new ConnectFailure("already_exists", `directory already exists: ${p}`)
            : new ConnectFailure("invalid_argument", `path already exists but it is not a directory: ${p}`)
        }
        await run(runtime.makeDir(id, p, { parents: true }))
        const made = await run(runtime.statFile(id, p))
        return json(made._tag === "Some" ? { entry: entryInfo(made.value) } : {})
      }
    }
    return connectError("unimplemented", `${route} is not served by this emulator`)
  }

  const envd = async (request: Request, url: URL, sandboxId: string): Promise<Response> => {
    const port = request.headers.get("e2b-sandbox-port")
    const sandbox = sandboxes[sandboxId]
    const proxyError = (message: string) => json({ code: 502, message, sandboxId }, 502)
    if (sandbox === undefined) return proxyError("The sandbox was not found")
    if (port !== null && port !== String(ENVD_PORT)) return proxyError(`The sandbox is running but port ${port} is not open`)
    if (sandbox.state !== "running") return proxyError("The sandbox is paused")
    const route = url.pathname.replace(/^\/+/, "")
    if (route === "health" && request.method === "GET") return new Response(null, { status: 204 })
    if (request.headers.get("x-access-token") !== sandbox.accessToken) return apiError(401, "unauthorized access, please provide a valid access token")
    const refused = userProblem(route === "files" ? url.searchParams.get("username") || null : rpcUser(request))
    if (refused !== null) {
      if (route === "files") return apiError(refused.status, refused.message)
      return route === "process.Process/Start" || route === "process.Process/Connect" ? streamError(refused.code, refused.message) : connectError(refused.code, refused.message)
    }
    try {
      if (route === "files") {
        if (request.method === "GET") return await download(sandbox, url, request)
        if (request.method === "POST") return await upload(sandbox, url, request)
        return apiError(405, "method not allowed")
      }
      if (request.method !== "POST") return apiError(405, "method not allowed")
      if (route === "process.Process/Start" || route === "process.Process/Connect") return await streaming(request, sandbox, route.split("/")[1]!)
      return await unary(request, sandbox, route)
    } catch (e) {
      if (e instanceof ConnectFailure) return connectError(e.code, e.message)
      if (e instanceof HttpFailure || route === "files") return answerFailure(e)
      return connectError(connectCodeOf(e), emulatorMessage(e, "e2b"))
    }
  }

  return { envd }
}
