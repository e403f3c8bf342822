/**
 * Every route the gateway serves, in one table: the HttpApi contract's (read from `Api`: each endpoint's method,
 * path, group and handler file) and the ones outside it, which Bun's router answers ahead of HttpApi (ARCHITECTURE.md
 * §10 says why each is outside): the polled and followed reads (FastReads.ts), raw writes (RawWrites.ts), terminal attaches
 * (Attach.ts), MCP (Mcp.ts), the operators' scrape (Telemetry.ts), the dashboard (Dashboard.ts), the interactive
 * docs and the OpenAPI document, and the endpoint listener (EndpointProxy.ts). `apiListenerRoutes` builds the API
 * listener's Bun routes from the table; http/Http.ts only wires them into the server.
 */
import { HttpApi } from "@effect/platform"
import { type ConfigError, Effect, Runtime } from "effect"
import type { AppConfigShape } from "../Config.ts"
import { Credentials } from "../services/Credentials.ts"
import { forward, isClustered, ownerUrl, wasForwarded } from "../services/Forwarding.ts"
import type { LiveStreams } from "../services/LiveStreams.ts"
import type { ProviderAccounts } from "../services/ProviderAccounts.ts"
import type { RawWriteServices } from "../services/sandboxes/RawFiles.ts"
import type { ServiceContext } from "../services/ServiceContext.ts"
import type { Telemetry } from "../services/Telemetry.ts"
import { Api } from "./Api.ts"
import { ATTACH_PATH, attachRoute, type OwnerOf, PROJECT_ATTACH_PATH } from "./Attach.ts"
import { guardBodySize } from "./BodyLimits.ts"
import { DASHBOARD_ASSETS, DASHBOARD_PAGES, dashboardAsset, dashboardPage } from "./Dashboard.ts"
import { FAST_READ_PATHS, type FastReadPath, type FastReads, FastReadsScoped } from "./FastReads.ts"
import { MCP_PATH, mcpRoute, PROJECT_MCP_PATH } from "./Mcp.ts"
import { PROJECT_RAW_CONTENT_PATH, RAW_CONTENT_PATH, rawWriteRoute } from "./RawWrites.ts"
import { metricsRoute } from "./Telemetry.ts"

/** A Bun route; it answers nothing (undefined) when it upgraded the connection to a WebSocket. */
export type BunRoute = (request: Bun.BunRequest, server: Bun.Server<unknown>) => Response | undefined | Promise<Response | undefined>

/** The interactive docs (HttpApiSwagger) and the OpenAPI document (generated from the contract). */
export const DOCS_PATH = "/docs"
export const OPENAPI_PATH = "/v1/openapi.json"

/** Which listener serves a route: the API's (PORT) or the endpoint listener (ENDPOINTS_PORT, its own origin). */
export type Listener = "api" | "endpoints"

export interface RouteEntry {
  readonly listener: Listener
  /** `*`: any method (the route answers the ones it does not take itself, or hands them to the API). */
  readonly method: string
  /** Bun's route pattern (`:name` one segment, `*` the rest); on the endpoint listener, how an endpoint is addressed. */
  readonly path: string
  /** Who answers: a contract route's handler (`handlers/<Group>Http.ts` `group.endpoint`), else the module and function. */
  readonly handler: string
  /** Off the contract: why, in a few words. */
  readonly note?: string
  /** A Bun route ahead of the contract's own route (same method and path), which it hands the request to or checks with first. */
  readonly aheadOfContract?: true
}

/** What the off-contract routes of the API listener are built with. */
interface Shared {
  readonly config: AppConfigShape
  /** The body-size guard in front of the API (HttpApi, through `server.fetch`). */
  readonly api: ReturnType<typeof guardBodySize>
  readonly fast: FastReads
  readonly ownerOf: OwnerOf
}

type Services = ServiceContext | Credentials | Telemetry | RawWriteServices | ProviderAccounts | LiveStreams

/** An off-contract route of the API listener: its entries and how its handler is built (undefined: not served). */
interface OffContract extends Omit<RouteEntry, "path" | "listener"> {
  readonly paths: ReadonlyArray<string>
  readonly build: (shared: Shared) => Effect.Effect<BunRoute | undefined, ConfigError.ConfigError, Services>
  /** Served by the node the sandbox lives on (services/Forwarding.ts): forwarded there from any other node. */
  readonly ownerServed?: boolean
}

/** Requests that call a local sandbox's provider at once, on the routes marked `ownerServed`: the sandbox's id. */
const OWNER_SERVED = /^\/v1\/(?:projects\/[^/]+\/)?sandboxes\/([^/]+)\/(?:files\/content|processes\/[^/]+\/stdin)$/

/** A polled (or followed) read: its GET answered by FastReads first, anything else by the API (behind the body-size guard: a GET has none). */
const fastRead = (path: FastReadPath): OffContract => ({
  method: "GET",
  paths: [path],
  handler: "FastReads.ts makeFastReads (other methods, and anything but the plain success: HttpApi)",
  note: "polled in tight loops, or followed; the full stack costs ~1 ms of CPU (~3–4 ms a followed stream)",
  aheadOfContract: true,
  build: ({ api, fast }) => {
    const read = fast.routes[path]
    return Effect.succeed<BunRoute>(read === undefined ? api : (request, server) => (request.method === "GET" ? read(request, server) : api(request, server)))
  }
})

const OFF_CONTRACT: ReadonlyArray<OffContract> = [
  {
    method: "*",
    paths: ["/*"],
    handler: "HttpApi (Api.ts, handlers/) behind BodyLimits.ts guardBodySize",
    note: "everything no other route takes: the contract's routes",
    ownerServed: true,
    build: ({ api }) => Effect.succeed(api)
  },
  ...FAST_READ_PATHS.map(fastRead),
  {
    method: "POST",
    paths: [MCP_PATH, PROJECT_MCP_PATH],
    handler: "Mcp.ts mcpRoute (tools: McpTools.ts, each made of the API's own requests)",
    note: "a JSON-RPC transport, not a REST resource",
    // A project API key alone is enough (its project is implied), or the project in the path.
    build: ({ config }) =>
      Effect.gen(function*() {
        const credentials = yield* Credentials
        const run = Runtime.runPromise(yield* Effect.runtime<never>())
        return guardBodySize(config.maxBodyBytes, mcpRoute((token) =>
          run(credentials.resolveApiKey(token)).then((key) => (key._tag === "Some" ? key.value.projectId : undefined), () => undefined)))
      })
  },
  {
    method: "GET",
    paths: DASHBOARD_PAGES,
    handler: "Dashboard.ts dashboardPage (other methods: HttpApi)",
    note: "static files of the dashboard, the front door",
    build: ({ api }) => Effect.succeed(dashboardPage(api))
  },
  {
    method: "GET",
    paths: [DASHBOARD_ASSETS],
    handler: "Dashboard.ts dashboardAsset",
    note: "the dashboard's hashed assets",
    build: () => Effect.succeed(dashboardAsset)
  },
  {
    method: "PUT",
    paths: [RAW_CONTENT_PATH, PROJECT_RAW_CONTENT_PATH],
    handler: "RawWrites.ts rawWriteRoute (after the contract route's checks; other methods: HttpApi)",
    note: "the body streams to the provider (up to RAW_WRITE_MAX_BYTES, past the body-size guard, which it enforces itself)",
    aheadOfContract: true,
    ownerServed: true,
    build: ({ api }) => Effect.map(Effect.runtime<RawWriteServices>(), (runtime) => rawWriteRoute(runtime, api) as BunRoute)
  },
  {
    method: "GET",
    paths: [ATTACH_PATH, PROJECT_ATTACH_PATH],
    handler: "Attach.ts attachRoute (after the contract route's checks; relayed to the sandbox's node)",
    note: "a WebSocket: only the route that received the connection can upgrade it",
    aheadOfContract: true,
    build: ({ config, ownerOf }) =>
      Effect.map(Effect.runtime<ServiceContext | ProviderAccounts | LiveStreams>(), (runtime) => attachRoute(runtime, config, ownerOf) as BunRoute)
  },
  {
    method: "GET",
    paths: ["/metrics"],
    handler: "Telemetry.ts metricsRoute (only with METRICS_TOKEN)",
    note: "the operators' Prometheus scrape",
    build: () => Effect.flatMap(Effect.runtime<Telemetry | ServiceContext>(), metricsRoute)
  }
]

/** The contract's routes, as HttpApi declares them (groups/), each with its handler file. */
const contractRoutes = (): Array<RouteEntry> => {
  const entries: Array<RouteEntry> = []
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group }) => {
      const file = `${group.identifier.charAt(0).toUpperCase()}${group.identifier.slice(1)}Http.ts`
      entries.push({ listener: "api", method: endpoint.method, path: endpoint.path, handler: `handlers/${file} ${group.identifier}.${endpoint.name}` })
    }
  })
  return entries
}

/** The table: every route of both listeners. */
export const routeTable = (): ReadonlyArray<RouteEntry> => [
  ...contractRoutes(),
  { listener: "api", method: "GET", path: DOCS_PATH, handler: "HttpApiSwagger.layer (Http.ts)", note: "the interactive docs of the contract" },
  { listener: "api", method: "GET", path: OPENAPI_PATH, handler: "HttpApiBuilder.middlewareOpenApi (Http.ts, OpenApiTransform.ts)", note: "generated from the contract" },
  ...OFF_CONTRACT.flatMap(({ build: _build, ownerServed: _owner, paths, ...entry }) => paths.map((path): RouteEntry => ({ listener: "api", path, ...entry }))),
  {
    listener: "endpoints",
    method: "*",
    path: "/e/:endpoint_id/:token/* (path addressing), or the host <endpoint_id>-<token>.<ENDPOINTS_BASE_DOMAIN>",
    handler: "EndpointProxy.ts EndpointServerLive: proxy (plain requests), upgradeRoute (WebSocket upgrades)",
    note: "a sandbox's own pages, on an origin of their own"
  }
]

/**
 * The API listener's Bun routes, built from the table (the contract's are served by HttpApi behind `/*`): the
 * polled reads answer their GETs first, and requests that call a local sandbox's provider at once go to the node
 * it lives on (services/Forwarding.ts), whichever route would serve them here; a terminal attach is relayed there.
 */
export const apiListenerRoutes = (config: AppConfigShape) =>
  Effect.gen(function*() {
    const fast = yield* FastReadsScoped(config)
    const api = guardBodySize(config.maxBodyBytes, (request, server) => server.fetch(request))
    const runServices = Runtime.runPromise(yield* Effect.runtime<ServiceContext>())
    // The only node (on SQLite) asks nothing of the database per request.
    const ownerOf: OwnerOf = !isClustered(config)
      ? () => Promise.resolve(undefined)
      : (sandboxId) => runServices(ownerUrl(config, sandboxId, "api")).catch(() => undefined)
    const viaOwner = (route: BunRoute): BunRoute => async (request, server) => {
      const owned = OWNER_SERVED.exec(new URL(request.url).pathname)
      if (owned?.[1] !== undefined && !wasForwarded(config, request)) {
        const base = await ownerOf(owned[1])
        if (base !== undefined) return forward(config, request, base)
      }
      return route(request, server)
    }
    const shared: Shared = { config, api, fast, ownerOf }
    const routes: Record<string, BunRoute> = {}
    for (const entry of OFF_CONTRACT) {
      const built = yield* entry.build(shared)
      if (built === undefined) continue
      for (const path of entry.paths) routes[path] = entry.ownerServed === true ? viaOwner(built) : built
    }
    return routes
  })
