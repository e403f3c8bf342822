/**
 * A loopback emulator of Daytona's API as its SDK (`@daytonaio/sdk`) and the adapter use it, backed by the local
 * runtime: the control API (`/sandbox…`, signed preview URLs: `control.ts`), the toolbox (`/toolbox/{id}/…`:
 * `toolbox.ts`, with its sessions `sessions.ts`, PTY sessions `pty.ts`, files `files.ts` and one-shot commands
 * `execute.ts`) and the preview proxy (`/preview/{token}/…` through root-only unix-socket bridges: `preview.ts`). Its
 * books (`books.ts`) survive a gateway restart the way a provider's cloud would, and it keeps its port, which stored
 * sandboxes carry in their toolbox URL.
 *
 * Three kinds of WebSocket: a preview's (relayed to a sandbox port), a PTY's (`…/process/pty/{id}/connect` and
 * `…/process/pty/create-connect`) and a session command's logs (`…/command/{id}/logs`). What a sandbox writes
 * crosses the last two: neither is compressed (no permessage-deflate is offered), a PTY client that does not keep
 * up is dropped (the daemon drops it: PTY output is not kept), and the logs are read from the runtime only as fast
 * as the client takes them.
 */
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { answering, asHttpFailure } from "../../core/emulator/failure.ts"
import { emulatorServeOptions, servePersistent } from "../../core/emulator/server.ts"
import { isWebSocketUpgrade } from "../../../src/providers/websocket.ts"
import { makeBooks } from "./books.ts"
import { makeControl } from "./control.ts"
import { makeExecute } from "./execute.ts"
import { makePreviews } from "./preview.ts"
import { type PreviewSocketData, previewSocketHandlers } from "../../core/emulator/previews.ts"
import { makePty, type PtySocketData } from "./pty.ts"
import { type LogsSocketData, makeSessions } from "./sessions.ts"
import { makeToolbox } from "./toolbox.ts"
import { answerFailure, daemonError, error, HttpFailure } from "./wire.ts"

/** A path segment as sent; a malformed escape names nothing (rather than failing the request). */
const decodeSegment = (segment: string) => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return ""
  }
}

type SocketData = PreviewSocketData | PtySocketData | LogsSocketData

export interface DaytonaEmulator {
  readonly baseUrl: string
  readonly apiKey: string
  readonly stop: () => void
}

export const startDaytonaEmulator = (dataDir: string, runtime: LocalRuntimeShape): DaytonaEmulator => {
  const books = makeBooks(dataDir)
  let baseUrl = ""
  const previews = makePreviews(books, runtime)
  const execute = makeExecute(books, runtime)
  const sessions = makeSessions(books, runtime)
  const pty = makePty(books, runtime, execute)
  const control = makeControl(books, runtime, { baseUrl: () => baseUrl, previews, forgetSandbox: sessions.forgetSandbox })
  const toolbox = makeToolbox(runtime, execute, sessions, pty)

  /** A toolbox request (its WebSocket upgrades first); `rest` is the path after `/toolbox/{id}`. */
  const toolboxCall = async (request: Request, url: URL, server: Bun.Server<SocketData>, idOrName: string, rest: Array<string>) => {
    const sandbox = books.findSandbox(idOrName)
    if (sandbox === undefined) throw new HttpFailure(404, "Sandbox not found")
    if (isWebSocketUpgrade(request)) {
      const [process, kind, id, command, commandId, logs, ...extra] = rest
      if (process === "process" && sandbox.state !== "started") throw new HttpFailure(409, "Sandbox is not running")
      if (process === "process" && kind === "pty" && id === "create-connect" && command === undefined) return pty.createConnect(request, url, server, sandbox)
      if (process === "process" && kind === "pty" && command === "connect" && commandId === undefined) return pty.connect(request, server, sandbox, decodeSegment(id ?? ""))
      if (process === "process" && kind === "session" && command === "command" && logs === "logs" && extra.length === 0) {
        return sessions.connectLogs(request, url, server, sandbox, decodeSegment(id ?? ""), decodeSegment(commandId ?? ""))
      }
    }
    return toolbox(request, url, sandbox, `/${rest.join("/")}`)
  }

  const handle = async (request: Request, server: Bun.Server<SocketData>): Promise<Response | undefined> => {
    const url = new URL(request.url)
    const [first, second, ...rest] = url.pathname.split("/").filter(Boolean)
    if (first === "preview") return previews.proxy(request, second ?? "", rest.join("/"), url, server)
    if (request.headers.get("authorization") !== `Bearer ${books.apiKey}`) return error(401, "Unauthorized")
    if (first === "sandbox") return control(request, url)
    if (first === "toolbox" && second !== undefined) {
      try {
        return await toolboxCall(request, url, server, decodeSegment(second), rest)
      } catch (e) {
        // The daemon's error body; a file that is not there is its FILE_NOT_FOUND.
        const f = asHttpFailure(e, "daytona", { codeOf: (status) => (status === 404 && rest[0] === "files" ? "FILE_NOT_FOUND" : undefined) })
        return daemonError(request, f.status, f.message, f.code)
      }
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
    websocket: {
      // Nothing a sandbox writes is compressed on the way, nor a client's input inflated.
      perMessageDeflate: false,
      open: (ws) =>
        "pty" in ws.data
          ? pty.socketHandlers.open(ws as Bun.ServerWebSocket<PtySocketData>)
          : "logs" in ws.data
          ? sessions.socketHandlers.open(ws as Bun.ServerWebSocket<LogsSocketData>)
          : previewSocketHandlers.open?.(ws as Bun.ServerWebSocket<PreviewSocketData>),
      message: (ws, message) =>
        "pty" in ws.data
          ? pty.socketHandlers.message(ws as Bun.ServerWebSocket<PtySocketData>, message)
          : "logs" in ws.data
          ? undefined // the daemon reads nothing from a logs client but its close
          : previewSocketHandlers.message?.(ws as Bun.ServerWebSocket<PreviewSocketData>, message),
      drain: (ws) => ("logs" in ws.data ? sessions.socketHandlers.drain(ws as Bun.ServerWebSocket<LogsSocketData>) : undefined),
      close: (ws, code, reason) =>
        "pty" in ws.data
          ? pty.socketHandlers.close(ws as Bun.ServerWebSocket<PtySocketData>)
          : "logs" in ws.data
          ? sessions.socketHandlers.close(ws as Bun.ServerWebSocket<LogsSocketData>)
          : previewSocketHandlers.close?.(ws as Bun.ServerWebSocket<PreviewSocketData>, code, reason)
    },
    fetch: (request, server) => answering(answerFailure, () => handle(request, server))
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
