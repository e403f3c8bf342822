/**
 * The Blaxel emulator's public previews and their proxy (`/preview/{token}/…`): a live preview forwards to its
 * sandbox's port through a bridge (`core/emulator/bridges.ts`: a unix socket in a root-only directory, never a TCP
 * port), one per preview. A preview ends at its ttl, when it is deleted through the API, or when its sandbox is
 * deleted: its bridge closes then, cutting the connections through it.
 */
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { makePortBridges } from "../../core/emulator/bridges.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Books } from "./books.ts"
import { controlError } from "./http.ts"

/** setTimeout's longest delay. */
const MAX_TIMER_MS = 2 ** 31 - 1

export const makePreviews = (books: Books, runtime: LocalRuntimeShape) => {
  const { state, save } = books
  const bridges = makePortBridges(books.dir)
  const timers = new Map<string, ReturnType<typeof setTimeout>>()

  /** The preview is over: its record, its timer and its bridge go. */
  const drop = (token: string) => {
    clearTimeout(timers.get(token))
    timers.delete(token)
    bridges.close(token)
    if (state.previews[token] !== undefined) {
      delete state.previews[token]
      save()
    }
  }
  /** A preview ends at its expiry, whether or not anything uses it (one longer than a timer can wait is re-armed). */
  const arm = (token: string) => {
    const preview = state.previews[token]
    if (preview === undefined) return
    clearTimeout(timers.get(token))
    const wait = Math.max(0, preview.expiresAt - Date.now())
    timers.set(token, setTimeout(() => (wait > MAX_TIMER_MS ? arm(token) : drop(token)), Math.min(wait, MAX_TIMER_MS)))
  }
  for (const token of Object.keys(state.previews)) arm(token)

  const proxy = async (request: Request, token: string, rest: string, url: URL): Promise<Response> => {
    const entry = state.previews[token]
    if (entry === undefined || entry.expiresAt <= Date.now()) return controlError(404, "Preview not found")
    const sandbox = state.sandboxes[entry.sandbox]
    if (sandbox === undefined) return controlError(404, "Preview not found")
    const bridge = bridges.open(token, entry.sandbox, () => run(runtime.connectPort(sandbox.runtimeId, entry.port)))
    try {
      await bridge.ready
      const upstream = await fetch(`http://sandbox/${rest}${url.search}`, {
        unix: bridge.socketPath,
        method: request.method,
        headers: request.headers,
        redirect: "manual",
        // The caller going away ends the exchange with the sandbox too.
        signal: request.signal,
        ...(request.method === "GET" || request.method === "HEAD" ? {} : { body: request.body, duplex: "half" })
      } as RequestInit)
      return new Response(upstream.body, { status: upstream.status, headers: upstream.headers })
    } catch {
      return controlError(502, "Nothing answers on that port")
    }
  }

  return {
    proxy,
    arm,
    drop,
    /** The sandbox went: nothing reaches it any more. */
    closeSandbox: bridges.closeSandbox,
    stop: () => {
      for (const timer of timers.values()) clearTimeout(timer)
      bridges.closeAll()
    }
  }
}

export type Previews = ReturnType<typeof makePreviews>
