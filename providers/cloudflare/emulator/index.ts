/**
 * A loopback emulator of the Cloudflare Sandbox bridge Worker (the wire in `../adapter/wire.ts`), over the local
 * runtime: it is what an operator deploys (`../bridge/`), with the local runtime in place of the SDK's Durable
 * Object and container. Sandboxes (`control.ts`), commands over SSE (`exec.ts`) and files under `/workspace/`
 * (`files.ts`). Requests need the bridge token as a Bearer (401 `UNAUTHORIZED` otherwise). Its books survive a
 * gateway restart, and it keeps its port.
 */
import { Effect, type Scope } from "effect"
import { AppConfig } from "../../../src/Config.ts"
import { LocalRuntime, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { answering } from "../../core/emulator/failure.ts"
import { emulatorServeOptions, makeRouter, route, scopedEmulator, servePersistent } from "../../core/emulator/server.ts"
import { makeBooks } from "./books.ts"
import { makeControl } from "./control.ts"
import { makeExec } from "./exec.ts"
import { makeFiles } from "./files.ts"
import { answerFailure, bridgeError } from "./http.ts"

export interface CloudflareEmulatorInfo {
  readonly apiUrl: string
  readonly apiKey: string
  /** The local-runtime jail behind a bridge sandbox (for its metrics); undefined when there is none. */
  readonly runtimeIdOf: (id: string) => string | undefined
}
export interface CloudflareEmulatorHandle extends CloudflareEmulatorInfo {
  readonly stop: () => void
}

interface Call {
  readonly request: Request
}

export const startCloudflareEmulator = (dataDir: string, runtime: LocalRuntimeShape): CloudflareEmulatorHandle => {
  const books = makeBooks(dataDir)
  const control = makeControl(books, runtime)
  const commands = makeExec(runtime)
  const files = makeFiles(runtime)
  const sandbox = (id: string | undefined) => control.sandboxOr404(id!)

  const router = makeRouter<Call>([
    route("POST", "/v1/sandbox", ({ request }) => control.create(request)),
    route("GET", "/v1/sandbox/:id/running", (_, { id }) => control.running(id!)),
    route("DELETE", "/v1/sandbox/:id", (_, { id }) => control.remove(id!)),
    route("POST", "/v1/sandbox/:id/exec", ({ request }, { id }) => commands.exec(sandbox(id), request)),
    route("GET", "/v1/sandbox/:id/file/*path", ({ request }, { id, path }) => files.read(sandbox(id), path!, request)),
    route("PUT", "/v1/sandbox/:id/file/*path", ({ request }, { id, path }) => files.write(sandbox(id), path!, request))
  ])

  const handle = async (request: Request, url: URL): Promise<Response> => {
    if (request.headers.get("authorization") !== `Bearer ${books.token}`) return bridgeError(401, "UNAUTHORIZED", "unauthorized")
    const found = router.match(request.method, url.pathname)
    if (found._tag === "MethodNotAllowed") return bridgeError(405, "METHOD_NOT_ALLOWED", "method not allowed")
    if (found._tag !== "Found") return bridgeError(404, "NOT_FOUND", "not found")
    return answering(answerFailure, () => found.handle({ request }))
  }

  // An exec's stream stays open while its command runs (at most the 30 s request timeout).
  const serve = (port: number) => Bun.serve({ ...emulatorServeOptions("cloudflare"), hostname: "127.0.0.1", port, idleTimeout: 120, fetch: (request) => handle(request, new URL(request.url)) })
  const server = servePersistent(books.dir, serve)
  return {
    apiUrl: `http://127.0.0.1:${server.port}`,
    apiKey: books.token,
    runtimeIdOf: (id) => books.state.sandboxes[id]?.runtimeId,
    stop: () => server.stop(true)
  }
}

/** The emulator for the running gateway: started in the caller's scope, stopped when it closes. */
export const cloudflareEmulator: Effect.Effect<CloudflareEmulatorInfo, never, AppConfig | LocalRuntime | Scope.Scope> = scopedEmulator(startCloudflareEmulator, (h) => ({ apiUrl: h.apiUrl, apiKey: h.apiKey, runtimeIdOf: h.runtimeIdOf }))
