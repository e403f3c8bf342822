/**
 * The Blaxel emulator's public previews and their proxy (`/preview/{token}/…`), on the kit's preview leases
 * (`core/emulator/previews.ts`: a bridge per preview, a unix socket in a root-only directory, never a TCP port). A
 * preview ends at its ttl, when it is deleted through the API, or when its sandbox is deleted: its bridge closes
 * then, cutting the connections through it.
 */
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { makePreviewLeases, type PreviewSocketData } from "../../core/emulator/previews.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Books } from "./books.ts"
import { controlError } from "./http.ts"

export const makePreviews = (books: Books, runtime: LocalRuntimeShape) => {
  const { state } = books
  const leases = makePreviewLeases({ dir: books.dir, previews: () => state.previews, save: books.save })

  /** A request (or a WebSocket: undefined once upgraded) to the preview's port. */
  const proxy = async (request: Request, token: string, rest: string, url: URL, server: Bun.Server<PreviewSocketData>): Promise<Response | undefined> => {
    const entry = state.previews[token]
    if (entry === undefined || entry.expiresAt <= Date.now()) return controlError(404, "Preview not found")
    const sandbox = state.sandboxes[entry.sandbox]
    if (sandbox === undefined) return controlError(404, "Preview not found")
    const answer = await leases.pass(request, server, token, entry.sandbox, `${rest}${url.search}`, () => run(runtime.connectPort(sandbox.runtimeId, entry.port)))
    return answer === null ? controlError(502, "Nothing answers on that port") : answer
  }

  return { proxy, arm: leases.arm, drop: leases.drop, closeSandbox: leases.closeSandbox, stop: leases.stop }
}

export type Previews = ReturnType<typeof makePreviews>
