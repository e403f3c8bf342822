/**
 * A loopback emulator of Blaxel's API as its official SDK (`@blaxel/core`) and the adapter use it, backed by the local runtime (one Blaxel sandbox =
 * one runtime sandbox). One port serves three planes: the control API under `/v0` (`control.ts`), each sandbox's
 * runtime under `/run/{name}` — its `metadata.url` — (`process.ts`, `filesystem.ts`), and public previews under
 * `/preview/{token}` through root-only unix-socket bridges (`preview.ts`). Its books (`books.ts`) survive a gateway
 * restart the way a provider's cloud would, and it keeps its port, which stored sandboxes carry in their URLs.
 */
import { Effect, type Scope } from "effect"
import { AppConfig } from "../../../src/Config.ts"
import { LocalRuntime, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { answering } from "../../core/emulator/failure.ts"
import { emulatorServeOptions, makeRouter, route, scopedEmulator, servePersistent } from "../../core/emulator/server.ts"
import { type Books, type EmulatedSandbox, makeBooks } from "./books.ts"
import { makeControl } from "./control.ts"
import { makeFilesystem, resolvePath } from "./filesystem.ts"
import { answerControlFailure, answerRuntimeFailure, controlError, runtimeError } from "./http.ts"
import { makePreviews } from "./preview.ts"
import { type PreviewSocketData, previewSocketHandlers } from "../../core/emulator/previews.ts"
import { makeProcesses } from "./process.ts"

export interface BlaxelEmulatorInfo {
  /** The control API (`…/v0`). */
  readonly apiUrl: string
  readonly apiKey: string
  readonly workspace: string
  /** The local-runtime jail behind a sandbox name (for its metrics); undefined when there is no such sandbox. */
  readonly runtimeIdOf: (name: string) => string | undefined
}
export interface BlaxelEmulatorHandle extends BlaxelEmulatorInfo {
  readonly stop: () => void
}

interface RuntimeCall {
  readonly request: Request
  readonly url: URL
  readonly sandbox: EmulatedSandbox
  /** The path after `/run/{name}`, as sent (escapes kept). */
  readonly raw: string
}

const makeRuntimePlane = (books: Books, runtime: LocalRuntimeShape) => {
  const processes = makeProcesses(books, runtime)
  const fs = makeFilesystem(runtime)
  const target = ({ raw }: RuntimeCall, decoded: string) => resolvePath(raw, decoded)
  const router = makeRouter<RuntimeCall>([
    route("POST", "/process", ({ request, sandbox }) => processes.start(sandbox, request)),
    route("GET", "/process", ({ sandbox }) => processes.list(sandbox)),
    route("GET", "/process/:id", ({ sandbox }, { id }) => processes.get(sandbox, id!)),
    route("DELETE", "/process/:id", ({ sandbox }, { id }) => processes.stop(sandbox, id!)),
    route("GET", "/process/:id/logs", ({ sandbox }, { id }) => processes.logs(sandbox, id!)),
    route("GET", "/process/:id/logs/stream", ({ request, sandbox }, { id }) => processes.logStream(sandbox, id!, request.signal)),
    route("DELETE", "/process/:id/kill", ({ sandbox }, { id }) => processes.kill(sandbox, id!)),
    route("POST", "/process/:id/stdin", ({ request, sandbox }, { id }) => processes.writeStdin(sandbox, id!, request)),
    route("DELETE", "/process/:id/stdin", ({ sandbox }, { id }) => processes.closeStdin(sandbox, id!)),
    route("POST", "/filesystem-multipart/initiate/*path", (call, { path }) => fs.initiate(call.sandbox, target(call, path!), call.request)),
    route("PUT", "/filesystem-multipart/:upload/part", ({ request, sandbox, url }, { upload }) => fs.part(sandbox, upload!, request, url)),
    route("POST", "/filesystem-multipart/:upload/complete", ({ request, sandbox }, { upload }) => fs.complete(sandbox, upload!, request)),
    route("DELETE", "/filesystem-multipart/:upload/abort", ({ sandbox }, { upload }) => fs.abort(sandbox, upload!)),
    route("GET", "/filesystem/*path", (call, { path }) => fs.get(call.sandbox, target(call, path!), call.request, call.url)),
    route("PUT", "/filesystem/*path", (call, { path }) => fs.put(call.sandbox, target(call, path!), call.request)),
    route("DELETE", "/filesystem/*path", (call, { path }) => fs.remove(call.sandbox, target(call, path!), call.url))
  ])
  return {
    dropSandbox: fs.dropSandbox,
    handle: async (request: Request, url: URL, name: string, raw: string): Promise<Response> => {
      const auth = request.headers.get("authorization") ?? request.headers.get("x-blaxel-authorization")
      if (auth !== `Bearer ${books.apiKey}`) return runtimeError(401, "unauthorized")
      const sandbox = books.state.sandboxes[name]
      if (sandbox === undefined) return runtimeError(404, "sandbox not found")
      const found = router.match(request.method, raw)
      if (found._tag !== "Found") return runtimeError(404, "not found")
      return found.handle({ request, url, sandbox, raw })
    }
  }
}

export const startBlaxelEmulator = (dataDir: string, runtime: LocalRuntimeShape): BlaxelEmulatorHandle => {
  const books = makeBooks(dataDir)
  let baseUrl = ""
  const previews = makePreviews(books, runtime)
  const sandboxRuntime = makeRuntimePlane(books, runtime)
  const control = makeControl(books, runtime, { baseUrl: () => baseUrl, previews, onDeleted: sandboxRuntime.dropSandbox })

  const handle = async (request: Request, url: URL, server: Bun.Server<PreviewSocketData>): Promise<Response | undefined> => {
    const raw = url.pathname
    const [first, second] = raw.split("/").filter(Boolean)
    if (first === "preview") {
      const rest = raw.split("/").slice(3).join("/")
      return previews.proxy(request, second ?? "", rest, url, server)
    }
    if (first === "run" && second !== undefined) {
      let name: string
      try {
        name = decodeURIComponent(second)
      } catch {
        return runtimeError(404, "sandbox not found")
      }
      return answering(answerRuntimeFailure, () => sandboxRuntime.handle(request, url, name, raw.slice(`/run/${second}`.length) || "/"))
    }
    if (first === "v0") {
      return answering(answerControlFailure, () => control.control(request, url))
    }
    return controlError(404, "Not found")
  }

  const serve = (port: number) =>
    Bun.serve<PreviewSocketData>({
      ...emulatorServeOptions("blaxel"),
      hostname: "127.0.0.1",
      port,
      idleTimeout: 60,
      websocket: previewSocketHandlers,
      fetch: (request, server) => handle(request, new URL(request.url), server)
    })
  const server = servePersistent(books.dir, serve)
  baseUrl = `http://127.0.0.1:${server.port}`
  return {
    apiUrl: `${baseUrl}/v0`,
    apiKey: books.apiKey,
    workspace: books.workspace,
    runtimeIdOf: (name) => books.state.sandboxes[name]?.runtimeId,
    stop: () => {
      control.stop()
      previews.stop()
      server.stop(true)
    }
  }
}

/** The emulator for the running gateway: started in the caller's scope, stopped when it closes. */
export const blaxelEmulator: Effect.Effect<BlaxelEmulatorInfo, never, AppConfig | LocalRuntime | Scope.Scope> = scopedEmulator(startBlaxelEmulator, (h) => ({ apiUrl: h.apiUrl, apiKey: h.apiKey, workspace: h.workspace, runtimeIdOf: h.runtimeIdOf }))
