/**
 * The dashboard's edge over real HTTP: the page and its assets carry a Content-Security-Policy without inline
 * scripts; signing in sets an HttpOnly, SameSite=Strict cookie; a cookie-signed change from another origin (the
 * endpoint listener's included: same host, same site), without Origin or without the CSRF header is refused;
 * a one-time link signs in once; signing out makes the cookie worthless; and the project-path routes the
 * dashboard drives answer members only.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Bootstrap, bootstrap, expectEnvelope, type RunningServer, runCli, startServer } from "../support/server.ts"

let server: RunningServer
let owner: Bootstrap
let stranger: Bootstrap
let http: ReturnType<typeof api>

const CSRF = { "x-metal-csrf": "1" }

/** Signs in with the owner's token as the page does; answers the cookie header to send back. */
const signIn = async (body: Record<string, string> = { user_token: owner.user_token }) => {
  const answer = await http.post("/v1/sessions", { body, headers: { origin: server.url, ...CSRF } })
  expect(answer.status, answer.text).toBe(201)
  const setCookie = answer.headers.get("set-cookie")!
  return { setCookie, cookie: setCookie.split(";")[0]!, answer }
}

describe("the dashboard's edge", () => {
  beforeAll(async () => {
    server = await startServer()
    http = api(server.url)
    owner = await bootstrap(server.dataDir, "edge-owner@example.com")
    stranger = await bootstrap(server.dataDir, "edge-stranger@example.com")
  }, 120_000)
  afterAll(() => server?.stop())

  it("serves the page and its assets with a Content-Security-Policy without inline scripts", async () => {
    const page = await fetch(`${server.url}/`)
    const html = await page.text()
    const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!)
    expect(assets.length).toBeGreaterThanOrEqual(2)
    // Every script is a file of this origin: none is inline.
    expect([...html.matchAll(/<script\b([^>]*)>/g)].every((m) => /\bsrc="\/assets\//.test(m[1]!))).toBe(true)
    for (const path of ["/", "/login", "/o/anything", "/p/prj_anything/sandboxes/sbx_x", ...assets, "/assets/missing.js"]) {
      const response = await fetch(server.url + path)
      const csp = response.headers.get("content-security-policy") ?? ""
      expect(csp, path).toContain("script-src 'self'")
      expect(csp, path).toContain("frame-ancestors 'none'")
      expect(csp.split(";").find((d) => d.trim().startsWith("script-src")), path).not.toContain("unsafe")
      expect(response.headers.get("x-content-type-options"), path).toBe("nosniff")
      expect(response.status, path).toBe(path === "/assets/missing.js" ? 404 : 200)
    }
    expect((await fetch(`${server.url}${assets[0]}`)).headers.get("cache-control")).toContain("immutable")
    // The API, its docs and its health are untouched.
    expect((await fetch(`${server.url}/ready`)).status).toBe(200)
    expect((await fetch(`${server.url}/docs`)).status).toBe(200)
    expectEnvelope(await http.get("/v1/nothing-here"), 404, "not_found")
    // Another method on a page is the API's answer, not the page.
    expectEnvelope(await http.post("/login", { headers: { origin: server.url } }), 404)
  })

  it("signs in with a token: an HttpOnly, SameSite=Strict cookie, and only from the dashboard's origin", async () => {
    const { setCookie, answer } = await signIn()
    expect(setCookie).toMatch(/^metal_gw_session=metal_us_[A-Za-z0-9_-]{43}; /)
    expect(setCookie).toContain("HttpOnly")
    expect(setCookie).toContain("SameSite=Strict")
    expect(setCookie).toContain("Path=/")
    expect(setCookie).not.toContain("Domain")
    expect(setCookie).not.toContain("Secure")
    expect(answer.body).toMatchObject({ user: { id: owner.user_id, email: "edge-owner@example.com" }, via: "session" })

    expectEnvelope(await http.post("/v1/sessions", { body: { user_token: owner.user_token }, headers: CSRF }), 403, "csrf_failed")
    expectEnvelope(await http.post("/v1/sessions", { body: { user_token: owner.user_token }, headers: { origin: server.url } }), 403, "csrf_failed")
    expectEnvelope(await http.post("/v1/sessions", { body: { user_token: owner.user_token }, headers: { origin: server.endpointUrl, ...CSRF } }), 403, "csrf_failed")
    expectEnvelope(await http.post("/v1/sessions", { body: { user_token: `${owner.user_token}x` }, headers: { origin: server.url, ...CSRF } }), 401, "unauthenticated")
    expectEnvelope(await http.post("/v1/sessions", { body: { user_token: owner.api_key }, headers: { origin: server.url, ...CSRF } }), 401, "unauthenticated")
    expectEnvelope(await http.post("/v1/sessions", { body: { password: "x" }, headers: { origin: server.url, ...CSRF } }), 422, "validation_error")
  })

  it("refuses a cookie-signed change from another origin, without Origin, or without the CSRF header", async () => {
    const { cookie } = await signIn()
    const create = (headers: Record<string, string>, slug: string) =>
      http.post(`/v1/organizations/${owner.organization_id}/projects`, { body: { name: slug, slug }, headers: { cookie, ...headers } })
    // The endpoint listener is the same host on another port: same site, so SameSite does not stop it; Origin does.
    for (const origin of [server.endpointUrl, "https://evil.example", "null"]) {
      const refused = expectEnvelope(await create({ origin, ...CSRF }, "from-elsewhere"), 403, "csrf_failed")
      expect(refused.message).toContain("dashboard's origin")
    }
    expectEnvelope(await create(CSRF, "no-origin"), 403, "csrf_failed")
    expectEnvelope(await create({ origin: server.url }, "no-header"), 403, "csrf_failed")
    const made = await create({ origin: server.url, ...CSRF }, "from-the-dashboard")
    expect(made.status, made.text).toBe(201)
    // Reads: the page's own (no Origin on a same-origin GET) pass; another origin's are refused too.
    expect((await http.get(`/v1/organizations/${owner.organization_id}/projects`, { headers: { cookie } })).status).toBe(200)
    expectEnvelope(await http.get(`/v1/organizations/${owner.organization_id}/projects`, { headers: { cookie, origin: server.endpointUrl } }), 403, "csrf_failed")
    // A terminal's WebSocket handshake (a GET with the browser's Origin) is checked the same way.
    expectEnvelope(await http.get(`/v1/projects/${owner.project_id}/sandboxes/sbx_none/processes/proc_none/attach`, { headers: { cookie, origin: server.endpointUrl } }), 403, "csrf_failed")
    // A bearer token is not a cookie: no Origin rules for API clients.
    expect((await http.post(`/v1/organizations/${owner.organization_id}/projects`, { token: owner.user_token, body: { name: "by-token", slug: "by-token" }, headers: { origin: "https://evil.example" } })).status).toBe(201)
    // The session's value is no bearer token.
    const value = cookie.split("=")[1]!
    expectEnvelope(await http.get("/v1/organizations", { token: value }), 401, "unauthenticated")
  })

  it("signs in with a one-time link once", async () => {
    const link = await runCli(server.dataDir, ["login-link", "--email", "edge-owner@example.com", "--json"], { PUBLIC_URL: server.url })
    expect(link.code, link.stderr).toBe(0)
    const { url, expires_at } = JSON.parse(link.stdout) as { url: string; expires_at: string }
    expect(Date.parse(expires_at) - Date.now()).toBeLessThanOrEqual(600_000)
    const code = new URL(url).hash.replace("#code=", "")
    const first = await signIn({ login_code: code })
    expect(first.answer.body.user.email).toBe("edge-owner@example.com")
    expectEnvelope(await http.post("/v1/sessions", { body: { login_code: code }, headers: { origin: server.url, ...CSRF } }), 401, "unauthenticated")
    const unknown = await runCli(server.dataDir, ["login-link", "--email", "nobody@example.com"])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toContain("no user with email nobody@example.com")
  })

  it("signs out: the session is revoked and its cookie refused", async () => {
    const { cookie } = await signIn()
    const current = await http.get("/v1/sessions/current", { headers: { cookie } })
    expect(current.body).toMatchObject({ user: { id: owner.user_id }, via: "session" })
    expect(Date.parse(current.body.expires_at)).toBeGreaterThan(Date.now())
    expectEnvelope(await http.delete("/v1/sessions/current", { headers: { cookie, origin: server.endpointUrl, ...CSRF } }), 403, "csrf_failed")
    const out = await http.delete("/v1/sessions/current", { headers: { cookie, origin: server.url, ...CSRF } })
    expect(out.status).toBe(200)
    expect(out.headers.get("set-cookie")).toMatch(/^metal_gw_session=; .*Max-Age=0/)
    expectEnvelope(await http.get("/v1/sessions/current", { headers: { cookie } }), 401, "unauthenticated")
    expectEnvelope(await http.get(`/v1/organizations/${owner.organization_id}`, { headers: { cookie } }), 401, "unauthenticated")
    // A bearer token has no session to end.
    expectEnvelope(await http.delete("/v1/sessions/current", { token: owner.user_token }), 404, "not_found")
    expect((await http.get("/v1/sessions/current", { token: owner.user_token })).body).toMatchObject({ via: "token", expires_at: null })
  })

  it("answers the project-path runtime routes for members only", async () => {
    const { cookie } = await signIn({ user_token: stranger.user_token })
    const headers = { cookie, origin: server.url, ...CSRF, "idempotency-key": "stranger-1" }
    const base = `/v1/projects/${owner.project_id}/sandboxes`
    const request = { source: { kind: "environment", environment: "metal/base" }, resources: { vcpu: 1, memory_mb: 256 }, lifecycle: { runtime_timeout_seconds: 60 } }
    expectEnvelope(await http.post(base, { body: request, headers }), 404, "not_found")
    expectEnvelope(await http.get(`${base}/sbx_none/processes`, { headers }), 404, "not_found")
    expectEnvelope(await http.post(`${base}/sbx_none/filesystem/list`, { body: { path: "/" }, headers }), 404, "not_found")
    expectEnvelope(await http.get(`${base}/sbx_none/endpoints`, { headers }), 404, "not_found")
    // The owner's own: the project is found, the sandbox is not.
    expectEnvelope(await http.get(`${base}/sbx_none/processes`, { token: owner.user_token }), 404, "not_found")
    expectEnvelope(await http.post(base, { body: request, token: owner.user_token }), 400, "idempotency_key_required")
    // A project key is not a user's credential on the project path.
    expectEnvelope(await http.get(`${base}/sbx_none/processes`, { token: owner.api_key }), 401, "unauthenticated")
  })
})
