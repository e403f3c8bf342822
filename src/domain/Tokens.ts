/**
 * Bearer secrets: their prefixes and shape, how they are made (CSPRNG) and how they are kept (only the SHA-256 of
 * a secret is stored; comparisons of hashes are constant-time).
 */
import * as crypto from "node:crypto"

export const USER_TOKEN_PREFIX = "metal_ut_"
export const API_KEY_PREFIX = "metal_sk_"
/**
 * Every cookie the gateway sets (the dashboard's session, …) is named with this prefix, after an optional
 * `__Host-` or `__Secure-`: cookies are not scoped by port, so the API origin's cookies also reach the endpoint
 * listener on the same host, and the endpoint proxy strips cookies by this name (src/http/EndpointHeaders.ts).
 */
export const GATEWAY_COOKIE_PREFIX = "metal_gw_"
/** What a bearer secret may look like at all (checked before any lookup). */
export const TOKEN_SHAPE = /^[A-Za-z0-9_-]{20,200}$/

export const sha256Hex = (input: string | Uint8Array): string => crypto.createHash("sha256").update(input).digest("hex")

/** `prefix` + base64url of 32 random bytes (43 characters). */
export const randomToken = (prefix: string): string => prefix + crypto.randomBytes(32).toString("base64url")

export const timingSafeEqualHex = (a: string, b: string): boolean =>
  a.length === b.length && crypto.timingSafeEqual(Buffer.from(a, "hex"), Buffer.from(b, "hex"))

/** A dashboard session (the value of its cookie, src/http/SessionCookie.ts): never a bearer token. */
export const SESSION_TOKEN_PREFIX = "metal_us_"
/** A one-time sign-in link's code (`login-link` in the operator CLI): exchanged once for a session. */
export const LOGIN_CODE_PREFIX = "metal_ll_"
