/**
 * The dashboard (docs/guide/dashboard.md), on the API's origin: the page at `/` and at each of its own paths
 * (`/login`, `/o/…`, `/p/…`: the page routes itself), and its hashed assets at `/assets/…`. The assets are built
 * from web/ by scripts/build-web.ts into one module (web/dist/bundle.ts) imported here, so the compiled binary
 * carries them: nothing is read from disk or fetched from elsewhere at run time. The page talks only to `/v1`.
 *
 * Every answer carries a Content-Security-Policy without inline scripts (scripts and connections only from this
 * origin, no frames, no plugins; inline styles are allowed: the terminal sets its own), and is never framed.
 */
import * as zlib from "node:zlib"
import { bundle } from "../../web/dist/bundle.ts"
import { asBody } from "../domain/Bodies.ts"
import { newRequestId, WELL_FORMED_REQUEST_ID } from "./RequestId.ts"

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join("; ")

const SECURITY_HEADERS = {
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin"
}

/** The page's own paths (Bun route patterns): each answers the page, which shows what the path names. */
export const DASHBOARD_PAGES = ["/", "/login", "/o/*", "/p/*"] as const
export const DASHBOARD_ASSETS = "/assets/*"

interface Served {
  readonly type: string
  readonly gzip: Uint8Array<ArrayBuffer>
  readonly plain: Uint8Array<ArrayBuffer>
}

const served = new Map<string, Served>(bundle.map((asset) => {
  const gzip = asBody(Buffer.from(asset.gzip, "base64"))
  return [asset.path, { type: asset.type, gzip, plain: asBody(zlib.gunzipSync(gzip)) }]
}))

/** Every response carries `x-request-id`, as the API's do: a well-formed incoming one echoed, else a new one. */
const requestIdOf = (request: Request) => {
  const incoming = request.headers.get("x-request-id")
  return incoming !== null && WELL_FORMED_REQUEST_ID.test(incoming) ? incoming : newRequestId()
}

const answer = (request: Request, asset: Served, cacheControl: string) => {
  const gzip = /\bgzip\b/.test(request.headers.get("accept-encoding") ?? "")
  const headers: Record<string, string> = { ...SECURITY_HEADERS, "content-type": asset.type, "cache-control": cacheControl, vary: "accept-encoding", "x-request-id": requestIdOf(request) }
  if (gzip) headers["content-encoding"] = "gzip"
  return new Response(request.method === "HEAD" ? null : gzip ? asset.gzip : asset.plain, { headers })
}

const notFound = (request: Request) => {
  const requestId = requestIdOf(request)
  return Response.json(
    { code: "not_found", message: "No such dashboard asset", request_id: requestId, retryable: false },
    { status: 404, headers: { ...SECURITY_HEADERS, "x-request-id": requestId } }
  )
}

/** The page itself, at any of its paths; never cached (it names the current assets). Other methods go to `other`. */
export const dashboardPage = (other: (request: Request, server: Bun.Server<unknown>) => Response | Promise<Response>) =>
  (request: Request, server: Bun.Server<unknown>): Response | Promise<Response> => {
    if (request.method !== "GET" && request.method !== "HEAD") return other(request, server)
    const page = served.get("/index.html")
    return page === undefined ? notFound(request) : answer(request, page, "no-store")
  }

/** A hashed asset: cached for good (its name changes with its content). */
export const dashboardAsset = (request: Request): Response => {
  const asset = request.method === "GET" || request.method === "HEAD" ? served.get(new URL(request.url).pathname) : undefined
  return asset === undefined ? notFound(request) : answer(request, asset, "public, max-age=31536000, immutable")
}
