/**
 * A loopback emulator of Runloop's API as its official SDK (`@runloop/api-client`) and the adapter use it, backed
 * by the local runtime (one devbox = one runtime sandbox, under the devbox's id). One port serves the API under
 * `/v1`: devboxes (`control.ts`), executions (`process.ts`) and files (`filesystem.ts`). No previews: Runloop has no endpoints declared. Its books
 * (`books.ts`) survive a gateway restart the way a provider's cloud would, and it keeps its port.
 */
import { Effect, type Scope } from "effect"
import { AppConfig } from "../../../src/Config.ts"
import { LocalRuntime, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { answering } from "../../core/emulator/failure.ts"
import { emulatorServeOptions, makeRouter, route, scopedEmulator, servePersistent } from "../../core/emulator/server.ts"
import { type Books, type Devbox, makeBooks } from "./books.ts"
import { makeControl } from "./control.ts"
import { makeFilesystem } from "./filesystem.ts"
import { answerFailure, errorResponse } from "./http.ts"
import { makeExecutions } from "./process.ts"

export interface RunloopEmulatorInfo {
  /** The API base (paths start with `/v1`). */
  readonly apiUrl: string
  readonly apiKey: string
}
export interface RunloopEmulatorHandle extends RunloopEmulatorInfo {
  readonly stop: () => void
}
export interface RunloopEmulatorOptions {
  /** How long `wait_for_status` holds a request before its 408 (Runloop: 30 s). */
  readonly longPollMs?: number | undefined
}

interface Call {
  readonly request: Request
  readonly url: URL
  /** The devbox the path names (404 when there is none). */
  readonly devbox: () => Devbox
}

const makeApi = (books: Books, runtime: LocalRuntimeShape, options: RunloopEmulatorOptions) => {
  const longPollMs = options.longPollMs ?? 30_000
  const executions = makeExecutions(books, runtime, { longPollMs })
  const files = makeFilesystem(runtime)
  const control = makeControl(books, runtime, {
    longPollMs,
    endExecutions: executions.endAll,
    onShutdown: executions.dropDevbox
  })
  const router = makeRouter<Call>([
    route("POST", "/v1/devboxes", ({ request }) => control.create(request)),
    route("POST", "/v1/devboxes/create_and_await_running", ({ request }) => control.createAndAwaitRunning(request)),
    route("GET", "/v1/devboxes", ({ url }) => control.list(url)),
    route("GET", "/v1/devboxes/:id", (_, { id }) => control.get(id!)),
    route("POST", "/v1/devboxes/:id/wait_for_status", ({ request }, { id }) => control.waitForStatus(request, id!)),
    route("POST", "/v1/devboxes/:id/suspend", (_, { id }) => control.suspend(id!)),
    route("POST", "/v1/devboxes/:id/resume", (_, { id }) => control.resume(id!)),
    route("POST", "/v1/devboxes/:id/shutdown", (_, { id }) => control.shutdown(id!)),
    route("GET", "/v1/devboxes/:id/usage", (_, { id }) => control.usage(id!)),
    route("POST", "/v1/devboxes/:id/keep_alive", (_, { id }) => control.keepAlive(id!)),
    route("POST", "/v1/devboxes/:id/execute", ({ request, url, devbox }) => executions.execute(devbox(), request, url)),
    route("POST", "/v1/devboxes/:id/execute_async", ({ request, devbox }) => executions.executeAsync(devbox(), request)),
    route("POST", "/v1/devboxes/:id/execute_sync", ({ request, devbox }) => executions.executeSync(devbox(), request)),
    route("GET", "/v1/devboxes/:id/executions/:execution", ({ url, devbox }, { execution }) => executions.get(devbox(), execution!, url)),
    route("POST", "/v1/devboxes/:id/executions/:execution/wait_for_status", ({ request, url, devbox }, { execution }) =>
      executions.waitForStatus(devbox(), execution!, request, url)),
    route("POST", "/v1/devboxes/:id/executions/:execution/kill", ({ request, devbox }, { execution }) => executions.kill(devbox(), execution!, request)),
    route("GET", "/v1/devboxes/:id/executions/:execution/stream_stdout_updates", ({ request, url, devbox }, { execution }) =>
      executions.streamUpdates(devbox(), execution!, "stdout", request, url)),
    route("GET", "/v1/devboxes/:id/executions/:execution/stream_stderr_updates", ({ request, url, devbox }, { execution }) =>
      executions.streamUpdates(devbox(), execution!, "stderr", request, url)),
    route("POST", "/v1/devboxes/:id/download_file", ({ request, devbox }) => files.download(devbox(), request)),
    route("POST", "/v1/devboxes/:id/upload_file", ({ request, devbox }) => files.upload(devbox(), request)),
    route("POST", "/v1/devboxes/:id/read_file_contents", ({ request, devbox }) => files.readContents(devbox(), request)),
    route("POST", "/v1/devboxes/:id/write_file_contents", ({ request, devbox }) => files.writeContents(devbox(), request))
  ])

  const handle = async (request: Request, url: URL): Promise<Response> => {
    if (request.headers.get("authorization") !== `Bearer ${books.apiKey}`) return errorResponse(401, "Invalid API key")
    const found = router.match(request.method, url.pathname)
    if (found._tag !== "Found") return errorResponse(found._tag === "MethodNotAllowed" ? 405 : 404, "Not found")
    let id = ""
    try {
      id = decodeURIComponent(url.pathname.split("/")[3] ?? "")
    } catch {
      // matched nothing anyway
    }
    return answering(answerFailure, () => found.handle({ request, url, devbox: () => control.devboxOr404(id) }))
  }
  return { handle, stop: control.stop }
}

export const startRunloopEmulator = (dataDir: string, runtime: LocalRuntimeShape, options: RunloopEmulatorOptions = {}): RunloopEmulatorHandle => {
  const books = makeBooks(dataDir)
  const api = makeApi(books, runtime, options)
  const serve = (port: number) =>
    // Long-polls are held up to 30 s: the idle timeout is above that.
    Bun.serve({ ...emulatorServeOptions("runloop"), hostname: "127.0.0.1", port, idleTimeout: 60, fetch: (request) => api.handle(request, new URL(request.url)) })
  const server = servePersistent(books.dir, serve)
  return {
    apiUrl: `http://127.0.0.1:${server.port}`,
    apiKey: books.apiKey,
    stop: () => {
      api.stop()
      server.stop(true)
    }
  }
}

/** The emulator for the running gateway: started in the caller's scope, stopped when it closes. */
export const runloopEmulator: Effect.Effect<RunloopEmulatorInfo, never, AppConfig | LocalRuntime | Scope.Scope> = scopedEmulator(startRunloopEmulator, (h) => ({ apiUrl: h.apiUrl, apiKey: h.apiKey }))
