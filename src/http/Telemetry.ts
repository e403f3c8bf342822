/**
 * Request metrics and the operators' scrape route. Every request the server answers (the API's and the polled
 * reads FastReads answers first) is counted under its route template — `/v1/sandboxes/:sandbox_id`, never the
 * path itself — so the series stay as many as the routes. `GET /metrics` exists only when METRICS_TOKEN is set
 * (at least 16 characters), and then answers only `Authorization: Bearer <METRICS_TOKEN>`.
 */
import type { ErrorCode } from "../domain/ErrorCodes.ts"
import { HttpApi } from "@effect/platform"
import { Config, Effect, Option, Redacted, type Runtime } from "effect"
import { timingSafeEqual } from "node:crypto"
import { Api } from "./Api.ts"
import { MCP_PATH } from "./Mcp.ts"
import { scrapeMetrics, type Telemetry } from "../services/Telemetry.ts"
import type { Repositories } from "../db/Database.ts"
import { envelopeResponse } from "./Edge.ts"

/** A Bun route; no response (undefined) when it upgraded the connection to a WebSocket. */
type Route = (request: Bun.BunRequest, server: Bun.Server<unknown>) => Response | undefined | Promise<Response | undefined>

const MIN_TOKEN_LENGTH = 16

/** The API's route templates, split into segments (`:name` matches any one segment), most literal first. */
const routeTemplates = (): ReadonlyArray<{ readonly template: string; readonly segments: ReadonlyArray<string> }> => {
  const templates = new Set<string>()
  HttpApi.reflect(Api, { onGroup: () => {}, onEndpoint: ({ endpoint }) => templates.add(endpoint.path) })
  templates.add("/metrics")
  templates.add(MCP_PATH)
  // A literal segment beats a parameter at the same place: /v1/sandboxes/:id vs /v1/sandboxes/metrics-like names.
  const score = (segments: ReadonlyArray<string>) => segments.map((s) => (s.startsWith(":") ? "1" : "0")).join("")
  return [...templates]
    .map((template) => ({ template, segments: template.split("/").slice(1) }))
    .sort((a, b) => (score(a.segments) < score(b.segments) ? -1 : score(a.segments) > score(b.segments) ? 1 : 0))
}

export const makeRouteOf = () => {
  const templates = routeTemplates()
  return (pathname: string): string => {
    const segments = pathname.split("/").slice(1)
    for (const t of templates) {
      if (t.segments.length !== segments.length) continue
      if (t.segments.every((s, i) => s.startsWith(":") ? segments[i] !== "" : s === segments[i])) return t.template
    }
    return "unmatched"
  }
}

/** Wraps each route so that its answer is counted (time to the response head for streams). */
export const countRequests = (routes: Record<string, Route>, telemetry: Telemetry): Record<string, Route> => {
  const routeOf = makeRouteOf()
  const counted: Record<string, Route> = {}
  for (const [path, route] of Object.entries(routes)) {
    counted[path] = async (request, server) => {
      const started = performance.now()
      let status = 500
      try {
        const response = await route(request, server)
        // No response: the connection was upgraded to a WebSocket.
        status = response?.status ?? 101
        return response
      } finally {
        telemetry.request(request.method, routeOf(new URL(request.url).pathname), status, (performance.now() - started) / 1000)
      }
    }
  }
  return counted
}

const METRICS_TOKEN = Config.option(Config.redacted("METRICS_TOKEN")).pipe(
  Config.validate({
    message: `METRICS_TOKEN must be at least ${MIN_TOKEN_LENGTH} characters`,
    validation: (token) => Option.isNone(token) || Redacted.value(token.value).length >= MIN_TOKEN_LENGTH
  })
)

const envelope = (status: number, code: ErrorCode, message: string, headers: Record<string, string> = {}) =>
  envelopeResponse(status, code, message, { headers: { "cache-control": "no-store", ...headers } })

/** The `/metrics` route when METRICS_TOKEN is set; none otherwise (the path is then an unknown route). */
export const metricsRoute = (runtime: Runtime.Runtime<Telemetry | Repositories>) =>
  Effect.map(METRICS_TOKEN, (token): Route | undefined => {
    if (Option.isNone(token)) return undefined
    const expected = Buffer.from(`Bearer ${Redacted.value(token.value)}`)
    return async (request) => {
      const given = Buffer.from(request.headers.get("authorization") ?? "")
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        return envelope(401, "unauthenticated", "The metrics need Authorization: Bearer <METRICS_TOKEN>", { "www-authenticate": "Bearer" })
      }
      if (request.method !== "GET") return envelope(405, "method_not_allowed", "The metrics are read with GET", { allow: "GET" })
      const text = await Effect.runPromise(Effect.provide(scrapeMetrics, runtime.context)).catch(() => undefined)
      if (text === undefined) return envelope(503, "service_unavailable", "The metrics could not be read; try again")
      return new Response(text, { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8", "cache-control": "no-store" } })
    }
  })
