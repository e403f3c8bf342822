/**
 * The Daytona emulator's toolbox (`/toolbox/{id}/…`), the daemon's routes as the SDK (`@daytonaio/sdk`) calls them:
 * one-shot commands and the sandbox's directories (`execute.ts`), sessions (`sessions.ts`), PTY sessions
 * (`pty.ts`), files (`files.ts`) and computer use (`computer.ts`), all over the local runtime. Its errors are the
 * daemon's (`{statusCode, message, code, source: "DAYTONA_DAEMON", …}`, wire.ts); routes of the daemon it does not
 * serve are 404.
 */
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { makeRouter, route } from "../../core/emulator/server.ts"
import type { EmulatedSandbox } from "./books.ts"
import { makeComputerUse } from "./computer.ts"
import type { Execute } from "./execute.ts"
import { makeFiles } from "./files.ts"
import type { Pty } from "./pty.ts"
import type { Sessions } from "./sessions.ts"
import { HttpFailure } from "./wire.ts"

interface Call {
  readonly request: Request
  readonly url: URL
  readonly sandbox: EmulatedSandbox
}

export const makeToolbox = (runtime: LocalRuntimeShape, execute: Execute, sessions: Sessions, pty: Pty) => {
  const files = makeFiles(runtime, execute)

  const router = makeRouter<Call>([
    route("POST", "/process/execute", ({ request, sandbox }) => execute.execute(request, sandbox)),
    route("GET", "/work-dir", ({ sandbox }) => execute.workDir(sandbox)),
    route("GET", "/user-home-dir", ({ sandbox }) => execute.homeDir(sandbox)),
    route("GET", "/process/session", ({ sandbox }) => sessions.list(sandbox)),
    route("POST", "/process/session", ({ request, sandbox }) => sessions.create(request, sandbox)),
    route("GET", "/process/session/:session", ({ sandbox }, { session }) => sessions.get(sandbox, session!)),
    route("DELETE", "/process/session/:session", ({ sandbox }, { session }) => sessions.remove(sandbox, session!)),
    route("POST", "/process/session/:session/exec", ({ request, sandbox }, { session }) => sessions.exec(request, sandbox, session!)),
    route("GET", "/process/session/:session/command/:command", ({ sandbox }, { command, session }) => sessions.commandStatus(sandbox, session!, command!)),
    route("POST", "/process/session/:session/command/:command/input", ({ request, sandbox }, { command, session }) => sessions.sendInput(request, sandbox, session!, command!)),
    // Its WebSocket form is taken before the router (index.ts).
    route("GET", "/process/session/:session/command/:command/logs", ({ request, sandbox }, { command, session }) => sessions.commandLogs(request, sandbox, session!, command!)),
    route("POST", "/process/pty", ({ request, sandbox }) => pty.create(request, sandbox)),
    route("GET", "/process/pty", ({ sandbox }) => pty.list(sandbox)),
    route("GET", "/process/pty/:id", ({ sandbox }, { id }) => pty.get(sandbox, id!)),
    route("DELETE", "/process/pty/:id", ({ sandbox }, { id }) => pty.kill(sandbox, id!)),
    route("POST", "/process/pty/:id/resize", ({ request, sandbox }, { id }) => pty.resize(request, sandbox, id!)),
    // A WebSocket upgrade of these is taken before the router (index.ts); a plain request is refused as Go's upgrader does.
    route("GET", "/process/pty/:id/connect", () => {
      throw new HttpFailure(400, "websocket: the client is not using the websocket protocol")
    }),
    route("GET", "/files", ({ sandbox, url }) => files.list(sandbox, url)),
    route("GET", "/files/info", ({ sandbox, url }) => files.info(sandbox, url)),
    route("GET", "/files/download", ({ request, sandbox, url }) => files.download(request, sandbox, url)),
    route("POST", "/files/bulk-download", ({ request, sandbox }) => files.bulkDownload(request, sandbox)),
    route("POST", "/files/upload-v2", ({ request, sandbox, url }) => files.uploadV2(request, sandbox, url)),
    route("POST", "/files/bulk-upload", ({ request, sandbox }) => files.bulkUpload(request, sandbox)),
    route("POST", "/files/folder", ({ sandbox, url }) => files.folder(sandbox, url)),
    route("DELETE", "/files", ({ sandbox, url }) => files.remove(sandbox, url)),
    ...makeComputerUse(runtime)
  ])

  /** `rest`: the path after `/toolbox/{id}`. */
  return async (request: Request, url: URL, sandbox: EmulatedSandbox, rest: string): Promise<Response> => {
    if (sandbox.state !== "started") throw new HttpFailure(409, "Sandbox is not running")
    const found = router.match(request.method, rest === "/files/" ? "/files" : rest)
    if (found._tag !== "Found") throw new HttpFailure(404, "Not found")
    return found.handle({ request, url, sandbox })
  }
}
