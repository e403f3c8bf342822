/** The OpenAPI document is valid OpenAPI 3.1, lists every served route with its errors, and uses the envelope. */
import { Validator } from "@seriousme/openapi-schema-validator"
import { OpenApi } from "@effect/platform"
import { describe, expect, it } from "vitest"
import { Api } from "../../src/http/Api.ts"
import { ContractApi } from "../../src/http/Contract.ts"
import { ERROR_CODES } from "../../src/domain/ErrorCodes.ts"

const validate = async (doc: unknown) => {
  const validator = new Validator()
  const result = await validator.validate(doc as Parameters<Validator["validate"]>[0])
  return result
}

describe("OpenAPI", () => {
  it("the served document and the full contract validate as OpenAPI 3.1", async () => {
    for (const api of [Api, ContractApi]) {
      const doc = OpenApi.fromApi(api as typeof Api)
      expect(doc.openapi).toBe("3.1.0")
      const result = await validate(doc)
      expect(result.errors ?? []).toEqual([])
      expect(result.valid).toBe(true)
    }
  })

  it("every operation declares its errors with the envelope, never the built-in decode error", () => {
    const doc = OpenApi.fromApi(Api) as any
    const text = JSON.stringify(doc)
    expect(text).not.toContain("HttpApiDecodeError")
    let operations = 0
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        operations++
        const statuses = Object.keys(op.responses)
        // 101: a WebSocket (a terminal's attach).
        expect(statuses.some((s) => s.startsWith("2") || s === "101"), `${method} ${path}`).toBe(true)
        expect(statuses, `${method} ${path}`).toContain("422")
        if (path.startsWith("/v1/") && path !== "/v1/meta") expect(statuses, `${method} ${path}`).toContain("401")
      }
    }
    expect(operations).toBeGreaterThanOrEqual(38)
    expect(doc.components.schemas.CreateProject.properties.slug.$ref).toBe("#/components/schemas/Slug")
    expect(doc.components.schemas.Slug).toMatchObject({ pattern: "^[a-z0-9]+(?:-[a-z0-9]+)*$", minLength: 1, maxLength: 63 })
    expect(doc.components.schemas.Name).toMatchObject({ minLength: 1, maxLength: 120 })
  })

  // What a handler can fail with is checked by the type checker (each route's `failsWith` declarations against its
  // handler's error type: test/architecture/types.test.ts); here, that the document says it.
  it("every error response lists the codes the route can answer with, each from the catalogue and explained", () => {
    const doc = OpenApi.fromApi(Api) as any
    const codes = (method: string, path: string, status: string): ReadonlyArray<string> | undefined =>
      doc.paths[path]?.[method]?.responses[status]?.content?.["application/json"]?.schema?.properties?.code?.enum
    let listed = 0
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        for (const [status, response] of Object.entries<any>(op.responses)) {
          if (Number(status) < 400) continue
          const known = (ERROR_CODES as Record<string, Record<string, string>>)[status]
          const list = codes(method, path, status)
          expect(list, `${method} ${path} ${status}`).toBeDefined()
          expect(list!.length, `${method} ${path} ${status}`).toBeGreaterThan(0)
          for (const code of list!) {
            expect(known?.[code], `${method} ${path} ${status} ${code}`).toBeDefined()
            expect(response.description).toContain(`\`${code}\``)
            listed++
          }
        }
      }
    }
    expect(listed).toBeGreaterThan(500)
    // The route's own codes, from its handler: not every code of the status.
    expect(codes("post", "/v1/sandboxes", "402")).toEqual(["insufficient_credits"])
    expect(codes("post", "/v1/sandboxes", "400")).toEqual(["idempotency_key_required", "invalid_json", "project_header_required"])
    expect(codes("post", "/v1/sandboxes/{sandbox_id}/actions/pause", "409")).toEqual(["invalid_sandbox_state", "recording_active", "unsupported_operation"])
    expect(codes("get", "/v1/sandboxes/{sandbox_id}/files/content", "416")).toEqual(["range_not_satisfiable"])
    expect(codes("get", "/v1/sandboxes/{sandbox_id}/files/content", "404")).toEqual(["file_not_found", "not_found"])
    expect(codes("get", "/v1/sandboxes/{sandbox_id}", "409")).toBeUndefined()
    expect(codes("delete", "/v1/organizations/{organization_id}", "422")).toEqual(["confirmation_mismatch", "validation_error"])
  })

  it("docs/guide/errors.md lists every code of the catalogue with its status", async () => {
    const text = await Bun.file(new URL("../../docs/guide/errors.md", import.meta.url)).text()
    const rows = new Set([...text.matchAll(/^\| (\d{3}) \| `(\w+)` \|/gm)].map((m) => `${m[1]} ${m[2]}`))
    const catalogue = Object.entries(ERROR_CODES).flatMap(([status, codes]) => Object.keys(codes).map((code) => `${status} ${code}`))
    expect([...rows].sort()).toEqual(catalogue.sort())
  })
})
