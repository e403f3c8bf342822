/**
 * Every single-rule violation (violations.ts) of every SERVED route, sent over HTTP to a real server: 422
 * `validation_error` in the envelope with `details.issues` at the field, and nothing written to the database.
 * Each request is otherwise valid (real organization and project, a fresh Idempotency-Key, the right
 * credential), so it would have written something had validation let it through. Rows of routes that are only
 * declared (not yet served) are skipped and show up as such.
 */
import { Database } from "bun:sqlite"
import { Either, Schema } from "effect"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Bootstrap, bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"
import { type EndpointInfo, fill, nameOf, pathParams, targetOf } from "./contract.ts"
import { allViolations, pointsAt, type SchemaName, VALID, type Violation } from "./violations.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let boot: Bootstrap

/** Groups called with a project key (reference §2 "K"); the others take a user access token. */
const KEY_GROUPS = new Set(["sandboxes", "operations", "processes", "filesystem", "endpoints", "computer"])

/**
 * What the gateway writes by itself, whatever the requests: the node's heartbeat (every few seconds) and its
 * housekeeping jobs (the retention sweep runs at start, then hourly). Left out of the snapshot, so that one landing
 * between two snapshots is not taken for a write by the request; every other column and row is compared.
 */
const BY_ITSELF: Record<string, (row: Record<string, unknown>) => Record<string, unknown> | undefined> = {
  nodes: ({ heartbeat_at: _, ...row }) => row,
  jobs: (row) => (String(row["type"]).startsWith("maintenance.") ? undefined : row)
}

/** Every table's rows, as one string (API-key `last_used_at` moves on every authenticated call). */
const snapshot = () => {
  const db = new Database(path.join(server.dataDir, "gateway.sqlite"), { readonly: true })
  try {
    const tables = db.query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`).all() as Array<{ name: string }>
    return tables.map(({ name }) => {
      const rows = db.query(`SELECT * FROM "${name}" ORDER BY rowid`).all() as Array<Record<string, unknown>>
      const own = BY_ITSELF[name]
      return `${name}: ${JSON.stringify(own === undefined ? rows : rows.map(own).filter((row) => row !== undefined))}`
    }).join("\n")
      .replace(/"last_used_at":(?:null|"[^"]*")/g, "")
  } finally {
    db.close()
  }
}

/** Valid path parameters, from the valid values of the path rows. */
const VALID_PATH = Object.assign(
  {},
  ...(Object.keys(VALID) as Array<SchemaName>).filter((n) => n.startsWith("path.")).map((n) => VALID[n] as Record<string, string>)
) as Record<string, string>

/** A raw byte body (the octet-stream routes): any bytes are valid. */
const RAW_BYTES = Symbol("raw bytes")
const isBytes = (schema: Schema.Schema.Any) => Either.isRight(Schema.decodeUnknownEither(schema as Schema.Schema.AnyNoContext)(new Uint8Array(1)))

const validPart = (endpoint: EndpointInfo, part: "payload" | "urlParams"): unknown => {
  const schema = endpoint.parts[part]
  if (schema === undefined) return undefined
  if (part === "payload" && isBytes(schema)) return RAW_BYTES
  const name = nameOf(schema)
  if (name === undefined) throw new Error(`no valid ${part} known for ${endpoint.key}`)
  return VALID[name]
}

let keyCounter = 0

/** The request a row describes: its broken part, and valid everything else. */
const requestOf = (v: Violation) => {
  const { endpoint, part } = targetOf(v.schema)
  const ids = { org: boot.organization_id, project: boot.project_id }
  const params = fill(part === "path" ? { ...VALID_PATH, ...(v.value as object) } : VALID_PATH, ids) as Record<string, string>
  let route = endpoint.path
  for (const name of pathParams(endpoint.path)) route = route.replace(`:${name}`, encodeURIComponent(params[name]!))
  const query = fill(part === "urlParams" ? v.value : validPart(endpoint, "urlParams"), ids) as Record<string, string> | undefined
  if (query !== undefined && Object.keys(query).length > 0) route += `?${new URLSearchParams(query)}`
  const valid = part === "payload" ? v.value : validPart(endpoint, "payload")
  const raw = valid === RAW_BYTES
  const body = raw ? undefined : fill(valid, ids)
  const headers: Record<string, string> = endpoint.parts.headers === undefined ? {} : { "idempotency-key": `violation-${keyCounter++}` }
  if (raw) headers["content-type"] = "application/octet-stream"
  if (part === "headers") Object.assign(headers, v.value)
  const auth = KEY_GROUPS.has(endpoint.group) ? { token: boot.api_key, project: boot.project_id } : { token: boot.user_token }
  return { endpoint, method: endpoint.method, route, options: { ...auth, headers, ...(raw ? { rawBody: "hi" } : body === undefined ? {} : { body }) } }
}

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  boot = await bootstrap(server.dataDir, "violations@example.com")
})
afterAll(() => server.stop())

describe("violations over HTTP", () => {
  for (const v of allViolations) {
    const { endpoint } = targetOf(v.schema)
    it.skipIf(!endpoint.served)(`${endpoint.method} ${endpoint.path} (${v.schema}): ${v.why} → 422 at ${v.field}, nothing written`, async () => {
      const { method, route, options } = requestOf(v)
      const before = snapshot()
      const response = await http.call(method, route, options)
      const envelope = expectEnvelope(response, 422, "validation_error")
      const paths = (envelope.details.issues as Array<{ path: string }>).map((i) => i.path)
      expect(pointsAt(paths, v.field), `issues at ${JSON.stringify(paths)} do not point at ${v.field}`).toBe(true)
      expect(snapshot()).toBe(before)
    })
  }

  it("a malformed X-Metal-Project-ID is a 422 at that header", async () => {
    const response = await http.get("/v1/sandboxes", { token: boot.api_key, project: "project-1" })
    const envelope = expectEnvelope(response, 422, "validation_error")
    expect(envelope.details.issues.map((i: { path: string }) => i.path)).toEqual(["headers.x-metal-project-id"])
  })

  it("afterwards the lists show only what bootstrap made", async () => {
    const key = { token: boot.api_key, project: boot.project_id }
    const user = { token: boot.user_token }
    expect((await http.get("/v1/sandboxes", key)).body).toEqual({ sandboxes: [], next_cursor: null })
    expect((await http.get(`/v1/projects/${boot.project_id}/sandboxes`, user)).body).toEqual({ sandboxes: [] })
    expect((await http.get("/v1/organizations", user)).body.organizations.map((o: { id: string }) => o.id)).toEqual([boot.organization_id])
    expect((await http.get(`/v1/organizations/${boot.organization_id}/projects`, user)).body.projects.map((p: { id: string }) => p.id)).toEqual([boot.project_id])
    expect((await http.get(`/v1/projects/${boot.project_id}/api-keys`, user)).body.api_keys).toHaveLength(1)
    expect((await http.get(`/v1/organizations/${boot.organization_id}/webhooks`, user)).body).toEqual({ webhooks: [] })
    expect((await http.get(`/v1/organizations/${boot.organization_id}/members`, user)).body.invitations).toEqual([])
    expect((await http.get(`/v1/organizations/${boot.organization_id}/provider-credentials`, user)).body).toEqual({ provider_credentials: [] })
  })
})

// Last, since these requests do write: the unbroken request of every row passes validation, so each 422 above
// came from the one rule its row breaks. (Other answers are fine here: a 404 for a stand-in id, a 409, a 202.)
describe("the same requests without the broken rule pass validation", () => {
  const targets = [...new Set(allViolations.map((v) => v.schema))]
  for (const name of targets) {
    const { endpoint } = targetOf(name)
    it.skipIf(!endpoint.served)(`${endpoint.method} ${endpoint.path} with a valid ${name}`, async () => {
      const { method, route, options } = requestOf({ schema: name, field: "", why: "valid", value: VALID[name], body: VALID[name] })
      if (endpoint.key === "events.stream") {
        // A valid request opens a stream that stays open: its headers are the answer.
        const controller = new AbortController()
        const opened = await fetch(server.url + route, { headers: { authorization: `Bearer ${options.token}`, ...options.headers }, signal: controller.signal })
        controller.abort()
        expect(opened.status).toBe(200)
        expect(opened.headers.get("content-type")).toBe("text/event-stream")
        return
      }
      const response = await http.call(method, route, options)
      expect(response.status, response.text).toBeLessThan(500)
      expect(response.body?.code, response.text).not.toBe("validation_error")
    })
  }
})
