/**
 * Traces (docs/operations/monitoring.md "Traces"): with an OTLP endpoint configured, the spans of every request
 * (src/http/RequestId.ts opens one per request, continuing an incoming W3C `traceparent`), the service calls the
 * handlers make, the jobs the runner runs and the provider calls they make are exported over OTLP/HTTP. Without one,
 * spans still exist (Effect's in-process tracer: log lines carry their span) and nothing leaves the process.
 *
 * The endpoint is the operator's (a collector they run), never a tenant's, so the tenants' address policy does not
 * apply to it. Variables are OpenTelemetry's own, so an existing collector set-up carries over:
 *   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  the traces URL as is (e.g. http://127.0.0.1:4318/v1/traces), or
 *   OTEL_EXPORTER_OTLP_ENDPOINT         a base URL: `/v1/traces` is appended
 *   OTEL_EXPORTER_OTLP_HEADERS          `key=value,key2=value2` (values URL-encoded), e.g. an authorization header
 *   OTEL_EXPORTER_OTLP_PROTOCOL         `http/protobuf` (the default, as OpenTelemetry's) or `http/json`
 *   OTEL_SERVICE_NAME                   default `sandbox-gateway`
 */
import { FetchHttpClient, Headers, HttpTraceContext } from "@effect/platform"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import { Config, ConfigError, Effect, Either, Layer, Option, type Tracer } from "effect"
import { GATEWAY_VERSION } from "../domain/Version.ts"

export interface TracingConfig {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly protocol: "http/protobuf" | "http/json"
  readonly serviceName: string
}

const url = (name: string) =>
  Config.string(name).pipe(Config.mapOrFail((raw) => {
    const parsed = URL.parse(raw)
    return parsed !== null && (parsed.protocol === "http:" || parsed.protocol === "https:")
      ? Either.right(parsed)
      : Either.left(ConfigError.InvalidData([name], `${name} must be an http(s) URL`)) // its text not echoed: it may hold credentials
  }))

/**
 * `k=v,k2=v2` as OpenTelemetry's variable has it: keys and values URL-encoded, blanks around them ignored. A refusal
 * names the entry by its place, never by its text: a value is often a secret (an authorization header).
 */
export const parseOtlpHeaders = (raw: string): Either.Either<Record<string, string>, string> => {
  const headers: Record<string, string> = {}
  for (const [i, pair] of raw.split(",").entries()) {
    if (pair.trim() === "") continue
    const at = pair.indexOf("=")
    if (at <= 0) return Either.left(`entry ${i + 1} is not key=value`)
    try {
      headers[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim())
    } catch {
      return Either.left(`entry ${i + 1} is not URL-encoded`)
    }
  }
  return Either.right(headers)
}

/** The exporter's settings, or none when no endpoint is configured. */
export const tracingConfig: Config.Config<Option.Option<TracingConfig>> = Config.all({
  traces: Config.option(url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
  base: Config.option(url("OTEL_EXPORTER_OTLP_ENDPOINT")),
  headers: Config.string("OTEL_EXPORTER_OTLP_HEADERS").pipe(
    Config.withDefault(""),
    Config.mapOrFail((raw) => Either.mapLeft(parseOtlpHeaders(raw), (why) => ConfigError.InvalidData(["OTEL_EXPORTER_OTLP_HEADERS"], why)))
  ),
  protocol: Config.literal("http/protobuf", "http/json")("OTEL_EXPORTER_OTLP_PROTOCOL").pipe(Config.withDefault("http/protobuf" as const)),
  serviceName: Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault("sandbox-gateway"))
}).pipe(Config.map(({ base, headers, protocol, serviceName, traces }) => {
  const endpoint = Option.orElse(traces, () => Option.map(base, (b) => new URL(`${b.pathname.replace(/\/$/, "")}/v1/traces`, b)))
  return Option.map(endpoint, (u): TracingConfig => ({ url: u.href, headers, protocol, serviceName }))
}))

/** The tracer the whole program runs with: OTLP export when configured, else Effect's own (nothing exported). */
export const TracingLive = Layer.unwrapEffect(Effect.map(tracingConfig, Option.match({
  onNone: () => Layer.empty,
  onSome: (config) =>
    OtlpTracer.layer({
      url: config.url,
      headers: config.headers,
      resource: { serviceName: config.serviceName, serviceVersion: GATEWAY_VERSION },
      exportInterval: "1 second"
    }).pipe(
      Layer.provide(config.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf),
      Layer.provide(FetchHttpClient.layer)
    )
})))

/** A span as a W3C `traceparent` (what a job keeps of the span that enqueued it). */
export const traceParentOf = (span: Tracer.Span): string => `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`

/** The span a kept `traceparent` names (a malformed one names none: the job starts a trace of its own). */
export const spanOfTraceParent = (traceParent: string | null): Tracer.ExternalSpan | undefined =>
  traceParent === null ? undefined : Option.getOrUndefined(HttpTraceContext.w3c(Headers.fromInput({ traceparent: traceParent })))
