/**
 * A loopback emulator of the E2B wire subset the adapter uses, over the local runtime (one E2B sandbox = one
 * runtime sandbox). One port serves both planes, routed the way E2B routes them:
 *
 * - Control API (`X-API-Key`, JSON errors `{code, message}`): `POST /sandboxes`, `GET /sandboxes` (running),
 *   `GET /v2/sandboxes` (metadata and state filters, `limit`/`nextToken` pages), `GET|DELETE /sandboxes/{id}`,
 *   `POST /sandboxes/{id}/pause|resume|connect|timeout`. The timeout is honoured: a running sandbox past its
 *   end is killed (or paused, with `autoPause`); a paused one does not age.
 * - envd, for requests carrying `E2b-Sandbox-Id` (or a `49983-<id>.` host), guarded by the sandbox's access
 *   token: Connect JSON streams `process.Process/Start` and `/Connect` (keepalives when asked), unary `List`,
 *   `SendSignal`, `SendInput`, `CloseStdin`, `filesystem.Filesystem/Stat|ListDir|Remove|MakeDir`, and
 *   `GET /files` (Range → 206/416 like Go's ServeContent) / `POST /files` (octet-stream or multipart).
 *   A paused or unknown sandbox answers 502, as E2B's proxy does, and pausing drops its open streams.
 *
 * Deviations, on purpose: `Connect` replays a process's output from the start (the runtime keeps it), even after
 * the process ended, and says so with `x-e2b-emulator-replay: start`; real envd streams only what comes next and
 * forgets finished processes. Every template name runs on the runtime's one base system. Start's
 * `Connect-Timeout-Ms` kills the process like envd's deadline does.
 *
 * State lives in DATA_DIR/emulators/e2b/state.json and the port is kept, so a restarted gateway finds its
 * sandboxes and processes again.
 */
import { Context, Effect, Layer, Option, type Scope } from "effect"
import * as crypto from "node:crypto"
import * as path from "node:path"
import { AppConfig } from "../../src/Config.ts"
import { type ExecEvent, type FileEntry, LocalRuntime, type LocalRuntimeShape, type RuntimeError } from "../../src/runtime/LocalRuntime.ts"
import { emulatorHome, emulatorKey, emulatorMessage, persistentState, runOrThrow, servePersistent } from "../core/emulator-support.ts"
import { ENVD_PORT, GO_SIGNAL_NAMES, REPLAY_HEADER } from "./adapter.ts"
import { CONNECT_STATUS, type ConnectCode, encodeEnvelope, END_STREAM, EnvelopeDecoder, STREAM_CONTENT_TYPE } from "./connect.ts"

const ENVD_VERSION = "0.5.7"
const HOME = "/workspace"
const MAX_TIMEOUT_SECONDS = 86_400
const MAX_OUTPUT_BYTES = 100 * 1024 * 1024
const MAX_READ_BYTES = 100 * 1024 * 1024
const SWEEP_MS = 1_000
const LONG_POLL_MS = 5_000

interface ProcessConfig {
  cmd: string
  args: Array<string>
  envs: Record<string, string>
  cwd?: string | undefined
}
interface ProcessRecord {
  execId: string
  tag: string | null
  config: ProcessConfig
}

interface EmulatedSandbox {
  sandboxID: string
  templateID: string
  metadata: Record<string, string>
  state: "running" | "paused"
  autoPause: boolean
  allowInternetAccess: boolean
  cpuCount: number
  memoryMB: number
  diskSizeMB: number
  accessToken: string
  startedAt: string
  endAt: string
  /** envd pid → the runtime execution */
  processes: Record<string, ProcessRecord>
}

export interface E2BEmulatorInfo {
  readonly apiUrl: string
  /** envd base, header-routed (the same host as the API, as `sandbox.e2b.app` is for the real thing). */
  readonly sandboxUrl: string
  readonly apiKey: string
}
export interface E2BEmulatorHandle extends E2BEmulatorInfo {
  readonly stop: () => void
}

class HttpFailure extends Error {
  constructor(readonly status: number, message: string) {
    super(message)
  }
}
class ConnectFailure extends Error {
  constructor(readonly code: ConnectCode, message: string) {
    super(message)
  }
}

const json = (body: unknown, status = 200, headers: Record<string, string> = {}) => Response.json(body, { status, headers })
const apiError = (status: number, message: string) => json({ code: status, message }, status)
const connectError = (code: ConnectCode, message: string) => json({ code, message }, CONNECT_STATUS[code])

const isStringRecord = (v: unknown): v is Record<string, string> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === "string")
const isNonNegativeInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0

/** Runtime failures in envd terms. */
const connectCodeOf = (e: unknown): ConnectCode => {
  const kind = (e as Partial<RuntimeError>).kind
  return kind === "not_found" ? "not_found" : kind === "invalid" ? "invalid_argument" : kind === "conflict" ? "failed_precondition" : kind === "unavailable" ? "unavailable" : "internal"
}
const statusOf = (e: unknown) => CONNECT_STATUS[connectCodeOf(e)]

const permissions = (entry: FileEntry) => {
  const bits = "rwxrwxrwx".split("").map((c, i) => ((entry.mode >> (8 - i)) & 1 ? c : "-")).join("")
  return `${entry.type === "directory" ? "d" : entry.type === "symlink" ? "L" : "-"}${bits}`
}
const entryInfo = (e: FileEntry) => ({
  name: path.posix.basename(e.path),
  type: e.type === "directory" ? "FILE_TYPE_DIRECTORY" : e.type === "symlink" ? "FILE_TYPE_SYMLINK" : e.type === "file" ? "FILE_TYPE_FILE" : "FILE_TYPE_UNSPECIFIED",
  path: e.path,
  size: String(e.sizeBytes),
  mode: e.mode,
  permissions: permissions(e),
  owner: "user",
  group: "user",
  modifiedTime: e.modifiedAt
})

/** envd resolves relative paths against the user's home. */
const resolvePath = (p: string) => (p.startsWith("/") ? path.posix.normalize(p) : path.posix.join(HOME, p))

/** The end event as envd's Go side writes it (protobuf JSON leaves out defaults). */
const endEvent = (exit: Extract<ExecEvent, { type: "exit" }>) => {
  if (exit.exitCode !== null) {
    const status = `exit status ${exit.exitCode}`
    return exit.exitCode === 0 ? { exited: true, status } : { exitCode: exit.exitCode, exited: true, status, error: status }
  }
  const status = `signal: ${GO_SIGNAL_NAMES[exit.signal ?? ""] ?? (exit.signal ?? "unknown").toLowerCase()}`
  return { exitCode: -1, status, error: status }
}

export const startE2BEmulator = (dataDir: string, runtime: LocalRuntimeShape): E2BEmulatorHandle => {
  const dir = emulatorHome(dataDir, "e2b")
  const apiKey = emulatorKey(dir, () => `e2b_${crypto.randomBytes(20).toString("hex")}`)
  const { state: sandboxes, save } = persistentState<Record<string, EmulatedSandbox>>(dir, () => ({}))
  // State written by an earlier version lacks some fields (and kept bare exec ids per pid).
  for (const s of Object.values(sandboxes)) {
    s.processes ??= {}
    for (const [pid, record] of Object.entries(s.processes as Record<string, ProcessRecord | string>)) {
      if (typeof record === "string") s.processes[pid] = { execId: record, tag: null, config: { cmd: "", args: [], envs: {} } }
    }
    s.autoPause ??= false
    s.allowInternetAccess ??= false
    s.diskSizeMB ??= 0
  }
  const run = runOrThrow
  /** Open process streams per sandbox: a pause drops them, as it drops real envd connections. */
  const streams = new Map<string, Set<(reason: string) => void>>()

  const wireSandbox = (s: EmulatedSandbox) => ({
    templateID: s.templateID,
    sandboxID: s.sandboxID,
    clientID: "emulated",
    envdVersion: ENVD_VERSION,
    envdAccessToken: s.accessToken,
    trafficAccessToken: null,
    domain: null
  })
  const wireListed = (s: EmulatedSandbox) => ({
    templateID: s.templateID,
    sandboxID: s.sandboxID,
    clientID: "emulated",
    startedAt: s.startedAt,
    endAt: s.endAt,
    cpuCount: s.cpuCount,
    memoryMB: s.memoryMB,
    diskSizeMB: s.diskSizeMB,
    metadata: s.metadata,
    state: s.state,
    envdVersion: ENVD_VERSION
  })
  const wireDetail = (s: EmulatedSandbox) => ({ ...wireListed(s), envdAccessToken: s.accessToken, allowInternetAccess: s.allowInternetAccess, domain: null })

  const dropStreams = (sandboxId: string, reason: string) => {
    for (const close of streams.get(sandboxId) ?? []) close(reason)
    streams.delete(sandboxId)
  }
  const kill = async (s: EmulatedSandbox) => {
    dropStreams(s.sandboxID, "the sandbox was killed")
    await run(runtime.destroy(s.sandboxID))
    delete sandboxes[s.sandboxID]
    save()
  }
  const pause = async (s: EmulatedSandbox) => {
    await run(runtime.pause(s.sandboxID))
    s.state = "paused"
    save()
    dropStreams(s.sandboxID, "the sandbox was paused")
  }
  const resume = async (s: EmulatedSandbox, timeoutSeconds: number) => {
    await run(runtime.resume(s.sandboxID))
    s.state = "running"
    s.endAt = new Date(Date.now() + timeoutSeconds * 1000).toISOString()
    save()
  }

  /** Running sandboxes past their end are killed (or paused with autoPause); paused ones wait. */
  let sweeping = false
  const sweep = async () => {
    if (sweeping) return
    sweeping = true
    try {
      for (const s of Object.values(sandboxes)) {
        if (s.state !== "running" || Date.parse(s.endAt) > Date.now()) continue
        await (s.autoPause ? pause(s) : kill(s)).catch(() => undefined)
      }
    } finally {
      sweeping = false
    }
  }
  const sweeper = setInterval(() => void sweep(), SWEEP_MS)
  sweeper.unref()
  void sweep()

  const readJson = async (request: Request): Promise<Record<string, unknown>> => {
    let body: unknown
    try {
      body = await request.json()
    } catch {
      throw new HttpFailure(400, "the request body is not valid JSON")
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) throw new HttpFailure(400, "the request body must be a JSON object")
    return body as Record<string, unknown>
  }
  const timeoutField = (body: Record<string, unknown>, required: boolean, fallback: number) => {
    const t = body["timeout"]
    if (t === undefined && !required) return fallback
    if (!isNonNegativeInt(t)) throw new HttpFailure(400, "timeout must be a non-negative integer (seconds)")
    if (t > MAX_TIMEOUT_SECONDS) throw new HttpFailure(400, `timeout cannot be greater than ${MAX_TIMEOUT_SECONDS / 3600} hours`)
    return t
  }
  const sandboxOr404 = (id: string) => {
    const s = sandboxes[id]
    if (s === undefined) throw new HttpFailure(404, `sandbox "${id}" doesn't exist or you don't have access to it`)
    return s
  }

  // ---- control API ----

  const create = async (request: Request) => {
    const body = await readJson(request)
    const templateID = body["templateID"]
    if (typeof templateID !== "string" || !/^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$/.test(templateID)) {
      throw new HttpFailure(400, "templateID is required (a template id or alias)")
    }
    const timeout = timeoutField(body, false, 15)
    for (const field of ["metadata", "envVars"] as const) {
      if (body[field] !== undefined && !isStringRecord(body[field])) throw new HttpFailure(400, `${field} must map strings to strings`)
    }
    for (const field of ["autoPause", "secure", "allow_internet_access"] as const) {
      if (body[field] !== undefined && typeof body[field] !== "boolean") throw new HttpFailure(400, `${field} must be a boolean`)
    }
    const sandboxID = `i${Array.from(crypto.randomBytes(19), (b) => "abcdefghijklmnopqrstuvwxyz0123456789"[b % 36]).join("")}`
    const internet = body["allow_internet_access"] !== false
    const created = await run(runtime.create({
      id: sandboxID,
      vcpu: 2,
      memoryMb: 512,
      internet,
      env: (body["envVars"] as Record<string, string> | undefined) ?? {},
      labels: { provider: "e2b", template: templateID }
    }))
    const now = Date.now()
    const sandbox: EmulatedSandbox = {
      sandboxID,
      templateID,
      metadata: (body["metadata"] as Record<string, string> | undefined) ?? {},
      state: "running",
      autoPause: body["autoPause"] === true,
      allowInternetAccess: internet,
      cpuCount: created.applied.vcpu,
      memoryMB: created.applied.memoryMb,
      diskSizeMB: created.applied.diskMb,
      accessToken: crypto.randomBytes(24).toString("base64url"),
      startedAt: new Date(now).toISOString(),
      endAt: new Date(now + timeout * 1000).toISOString(),
      processes: {}
    }
    sandboxes[sandboxID] = sandbox
    save()
    return json(wireSandbox(sandbox), 201)
  }

  const list = (url: URL, v2: boolean) => {
    const wanted = [...new URLSearchParams(url.searchParams.get("metadata") ?? "")]
    const states = v2 ? (url.searchParams.get("state") ?? "running,paused").split(",").filter((x) => x !== "") : ["running"]
    if (states.some((x) => x !== "running" && x !== "paused")) throw new HttpFailure(400, "state must be running or paused")
    const limit = Number(url.searchParams.get("limit") ?? "100")
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new HttpFailure(400, "limit must be between 1 and 100")
    const from = Number(url.searchParams.get("nextToken") ?? "0")
    if (!Number.isInteger(from) || from < 0) throw new HttpFailure(400, "nextToken is not valid")
    const matching = Object.values(sandboxes)
      .filter((s) => states.includes(s.state) && wanted.every(([k, value]) => s.metadata[k] === value))
      .sort((a, b) => b.startedAt.localeCompare(a.startedAt))
    const page = v2 ? matching.slice(from, from + limit) : matching
    const more = v2 && from + limit < matching.length
    return json(page.map(wireListed), 200, more ? { "x-next-token": String(from + limit) } : {})
  }

  const control = async (request: Request, url: URL): Promise<Response> => {
    if (request.headers.get("x-api-key") !== apiKey) return apiError(401, "Invalid API key")
    const parts = url.pathname.split("/").filter(Boolean)
    const method = request.method
    if (parts.length === 2 && parts[0] === "v2" && parts[1] === "sandboxes" && method === "GET") return list(url, true)
    if (parts[0] !== "sandboxes") return apiError(404, "Not found")
    if (parts.length === 1) {
      if (method === "POST") return create(request)
      if (method === "GET") return list(url, false)
    }
    const sandbox = sandboxOr404(decodeURIComponent(parts[1] ?? ""))
    if (parts.length === 2 && method === "GET") {
      // A sandbox whose machine died is gone at E2B: it is removed, and reads as not found.
      const jail = await run(runtime.get(sandbox.sandboxID)).catch(() => Option.none())
      if (Option.isNone(jail) || jail.value.state === "stopped") {
        await kill(sandbox)
        return apiError(404, `sandbox "${sandbox.sandboxID}" doesn't exist or you don't have access to it`)
      }
      return json(wireDetail(sandbox))
    }
    if (parts.length === 2 && method === "DELETE") {
      await kill(sandbox)
      return new Response(null, { status: 204 })
    }
    if (parts.length === 3 && method === "POST") {
      switch (parts[2]) {
        case "pause": {
          if (sandbox.state === "paused") return apiError(409, `Sandbox ${sandbox.sandboxID} is already paused`)
          await pause(sandbox)
          return new Response(null, { status: 204 })
        }
        case "resume": {
          const timeout = timeoutField(await readJson(request), false, 15)
          if (sandbox.state === "running") return apiError(409, `Sandbox ${sandbox.sandboxID} is already running`)
          await resume(sandbox, timeout)
          return json(wireSandbox(sandbox), 201)
        }
        case "connect": {
          const timeout = timeoutField(await readJson(request), true, 0)
          if (sandbox.state === "paused") {
            await resume(sandbox, timeout)
            return json(wireSandbox(sandbox), 201)
          }
          // Connecting only ever extends the lifetime.
          const end = Date.now() + timeout * 1000
          if (end > Date.parse(sandbox.endAt)) sandbox.endAt = new Date(end).toISOString()
          save()
          return json(wireSandbox(sandbox), 200)
        }
        case "timeout": {
          const timeout = timeoutField(await readJson(request), true, 0)
          sandbox.endAt = new Date(Date.now() + timeout * 1000).toISOString()
          save()
          return new Response(null, { status: 204 })
        }
      }
    }
    return apiError(404, "Not found")
  }

  // ---- envd ----

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
    const info = await run(runtime.getExec(sandbox.sandboxID, record.execId)).catch(() => null)
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
    let close: (reason: string) => void = () => undefined
    const body = new ReadableStream<Uint8Array>({
      start: async (controller) => {
        const finish = (trailer: unknown) => {
          if (closed) return
          closed = true
          streams.get(id)?.delete(close)
          controller.enqueue(encodeEnvelope(trailer, END_STREAM))
          controller.close()
        }
        close = (reason) => finish({ error: { code: "unavailable", message: reason } })
        if (!streams.has(id)) streams.set(id, new Set())
        streams.get(id)!.add(close)
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
                controller.enqueue(encodeEnvelope({ event: { data: { [event.type]: Buffer.from(event.data).toString("base64") } } }))
                continue
              }
              // envd's deadline ends the Start call itself, ahead of the end event.
              if (event.timedOut && options.deadlineOnTimeout) return finish({ error: { code: "deadline_exceeded", message: "context deadline exceeded" } })
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
        streams.get(id)?.delete(close)
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
        const config: ProcessConfig = {
          cmd: proc.cmd,
          args: (proc.args as Array<string> | undefined) ?? [],
          envs: (proc.envs as Record<string, string> | undefined) ?? {},
          ...(proc.cwd === undefined ? {} : { cwd: resolvePath(proc.cwd as string) })
        }
        const exec = await run(runtime.exec(sandbox.sandboxID, {
          command: [config.cmd, ...config.args],
          cwd: config.cwd,
          env: config.envs,
          timeoutMs,
          maxOutputBytes: MAX_OUTPUT_BYTES,
          tag: tag ?? undefined
        }))
        sandbox.processes[String(exec.pid)] = { execId: exec.execId, tag, config }
        save()
        // Without `stdin: true` the process reads end-of-file at once.
        if (body["stdin"] !== true) void run(runtime.sendInput(sandbox.sandboxID, exec.execId, new Uint8Array(), true)).catch(() => undefined)
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
          const info = await run(runtime.getExec(id, record.execId)).catch(() => null)
          if (info === null) {
            delete sandbox.processes[pid] // the runtime forgot it: so does envd
            continue
          }
          if (info.state === "running") processes.push({ config: record.config, pid: Number(pid), ...(record.tag === null ? {} : { tag: record.tag }) })
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
        if (typeof input?.stdin !== "string") throw new ConnectFailure("invalid_argument", "input.stdin (base64) is required; there is no pty")
        await run(runtime.sendInput(id, record.execId, Buffer.from(input.stdin, "base64")))
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

  /** GET /files: Go's ServeContent semantics for Range (206, or 416 naming only the size). */
  const download = async (sandbox: EmulatedSandbox, url: URL, request: Request) => {
    const raw = url.searchParams.get("path")
    if (raw === null || raw === "") return apiError(400, "path is required")
    const p = resolvePath(raw)
    const entry = await run(runtime.statFile(sandbox.sandboxID, p))
    if (entry._tag === "None") return apiError(404, `path '${p}' does not exist`)
    if (entry.value.type === "directory") return apiError(400, `path '${p}' is a directory`)
    const size = entry.value.sizeBytes
    const header = request.headers.get("range")
    const single = header === null ? null : /^bytes=(\d*)-(\d*)$/.exec(header.trim())
    if (header === null || (single === null && header.includes(","))) {
      const read = await run(runtime.readFile(sandbox.sandboxID, p, 0, Math.min(size, MAX_READ_BYTES)))
      return new Response(read.data.slice(), { headers: { "content-type": "application/octet-stream", "accept-ranges": "bytes" } })
    }
    let start: number
    let end: number
    if (single === null || (single[1] === "" && single[2] === "")) {
      start = Number.POSITIVE_INFINITY
      end = 0
    } else if (single[1] === "") {
      start = Math.max(0, size - Number(single[2])) // suffix: the last n bytes
      end = size - 1
    } else {
      start = Number(single[1])
      end = single[2] === "" ? size - 1 : Math.min(Number(single[2]), size - 1)
    }
    if (start >= size || end < start) return new Response(null, { status: 416, headers: { "content-range": `bytes */${size}` } })
    const read = await run(runtime.readFile(sandbox.sandboxID, p, start, Math.min(end - start + 1, MAX_READ_BYTES)))
    return new Response(read.data.slice(), {
      status: 206,
      headers: { "content-type": "application/octet-stream", "content-range": `bytes ${start}-${start + read.data.length - 1}/${size}` }
    })
  }

  /** POST /files: the raw body (path required) or multipart `file` parts; parents are created, files overwritten. */
  const upload = async (sandbox: EmulatedSandbox, url: URL, request: Request) => {
    const contentType = request.headers.get("content-type") ?? ""
    const target = url.searchParams.get("path")
    const files: Array<{ path: string; data: Uint8Array }> = []
    if (contentType.startsWith("application/octet-stream")) {
      if (target === null || target === "") return apiError(400, "path is required for an application/octet-stream upload")
      files.push({ path: resolvePath(target), data: new Uint8Array(await request.arrayBuffer()) })
    } else if (contentType.startsWith("multipart/form-data")) {
      const form = await request.formData().catch(() => null)
      if (form === null) return apiError(400, "the multipart body is malformed")
      for (const part of form.getAll("file")) {
        if (typeof part === "string") continue
        const name = target ?? part.name
        if (name === "") return apiError(400, "each file needs a path")
        files.push({ path: resolvePath(name), data: new Uint8Array(await part.arrayBuffer()) })
      }
      if (files.length === 0) return apiError(400, "the multipart body has no file part")
    } else {
      return apiError(400, "the body must be application/octet-stream or multipart/form-data")
    }
    for (const file of files) {
      await run(runtime.writeFile(sandbox.sandboxID, file.path, file.data, { mode: "overwrite", createParents: true }))
    }
    return json(files.map((f) => ({ name: path.posix.basename(f.path), type: "file", path: f.path })))
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
      if (e instanceof HttpFailure) return apiError(e.status, e.message)
      return route === "files" ? apiError(statusOf(e), emulatorMessage(e, "e2b")) : connectError(connectCodeOf(e), emulatorMessage(e, "e2b"))
    }
  }

  const serve = (port: number) =>
    Bun.serve({
      hostname: "127.0.0.1",
      port,
      idleTimeout: 0,
      fetch: async (request) => {
        const url = new URL(request.url)
        const hostRouted = new RegExp(`^${ENVD_PORT}-([a-z0-9]+)\\.`).exec(url.hostname)?.[1]
        const sandboxId = request.headers.get("e2b-sandbox-id") ?? hostRouted
        try {
          if (sandboxId !== null && sandboxId !== undefined) return await envd(request, url, sandboxId)
          return await control(request, url)
        } catch (e) {
          if (e instanceof HttpFailure) return apiError(e.status, e.message)
          return apiError(statusOf(e), emulatorMessage(e, "e2b"))
        }
      }
    })
  const server = servePersistent(dir, serve)
  const base = `http://127.0.0.1:${server.port}`
  return {
    apiUrl: base,
    sandboxUrl: base,
    apiKey,
    stop: () => {
      clearInterval(sweeper)
      for (const id of [...streams.keys()]) dropStreams(id, "the emulator stopped")
      server.stop(true)
    }
  }
}

/** The emulator for the running gateway: started in the caller's scope, stopped when it closes. */
export const e2bEmulator: Effect.Effect<E2BEmulatorInfo, never, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const { dataDir } = yield* AppConfig
  const runtime = yield* LocalRuntime
  const handle = yield* Effect.acquireRelease(Effect.sync(() => startE2BEmulator(dataDir, runtime)), (h) => Effect.sync(() => h.stop()))
  return { apiUrl: handle.apiUrl, sandboxUrl: handle.sandboxUrl, apiKey: handle.apiKey }
})

export class E2BEmulator extends Context.Tag("providers/e2b/E2BEmulator")<E2BEmulator, E2BEmulatorInfo>() {}
export const E2BEmulatorLive = Layer.scoped(E2BEmulator, e2bEmulator)
