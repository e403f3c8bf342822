/**
 * The route table (src/http/Routes.ts): every contract endpoint once, with a handler file that exists; the
 * off-contract routes of both listeners; no route declared twice.
 */
import { HttpApi } from "@effect/platform"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { Api } from "../../src/http/Api.ts"
import { routeTable } from "../../src/http/Routes.ts"

const HTTP = path.resolve(import.meta.dirname, "../../src/http")

describe("route table", () => {
  const table = routeTable()

  it("lists every contract endpoint once, with its handler file", () => {
    const contract: Array<string> = []
    HttpApi.reflect(Api, { onGroup: () => {}, onEndpoint: ({ endpoint }) => contract.push(`${endpoint.method} ${endpoint.path}`) })
    const listed = table.filter((r) => r.handler.startsWith("handlers/")).map((r) => `${r.method} ${r.path}`)
    expect([...listed].sort()).toEqual([...contract].sort())
    for (const route of table.filter((r) => r.handler.startsWith("handlers/"))) {
      expect(fs.existsSync(path.join(HTTP, route.handler.split(" ")[0]!)), route.handler).toBe(true)
    }
  })

  it("declares the routes outside the contract, on their listeners", () => {
    const off = table.filter((r) => !r.handler.startsWith("handlers/")).map((r) => `${r.listener} ${r.method} ${r.path}`)
    for (const expected of [
      "api * /*",
      "api GET /v1/sandboxes/:sandbox_id",
      "api GET /v1/operations/:operation_id",
      "api GET /v1/operations/:operation_id/events",
      "api GET /v1/sandboxes/:sandbox_id/processes/:process_id/events",
      "api POST /v1/mcp",
      "api POST /v1/projects/:project_id/mcp",
      "api PUT /v1/sandboxes/:sandbox_id/files/content",
      "api GET /v1/sandboxes/:sandbox_id/processes/:process_id/attach",
      "api GET /metrics",
      "api GET /",
      "api GET /assets/*",
      "api GET /docs",
      "api GET /v1/openapi.json"
    ]) expect(off).toContain(expected)
    expect(off.some((r) => r.startsWith("endpoints * /e/:endpoint_id/:token/*"))).toBe(true)
    for (const route of table.filter((r) => !r.handler.startsWith("handlers/"))) expect(route.note, route.path).toBeDefined()
  })

  it("declares no route twice: only a Bun route ahead of the contract's shares its method and path", () => {
    const key = (r: (typeof table)[number]) => `${r.listener} ${r.method} ${r.path}`
    const contract = new Set(table.filter((r) => r.handler.startsWith("handlers/")).map(key))
    const ahead = table.filter((r) => r.aheadOfContract === true)
    expect(ahead.length).toBe(10) // the four polled reads and the two followed ones, the raw writes and the attaches on both paths
    for (const route of ahead) expect(contract.has(key(route)), key(route)).toBe(true)
    const rest = table.filter((r) => r.aheadOfContract !== true).map(key)
    expect(new Set(rest).size).toBe(rest.length)
  })
})
