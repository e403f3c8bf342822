/**
 * A loopback emulator of the Prime wire subset the adapter uses, backed by the local runtime (one sandbox = one
 * runtime sandbox, under the sandbox's id). One port serves the API under `/api/v1` (`control.ts`: sandbox CRUD,
 * label lookup, `/auth`) and the sandbox gateway under `/gateway` (`gateway.ts`: Connect + protobuf
 * `CommandSession/Start`, `/download`, `/upload`). No previews: Prime has no endpoints declared. Its books
 * (`books.ts`) survive a gateway restart the way a provider's cloud would, and it keeps its port.
 */
import { Effect, type Scope } from "effect"
import { AppConfig } from "../../../src/Config.ts"
import { LocalRuntime, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { answering } from "../../core/emulator/failure.ts"
import { emulatorServeOptions, makeRouter, route, scopedEmulator, servePersistent } from "../../core/emulator/server.ts"
import { type Books, makeBooks } from "./books.ts"
import { makeControl } from "./control.ts"
import { GatewayGone, makeGateway } from "./gateway.ts"
import { answerFailure, errorResponse, json } from "./http.ts"

export interface PrimeEmulatorInfo {
  /** The API base (paths start with `/api/v1`). */
  readonly apiUrl: string
  readonly apiKey: string
}
export interface PrimeEmulatorHandle extends PrimeEmulatorInfo {
  readonly stop: () => void
}

interface Call {
  readonly request: Request
  readonly url: URL
}

const makeApi = (books: Books, runtime: LocalRuntimeShape) => {
  let gatewayEnd: (id: string) => void = () => {}
  const control = makeControl(books, runtime, { onEnd: (s) => gatewayEnd(s.id) })
  const gateway = makeGateway(runtime, (id) => books.state.sandboxes[id])
  gatewayEnd = gateway.endSandbox

  const api = makeRouter<Call>([
    route("POST", "/api/v1/sandbox", ({ request }) => control.create(request)),
    route("GET", "/api/v1/sandbox", ({ url }) => control.list(url)),
    route("GET", "/api/v1/sandbox/:id", (_, { id }) => control.get(id!)),
    route("DELETE", "/api/v1/sandbox/:id", (_, { id }) => control.remove(id!)),
    route("POST", "/api/v1/sandbox/:id/auth", ({ url }, { id }) => gateway.auth(control.sandboxOr404(id!), url.origin))
  ])
  const gatewayRoutes = makeRouter<Call>([
    route("POST", "/gateway/:ns/:job/command_session.CommandSession/Start", ({ request }, { ns, job }) => gateway.start(request, gateway.target(request, ns!, job!))),
    route("GET", "/gateway/:ns/:job/download", ({ request, url }, { ns, job }) => gateway.download(gateway.target(request, ns!, job!), url)),
    route("POST", "/gateway/:ns/:job/upload", ({ request, url }, { ns, job }) => gateway.upload(gateway.target(request, ns!, job!), request, url))
  ])

  const handle = async (request: Request, url: URL): Promise<Response> => {
    const onGateway = url.pathname.startsWith("/gateway/")
    if (!onGateway && request.headers.get("authorization") !== `Bearer ${books.apiKey}`) return errorResponse(401, "Invalid API key")
    const found = (onGateway ? gatewayRoutes : api).match(request.method, url.pathname)
    if (found._tag !== "Found") return errorResponse(found._tag === "MethodNotAllowed" ? 405 : 404, "Not Found")
    return answering((e) => (e instanceof GatewayGone ? json({ error: "sandbox_not_found" }, 502) : answerFailure(e)), () => found.handle({ request, url }))
  }
  return { handle, stop: control.stop }
}

export const startPrimeEmulator = (dataDir: string, runtime: LocalRuntimeShape): PrimeEmulatorHandle => {
  const books = makeBooks(dataDir)
  const api = makeApi(books, runtime)
  const serve = (port: number) =>
    // Command streams are quiet while a command is: no idle timeout cuts them (Bun's longest is 255 s).
    Bun.serve({ ...emulatorServeOptions("prime"), hostname: "127.0.0.1", port, idleTimeout: 0, fetch: (request) => api.handle(request, new URL(request.url)) })
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
export const primeEmulator: Effect.Effect<PrimeEmulatorInfo, never, AppConfig | LocalRuntime | Scope.Scope> = scopedEmulator(startPrimeEmulator, (h) => ({ apiUrl: h.apiUrl, apiKey: h.apiKey }))
