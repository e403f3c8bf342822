/**
 * What the generated OpenAPI document needs beyond HttpApi's output, so that a tool can use it as it is (`/docs`'s
 * "Try it out", client generators):
 * - HttpApi always declares its own `HttpApiDecodeError` (400); our envelope middleware turns decode failures
 *   into 422 `validation_error`, so the built-in one is removed from the document;
 * - sandbox routes take the project API key *and* the `X-Metal-Project-ID` header: the header is a security scheme
 *   of its own (an `apiKey` in header), required together with the key on every route that takes the key;
 * - every request body carries its example (Examples.ts), one that succeeds as it is;
 * - each error response is one envelope whose `code` lists every code the route can answer with under that status
 *   (the server's own, its middleware's and its handler's, merged from HttpApi's `anyOf`), each explained.
 */
import { describeCodes, ERROR_CODES, type ErrorStatus } from "../domain/ErrorCodes.ts"
import { REQUEST_EXAMPLES } from "./Examples.ts"

type Json = Record<string, unknown>

const mentionsDecodeError = (value: unknown): boolean => JSON.stringify(value ?? null).includes("HttpApiDecodeError")

/** Schema.Unknown carries `$id: "/schemas/unknown"` at every use; repeated ids make the document invalid. */
const dropSchemaIds = (node: unknown): void => {
  if (Array.isArray(node)) for (const item of node) dropSchemaIds(item)
  else if (node !== null && typeof node === "object") {
    const record = node as Record<string, unknown>
    if (typeof record["$id"] === "string" && record["$id"].startsWith("/schemas/")) delete record["$id"]
    for (const value of Object.values(record)) dropSchemaIds(value)
  }
}

/** The project header, as the security scheme sent with the project API key. */
export const PROJECT_HEADER_SCHEME = "projectHeader"

const withProjectHeader = (spec: Json): Json => {
  const components = (spec["components"] ??= {}) as Json
  const schemes = (components["securitySchemes"] ??= {}) as Record<string, unknown>
  if (schemes["projectKey"] === undefined) return spec
  schemes[PROJECT_HEADER_SCHEME] = {
    type: "apiKey",
    in: "header",
    name: "X-Metal-Project-ID",
    description: "The project the API key belongs to (`prj_…`); sent with the project API key on every sandbox route"
  }
  for (const operation of operationsOf(spec)) {
    const security = operation["security"] as Array<Record<string, Array<string>>> | undefined
    if (security === undefined) continue
    operation["security"] = security.map((requirement) => requirement["projectKey"] === undefined ? requirement : { ...requirement, [PROJECT_HEADER_SCHEME]: [] })
  }
  return spec
}

const withExamples = (spec: Json): Json => {
  for (const operation of operationsOf(spec)) {
    const example = REQUEST_EXAMPLES[operation["operationId"] as string]
    const content = (operation["requestBody"] as Json | undefined)?.["content"] as Record<string, Json> | undefined
    if (example === undefined || content === undefined) continue
    for (const media of Object.values(content)) media["example"] = example
  }
  return spec
}

const codesOf = (schema: Json): ReadonlyArray<string> | undefined =>
  (((schema["properties"] as Json | undefined)?.["code"] as Json | undefined)?.["enum"]) as ReadonlyArray<string> | undefined

/** One envelope per error status, its `code` the union of the variants' codes, and a description naming each. */
const withErrorCodes = (spec: Json): Json => {
  for (const operation of operationsOf(spec)) {
    for (const [status, response] of Object.entries((operation["responses"] ?? {}) as Record<string, Json>)) {
      const media = ((response["content"] ?? {}) as Record<string, Json>)["application/json"]
      const schema = media?.["schema"] as Json | undefined
      if (!(Number(status) in ERROR_CODES) || schema === undefined) continue
      const variants = (schema["anyOf"] as Array<Json> | undefined) ?? [schema]
      const lists = variants.map(codesOf)
      if (lists.some((codes) => codes === undefined)) continue
      const codes = [...new Set(lists.flatMap((codes) => codes ?? []))].sort()
      const description = describeCodes(Number(status) as ErrorStatus, codes)
      const first = variants[0]!
      media!["schema"] = {
        ...first,
        properties: { ...(first["properties"] as Json), code: { type: "string", enum: codes } },
        description
      }
      response["description"] = description
    }
  }
  return spec
}

const operationsOf = (spec: Json): Array<Json> =>
  Object.values((spec["paths"] ?? {}) as Record<string, Record<string, Json>>).flatMap((item) => Object.values(item))

/** The whole transform (Api.ts): the four above. */
export const documentTransform = (spec: Json): Json => withErrorCodes(withExamples(withProjectHeader(dropHttpApiDecodeError(spec))))

export const dropHttpApiDecodeError = (spec: Json): Json => {
  dropSchemaIds(spec)
  const paths = (spec["paths"] ?? {}) as Record<string, Record<string, Json>>
  for (const item of Object.values(paths)) {
    for (const operation of Object.values(item)) {
      const responses = operation["responses"] as Record<string, Json> | undefined
      if (responses === undefined) continue
      for (const [status, response] of Object.entries(responses)) {
        const content = response["content"] as Record<string, { schema?: Json }> | undefined
        const schema = content?.["application/json"]?.schema
        if (schema === undefined || !mentionsDecodeError(schema)) continue
        const variants = (schema["anyOf"] as Array<unknown> | undefined)?.filter((s) => !mentionsDecodeError(s))
        if (variants === undefined || variants.length === 0) delete responses[status]
        else if (variants.length === 1) content!["application/json"]!.schema = variants[0] as Json
        else schema["anyOf"] = variants
      }
    }
  }
  const schemas = ((spec["components"] ?? {}) as Json)["schemas"] as Record<string, unknown> | undefined
  if (schemas !== undefined) {
    for (const name of Object.keys(schemas)) if (name.includes("HttpApiDecodeError") || name === "Issue") delete schemas[name]
  }
  return spec
}
