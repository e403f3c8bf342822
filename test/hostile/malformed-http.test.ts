/**
 * Input the HTTP layer must answer with the envelope (issue 7, item 11), over real HTTP to a real server:
 * JSON nested 100,000 levels deep on every JSON route (422, refused before parsing), bodies over MAX_BODY_BYTES
 * by Content-Length and chunked (our 413), and — pinned, because Bun answers them before any of our code runs
 * (docs/operations/security.md: "What Bun answers itself") — malformed Content-Length (400), oversized headers (431), a space in the
 * request target (505) and an unknown method (connection closed). After each of those the server still serves.
 *
 * The edge (issue 22, finding 6; src/http/Edge.ts): a request without a usable Host (HTTP/1.0 without one, a
 * garbage one, two) is a 400 envelope on both listeners and every route, never Bun's development error page (which
 * quoted the source and the checkout's path); no listener of the gateway process, the emulators' included, ever
 * answers that page; and whatever a handler throws outside the Effect app is a 500 envelope with nothing internal.
 */
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { jsonNestingExceeds, MAX_JSON_DEPTH } from "../../src/http/BodyLimits.ts"
import { atTheEdge, EDGE_SERVE_OPTIONS, edgeRoutes } from "../../src/http/Edge.ts"
import { listeningPorts, rawJson, rawRequest } from "../support/raw-http.ts"
import { api, type Bootstrap, bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"

const MAX_BODY = 256 * 1024
const METRICS_TOKEN = "metrics-token-for-the-edge-test"
let server: RunningServer
let http: ReturnType<typeof api>
let boot: Bootstrap

beforeAll(async () => {
  server = await startServer({ env: { MAX_BODY_BYTES: String(MAX_BODY), METRICS_TOKEN } })
  http = api(server.url)
  boot = await bootstrap(server.dataDir, "malformed@example.com")
})
afterAll(() => server.stop())

const deep = (levels: number, open = "[", close = "]") => open.repeat(levels) + close.repeat(levels)

/** The server answers a plain request normally (after an attack, it still serves). */
const stillServing = async () => {
  const ready = await fetch(`${server.url}/ready`)
  expect(ready.status).toBe(200)
}

describe("the nesting scan", () => {
  it("counts arrays and objects, never brackets inside strings or after escapes", () => {
    expect(jsonNestingExceeds(deep(MAX_JSON_DEPTH), MAX_JSON_DEPTH)).toBe(false)
    expect(jsonNestingExceeds(deep(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)).toBe(true)
    expect(jsonNestingExceeds(`{"a":${deep(MAX_JSON_DEPTH, "{\"b\":", "}")}}`.replaceAll('{"b":}', "{}"), MAX_JSON_DEPTH)).toBe(true)
    expect(jsonNestingExceeds(JSON.stringify({ s: deep(100_000) }), MAX_JSON_DEPTH)).toBe(false)
    expect(jsonNestingExceeds(JSON.stringify({ s: `\\"${deep(100)}\\"` }), MAX_JSON_DEPTH)).toBe(false)
    expect(jsonNestingExceeds(`["\\\\", ${deep(MAX_JSON_DEPTH)}]`, MAX_JSON_DEPTH)).toBe(true)
    expect(jsonNestingExceeds(`"unterminated ${deep(100)}`, MAX_JSON_DEPTH)).toBe(false)
    expect(jsonNestingExceeds("]]]]" + deep(10), MAX_JSON_DEPTH)).toBe(false)
  })
})

describe("JSON nested too deeply", () => {
  it("is 422 validation_error on every route that takes a JSON body, never a 500", async () => {
    const openapi = (await http.get("/v1/openapi.json")).body as { paths: Record<string, Record<string, { requestBody?: { content?: Record<string, unknown> } }>> }
    // Routes whose body is JSON (the raw file route takes octet-stream and answers JSON with 415).
    const routes = Object.entries(openapi.paths).flatMap(([route, methods]) =>
      Object.entries(methods).filter(([, op]) => op.requestBody?.content?.["application/json"] !== undefined).map(([method]) => [method.toUpperCase(), route] as const))
    expect(routes.length).toBeGreaterThan(10)
    const body = deep(100_000)
    for (const [method, route] of routes) {
      const filled = route.replaceAll(/\{[^}]+\}/g, (name) =>
        name === "{organization_id}" ? boot.organization_id : name === "{project_id}" ? boot.project_id : name === "{provider}" ? "e2b" : `x${name.slice(1, 4)}_${"a".repeat(32)}`)
      const response = await http.call(method, filled, {
        token: filled.startsWith("/v1/sandboxes") ? boot.api_key : boot.user_token,
        ...(filled.startsWith("/v1/sandboxes") ? { project: boot.project_id } : {}),
        rawBody: body,
        headers: { "content-type": "application/json", "idempotency-key": `deep-${method}-${filled}` }
      })
      const envelope = expectEnvelope(response, 422, "validation_error")
      expect(envelope.message, `${method} ${route}`).toContain(`deeper than ${MAX_JSON_DEPTH}`)
      expect(envelope.details?.max_depth).toBe(MAX_JSON_DEPTH)
    }
    await stillServing()
  })

  it("is refused however it is shaped (objects, inside a field), while brackets inside strings are data", async () => {
    const auth = { token: boot.user_token, headers: { "content-type": "application/json" } }
    const objects = `{"name":"x","slug":"x","deep":${deep(200, "{\"a\":", "}").replaceAll("{\"a\":}", "{}")}}`
    expectEnvelope(await http.post("/v1/organizations", { ...auth, rawBody: objects }), 422, "validation_error")
    // A name full of brackets is an ordinary (too long) string: the schema's answer, not the nesting one.
    const bracketName = await http.post("/v1/organizations", { ...auth, body: { name: deep(5_000), slug: "brackets" } })
    const envelope = expectEnvelope(bracketName, 422, "validation_error")
    expect(envelope.message).not.toContain("deeper than")
    // Nesting within the limit reaches the schema as usual.
    const within = await http.post("/v1/organizations", { ...auth, rawBody: `{"name":"ok","slug":"within-limit","x":${deep(MAX_JSON_DEPTH - 1)}}` })
    expect(expectEnvelope(within, 422, "validation_error").message).not.toContain("deeper than")
  })
})

describe("bodies over MAX_BODY_BYTES", () => {
  const post = (head: string, body: string | Array<string>, gapMs?: number) =>
    rawRequest(server.url, [`POST /v1/organizations HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${boot.user_token}\r\nContent-Type: application/json\r\nX-Request-Id: big-1\r\nConnection: close\r\n${head}\r\n`, ...(Array.isArray(body) ? body : [body])], { waitMs: 5_000, ...(gapMs === undefined ? {} : { gapMs }) })

  it("are refused with our 413 envelope by their Content-Length, before the body is read", async () => {
    const answer = await post(`Content-Length: ${MAX_BODY + 1}\r\n`, "{")
    expect(answer.status).toBe(413)
    expect(answer.headers["x-request-id"]).toBe("big-1")
    expect(rawJson(answer)).toMatchObject({ code: "payload_too_large", request_id: "big-1", retryable: false, details: { max_bytes: MAX_BODY } })
    // Far beyond any limit: the same answer (nothing is buffered).
    const huge = await post("Content-Length: 10000000000\r\n", "{")
    expect(huge.status).toBe(413)
    expect(rawJson(huge)?.code).toBe("payload_too_large")
    await stillServing()
  })

  it("are refused with our 413 envelope when chunked, counted as they stream in", async () => {
    const piece = "a".repeat(64 * 1024)
    const chunks = Array.from({ length: 8 }, () => `${piece.length.toString(16)}\r\n${piece}\r\n`)
    const answer = await post("Transfer-Encoding: chunked\r\n", [...chunks, "0\r\n\r\n"], 5)
    expect(answer.status).toBe(413)
    expect(rawJson(answer)).toMatchObject({ code: "payload_too_large", request_id: "big-1" })
    await stillServing()
  })

  it("within the limit, a chunked body is read and decoded as usual", async () => {
    const json = JSON.stringify({ name: "Chunked", slug: "chunked" })
    const answer = await post("Transfer-Encoding: chunked\r\n", [`${json.length.toString(16)}\r\n${json}\r\n`, "0\r\n\r\n"], 5)
    expect(answer.status).toBe(201)
    expect(rawJson(answer)).toMatchObject({ name: "Chunked", slug: "chunked" })
  })
})

describe("what Bun answers before our code runs (pinned)", () => {
  const get = (line: string, headers = "") => rawRequest(server.url, `${line}\r\nHost: gw\r\n${headers}\r\n`, { waitMs: 3_000 })

  it("a malformed Content-Length is 400 with an empty body, and the connection is closed", async () => {
    for (const value of ["abc", "-1", "2, 2"]) {
      const answer = await rawRequest(server.url, `POST /v1/organizations HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: ${value}\r\n\r\n{}`, { waitMs: 3_000 })
      expect(answer.status, value).toBe(400)
      expect(answer.body).toBe("")
      expect(answer.closed).toBe(true)
    }
    await stillServing()
  })

  it("oversized headers are 431 with an empty body", async () => {
    const answer = await get("GET /ready HTTP/1.1", `Connection: close\r\nX-Big: ${"a".repeat(64 * 1024)}\r\n`)
    expect(answer.status).toBe(431)
    expect(answer.body).toBe("")
    await stillServing()
  })

  it("a space in the request target is 505 with an empty body", async () => {
    const answer = await get("GET /v1/a b HTTP/1.1", "Connection: close\r\n")
    expect(answer.status).toBe(505)
    expect(answer.body).toBe("")
    await stillServing()
  })

  it("an unknown method closes the connection without an answer", async () => {
    const answer = await get("FROB /ready HTTP/1.1")
    expect(answer.closed).toBe(true)
    expect(answer.text).toBe("")
    await stillServing()
  })

  it("a method Bun knows but the API does not use is ours: a 404 envelope", async () => {
    const answer = await get("PROPFIND /v1/organizations HTTP/1.1", "Connection: close\r\nX-Request-Id: propfind-1\r\n")
    expect(answer.status).toBe(404)
    expect(rawJson(answer)).toMatchObject({ code: "not_found", request_id: "propfind-1" })
  })
})

const CHECKOUT = path.resolve(import.meta.dirname, "../..")

/** Nothing of the gateway's insides: no development error page, no source path or line, no stack. */
const expectNothingInternal = (text: string) => {
  expect(text).not.toContain("__bunfallback")
  expect(text).not.toContain("<html")
  expect(text).not.toContain(CHECKOUT)
  expect(text).not.toMatch(/\.ts:\d+/)
  expect(text).not.toMatch(/\bat \S+ \(/)
}

/** A raw answer is the envelope with this status and code (and this request id, when one was sent). */
const expectRawEnvelope = (answer: Awaited<ReturnType<typeof rawRequest>>, status: number, code: string, requestId?: string) => {
  expectNothingInternal(answer.text)
  expect(answer.status, answer.text.slice(0, 300)).toBe(status)
  const body = rawJson(answer)
  expect(body).toMatchObject({ code, retryable: status >= 500 })
  expect(typeof body.message).toBe("string")
  expect(body.request_id).toBe(answer.headers["x-request-id"])
  if (requestId !== undefined) expect(body.request_id).toBe(requestId)
  return body
}

describe("a request without a usable Host", () => {
  // One path per route of the API listener's table (src/http/Routes.ts): the API, FastReads, MCP, raw writes,
  // attach, metrics.
  const apiPaths = () => [
    "/ready",
    "/v1/organizations",
    `/v1/sandboxes/sbx_${"a".repeat(32)}`,
    "/v1/mcp",
    `/v1/sandboxes/sbx_${"a".repeat(32)}/files/content?path=/x`,
    `/v1/sandboxes/sbx_${"a".repeat(32)}/processes/proc_${"a".repeat(32)}/attach`,
    "/metrics"
  ]

  it("HTTP/1.0 without Host is a 400 envelope on every route of the API listener, and on the endpoint listener", async () => {
    for (const target of apiPaths()) {
      for (const method of ["GET", "POST", "PUT"]) {
        const answer = await rawRequest(server.url, `${method} ${target} HTTP/1.0\r\nAuthorization: Bearer ${boot.api_key}\r\nX-Metal-Project-ID: ${boot.project_id}\r\nX-Request-Id: nohost-1\r\nContent-Length: 0\r\n\r\n`)
        expect(expectRawEnvelope(answer, 400, "invalid_host", "nohost-1").details).toEqual({})
      }
    }
    for (const target of ["/", `/e/ep_${"a".repeat(32)}/${"a".repeat(26)}/`]) {
      expectRawEnvelope(await rawRequest(server.endpointUrl, `GET ${target} HTTP/1.0\r\n\r\n`), 400, "invalid_host")
    }
    await stillServing()
  })

  it("a Host that is garbage, empty or given twice is a 400 envelope on both listeners", async () => {
    const hosts = ["a b<>", "", "[::1", "a/b?c", "exa%mple", "gw:80:80", "@gw", "gw\u00e9"]
    for (const base of [server.url, server.endpointUrl]) {
      for (const host of hosts) {
        const answer = await rawRequest(base, `GET /ready HTTP/1.1\r\nHost: ${host}\r\nX-Request-Id: garbage-1\r\nConnection: close\r\n\r\n`)
        expectRawEnvelope(answer, 400, "invalid_host", "garbage-1")
      }
      const twice = await rawRequest(base, "GET /ready HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n")
      expectRawEnvelope(twice, 400, "invalid_host")
    }
    await stillServing()
  })

  it("an absolute-form request target is served by its path (the Host header names the server); without a Host it is refused", async () => {
    const absolute = await rawRequest(server.url, "GET http://evil.example:99/ready HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
    expect(absolute.status).toBe(200)
    expect(rawJson(absolute)).toMatchObject({ status: "ready" })
    const unknown = await rawRequest(server.url, "GET http://evil.example/v1/nothing-here HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
    expectRawEnvelope(unknown, 404, "not_found")
    for (const base of [server.url, server.endpointUrl]) {
      expectRawEnvelope(await rawRequest(base, "GET http://evil.example/ready HTTP/1.0\r\n\r\n"), 400, "invalid_host")
    }
  })

  it("a well-formed Host of any shape (name, IPv4, IPv6, with a port) is served", async () => {
    for (const host of ["gw", "gw.example.com:8080", "127.0.0.1", "[::1]:1", "GW.Example."]) {
      const answer = await rawRequest(server.url, `GET /ready HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`)
      expect(answer.status, host).toBe(200)
    }
  })

  it("no listener of the gateway process answers with Bun's development error page (API, endpoints, every emulator)", async () => {
    const ports = listeningPorts(server.pid)
    // The API, the endpoint listener and the emulators of the providers that serve HTTP.
    expect(ports.length).toBeGreaterThanOrEqual(10)
    expect(ports).toContain(Number(new URL(server.url).port))
    expect(ports).toContain(Number(new URL(server.endpointUrl).port))
    for (const port of ports) {
      for (const request of ["GET / HTTP/1.0\r\n\r\n", "GET /v1/x HTTP/1.1\r\nHost: a b\r\nConnection: close\r\n\r\n"]) {
        const answer = await rawRequest(`http://127.0.0.1:${port}`, request)
        expect(answer.status, `port ${port}`).toBeDefined()
        expectNothingInternal(answer.text)
      }
    }
  })
})

describe("an exception at the edge (src/http/Edge.ts)", () => {
  /** A Bun server as the gateway's are started: its routes behind the edge, its fetch handler not. */
  const serveThrowing = () =>
    Bun.serve({
      ...EDGE_SERVE_OPTIONS,
      port: 0,
      hostname: "127.0.0.1",
      routes: edgeRoutes({
        "/throws": (): Response => {
          throw new Error(`thrown at ${CHECKOUT}/src/secret.ts:12`)
        },
        "/rejects": async (): Promise<Response> => {
          await Bun.sleep(1)
          throw new TypeError("Invalid URL")
        }
      }),
      // Not wrapped: what escapes every handler meets the server's own error answer.
      fetch: (): Response => {
        throw new Error(`escaped at ${CHECKOUT}/src/other.ts:34`)
      }
    })

  it("what a route throws or rejects with is a 500 envelope with its request id and nothing internal", async () => {
    const bun = serveThrowing()
    try {
      expect(bun.development).toBe(false)
      const base = `http://127.0.0.1:${bun.port}`
      for (const target of ["/throws", "/rejects"]) {
        const answer = await rawRequest(base, `GET ${target} HTTP/1.1\r\nHost: gw\r\nX-Request-Id: crash-1\r\nConnection: close\r\n\r\n`)
        expectRawEnvelope(answer, 500, "internal_error", "crash-1")
        expect(rawJson(answer).message).toBe("Internal server error")
      }
      // Without a usable Host the route never runs.
      expectRawEnvelope(await rawRequest(base, "GET /throws HTTP/1.0\r\n\r\n"), 400, "invalid_host")
      // Past every wrapper, the server's own error answer is the envelope too (never Bun's page).
      const escaped = await rawRequest(base, "GET /elsewhere HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
      expectRawEnvelope(escaped, 500, "internal_error")
    } finally {
      bun.stop(true)
    }
  })

  it("a handler that answers normally is untouched (its status, headers and body)", async () => {
    const handler = atTheEdge("ok", async (request: Request) => new Response(`hello ${new URL(request.url).pathname}`, { status: 201, headers: { "x-mine": "1" } }))
    const response = await handler(new Request("http://gw/path", { headers: { host: "gw" } }), undefined)
    expect(response.status).toBe(201)
    expect(response.headers.get("x-mine")).toBe("1")
    expect(await response.text()).toBe("hello /path")
  })
})
