/**
 * Requests to exactly the address the policy checked (Targets.ts). The URL given to fetch carries that IP address,
 * so nothing resolves the name a second time; the `Host` header and the TLS server name stay the URL's host, so
 * virtual hosting and certificate checks work as for the name. fetch never follows a redirect by itself:
 * `fetchChecked` follows at most the number its caller allows, checking every hop again.
 */
import { Effect } from "effect"
import { type AddressPolicy, checkUrl, type Target } from "./Targets.ts"

/** The URL fetch is given: the checked address in place of the host name. */
export const pinnedUrl = (target: Target): string => {
  const url = new URL(target.url.href)
  url.hostname = target.address.family === 6 ? `[${target.address.address}]` : target.address.address
  return url.href
}

export interface PinnedInit {
  readonly method?: string
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string
  readonly signal?: AbortSignal
}

/** One request to the checked address; a redirect comes back as it is. */
export const pinnedFetch = (target: Target, init: PinnedInit): Promise<Response> => {
  const isName = !target.hostname.startsWith("[") && !/^[\d.]+$/.test(target.hostname)
  return fetch(pinnedUrl(target), {
    method: init.method ?? "GET",
    headers: { ...init.headers, host: target.url.host },
    ...(init.body !== undefined ? { body: init.body } : {}),
    redirect: "manual",
    ...(init.signal !== undefined ? { signal: init.signal } : {}),
    ...(target.url.protocol === "https:" && isName ? { tls: { serverName: target.hostname } } : {})
  })
}

/** A request the policy did not let out: `refused` (the address or URL), `unresolved`, or a redirect it would not follow. */
export class OutboundRefused extends Error {
  constructor(readonly kind: "refused" | "unresolved" | "redirect", message: string) {
    super(message)
  }
}

const REDIRECTS = new Set([301, 302, 303, 307, 308])
/** Headers that belong to one origin: never carried to another by a redirect. */
const ORIGIN_BOUND = ["authorization", "cookie", "proxy-authorization"]

export interface CheckedFetchOptions {
  readonly policy: AddressPolicy
  /** Redirects followed (each hop checked again); 0 hands a redirect back to the caller. */
  readonly maxRedirects: number
  /** A rule of the caller's on top of the address policy (for a registry: plain HTTP only on loopback); the reason it refuses `url`. */
  readonly refuseUrl?: ((url: URL) => string | undefined) | undefined
}

/**
 * A GET or HEAD (no body) through the policy, hop by hop: every URL, the first and each redirect's, is checked and
 * pinned; credentials are dropped when a redirect leaves the origin. Fails with OutboundRefused, or fetch's own
 * error when the connection fails.
 */
export const fetchChecked = async (url: string | URL, init: Omit<PinnedInit, "body">, options: CheckedFetchOptions): Promise<Response> => {
  let current = new URL(url)
  let headers: Record<string, string> = { ...init.headers }
  for (let hop = 0; ; hop++) {
    const ruled = options.refuseUrl?.(current)
    if (ruled !== undefined) throw new OutboundRefused("refused", ruled)
    const checked = await Effect.runPromise(checkUrl(current, options.policy))
    if (checked._tag === "Refused") throw new OutboundRefused("refused", checked.reason)
    if (checked._tag === "Unresolved") throw new OutboundRefused("unresolved", checked.reason)
    const response = await pinnedFetch(checked.target, { ...init, headers })
    const location = response.headers.get("location")
    if (!REDIRECTS.has(response.status) || location === null || options.maxRedirects === 0) return response
    await response.body?.cancel().catch(() => undefined)
    if (hop >= options.maxRedirects) throw new OutboundRefused("redirect", `more than ${options.maxRedirects} redirects`)
    let next: URL
    try {
      next = new URL(location, current)
    } catch {
      throw new OutboundRefused("redirect", "a redirect names no valid URL")
    }
    if (next.origin !== current.origin) headers = Object.fromEntries(Object.entries(headers).filter(([k]) => !ORIGIN_BOUND.includes(k.toLowerCase())))
    current = next
  }
}
