/**
 * A loopback emulator of Freestyle's API as its official SDK (`freestyle` 0.2.17) and the adapter use it, backed by
 * the local runtime (one VM = one runtime sandbox, under the VM's id). One port serves the API under `/v5`: VMs
 * (`control.ts`), `exec-await` (`process.ts`) and the `fs/*` routes (`filesystem.ts`). The SDK's background-request
 * header (`x-freestyle-background-after-secs`) is a hint: every call is answered when done, never with a 202. Requests need the emulator's key as a Bearer. No domains
 * or public ports are served: the adapter declares no endpoints. Its books (`books.ts`) survive a gateway restart
 * the way Freestyle's would, and it keeps its port.
 */
import { Effect, type Scope } from "effect"
import { AppConfig } from "../../../src/Config.ts"
import { LocalRuntime, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { answering } from "../../core/emulator/failure.ts"
import { emulatorServeOptions, makeRouter, route, scopedEmulator, servePersistent } from "../../core/emulator/server.ts"
import { makeBooks, type Vm } from "./books.ts"
import { makeControl } from "./control.ts"
import { makeFilesystem } from "./filesystem.ts"
import { answerFailure, errorResponse } from "./http.ts"
import { makeExecAwait } from "./process.ts"

export interface FreestyleEmulatorInfo {
  /** The API origin (paths start with `/v5`). */
  readonly apiUrl: string
  readonly apiKey: string
}
export interface FreestyleEmulatorHandle extends FreestyleEmulatorInfo {
  readonly stop: () => void
}

interface Call {
  readonly request: Request
  readonly url: URL
  /** The running VM the path names (404 when there is none, 409 when it does not run). */
  readonly vm: () => Vm
}

export const startFreestyleEmulator = (dataDir: string, runtime: LocalRuntimeShape): FreestyleEmulatorHandle => {
  const books = makeBooks(dataDir)
  const control = makeControl(books, runtime, { onDeleted: () => {} })
  const execAwait = makeExecAwait(runtime)
  const fs = makeFilesystem(runtime)

  const router = makeRouter<Call>([
    route("POST", "/v5/vms", ({ request }) => control.create(request)),
    route("GET", "/v5/vms", ({ url }) => control.list(url)),
    route("GET", "/v5/vms/:id", (_, { id }) => control.get(id!)),
    route("PATCH", "/v5/vms/:id", ({ request }, { id }) => control.update(request, id!)),
    route("DELETE", "/v5/vms/:id", (_, { id }) => control.remove(id!)),
    route("POST", "/v5/vms/:id/resize", ({ request }, { id }) => control.resize(request, id!)),
    route("POST", "/v5/vms/:id/pause", (_, { id }) => control.pause(id!)),
    route("POST", "/v5/vms/:id/start", (_, { id }) => control.start(id!)),
    route("POST", "/v5/vms/:id/exec-await", ({ request, vm }) => execAwait(vm(), request)),
    route("GET", "/v5/vms/:id/fs/stat", ({ url, vm }) => fs.stat(vm(), url)),
    route("GET", "/v5/vms/:id/fs/read", ({ url, request, vm }) => fs.read(vm(), url, request)),
    route("PUT", "/v5/vms/:id/fs/write", ({ url, request, vm }) => fs.write(vm(), url, request)),
    route("POST", "/v5/vms/:id/fs/mkdir", ({ request, vm }) => fs.mkdir(vm(), request)),
    route("GET", "/v5/vms/:id/fs/dir", ({ url, vm }) => fs.dir(vm(), url)),
    route("GET", "/v5/vms/:id/fs/exists", ({ url, vm }) => fs.exists(vm(), url)),
    route("DELETE", "/v5/vms/:id/fs/remove", ({ url, vm }) => fs.remove(vm(), url)),
    route("POST", "/v5/vms/:id/fs/uploads", ({ request, vm }) => fs.startUpload(vm(), request)),
    route("GET", "/v5/vms/:id/fs/uploads/:upload", ({ vm }, { upload }) => fs.uploadStatus(vm(), upload!)),
    route("PUT", "/v5/vms/:id/fs/uploads/:upload", ({ url, request, vm }, { upload }) => fs.putUpload(vm(), upload!, url, request)),
    route("POST", "/v5/vms/:id/fs/uploads/:upload/commit", ({ vm }, { upload }) => fs.commit(vm(), upload!)),
    route("DELETE", "/v5/vms/:id/fs/uploads/:upload", ({ vm }, { upload }) => fs.abort(vm(), upload!))
  ])

  const handle = async (request: Request, url: URL): Promise<Response> => {
    if (request.headers.get("authorization") !== `Bearer ${books.apiKey}`) return errorResponse(401, "UNAUTHORIZED", "Invalid API key")
    const found = router.match(request.method, url.pathname)
    if (found._tag !== "Found") return errorResponse(found._tag === "MethodNotAllowed" ? 405 : 404, "NOT_FOUND", "Not found")
    let id = ""
    try {
      id = decodeURIComponent(url.pathname.split("/")[3] ?? "")
    } catch {
      // matched nothing anyway
    }
    return answering(answerFailure, () => found.handle({ request, url, vm: () => control.runningVm(id) }))
  }

  const serve = (port: number) =>
    Bun.serve({
      ...emulatorServeOptions("freestyle"),
      hostname: "127.0.0.1",
      port,
      idleTimeout: 60,
      fetch: (request, server) => {
        // exec-await is held for up to 300 s, beyond any idle timeout: none for it.
        if (request.method === "POST" && request.url.endsWith("/exec-await")) server.timeout(request, 0)
        return handle(request, new URL(request.url))
      }
    })
  const server = servePersistent(books.dir, serve)
  return {
    apiUrl: `http://127.0.0.1:${server.port}`,
    apiKey: books.apiKey,
    stop: () => {
      control.stop()
      server.stop(true)
    }
  }
}

/** The emulator for the running gateway: started in the caller's scope, stopped when it closes. */
export const freestyleEmulator: Effect.Effect<FreestyleEmulatorInfo, never, AppConfig | LocalRuntime | Scope.Scope> = scopedEmulator(startFreestyleEmulator, (h) => ({ apiUrl: h.apiUrl, apiKey: h.apiKey }))
