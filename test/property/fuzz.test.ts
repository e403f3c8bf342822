/**
 * Fuzz: every operation of the OpenAPI document receives generated malformed requests (about 3,000 in all) over
 * real HTTP, authenticated as a real user and project so that validation is reached: bodies of the wrong type,
 * with fields missing, extra or of the wrong type, huge strings, deep nesting, numbers out of range, truncated
 * JSON, invalid UTF-8, wrong content types; bad ids in the path; bad query values; bad headers. Every answer must
 * be below 500, carry `x-request-id`, and every error must be the envelope with that request id and a message
 * free of internals. Deterministic: one seed, no clock in the generator. Path ids are well-formed but unknown, so
 * a request that happened to be valid finds nothing to change.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Bootstrap, bootstrap, type RunningServer, startServer } from "../support/server.ts"

const SEED = 0x5eed_2026
const CASES_PER_OPERATION = 48
const CONCURRENCY = 8
/** What a message must never show: stack frames, source files, host paths, engine wording. */
const INTERNALS = /\bat [\w$.<>]+ \([^)]*:\d+|\.ts:\d+|node_modules|\/tmp\/|sgw-|TypeError|SyntaxError|RangeError|undefined is not|evaluating '|ENAMETOOLONG|Maximum call stack/

/** mulberry32: small, fast, good enough for choosing cases. */
const prng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [k: string]: Json }
interface SchemaNode {
  readonly $ref?: string
  readonly type?: string | ReadonlyArray<string>
  readonly properties?: Record<string, SchemaNode>
  readonly required?: ReadonlyArray<string>
  readonly anyOf?: ReadonlyArray<SchemaNode>
  readonly items?: SchemaNode
  readonly enum?: ReadonlyArray<Json>
}
interface Operation {
  readonly method: string
  readonly path: string
  readonly security: "user" | "key" | "none"
  readonly query: ReadonlyArray<string>
  readonly headers: ReadonlyArray<string>
  readonly body: SchemaNode | undefined
}
interface Case {
  readonly label: string
  readonly method: string
  readonly url: string
  readonly headers: Record<string, string>
  readonly body?: string | Uint8Array<ArrayBuffer>
}

let server: RunningServer
let boot: Bootstrap
let other: Bootstrap
let operations: Array<Operation>
let components: Record<string, SchemaNode>

beforeAll(async () => {
  server = await startServer()
  boot = await bootstrap(server.dataDir, "fuzz@example.com")
  other = await bootstrap(server.dataDir, "fuzz-other@example.com")
  const doc = (await api(server.url).get("/v1/openapi.json")).body as {
    paths: Record<string, Record<string, { security?: Array<Record<string, unknown>>; parameters?: Array<{ name: string; in: string }>; requestBody?: { content: Record<string, { schema: SchemaNode }> } }>>
    components: { schemas: Record<string, SchemaNode> }
  }
  components = doc.components.schemas
  operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]): Operation => {
      const security = op.security?.[0]
      return {
        method: method.toUpperCase(),
        path,
        security: security === undefined ? "none" : "userToken" in security ? "user" : "key",
        query: (op.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name),
        headers: (op.parameters ?? []).filter((p) => p.in === "header").map((p) => p.name),
        body: op.requestBody?.content["application/json"]?.schema
      }
    }))
})
afterAll(() => server.stop())

const resolve = (node: SchemaNode | undefined): SchemaNode | undefined => {
  for (let depth = 0; node?.$ref !== undefined && depth < 10; depth++) node = components[node.$ref.replace("#/components/schemas/", "")]
  if (node?.anyOf !== undefined) return resolve(node.anyOf.find((n) => resolve(n)?.properties !== undefined) ?? node.anyOf[0])
  return node
}

const typeOf = (node: SchemaNode | undefined): string => {
  const resolved = resolve(node)
  const t = resolved?.type
  return typeof t === "string" ? t : Array.isArray(t) ? (t[0] ?? "unknown") : resolved?.properties !== undefined ? "object" : "unknown"
}

const BAD_IDS = ["", "x", "sbx_", `sbx_${"a".repeat(300)}`, "%ff%fe", "%00", "..%2f..%2fetc", "%F0%9F%99%82", "a%20b", "-1", "null", "{id}", "prj_!!", "%E0%A4%A", "00000000-0000-0000-0000-00000000000g"]
const BAD_QUERY = ["", "-1", "0", "abc", "1e999", "9".repeat(400), "%ff", "[]", "{}", "true", "1.5", "%00", "2026-13-45", "a".repeat(2000)]
const WRONG_ROOTS: ReadonlyArray<string> = ["42", "\"text\"", "[]", "null", "true", "[{}]", "-0", "1e309"]

const generate = (op: Operation, random: () => number): Array<Case> => {
  const pick = <T>(items: ReadonlyArray<T>): T => items[Math.floor(random() * items.length)]!
  /** A well-formed id that names nothing (same shape as real ones, so the path decodes and validation is reached). */
  const unknownId = (name: string) => {
    const prefix = name === "sandbox_id" ? "sbx_" : name === "process_id" ? "proc_" : name === "operation_id" ? "op_" : name === "runtime_operation_id" ? "rop_" : name === "endpoint_id" ? "ep_" : name === "project_id" ? "prj_" : undefined
    if (name === "provider") return "e2b"
    return prefix === undefined ? "3f2b8c1e-0000-4000-8000-00000000f022" : `${prefix}${"z".repeat(32)}`
  }
  const properties = resolve(op.body)?.properties ?? {}
  const names = Object.keys(properties)
  const wrongValue = (node: SchemaNode | undefined): Json => {
    switch (typeOf(node)) {
      case "string":
        return pick([42, true, null, [], { a: 1 }, -1.5])
      case "integer":
      case "number":
        return pick(["12", true, null, [], 1.5, -1, 2 ** 64, 1e308, { n: 1 }])
      case "boolean":
        return pick(["true", 1, 0, null, []])
      case "array":
        return pick(["[]", 1, { 0: "a" }, null, [null, 1, "x", []]])
      case "object":
        return pick([[], "{}", 1, null, { "": { "": [] } }])
      default:
        return pick([null, [], 1e308, "\u0000", { x: [] }])
    }
  }
  const wrongTypes = (): Record<string, Json> => Object.fromEntries(names.map((n) => [n, wrongValue(properties[n])]))

  const cases: Array<Case> = []
  for (let i = 0; i < CASES_PER_OPERATION; i++) {
    // Body mutations where the operation takes a body; elsewhere its path, query and headers (and a stray body).
    const kind = op.body !== undefined
      ? pick(["root", "types", "missing", "extra", "huge", "deep", "truncated", "utf8", "content-type", "numbers", "path", "query", "headers"] as const)
      : op.method === "GET"
      ? pick(["path", "query", "headers"] as const)
      : pick(["path", "query", "headers", "root", "content-type"] as const)
    const params: Record<string, string> = {}
    let path = op.path.replaceAll(/\{([^}]+)\}/g, (_, name: string) => {
      params[name] = unknownId(name)
      return params[name]!
    })
    const headers: Record<string, string> = { "x-request-id": `fuzz-${op.method}-${i}` }
    if (op.security === "user") headers["authorization"] = `Bearer ${boot.user_token}`
    if (op.security === "key") {
      headers["authorization"] = `Bearer ${boot.api_key}`
      headers["x-metal-project-id"] = boot.project_id
    }
    if (op.headers.includes("idempotency-key") && random() < 0.85) headers["idempotency-key"] = `fuzz-${i}-${Math.floor(random() * 1e9)}`
    let body: string | Uint8Array<ArrayBuffer> | undefined
    let contentType: string | undefined = "application/json"
    let query = ""
    const json = (value: unknown) => JSON.stringify(value)
    switch (kind) {
      case "root":
        body = pick(WRONG_ROOTS)
        break
      case "types":
        body = json(wrongTypes())
        break
      case "missing": {
        const keep = names.filter(() => random() < 0.3)
        body = json(Object.fromEntries(keep.map((n) => [n, wrongValue(properties[n])])))
        break
      }
      case "extra":
        body = json({ ...wrongTypes(), [pick(["__proto__x", "constructor", "zzz", "", "a".repeat(300)])]: pick([1, "x", { a: [] }]) })
        break
      case "huge":
        body = json(Object.fromEntries((names.length > 0 ? names : ["name"]).map((n) => [n, "x".repeat(pick([5_000, 100_000, 300_000]))])))
        break
      case "deep": {
        const levels = pick([65, 1_000, 50_000])
        const nested = "[".repeat(levels) + "]".repeat(levels)
        body = `{"${pick(names.length > 0 ? names : ["x"])}":${nested}}`
        break
      }
      case "truncated": {
        const whole = json(wrongTypes())
        body = whole.slice(0, Math.max(1, Math.floor(random() * whole.length)))
        break
      }
      case "utf8": {
        const prefix = Buffer.from(`{"${pick(names.length > 0 ? names : ["x"])}":"`)
        body = new Uint8Array(Buffer.concat([prefix, Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80, 0xf4, 0x90]), Buffer.from("\"}")]))
        break
      }
      case "content-type":
        contentType = pick(["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "", "application/xml"])
        body = pick(["a=1&b=2", "<x/>", "{}", "--x\r\n\r\n--x--"])
        break
      case "numbers":
        body = `{${(names.length > 0 ? names : ["n"]).map((n) => `"${n}":${pick(["1e309", "-1e309", "123456789012345678901234567890", "-0", "0.000000000001", "NaN", "Infinity", "0x10", "01"])}`).join(",")}}`
        break
      case "path": {
        const segments = path.split("/")
        const at = 1 + Math.floor(random() * (segments.length - 1))
        segments[at] = pick(BAD_IDS)
        path = segments.join("/")
        break
      }
      case "query": {
        const keys = op.query.length > 0 ? op.query : ["limit"]
        const pairs = keys.filter(() => random() < 0.7).map((k) => `${k}=${pick(BAD_QUERY)}`)
        if (random() < 0.3) pairs.push(`${pick(keys)}=1`, `${pick(keys)}=2`)
        if (random() < 0.3) pairs.push(`zzz=${pick(BAD_QUERY)}`)
        query = `?${pairs.join("&")}`
        break
      }
      case "headers": {
        const which = pick(["idempotency", "project", "auth", "request-id", "last-event-id", "swap"] as const)
        if (which === "idempotency") headers["idempotency-key"] = pick(["", "a".repeat(600), " ", "\t"])
        if (which === "project") headers["x-metal-project-id"] = pick(["", "prj_", "prj_!!!", "a".repeat(1000), other.project_id, "PRJ_x"])
        if (which === "auth") headers["authorization"] = pick(["Bearer", "Basic eDp5", `Bearer metal_sk_${"!".repeat(43)}`, `Bearer ${"a".repeat(5000)}`, "bearer  ", `Bearer ${other.api_key}`])
        if (which === "request-id") headers["x-request-id"] = pick(["has spaces in it", "a".repeat(500), "", "%%%"])
        if (which === "last-event-id") headers["last-event-id"] = pick(["-1", "abc", "1e99", "9".repeat(40)])
        if (which === "swap") headers["authorization"] = `Bearer ${op.security === "key" ? boot.user_token : boot.api_key}`
        break
      }
    }
    const hasBody = op.method !== "GET" && op.method !== "HEAD" && body !== undefined
    if (hasBody && contentType !== "") headers["content-type"] = contentType
    cases.push({ label: `${kind} #${i}`, method: op.method, url: `${server.url}${path}${query}`, headers, ...(hasBody ? { body: body! } : {}) })
  }
  return cases
}

const statuses = new Map<number, number>()

/** Sends one case; returns a problem, or undefined when the answer is right. */
const check = async (c: Case): Promise<string | undefined> => {
  const response = await fetch(c.url, { method: c.method, headers: c.headers, ...(c.body === undefined ? {} : { body: c.body }) })
  const text = await response.text()
  statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
  const where = `${c.method} ${c.url.replace(server.url, "").slice(0, 120)} [${c.label}] → ${response.status}`
  if (response.status >= 500) return `${where}: a server error: ${text.slice(0, 300)}`
  const requestId = response.headers.get("x-request-id")
  if (requestId === null || requestId === "") return `${where}: no x-request-id`
  if (response.status < 400) return undefined
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    return `${where}: not JSON: ${text.slice(0, 200)}`
  }
  if (typeof body?.code !== "string" || typeof body.message !== "string" || typeof body.retryable !== "boolean") return `${where}: not an envelope: ${text.slice(0, 200)}`
  if (body.request_id !== requestId) return `${where}: request_id ${body.request_id} !== x-request-id ${requestId}`
  if (INTERNALS.test(text)) return `${where}: internals in the answer: ${text.slice(0, 300)}`
  return undefined
}

describe("fuzz over the OpenAPI document", () => {
  it("a few thousand malformed requests: never a 5xx, always x-request-id, every error an envelope", async () => {
    const random = prng(SEED)
    const cases = operations.flatMap((op) => generate(op, random))
    expect(operations.length).toBeGreaterThan(50)
    expect(cases.length).toBeGreaterThan(2_500)
    const problems: Array<string> = []
    let next = 0
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < cases.length) {
        const c = cases[next++]!
        const problem = await check(c).catch((e) => `${c.method} ${c.url} [${c.label}]: the request failed: ${String(e)}`)
        if (problem !== undefined) problems.push(problem)
      }
    }))
    expect(problems.slice(0, 20), `${problems.length} of ${cases.length} answers were wrong`).toEqual([])
    // The credentials were good: most requests got past authentication and were refused by validation.
    expect(statuses.get(422) ?? 0).toBeGreaterThan(cases.length * 0.25)
    expect(statuses.get(401) ?? 0).toBeLessThan(cases.length * 0.1)
  }, 120_000)

  it("the endpoint listener answers malformed requests the same way (no 5xx, an envelope with x-request-id)", async () => {
    const random = prng(SEED + 1)
    const pick = <T>(items: ReadonlyArray<T>): T => items[Math.floor(random() * items.length)]!
    const problems: Array<string> = []
    for (let i = 0; i < 200; i++) {
      const id = pick(["ep_" + "a".repeat(32), "ep_", "ep_%ff", "x", ...BAD_IDS])
      const token = pick(["a".repeat(26), "", "%00", "b".repeat(200), "../..", "Zz-_"])
      const c: Case = {
        label: `endpoint #${i}`,
        method: pick(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]),
        url: `${server.endpointUrl}${pick([`/e/${id}/${token}/`, `/e/${id}/${token}`, `/e/${id}`, "/", "/v1/sandboxes", `/e/${id}/${token}/x?${pick(BAD_QUERY)}`])}`,
        headers: { host: pick(["x", "ep-a.b", "", "[::1]", "a".repeat(300)]), "x-request-id": `ep-fuzz-${i}` }
      }
      const problem = await check(c).catch((e) => `${c.url}: the request failed: ${String(e)}`)
      if (problem !== undefined) problems.push(problem)
    }
    expect(problems.slice(0, 20)).toEqual([])
  })
})
