/**
 * A loopback emulator of the E2B wire subset the adapter uses, over the local runtime (one E2B sandbox = one
 * runtime sandbox). One port serves both planes, routed the way E2B routes them: requests carrying
 * `E2b-Sandbox-Id` (or a `49983-<id>.` host) go to envd (`envd.ts`), the rest to the control API (`control.ts`).
 * State lives in DATA_DIR/emulators/e2b/state.json and the port is kept, so a restarted gateway finds its
 * sandboxes and processes again. Every template name runs on the runtime's one base system; the `desktop` template
 * (E2B's Desktop SDK) gets the runtime's desktop as its display (desktop.ts).
 */
import { Context, Effect, Layer, type Scope } from "effect"
import { AppConfig } from "../../../src/Config.ts"
import { LocalRuntime, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { answering } from "../../core/emulator/failure.ts"
import { emulatorServeOptions, scopedEmulator, servePersistent } from "../../core/emulator/server.ts"
import { ENVD_PORT } from "../adapter/wire.ts"
import { makeBooks } from "./books.ts"
import { makeControl } from "./control.ts"
import { makeEnvd } from "./envd.ts"
import { answerFailure } from "./http.ts"

export interface E2BEmulatorInfo {
  readonly apiUrl: string
  /** envd base, header-routed (the same host as the API, as `sandbox.e2b.app` is for the real thing). */
  readonly sandboxUrl: string
  readonly apiKey: string
}
export interface E2BEmulatorHandle extends E2BEmulatorInfo {
  readonly stop: () => void
}

const HOST_ROUTED = new RegExp(`^${ENVD_PORT}-([a-z0-9]+)\\.`)

export const startE2BEmulator = (dataDir: string, runtime: LocalRuntimeShape): E2BEmulatorHandle => {
  const books = makeBooks(dataDir, runtime)
  const control = makeControl(books)
  const { envd } = makeEnvd(books)
  const serve = (port: number) =>
    Bun.serve({
      ...emulatorServeOptions("e2b"),
      hostname: "127.0.0.1",
      port,
      idleTimeout: 0,
      // Uploads stream through to the runtime, which bounds them (Bun's own default would cut them at 128 MiB).
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      fetch: async (request) => {
        const url = new URL(request.url)
        const sandboxId = request.headers.get("e2b-sandbox-id") ?? HOST_ROUTED.exec(url.hostname)?.[1]
        return answering(answerFailure, () => (sandboxId !== null && sandboxId !== undefined ? envd(request, url, sandboxId) : control.control(request, url)))
      }
    })
  const server = servePersistent(books.dir, serve)
  const base = `http://127.0.0.1:${server.port}`
  return {
    apiUrl: base,
    sandboxUrl: base,
    apiKey: books.apiKey,
    stop: () => {
      control.stop()
      books.dropAllStreams("the emulator stopped")
      server.stop(true)
    }
  }
}

/** The emulator for the running gateway: started in the caller's scope, stopped when it closes. */
export const e2bEmulator: Effect.Effect<E2BEmulatorInfo, never, AppConfig | LocalRuntime | Scope.Scope> = scopedEmulator(startE2BEmulator, (h) => ({ apiUrl: h.apiUrl, sandboxUrl: h.sandboxUrl, apiKey: h.apiKey }))

export class E2BEmulator extends Context.Tag("providers/e2b/E2BEmulator")<E2BEmulator, E2BEmulatorInfo>() {}
export const E2BEmulatorLive = Layer.scoped(E2BEmulator, e2bEmulator)
