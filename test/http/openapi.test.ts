/** The OpenAPI document is valid OpenAPI 3.1, lists every served route with its errors, and uses the envelope. */
import { Validator } from "@seriousme/openapi-schema-validator"
import { OpenApi } from "@effect/platform"
import { describe, expect, it } from "vitest"
import { Api } from "../../src/http/Api.ts"
import { ContractApi } from "../../src/http/Contract.ts"

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
})
