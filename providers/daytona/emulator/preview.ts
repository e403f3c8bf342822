/**
 * The Daytona emulator's preview proxy (`/preview/{token}/…`): a live signed preview forwards to its sandbox's
 * port through the runtime's port bridge, by way of a loopback listener per sandbox and port.
 */
import * as net from "node:net"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Books } from "./books.ts"
import { error } from "./wire.ts"

export const makePreview = (books: Books, runtime: LocalRuntimeShape) => {
  const bridges = new Map<string, Promise<number>>()

  /** A loopback TCP listener that pipes to the sandbox's port through the runtime's bridge. */
  const bridgePort = (sandboxId: string, port: number) => {
    const key = `${sandboxId}:${port}`
    let pending = bridges.get(key)
    if (pending === undefined) {
      pending = new Promise<number>((resolve) => {
        const server = net.createServer((client) => {
          client.pause()
          run(runtime.connectPort(sandboxId, port)).then(
            (upstream) => {
              client.pipe(upstream)
              upstream.pipe(client)
              client.resume()
              upstream.on("error", () => client.destroy())
              client.on("error", () => upstream.destroy())
            },
            () => client.destroy()
          )
        })
        server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port))
      })
      bridges.set(key, pending)
    }
    return pending
  }

  const preview = async (request: Request, token: string, rest: string, url: URL): Promise<Response> => {
    const entry = books.state.previews[token]
    if (entry === undefined || entry.expiresAt <= Date.now()) return error(404, "Preview not found or expired")
    const port = await bridgePort(entry.sandboxId, entry.port)
    try {
      const upstream = await fetch(`http://127.0.0.1:${port}/${rest}${url.search}`, {
        method: request.method,
        headers: request.headers,
        redirect: "manual",
        ...(request.method === "GET" || request.method === "HEAD" ? {} : { body: request.body, duplex: "half" } as RequestInit)
      })
      return new Response(upstream.body, { status: upstream.status, headers: upstream.headers })
    } catch {
      return error(502, "Nothing answers on that port")
    }
  }

  return {
    preview,
    /** The sandbox is gone or stopped. */
    closeSandbox: (_sandboxId: string) => {},
    /** The preview was expired. */
    closePreview: (_token: string) => {},
    stop: () => {}
  }
}
