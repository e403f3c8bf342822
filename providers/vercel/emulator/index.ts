/**
 * A loopback emulator of Vercel Sandbox's API as its official SDK (`@vercel/sandbox`) and the adapter use it, backed by the local runtime (one Vercel
 * sandbox = its one session = one runtime sandbox): sandboxes (`control.ts`), a session's commands (`process.ts`)
 * and files (`filesystem.ts`), all under one API origin as at Vercel. Requests need the emulator's token as a
 * Bearer; a `teamId` query must name its team. Its books (`books.ts`) survive a gateway restart the way Vercel's
 * would, and it keeps its port. No routes (public URLs) are served: the adapter declares no endpoints.
 */
import { Effect, type Scope } from "effect"
import { AppConfig } from "../../../src/Config.ts"
import { LocalRuntime, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { answering } from "../../core/emulator/failure.ts"
import { emulatorServeOptions, makeRouter, route, scopedEmulator, servePersistent } from "../../core/emulator/server.ts"
import { makeBooks } from "./books.ts"
import { makeControl } from "./control.ts"
import { makeFilesystem } from "./filesystem.ts"
import { answerFailure, vercelError } from "./http.ts"
import { makeCommands } from "./process.ts"

export interface VercelEmulatorInfo {
  readonly apiUrl: string
  readonly token: string
  readonly teamId: string
  readonly projectId: string
  /** The local-runtime jail behind a sandbox name (for its metrics); undefined when there is no such sandbox. */
  readonly runtimeIdOf: (name: string) => string | undefined
}
export interface VercelEmulatorHandle extends VercelEmulatorInfo {
  readonly stop: () => void
}

interface Call {
  readonly request: Request
  readonly url: URL
}

export const startVercelEmulator = (dataDir: string, runtime: LocalRuntimeShape): VercelEmulatorHandle => {
  const books = makeBooks(dataDir)
  const commands = makeCommands(books, runtime)
  const fs = makeFilesystem(runtime)
  const control = makeControl(books, runtime, { onStopped: () => {} })
  const session = (id: string | undefined) => control.runningSession(id!)

  const router = makeRouter<Call>([
    // The SDK creates on /v3, and on /v2 when it names a runtime; both take the same body here.
    route("POST", "/v3/sandboxes", ({ request }) => control.create(request)),
    route("POST", "/v2/sandboxes", ({ request }) => control.create(request)),
    route("GET", "/v2/sandboxes", ({ url }) => control.list(url)),
    route("GET", "/v2/sandboxes/sessions/:session", (_, { session: id }) => control.getSession(id!)),
    route("POST", "/v2/sandboxes/sessions/:session/stop", (_, { session: id }) => control.stopSession(id!)),
    route("POST", "/v2/sandboxes/sessions/:session/extend-timeout", ({ request }, { session: id }) => control.extend(request, id!)),
    route("POST", "/v2/sandboxes/sessions/:session/cmd", ({ request }, { session: id }) => commands.start(session(id), request)),
    route("GET", "/v2/sandboxes/sessions/:session/cmd/:cmd", ({ request, url }, { session: id, cmd }) => commands.get(session(id), cmd!, url, request.signal)),
    route("GET", "/v2/sandboxes/sessions/:session/cmd/:cmd/logs", ({ request }, { session: id, cmd }) => commands.logs(session(id), cmd!, request.signal)),
    route("POST", "/v2/sandboxes/sessions/:session/cmd/:cmd/kill", ({ request }, { session: id, cmd }) => commands.kill(session(id), cmd!, request)),
    route("POST", "/v2/sandboxes/sessions/:session/fs/read", ({ request }, { session: id }) => fs.read(session(id), request)),
    route("POST", "/v2/sandboxes/sessions/:session/fs/write", ({ request }, { session: id }) => fs.write(session(id), request)),
    route("POST", "/v2/sandboxes/sessions/:session/fs/mkdir", ({ request }, { session: id }) => fs.mkdir(session(id), request)),
    route("GET", "/v2/sandboxes/:name", ({ url }, { name }) => control.get(url, name!)),
    route("DELETE", "/v2/sandboxes/:name", ({ url }, { name }) => control.remove(url, name!))
  ])

  const handle = async (request: Request, url: URL): Promise<Response> => {
    if (request.headers.get("authorization") !== `Bearer ${books.token}`) return vercelError(403, "forbidden", "Not authorized")
    const team = url.searchParams.get("teamId")
    if (team !== null && team !== books.teamId) return vercelError(403, "forbidden", `Not authorized for team ${team}`)
    const found = router.match(request.method, url.pathname)
    if (found._tag === "MethodNotAllowed") return vercelError(405, "method_not_allowed", "Method not allowed")
    if (found._tag !== "Found") return vercelError(404, "not_found", "Not found")
    return answering(answerFailure, () => found.handle({ request, url }))
  }

  // Long waits (`?wait=true`) and log streams stay open while a command runs.
  const serve = (port: number) => Bun.serve({ ...emulatorServeOptions("vercel"), hostname: "127.0.0.1", port, idleTimeout: 255, fetch: (request) => handle(request, new URL(request.url)) })
  const server = servePersistent(books.dir, serve)
  return {
    apiUrl: `http://127.0.0.1:${server.port}`,
    token: books.token,
    teamId: books.teamId,
    projectId: books.projectId,
    runtimeIdOf: (name) => books.state.sandboxes[name]?.runtimeId,
    stop: () => {
      control.stop()
      server.stop(true)
    }
  }
}

/** The emulator for the running gateway: started in the caller's scope, stopped when it closes. */
export const vercelEmulator: Effect.Effect<VercelEmulatorInfo, never, AppConfig | LocalRuntime | Scope.Scope> = scopedEmulator(startVercelEmulator, (h) => ({ apiUrl: h.apiUrl, token: h.token, teamId: h.teamId, projectId: h.projectId, runtimeIdOf: h.runtimeIdOf }))
