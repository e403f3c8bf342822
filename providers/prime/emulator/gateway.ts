/**
 * The Prime emulator's sandbox gateway, on the emulator's port under `/gateway/<user_ns>/<job_id>/…` (the job is
 * the sandbox): `POST /api/v1/sandbox/{id}/auth` hands out its address and a token (15 minutes), and with that token
 * - `POST …/command_session.CommandSession/Start` runs a command (Connect server stream, protobuf codec:
 *   `../command-session.ts`): the start event with the pid, stdout/stderr data as it comes, the end event (a
 *   zigzag exit code; a signal in its status), then the end-of-stream trailer. `Connect-Timeout-Ms` kills the
 *   command at the deadline and ends the call `deadline_exceeded`. The caller going away kills the command.
 *   Terminals and standard input are `unimplemented` (not emulated).
 * - `GET …/download?path=` answers the whole file (404 when there is none, 400 for a directory);
 * - multipart `POST …/upload?path=` (`file`) creates or replaces it; no parent directories are made.
 * A sandbox that ended answers 502 `{error: "sandbox_not_found"}`, as Prime's gateway does.
 */
import { asBody } from "../../../src/domain/Bodies.ts"
import * as crypto from "node:crypto"
import * as path from "node:path"
import type { ExecEvent, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { emulatorMessage, runOrThrow as run } from "../../core/emulator/server.ts"
import {
  decodeStartRequest,
  encodeStartResponse,
  endOfStream,
  envelope,
  EnvelopeDecoder,
  EnvelopeError,
  type SessionEvent,
  STREAM_CONTENT_TYPE
} from "../command-session.ts"
import type { Sandbox } from "./books.ts"
import { HttpFailure, json } from "./http.ts"

const TOKEN_TTL_MS = 15 * 60 * 1000
const MAX_OUTPUT_BYTES = 10 * 1024 * 1024
const MAX_DOWNLOAD_BYTES = 100 * 1024 * 1024
const MAX_UPLOAD_BYTES = 64 * 1024 * 1024
const LONG_POLL_MS = 1000
/** The namespace every emulated sandbox runs in. */
export const USER_NS = "emulated"

const SIGNAL_STATUS: Readonly<Record<string, string>> = { SIGKILL: "killed", SIGTERM: "terminated", SIGINT: "interrupt", SIGHUP: "hangup", SIGABRT: "aborted" }

/** An absolute path as given; a relative one under the user's working directory (`/workspace` here). */
const resolvePath = (p: string) => path.posix.normalize(p.startsWith("/") ? p : `/workspace/${p}`)

export const makeGateway = (runtime: LocalRuntimeShape, sandboxOf: (id: string) => Sandbox | undefined) => {
  const tokens = new Map<string, { readonly sandboxId: string; readonly expiresAt: number }>()
  /** Streams open per sandbox: ended when the sandbox ends. */
  const streams = new Map<string, Set<() => void>>()

  const auth = (s: Sandbox, origin: string) => {
    if (s.status !== "RUNNING") throw new HttpFailure(409, `Sandbox ${s.id} is ${s.status}, not RUNNING`)
    const now = Date.now()
    for (const [t, v] of tokens) if (v.expiresAt <= now) tokens.delete(t)
    const token = crypto.randomBytes(24).toString("base64url")
    const expiresAt = now + TOKEN_TTL_MS
    tokens.set(token, { sandboxId: s.id, expiresAt })
    return json({ token, gateway_url: `${origin}/gateway`, user_ns: USER_NS, job_id: s.id, expires_at: new Date(expiresAt).toISOString(), is_gpu: false })
  }

  /** The running sandbox a gateway call names, checked against its token. */
  const target = (request: Request, ns: string, job: string): Sandbox => {
    const header = request.headers.get("authorization") ?? ""
    const grant = header.startsWith("Bearer ") ? tokens.get(header.slice(7)) : undefined
    if (grant === undefined || grant.expiresAt <= Date.now() || grant.sandboxId !== job || ns !== USER_NS) throw new HttpFailure(401, "Invalid or expired token")
    const s = sandboxOf(job)
    if (s === undefined || s.status !== "RUNNING") {
      throw s !== undefined && (s.status === "PENDING" || s.status === "PROVISIONING")
        ? new HttpFailure(409, `Sandbox ${job} is ${s.status}`)
        : new GatewayGone()
    }
    return s
  }

  const streamError = (code: string, message: string) => new Response(endOfStream({ code, message }), { headers: { "content-type": STREAM_CONTENT_TYPE } })
  const frame = (event: SessionEvent) => envelope(encodeStartResponse(event))

  const start = async (request: Request, s: Sandbox): Promise<Response> => {
    if (!(request.headers.get("content-type") ?? "").startsWith(STREAM_CONTENT_TYPE)) {
      return new Response(null, { status: 415, headers: { "accept-post": STREAM_CONTENT_TYPE } })
    }
    let spec: { cmd: string; args: Array<string>; envs: Record<string, string>; cwd: string | undefined }
    try {
      const first = new EnvelopeDecoder().push(new Uint8Array(await request.arrayBuffer()))[0]
      if (first === undefined) return streamError("invalid_argument", "the request has no message")
      const req = decodeStartRequest(first.data)
      if (req.pty !== undefined) return streamError("unimplemented", "terminals are not emulated")
      if (req.stdin === true) return streamError("unimplemented", "standard input is not emulated")
      if (req.command === undefined || req.command.cmd === "") return streamError("invalid_argument", "command.cmd is required")
      if (req.command.user !== undefined) return streamError("unimplemented", "running as another user is not emulated")
      spec = { cmd: req.command.cmd, args: req.command.args, envs: req.command.envs, cwd: req.command.cwd }
    } catch (e) {
      return streamError("invalid_argument", e instanceof EnvelopeError ? e.message : "the request is not a StartRequest")
    }
    const timeoutHeader = request.headers.get("connect-timeout-ms")
    const timeoutMs = timeoutHeader === null ? undefined : Number(timeoutHeader)
    if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0)) return streamError("invalid_argument", "Connect-Timeout-Ms must be a positive integer")
    let execId: string
    let pid: number
    try {
      const started = await run(runtime.exec(s.id, {
        command: [spec.cmd, ...spec.args],
        cwd: spec.cwd === undefined ? undefined : resolvePath(spec.cwd),
        env: { ...s.environmentVars, ...spec.envs },
        timeoutMs,
        maxOutputBytes: MAX_OUTPUT_BYTES,
        stdin: false
      }))
      execId = started.execId
      pid = started.pid
    } catch (e) {
      // A request the sandbox cannot run (a missing working directory, …) is the caller's, as Connect says it.
      const kind = (e as { kind?: unknown }).kind
      return streamError(kind === "invalid" ? "invalid_argument" : kind === "not_found" ? "not_found" : "internal", emulatorMessage(e, "prime"))
    }
    let closed = false
    let unregister = () => {}
    const kill = () => void run(runtime.kill(s.id, execId, "SIGKILL")).catch(() => undefined)
    const body = new ReadableStream<Uint8Array>({
      start: async (controller) => {
        const finish = (error?: { code: string; message: string }) => {
          if (closed) return
          closed = true
          unregister()
          controller.enqueue(endOfStream(error))
          controller.close()
        }
        const set = streams.get(s.id) ?? new Set()
        streams.set(s.id, set)
        const onEnd = () => finish({ code: "unavailable", message: "the sandbox ended" })
        set.add(onEnd)
        unregister = () => set.delete(onEnd)
        controller.enqueue(frame({ type: "start", pid }))
        let seq = 0
        try {
          while (!closed) {
            const events: ReadonlyArray<ExecEvent> = await run(runtime.execEvents(s.id, execId, seq, LONG_POLL_MS))
            if (closed) return
            for (const event of events) {
              seq = event.seq + 1
              if (event.type !== "exit") {
                controller.enqueue(frame({ type: event.type, data: event.data }))
                continue
              }
              if (event.timedOut && timeoutMs !== undefined) return finish({ code: "deadline_exceeded", message: "context deadline exceeded" })
              const exited = event.exitCode !== null
              const status = exited ? `exit status ${event.exitCode}` : `signal: ${SIGNAL_STATUS[event.signal ?? ""] ?? (event.signal ?? "unknown").toLowerCase()}`
              controller.enqueue(frame({ type: "end", exitCode: event.exitCode ?? -1, exited, status, error: undefined }))
              return finish()
            }
          }
        } catch (e) {
          finish({ code: "internal", message: emulatorMessage(e, "prime") })
        }
      },
      cancel: () => {
        // The caller went away: its command does not outlive it.
        closed = true
        unregister()
        kill()
      }
    })
    return new Response(body, { headers: { "content-type": STREAM_CONTENT_TYPE } })
  }

  const download = async (s: Sandbox, url: URL) => {
    const raw = url.searchParams.get("path")
    if (raw === null || raw === "") throw new HttpFailure(422, "path is required")
    const p = resolvePath(raw)
    const stat = await run(runtime.statFile(s.id, p))
    if (stat._tag === "None") throw new HttpFailure(404, `File not found: ${raw}`)
    if (stat.value.type === "directory") throw new HttpFailure(400, `${raw} is a directory`)
    if (stat.value.sizeBytes > MAX_DOWNLOAD_BYTES) throw new HttpFailure(413, `${raw} is larger than the emulator serves`)
    const read = await run(runtime.readFile(s.id, p, 0, stat.value.sizeBytes))
    return new Response(asBody(read.data), {
      headers: { "content-type": "application/octet-stream", "content-disposition": `attachment; filename="${path.posix.basename(p)}"` }
    })
  }

  const upload = async (s: Sandbox, request: Request, url: URL) => {
    const raw = url.searchParams.get("path")
    if (raw === null || raw === "") throw new HttpFailure(422, "path is required")
    if (Number(request.headers.get("content-length") ?? "0") > MAX_UPLOAD_BYTES + 64 * 1024) throw new HttpFailure(413, "the file is too large for the emulator")
    const form = await request.formData().catch(() => null)
    const file = form?.get("file")
    if (!(file instanceof Blob)) throw new HttpFailure(422, "missing 'file' field in multipart form")
    if (file.size > MAX_UPLOAD_BYTES) throw new HttpFailure(413, "the file is too large for the emulator")
    const p = resolvePath(raw)
    const stat = await run(runtime.statFile(s.id, p))
    if (stat._tag === "Some" && stat.value.type === "directory") throw new HttpFailure(400, `${raw} is a directory`)
    await run(runtime.writeFile(s.id, p, new Uint8Array(await file.arrayBuffer()), { mode: "overwrite", createParents: false }))
    return json({ success: true, path: raw, size: file.size, timestamp: new Date().toISOString() })
  }

  return {
    auth,
    target,
    start,
    download,
    upload,
    /** The sandbox ended: its tokens and open streams end too. */
    endSandbox: (id: string) => {
      for (const [t, v] of tokens) if (v.sandboxId === id) tokens.delete(t)
      for (const onEnd of [...(streams.get(id) ?? [])]) onEnd()
      streams.delete(id)
    }
  }
}

/** A gateway call for a sandbox that no longer runs. */
export class GatewayGone extends Error {}
