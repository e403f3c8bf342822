/**
 * The Sandbox Bridge Worker: what an operator deploys to Cloudflare so the gateway can use Cloudflare Sandboxes
 * for real. `@cloudflare/sandbox` runs only inside Workers (each sandbox is a Durable Object driving a container),
 * so this Worker turns the SDK into the small REST + SSE API the gateway's adapter speaks
 * (`providers/cloudflare/adapter/wire.ts`):
 *
 *   POST   /v1/sandbox                  (no body; optional Idempotency-Key)  → {id}
 *   GET    /v1/sandbox/{id}/running                                          → {running, instanceId}; 404 unknown
 *   POST   /v1/sandbox/{id}/exec        {argv, timeout_ms, cwd?}             → text/event-stream (stdout/stderr
 *          frames with base64 data, then `exit` {exit_code} or `error` {error, code})
 *   GET    /v1/sandbox/{id}/file/workspace/…  (Range: bytes=a-b)            → 200 | 206 | 404 | 416
 *   PUT    /v1/sandbox/{id}/file/workspace/…  (the bytes)                   → {path, bytes}
 *   DELETE /v1/sandbox/{id}                                                 → {id, deleted}; 404 unknown
 *
 * Every request needs `Authorization: Bearer <BRIDGE_TOKEN>` (a Worker secret: `wrangler secret put
 * BRIDGE_TOKEN`). Known sandbox ids are kept in the KV namespace `SANDBOXES`, so `running` and `DELETE` answer 404
 * for an id never created (or already deleted) instead of waking a new container. Commands get no environment
 * overrides and no stdin (a body with either is refused), and run at most REQUEST_TIMEOUT_MS (30 s by default).
 *
 * Documentation-grade: it is not built or type-checked with the gateway (tsconfig excludes this folder). Deploy
 * with `npm install @cloudflare/sandbox@0.12.10 && npx wrangler deploy` next to wrangler.toml and Dockerfile.
 * Cost: the gateway reads Cloudflare's container analytics filtered by the label `metal_sbx=<id>`; label the
 * containers so where your account's Containers configuration allows it, or leave cost off in the gateway.
 */
import { getSandbox, parseSSEStream, type ExecEvent, type Sandbox as SandboxDO } from "@cloudflare/sandbox"

export { Sandbox } from "@cloudflare/sandbox"

interface Env {
  Sandbox: DurableObjectNamespace<SandboxDO>
  SANDBOXES: KVNamespace
  BRIDGE_TOKEN: string
  REQUEST_TIMEOUT_MS?: string
}

const MAX_FILE_BYTES = 10 * 1024 * 1024

const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } })
const failure = (status: number, code: string, error: string) => json({ error, code }, status)

/** Equal strings in time independent of where they differ. */
const sameToken = (a: string, b: string) => {
  const x = new TextEncoder().encode(a)
  const y = new TextEncoder().encode(b)
  let diff = x.length ^ y.length
  for (let i = 0; i < Math.max(x.length, y.length); i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0)
  return diff === 0
}

/** One argv word for the shell (`execStream` takes a command line). */
const quote = (word: string) => (/^[A-Za-z0-9_\/.:=@%+,-]+$/.test(word) ? word : `'${word.replaceAll("'", `'"'"'`)}'`)

const toBase64 = (bytes: Uint8Array) => {
  let binary = ""
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(binary)
}
const fromBase64 = (text: string) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0))

/** A sandbox id for a create: derived from the idempotency key (a retry gets the same sandbox), else random. */
const idFor = async (key: string | null) => {
  if (key === null) return `sb-${crypto.randomUUID()}`
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key)))
  return `sb-${[...digest.slice(0, 12)].map((b) => b.toString(16).padStart(2, "0")).join("")}`
}

/** `/workspace/…` from the route's rest, or null for anything else. */
const workspacePath = (rest: string) => {
  const parts = rest.split("/").map(decodeURIComponent)
  if (parts[0] !== "workspace" || parts.length < 2 || parts.some((p) => p === "" || p === "." || p === "..")) return null
  return `/${parts.join("/")}`
}

const exec = async (sandbox: ReturnType<typeof getSandbox>, request: Request, env: Env) => {
  const body = (await request.json().catch(() => null)) as { argv?: unknown; timeout_ms?: unknown; cwd?: unknown; env?: unknown; stdin?: unknown } | null
  if (body === null || !Array.isArray(body.argv) || body.argv.length === 0 || !body.argv.every((a) => typeof a === "string")) {
    return failure(400, "BAD_REQUEST", "argv must be a non-empty list of strings")
  }
  if (body.env !== undefined && Object.keys(body.env as object).length > 0) return failure(400, "UNSUPPORTED", "the bridge runs commands without environment overrides")
  if (body.stdin !== undefined) return failure(400, "UNSUPPORTED", "the bridge runs commands without standard input")
  const limit = Number(env.REQUEST_TIMEOUT_MS ?? "30000")
  const timeout = Math.min(typeof body.timeout_ms === "number" && body.timeout_ms > 0 ? body.timeout_ms : limit, limit)
  const command = (body.argv as Array<string>).map(quote).join(" ")
  const stream = await sandbox.execStream(command, { timeout, ...(typeof body.cwd === "string" ? { cwd: body.cwd } : {}) })
  const encoder = new TextEncoder()
  const frame = (event: string, data: string) => encoder.encode(`event: ${event}\ndata: ${data}\n\n`)
  const out = new TransformStream<Uint8Array, Uint8Array>()
  const writer = out.writable.getWriter()
  const pump = async () => {
    // A comment first, so the answer leaves before any output.
    await writer.write(encoder.encode(": started\n\n"))
    try {
      for await (const event of parseSSEStream<ExecEvent>(stream)) {
        if (event.type === "stdout" || event.type === "stderr") await writer.write(frame(event.type, toBase64(encoder.encode(event.data ?? ""))))
        else if (event.type === "complete") {
          await writer.write(frame("exit", JSON.stringify({ exit_code: event.exitCode ?? 0 })))
          break
        } else if (event.type === "error") {
          const message = String(event.error ?? "the command failed")
          await writer.write(frame("error", JSON.stringify({ error: message, code: /time ?out/i.test(message) ? "COMMAND_TIMEOUT" : "EXEC_ERROR" })))
          break
        }
      }
    } catch (e) {
      await writer.write(frame("error", JSON.stringify({ error: e instanceof Error ? e.message : "the command failed", code: "EXEC_ERROR" })))
    } finally {
      await writer.close()
    }
  }
  // The Worker stays alive for the stream; the gateway reads it to the end.
  void pump()
  return new Response(out.readable, { headers: { "content-type": "text/event-stream", "cache-control": "no-store" } })
}

const readFile = async (sandbox: ReturnType<typeof getSandbox>, path: string, request: Request) => {
  const found = await sandbox.exists(path).catch(() => ({ exists: false }))
  if (!found.exists) return failure(404, "FILE_NOT_FOUND", `${path}: no such file`)
  const file = await sandbox.readFile(path, { encoding: "base64" })
  const bytes = file.encoding === "base64" ? fromBase64(file.content) : new TextEncoder().encode(file.content)
  const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.get("range") ?? "")
  if (range === null) return new Response(bytes, { headers: { "content-type": "application/octet-stream" } })
  const start = Number(range[1])
  if (start >= bytes.length) return new Response(null, { status: 416, headers: { "content-range": `bytes */${bytes.length}` } })
  const end = range[2] === "" ? bytes.length - 1 : Math.min(bytes.length - 1, Number(range[2]))
  return new Response(bytes.subarray(start, end + 1), {
    status: 206,
    headers: { "content-type": "application/octet-stream", "content-range": `bytes ${start}-${end}/${bytes.length}` }
  })
}
const writeFile = async (sandbox: ReturnType<typeof getSandbox>, path: string, request: Request) => {
  const bytes = new Uint8Array(await request.arrayBuffer())
  if (bytes.length > MAX_FILE_BYTES) return failure(413, "PAYLOAD_TOO_LARGE", `at most ${MAX_FILE_BYTES} bytes`)
  const parent = path.slice(0, path.lastIndexOf("/"))
  if (!(await sandbox.exists(parent).catch(() => ({ exists: false }))).exists) return failure(404, "FILE_NOT_FOUND", `${parent} is not a directory`)
  await sandbox.writeFile(path, toBase64(bytes), { encoding: "base64" })
  return json({ path, bytes: bytes.length })
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const auth = request.headers.get("authorization") ?? ""
    if (!env.BRIDGE_TOKEN || !sameToken(auth, `Bearer ${env.BRIDGE_TOKEN}`)) return failure(401, "UNAUTHORIZED", "unauthorized")
    const url = new URL(request.url)
    const parts = url.pathname.split("/").filter((p) => p !== "")
    if (parts[0] !== "v1" || parts[1] !== "sandbox") return failure(404, "NOT_FOUND", "not found")
    try {
      if (parts.length === 2 && request.method === "POST") {
        const id = await idFor(request.headers.get("idempotency-key"))
        await env.SANDBOXES.put(id, JSON.stringify({ createdAt: new Date().toISOString() }))
        return json({ id }, 201)
      }
      const id = decodeURIComponent(parts[2] ?? "")
      if ((await env.SANDBOXES.get(id)) === null) return failure(404, "SANDBOX_NOT_FOUND", `sandbox ${id} not found`)
      const sandbox = getSandbox(env.Sandbox, id)
      const action = parts[3]
      if (parts.length === 3 && request.method === "DELETE") {
        await sandbox.destroy()
        await env.SANDBOXES.delete(id)
        return json({ id, deleted: true })
      }
      if (action === "running" && request.method === "GET") {
        // Starts the container when it sleeps; a failing probe reads as not running yet.
        const probe = await sandbox.exec("true").catch(() => null)
        return json({ running: probe?.exitCode === 0, instanceId: id })
      }
      if (action === "exec" && request.method === "POST") return await exec(sandbox, request, env)
      if (action === "file") {
        const path = workspacePath(parts.slice(4).join("/"))
        if (path === null) return failure(400, "INVALID_PATH", "files are served only under /workspace/")
        if (request.method === "GET") return await readFile(sandbox, path, request)
        if (request.method === "PUT") return await writeFile(sandbox, path, request)
      }
      return failure(404, "NOT_FOUND", "not found")
    } catch (e) {
      return failure(500, "INTERNAL_ERROR", e instanceof Error ? e.message : "internal error")
    }
  }
}
