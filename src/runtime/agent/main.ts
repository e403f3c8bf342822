/**
 * The in-jail agent (the way E2B's envd serves each VM). It runs inside a sandbox's bwrap jail as the sandbox
 * user, under a tiny shell loop that restarts it if it dies, and serves HTTP on a unix socket in /run/agent:
 * - runs processes (processes.ts) and keeps their ordered output and exit status on the sandbox's disk
 *   (events.ts), so neither the gateway's absence nor a restart of this agent loses them;
 * - does file operations from inside the jail (files.ts), so paths, `..` and symlinks resolve in the jail;
 * - runs the sandbox's desktop when asked (desktop.ts, x11.ts): its display, input, screenshots, recordings;
 * - bridges TCP ports (bridge.ts): a connection to /run/agent/bridge.sock that sends "PORT <n>\n" is piped to
 *   127.0.0.1:n in the jail's own network namespace.
 * Self-contained on purpose (node builtins only): the gateway ships these modules as text, transpiled, on the
 * tools tmpfs (LocalRuntimeLive.ts, Host.ts), and runs this one with bun.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Protocol from "../AgentProtocol.ts"
import { startBridge } from "./bridge.ts"
import { json, queryOf, RUN_DIR } from "./common.ts"
import { evictFinished, execs, loadExecs } from "./events.ts"
import { errnoError, fileRoute, normalize } from "./files.ts"
import { execRoute } from "./processes.ts"

/**
 * The desktop's modules (X11, PNG encoding, node:zlib) are loaded at the first desktop call: most sandboxes never
 * start a desktop, and loading them costs every agent's start about a third of its CPU (measured: ~120 → ~85 ms).
 */
let desktop: Promise<typeof import("./desktop.ts")> | undefined
const desktopRoute = (request: Request, parts: ReadonlyArray<string>, q: URLSearchParams) =>
  (desktop ??= import("./desktop.ts")).then((m) => m.desktopRoute(request, parts, q))

const handle = async (request: Request): Promise<Response> => {
  const url = new URL(request.url)
  const q = url.searchParams
  const parts = url.pathname.split("/").filter(Boolean)
  /** The path the request names, for error messages. */
  let subject: string | undefined
  try {
    if (parts[0] === "health") return json({ ok: true, pid: process.pid, execs: execs.size } satisfies Protocol.HealthAnswer)
    if (parts[0] === "exec") return await execRoute(request, parts, q)
    if (parts[0] === "desktop") return await desktopRoute(request, parts, q)
    // Every file route's query names the path (StatQuery is the one that names nothing else).
    const p = normalize(queryOf<Protocol.StatQuery>(q).get("path"))
    subject = p
    return await fileRoute(request, parts, q, p)
  } catch (e) {
    const error = errnoError(e, subject)
    return json({ kind: error.kind, message: error.message } satisfies Protocol.ErrorAnswer, error.status)
  }
}

/**
 * Only as the entry point (`bun main.js` in the jail). The gateway imports these files as text, and a test runner
 * that ignores import attributes would evaluate them as modules: then nothing may start.
 */
/** Seconds a connection may say nothing: more than the longest events wait (60 s). */
const AGENT_IDLE_SECONDS = 90

const main = () => {
  fs.mkdirSync(RUN_DIR, { recursive: true })
  loadExecs()
  for (const name of ["agent.sock", "bridge.sock"]) fs.rmSync(path.join(RUN_DIR, name), { force: true })
  startBridge(path.join(RUN_DIR, "bridge.sock"))
  // The agent socket comes last: once it answers, everything is ready.
  // Writes stream to disk and are bounded by their `limit` (Bun's own default would cut them at 128 MiB).
  // Production mode: never Bun's development error page (it quotes the source) as an answer.
  const options: Parameters<typeof Bun.serve>[0] = { unix: path.join(RUN_DIR, "agent.sock"), development: false, fetch: handle, maxRequestBodySize: Number.MAX_SAFE_INTEGER }
  // An idle timeout above the longest long poll (an events wait, at most 60 s): on a unix socket Bun (1.4) ignores
  // `server.timeout(request, 0)`, so its default of 10 s cut every wait past ~12 s ("the agent does not answer").
  // bun-types lists `idleTimeout` for TCP servers only; Bun applies it on a unix socket too (test/runtime/processes.test.ts).
  Bun.serve(Object.assign(options, { idleTimeout: AGENT_IDLE_SECONDS }))
  setInterval(evictFinished, 10 * 60 * 1000).unref()
}

if (import.meta.main) main()
