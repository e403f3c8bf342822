/**
 * One delivery attempt on the wire: a POST to exactly the address the URL policy checked (Targets.ts), pinned by
 * src/net/Fetch.ts (the `Host` header and the TLS server name stay the URL's host). Redirects are not followed;
 * the whole exchange has one deadline; at most 1 MiB of the answer is read and its first 4,096 bytes kept. An
 * interrupted attempt (the gateway shutting down) closes its connection at once, not at its deadline.
 */
import { Effect } from "effect"
import { pinnedFetch } from "../../net/Fetch.ts"
import type { Target } from "../../net/Targets.ts"

export const SNIPPET_BYTES = 4096
const READ_LIMIT = 1024 * 1024

export type SendResult =
  | { readonly _tag: "Response"; readonly status: number; readonly retryAfter: string | null; readonly snippet: string | null }
  | { readonly _tag: "NoResponse"; readonly error: string }

const readSnippet = async (response: Response): Promise<string | null> => {
  if (response.body === null) return null
  const reader = response.body.getReader()
  const kept: Array<Uint8Array> = []
  let keptBytes = 0
  let read = 0
  try {
    while (read < READ_LIMIT) {
      const { done, value } = await reader.read()
      if (done) break
      read += value.byteLength
      if (keptBytes < SNIPPET_BYTES) {
        const part = value.subarray(0, SNIPPET_BYTES - keptBytes)
        kept.push(part)
        keptBytes += part.byteLength
      }
    }
  } catch {
    // A body cut short (deadline, reset) still leaves what arrived; the status decides the outcome.
  } finally {
    reader.cancel().catch(() => undefined)
  }
  if (keptBytes === 0) return null
  return new TextDecoder("utf-8", { fatal: false }).decode(Buffer.concat(kept))
}

const describeFailure = (e: unknown, timeoutMs: number): string => {
  const name = (e as { name?: unknown })?.name
  if (name === "TimeoutError" || name === "AbortError") return `no response within ${timeoutMs} ms`
  const code = (e as { code?: unknown })?.code
  return `the connection failed (${typeof code === "string" && code !== "" ? code : "network error"})`
}

export const send = (request: {
  readonly target: Target
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  readonly timeoutMs: number
}): Effect.Effect<SendResult> =>
  Effect.promise(async (interrupted): Promise<SendResult> => {
    try {
      const response = await pinnedFetch(request.target, {
        method: "POST",
        headers: request.headers,
        body: request.body,
        signal: AbortSignal.any([AbortSignal.timeout(request.timeoutMs), interrupted])
      })
      const snippet = await readSnippet(response)
      return { _tag: "Response", status: response.status, retryAfter: response.headers.get("retry-after"), snippet }
    } catch (e) {
      return { _tag: "NoResponse", error: describeFailure(e, request.timeoutMs) }
    }
  })
