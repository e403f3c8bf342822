/**
 * The dashboard session's cookie and the defences of the routes it authenticates (docs/operations/security.md,
 * "The dashboard").
 *
 * - One cookie, SESSION_COOKIE, named with the gateway's cookie prefix (domain/Tokens.ts GATEWAY_COOKIE_PREFIX):
 *   cookies are not scoped by port, so the endpoint listener on the same host is sent it too, and the endpoint
 *   proxy strips the gateway's cookies by that prefix before a request reaches a sandbox.
 * - `HttpOnly` (no script reads it), `SameSite=Strict`, `Path=/`, host-only (no `Domain`: never sent to the
 *   endpoints' subdomains), and `Secure` when PUBLIC_URL is https.
 * - Cookie-authenticated requests are refused (403 `csrf_failed`) when their `Origin` is another origin than the
 *   API's: SameSite does not tell ports apart, so a page served by a sandbox on the endpoint listener is
 *   same-site. Mutations (every method but GET and HEAD) must also carry `Origin` and the CSRF_HEADER, which a
 *   page of another origin cannot send without a CORS preflight this gateway never grants. A terminal's
 *   WebSocket cannot carry a header, but browsers always send its `Origin`.
 */
import { GATEWAY_COOKIE_PREFIX } from "../domain/Tokens.ts"

export const SESSION_COOKIE = `${GATEWAY_COOKIE_PREFIX}session`

/** The header the dashboard sends with every request (its value is not a secret: its presence is the proof). */
export const CSRF_HEADER = "x-metal-csrf"

export const sessionCookie = (value: string, expiresAt: string, secure: boolean) => {
  const seconds = Math.max(0, Math.floor((Date.parse(expiresAt) - Date.now()) / 1000))
  return `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${seconds}; Expires=${new Date(expiresAt).toUTCString()}${secure ? "; Secure" : ""}`
}

export const clearedSessionCookie = (secure: boolean) =>
  `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT${secure ? "; Secure" : ""}`

/** The session's value in a Cookie header, if any. */
export const sessionFromCookies = (cookie: string | undefined): string | undefined => {
  for (const pair of (cookie ?? "").split(";")) {
    const at = pair.indexOf("=")
    if (at > 0 && pair.slice(0, at).trim() === SESSION_COOKIE) return pair.slice(at + 1).trim()
  }
  return undefined
}

const originOf = (url: string): string | undefined => {
  try {
    const parsed = new URL(url)
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.origin : undefined
  } catch {
    return undefined
  }
}

/**
 * Why a cookie-authenticated request is refused, or undefined when it may go on. The API's origin is PUBLIC_URL's,
 * or the one the request itself was addressed to (its Host, with either scheme: behind a proxy that terminates
 * TLS the gateway sees http). A browser sets Host from the URL it requests, so a page of another origin cannot
 * make its Origin match.
 */
export const csrfRefusal = (request: { readonly method: string; readonly headers: Readonly<Record<string, string | undefined>> }, publicUrl: string): string | undefined => {
  const origin = request.headers["origin"]
  const mutation = request.method !== "GET" && request.method !== "HEAD"
  if (origin === undefined) return mutation ? "A request signed in by the session cookie must carry an Origin header" : undefined
  const from = originOf(origin)
  const host = request.headers["host"]
  const allowed = from !== undefined && (from === originOf(publicUrl) || (host !== undefined && new URL(from).host === host.toLowerCase()))
  if (!allowed) return `A request signed in by the session cookie may come only from the dashboard's origin, not ${origin.slice(0, 200)}`
  if (mutation && request.headers[CSRF_HEADER] === undefined) return `A change signed in by the session cookie must carry the ${CSRF_HEADER} header`
  return undefined
}
