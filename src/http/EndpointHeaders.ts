/**
 * What of a visitor's request never reaches a sandbox through an endpoint: the gateway's own credentials. The
 * page behind an endpoint is the sandbox owner's code, and its visitor's browser may hold a key or a session of
 * the gateway (or its visitor may paste one); the sandbox's app may use cookies and an Authorization of its own
 * (a login of its own, basic auth in front of a preview), so only the gateway's are taken out:
 *
 * - Authorization and Proxy-Authorization that carry a gateway credential (`metal_sk_…`, `metal_ut_…`), in any
 *   scheme: Bearer, Basic (decoded: as user or password), anything else;
 * - X-Metal-Project-ID;
 * - from Cookie, the gateway's own cookies (named with GATEWAY_COOKIE_PREFIX: cookies are not port-scoped, so
 *   the API origin's reach the endpoint listener on the same host) and any cookie whose value carries a gateway
 *   credential; the app's other cookies pass as they came.
 */
import { API_KEY_PREFIX, GATEWAY_COOKIE_PREFIX, USER_TOKEN_PREFIX } from "../domain/Tokens.ts"

const CREDENTIAL = new RegExp(`${API_KEY_PREFIX}|${USER_TOKEN_PREFIX}`, "i")
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/

/** Whether a header value carries a gateway credential, as it is or base64-encoded in one of its words (Basic). */
export const carriesGatewayCredential = (value: string): boolean =>
  CREDENTIAL.test(value) ||
  value.split(/[\s,]+/).some((word) => word.length >= 12 && BASE64.test(word) && CREDENTIAL.test(Buffer.from(word, "base64").toString("latin1")))

/** A cookie the gateway itself sets (its name, after an optional `__Host-` / `__Secure-`). */
const isGatewayCookie = (name: string) => name.replace(/^__(?:Host|Secure)-/i, "").toLowerCase().startsWith(GATEWAY_COOKIE_PREFIX)

/** The Cookie header without the gateway's cookies and credentials; undefined when none is left. */
const visitorCookies = (cookie: string): string | undefined => {
  const kept = cookie.split(";").filter((pair) => {
    const at = pair.indexOf("=")
    const name = (at < 0 ? pair : pair.slice(0, at)).trim()
    return !isGatewayCookie(name) && !carriesGatewayCredential(pair)
  })
  const joined = kept.map((pair) => pair.trim()).filter((pair) => pair !== "").join("; ")
  return joined === "" ? undefined : joined
}

/**
 * What to change in a visitor's headers before they go to the sandbox: a header to drop is named with
 * `undefined`, a header to replace with its new value (the Cookie without the gateway's cookies).
 */
export const withoutGatewayCredentials = (headers: Headers): Record<string, string | undefined> => {
  const changes: Record<string, string | undefined> = {}
  for (const name of ["authorization", "proxy-authorization"]) {
    const value = headers.get(name)
    if (value !== null && carriesGatewayCredential(value)) changes[name] = undefined
  }
  if (headers.has("x-metal-project-id")) changes["x-metal-project-id"] = undefined
  const cookie = headers.get("cookie")
  if (cookie !== null) {
    const kept = visitorCookies(cookie)
    if (kept !== cookie) changes["cookie"] = kept
  }
  return changes
}
