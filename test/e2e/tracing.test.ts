/**
 * Traces (docs/operations/monitoring.md "Traces"): with an OTLP endpoint configured, a request's path is one trace —
 * the request (continuing the caller's `traceparent`), the service call it made, the job that call enqueued (run
 * later, by the runner) and the provider calls the job made — exported to the operator's collector, here a
 * loopback server that keeps what it is sent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ConfigProvider, Effect, Either, Option } from "effect"
import { parseOtlpHeaders, tracingConfig } from "../../src/services/Tracing.ts"
import { openGateway, type RunningServer, startServer } from "../support/server.ts"
import { idempotencyKey, minimalSandbox, waitOperation } from "../support/sandbox.ts"

interface OtlpValue { readonly stringValue?: string; readonly intValue?: string | number; readonly boolValue?: boolean }
interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: OtlpValue }>
}
interface Export {
  readonly contentType: string | null
  readonly authorization: string | null
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: { readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: OtlpValue }> }
    readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<OtlpSpan> }>
  }>
}

const exports: Array<Export> = []
const collector = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: async (request) => {
    if (new URL(request.url).pathname !== "/v1/traces") return new Response("not found", { status: 404 })
    const body = await request.json() as Pick<Export, "resourceSpans">
    exports.push({ contentType: request.headers.get("content-type"), authorization: request.headers.get("authorization"), resourceSpans: body.resourceSpans })
    return Response.json({})
  }
})

const spans = () => exports.flatMap((e) => e.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)))

/** The ids of a span's parent, its parent's parent, and so on (among the spans exported so far). */
const ancestors = (span: OtlpSpan): Array<string> => {
  const parent = span.parentSpanId === undefined ? undefined : spans().find((s) => s.spanId === span.parentSpanId)
  return parent === undefined ? [] : [parent.spanId, ...ancestors(parent)]
}
const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value
  return value?.stringValue ?? value?.intValue ?? value?.boolValue
}

/** Waits until the collector holds a span `find` accepts (the gateway exports every second). */
const exported = async (what: string, find: (span: OtlpSpan) => boolean) => {
  for (let i = 0; i < 300; i++) {
    const span = spans().find(find)
    if (span !== undefined) return span
    await Bun.sleep(100)
  }
  throw new Error(`no ${what} span was exported; got: ${spans().map((s) => s.name).join(", ")}`)
}

let gateway: Awaited<ReturnType<typeof openGateway>>

beforeAll(async () => {
  gateway = await openGateway("tracing@example.com", {
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector.port}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20collector-secret",
      OTEL_SERVICE_NAME: "gateway-under-test"
    }
  })
})

afterAll(async () => {
  await gateway?.server.stop()
  collector.stop(true)
})

describe("traces over OTLP", () => {
  it("a create is one trace: the caller's span → the request → the service call → the job it enqueued → the provider's calls", async () => {
    const { http, auth } = gateway
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
    const callerSpan = "00f067aa0ba902b7"
    const created = await http.post("/v1/sandboxes", {
      ...auth,
      body: minimalSandbox(),
      headers: { "idempotency-key": idempotencyKey("traced"), traceparent: `00-${traceId}-${callerSpan}-01` }
    })
    expect(created.status).toBe(202)
    expect((await waitOperation(http, auth, created.body.operation.id)).state).toBe("succeeded")

    const request = await exported("request", (s) => s.traceId === traceId && s.name === "HTTP POST")
    expect(request.parentSpanId).toBe(callerSpan)
    expect(request.kind).toBe(2) // server
    expect(attribute(request, "url.path")).toBe("/v1/sandboxes")
    expect(attribute(request, "request_id")).toBe(created.headers.get("x-request-id"))
    expect(Number(attribute(request, "http.response.status_code"))).toBe(202)

    const service = await exported("service", (s) => s.traceId === traceId && s.name === "SandboxCommands.createSandbox")
    // In between: the idempotency record's transaction (and @effect/sql's own spans for each statement).
    expect(ancestors(service)).toContain(request.spanId)
    expect(attribute(service, "project.id")).toBe(auth.project)

    // The job ran after the request had been answered, from the jobs table: the trace went with it.
    const job = await exported("job", (s) => s.traceId === traceId && s.name === "job sandbox.provision")
    expect(ancestors(job)).toContain(service.spanId)
    const provider = await exported("provider", (s) => s.traceId === traceId && s.name.startsWith("provider ") && s.name.endsWith(".create"))
    expect(ancestors(provider)).toContain(job.spanId)

    // The operator's collector settings: its headers and the service's name.
    const first = exports[0]!
    expect(first.contentType).toContain("application/json")
    expect(first.authorization).toBe("Bearer collector-secret")
    const resource = first.resourceSpans[0]!.resource.attributes
    expect(resource.find((a) => a.key === "service.name")?.value.stringValue).toBe("gateway-under-test")
  })

  it("a request without a traceparent starts a trace of its own", async () => {
    const { http, auth } = gateway
    const listed = await http.get("/v1/sandboxes", auth)
    expect(listed.status).toBe(200)
    const request = await exported("request", (s) => s.name === "HTTP GET" && attribute(s, "request_id") === listed.headers.get("x-request-id"))
    expect(request.parentSpanId ?? "").toBe("")
    expect(request.traceId).toMatch(/^[0-9a-f]{32}$/)
  })
})

describe("the tracing configuration", () => {
  const read = (env: Record<string, string>) =>
    Effect.runSync(Effect.either(Effect.withConfigProvider(tracingConfig, ConfigProvider.fromMap(new Map(Object.entries(env))))))

  it("nothing configured: nothing exported; a base URL gets /v1/traces, a traces URL is used as is; protobuf by default", () => {
    expect(read({})).toEqual(Either.right(Option.none()))
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" })).toEqual(Either.right(Option.some({
      url: "http://127.0.0.1:4318/v1/traces",
      headers: {},
      protocol: "http/protobuf",
      serviceName: "sandbox-gateway"
    })))
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318/otel/" })).toMatchObject(Either.right(Option.some({ url: "http://127.0.0.1:4318/otel/v1/traces" })))
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://collector.test/ingest" }))
      .toMatchObject(Either.right(Option.some({ url: "https://collector.test/ingest" })))
  })

  it("bad values are refused, naming the variable", () => {
    const refusal = (env: Record<string, string>) => {
      const result = read(env)
      if (Either.isRight(result)) throw new Error(`accepted: ${JSON.stringify(env)}`)
      return String(result.left)
    }
    expect(refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "ftp://127.0.0.1" })).toContain("OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL")
    expect(refusal({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "not a url" })).toContain("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    expect(refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toContain("OTEL_EXPORTER_OTLP_PROTOCOL")
    const secret = refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1", OTEL_EXPORTER_OTLP_HEADERS: "x-team=a,authorization: Bearer s3cret" })
    expect(secret).toContain("OTEL_EXPORTER_OTLP_HEADERS")
    expect(secret).toContain("entry 2 is not key=value")
    expect(secret).not.toContain("s3cret")
    expect(parseOtlpHeaders("a=1, b = two%20words ,")).toEqual(Either.right({ a: "1", b: "two words" }))
    expect(Either.isLeft(parseOtlpHeaders("a=%E0%A4%A"))).toBe(true)
  })

  it("a gateway with a bad tracing variable does not start, and says which", async () => {
    let server: RunningServer | undefined
    const failure = await startServer({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: "localhost:4318" } }).then((s) => {
      server = s
      return ""
    }, (e: unknown) => String(e))
    await server?.stop()
    expect(failure).toContain("OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL")
  })
})
