/**
 * A loopback emulator of the Daytona API subset the adapter uses, backed by the local runtime: the control API
 * (`/sandbox…`, signed preview URLs: `control.ts`), the toolbox (`/toolbox/{id}/…`: `toolbox.ts`, its PTY sessions
 * `pty.ts`) and the preview
 * proxy (`/preview/{token}/…` through root-only unix-socket bridges: `preview.ts`). Its books (`books.ts`) survive a gateway restart the way a
 * provider's cloud would, and it keeps its port, which stored sandboxes carry in their toolbox URL.
 */
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { emulatorMessage, emulatorServeOptions, servePersistent, statusOfRuntimeError } from "../../core/emulator/server.ts"
import { isWebSocketUpgrade } from "../../core/websocket.ts"
import { makeBooks } from "./books.ts"
import { makeControl } from "./control.ts"
import { makePreviews } from "./preview.ts"
import { type PreviewSocketData, previewSocketHandlers } from "../../core/emulator/previews.ts"
import { makePty, type PtySocketData } from "./pty.ts"
import { makeToolbox } from "./toolbox.ts"
import { error, Refused } from "./wire.ts"

/** A path segment as sent; a malformed escape names nothing (rather than failing the request). */
const decodeSegment = (segment: string) => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return ""
  }
}

type SocketData = PreviewSocketData | PtySocketData

export interface DaytonaEmulator {
  readonly baseUrl: string
  readonly apiKey: string
  readonly stop: () => void
}

export const startDaytonaEmulator = (dataDir: string, runtime: LocalRuntimeShape): DaytonaEmulator => {
  const books = makeBooks(dataDir)
  let baseUrl = ""
  const previews = makePreviews(books, runtime)
  const control = makeControl(books, runtime, { baseUrl: () => baseUrl, previews })
  const pty = makePty(books, runtime)
  const toolbox = makeToolbox(books, runtime, pty)

  const handle = async (request: Request, server: Bun.Server<SocketData>): Promise<Response | undefined> => {
    const url = new URL(request.url)
    const [first, second, ...rest] = url.pathname.split("/").filter(Boolean)
    if (first === "preview") return previews.proxy(request, second ?? "", rest.join("/"), url, server)
    if (request.headers.get("authorization") !== `Bearer ${books.apiKey}`) return error(401, "Unauthorized")
    if (first === "sandbox") return control(request, url)
    if (first === "toolbox" && second !== undefined) {
      const sandbox = books.findSandbox(decodeSegment(second))
      if (sandbox === undefined) return error(404, "Sandbox not found")
      const [process, kind, id, connect, ...extra] = rest
      if (process === "process" && kind === "pty" && connect === "connect" && extra.length === 0 && isWebSocketUpgrade(request)) {
        if (sandbox.state !== "started") return error(409, "Sandbox is not running")
        return pty.connect(request, server, sandbox, decodeSegment(id ?? ""))
      }
      return toolbox(request, url, sandbox, `/${rest.join("/")}`)
    }
    return error(404, "Not found")
  }

  const serve = (port: number) => Bun.serve<SocketData>({
    ...emulatorServeOptions("daytona"),
    hostname: "127.0.0.1",
    port,
    idleTimeout: 60,
    // Uploads stream through to the runtime, which bounds them (Bun's own default would cut them at 128 MiB).
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    // Two kinds of WebSocket: a preview's (relayed to a sandbox port) and a PTY's.
    websocket: {
      open: (ws) => ("pty" in ws.data ? pty.socketHandlers.open(ws as Bun.ServerWebSocket<PtySocketData>) : previewSocketHandlers.open?.(ws as Bun.ServerWebSocket<PreviewSocketData>)),
      message: (ws, message) =>
        "pty" in ws.data ? pty.socketHandlers.message(ws as Bun.ServerWebSocket<PtySocketData>, message) : previewSocketHandlers.message?.(ws as Bun.ServerWebSocket<PreviewSocketData>, message),
      close: (ws, code, reason) => ("pty" in ws.data ? pty.socketHandlers.close(ws as Bun.ServerWebSocket<PtySocketData>) : previewSocketHandlers.close?.(ws as Bun.ServerWebSocket<PreviewSocketData>, code, reason))
    },
    fetch: async (request, server) => {
      try {
        return await handle(request, server)
      } catch (e) {
        if (e instanceof Refused) return error(e.status, e.message)
        return error(statusOfRuntimeError(e), emulatorMessage(e, "daytona"))
      }
    }
  })
  const server = servePersistent(books.dir, serve)
  baseUrl = `http://127.0.0.1:${server.port}`
  return {
    baseUrl,
    apiKey: books.apiKey,
    stop: () => {
      pty.stop()
      previews.stop()
      server.stop(true)
    }
  }
}
