import { Database } from "bun:sqlite"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { querySql } from "../support/accounts.ts"
import { api, bootstrap, expectEnvelope, type RunningServer, startServer, openGatewayDatabase } from "../support/server.ts"
import { databaseUrlFor, onPostgres } from "../support/postgres.ts"

let server: RunningServer
let http: ReturnType<typeof api>

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
})
afterAll(() => server.stop())

describe("system routes and the error envelope", () => {
  it("GET /health and /ready answer without auth", async () => {
    expect((await http.get("/health")).body).toEqual({ status: "ok" })
    const ready = await http.get("/ready")
    expect(ready.status).toBe(200)
    expect(ready.body).toMatchObject({ status: "ready", checks: { database: "ok", engine: onPostgres() ? "pg" : "sqlite" } })
    // This node, heart-beating (docs/operations/scaling-out.md).
    expect(ready.body.nodes).toEqual([{ id: ready.body.node_id, url: expect.any(String), heartbeat_age_seconds: expect.any(Number), lost: false }])
    expect(ready.body.nodes[0].heartbeat_age_seconds).toBeLessThan(10)
    expect(ready.headers.get("x-request-id")).toMatch(/^req_/)
  })

  it("echoes a well-formed x-request-id and replaces a malformed one", async () => {
    const echoed = await http.get("/health", { headers: { "x-request-id": "client-123" } })
    expect(echoed.headers.get("x-request-id")).toBe("client-123")
    const replaced = await http.get("/health", { headers: { "x-request-id": "bad id with spaces" } })
    expect(replaced.headers.get("x-request-id")).toMatch(/^req_/)
  })

  it("an unknown route is a 404 envelope", async () => {
    expectEnvelope(await http.get("/v1/nothing-here"), 404, "not_found")
  })

  it("a body that is not JSON is 415, unparseable JSON is 400, an oversized body is 413", async () => {
    expectEnvelope(await http.post("/v1/organizations", { rawBody: "name=x", headers: { "content-type": "text/plain" } }), 415, "unsupported_media_type")
    // Authentication comes first: unparseable JSON with an unknown token is still a 401.
    expectEnvelope(await http.post("/v1/organizations", { rawBody: "{not json", headers: { "content-type": "application/json", authorization: "Bearer metal_ut_xxxxxxxxxxxxxxxxxxxxxxxx" } }), 401, "unauthenticated")
    const owner = await bootstrap(server.dataDir, "json@example.com")
    for (const rawBody of ["{not json", "{\"name\": \"x\",", "[1, 2"]) {
      const bad = await http.post("/v1/organizations", { rawBody, headers: { "content-type": "application/json", authorization: `Bearer ${owner.user_token}` } })
      expectEnvelope(bad, 400, "invalid_json")
    }
    expect(querySql(server.dataDir, "SELECT id FROM organizations WHERE name = 'x'")).toEqual([])
    const big = await http.post("/v1/organizations", { rawBody: "x".repeat(17 * 1024 * 1024), headers: { "content-type": "application/json" } })
    expectEnvelope(big, 413, "payload_too_large")
  })

  it("serves the OpenAPI document and offline docs", async () => {
    const doc = await http.get("/v1/openapi.json")
    expect(doc.status).toBe(200)
    expect(doc.body.openapi).toBe("3.1.0")
    const docs = await http.get("/docs")
    expect(docs.status).toBe(200)
    expect(docs.text).not.toMatch(/https?:\/\/(cdn|unpkg|fonts)\./)
  })
})

describe("a database held by another process", () => {
  it("answers 503 database_busy (retryable, nothing written) past the busy timeout, then works once it is released", async () => {
    const owner = await bootstrap(server.dataDir, "busy@example.com")
    let busy
    const url = databaseUrlFor(server.dataDir)
    if (url !== undefined) {
      // PostgreSQL: another session holds the table past the server's lock timeout (55P03).
      const other = new Bun.SQL(url)
      const held = await other.reserve()
      await held`BEGIN`
      await held`LOCK TABLE projects IN ACCESS EXCLUSIVE MODE`
      try {
        busy = await http.post(`/v1/organizations/${owner.organization_id}/projects`, { token: owner.user_token, body: { name: "Busy", slug: "busy" } })
      } finally {
        await held`ROLLBACK`
        held.release()
        await other.close()
      }
    } else {
      const db = openGatewayDatabase(server.dataDir)
      db.exec("PRAGMA busy_timeout = 5000")
      db.exec("BEGIN IMMEDIATE") // the write lock, as a long CLI or backup transaction would hold it
      try {
        busy = await http.post(`/v1/organizations/${owner.organization_id}/projects`, { token: owner.user_token, body: { name: "Busy", slug: "busy" } })
      } finally {
        db.exec("ROLLBACK")
        db.close()
      }
    }
    const envelope = expectEnvelope(busy, 503, "database_busy")
    expect(envelope.retryable).toBe(true)
    expect(querySql(server.dataDir, "SELECT id FROM projects WHERE slug = 'busy'")).toEqual([])
    const again = await http.post(`/v1/organizations/${owner.organization_id}/projects`, { token: owner.user_token, body: { name: "Busy", slug: "busy" } })
    expect(again.status).toBe(201)
  }, 30_000)
})
