/** Wiring only: the API with its handlers, the services they need, and the Bun HTTP server. */
import { HttpApiBuilder, HttpApiSwagger, HttpMiddleware, HttpServer } from "@effect/platform"
import { BunHttpServer, BunRuntime } from "@effect/platform-bun"
import { Config, Context, Effect, Layer, Logger, LogLevel, Runtime } from "effect"
import { AppConfig, AppConfigLive, nodeIdOf, WebhookConfigLive } from "../Config.ts"
import { CheckpointerLive } from "../db/Checkpointer.ts"
import { DatabaseLive } from "../db/Database.ts"
import { Credentials, CredentialsLive } from "../services/Credentials.ts"
import { SecretBoxLive } from "../services/Crypto.ts"
import { IdempotencyStoreLive } from "../services/IdempotencyStore.ts"
import { Api } from "./Api.ts"
import { ErrorEnvelopeLive } from "./ErrorEnvelope.ts"
import { ApiKeysLive } from "./handlers/ApiKeysHttp.ts"
import { BillingLive } from "./handlers/BillingHttp.ts"
import { EventsLive } from "./handlers/EventsHttp.ts"
import { ProviderCredentialsLive } from "./handlers/ProviderCredentialsHttp.ts"
import { WebhookDeliveriesLive } from "./handlers/WebhookDeliveriesHttp.ts"
import { WebhooksLive } from "./handlers/WebhooksHttp.ts"
import { EventFeedLive } from "../services/EventFeed.ts"
import { NodesLive } from "../services/Nodes.ts"
import { WebhookResolverLive } from "../services/webhooks/Targets.ts"
import { MembersLive } from "./handlers/MembersHttp.ts"
import { OrganizationsLive } from "./handlers/OrganizationsHttp.ts"
import { ProjectsLive } from "./handlers/ProjectsHttp.ts"
import { EndpointsLive } from "./handlers/EndpointsHttp.ts"
import { ComputerLive } from "./handlers/ComputerHttp.ts"
import { FilesystemLive } from "./handlers/FilesystemHttp.ts"
import { OperationsLive } from "./handlers/OperationsHttp.ts"
import { ProcessesLive } from "./handlers/ProcessesHttp.ts"
import { ProjectSandboxesLive } from "./handlers/ProjectSandboxesHttp.ts"
import { ProjectProcessesLive } from "./handlers/ProjectProcessesHttp.ts"
import { ProjectFilesystemLive } from "./handlers/ProjectFilesystemHttp.ts"
import { ProjectEndpointsLive } from "./handlers/ProjectEndpointsHttp.ts"
import { ProjectOperationsLive } from "./handlers/ProjectOperationsHttp.ts"
import { SandboxesLive } from "./handlers/SandboxesHttp.ts"
import { EnvironmentsLive } from "./handlers/EnvironmentsHttp.ts"
import { SystemLive } from "./handlers/SystemHttp.ts"
import { SessionsLive } from "./handlers/SessionsHttp.ts"
import { EndpointServerLive } from "./EndpointProxy.ts"
import { EndpointConnectionsLive } from "../services/sandboxes/EndpointConnections.ts"
import { type LiveStreams, LiveStreamsLive } from "../services/LiveStreams.ts"
import { guardBodySize, SERVER_BODY_LIMIT } from "./BodyLimits.ts"
import { FastReadsScoped } from "./FastReads.ts"
import { OperationRunnerLive } from "../services/OperationRunner.ts"
import { ProviderAccounts } from "../services/ProviderAccounts.ts"
import { ProviderRegistryLive } from "../services/ProviderRegistryLive.ts"
import type { GatewayPlugin } from "../providers/registry.ts"
import { SandboxJobsLive } from "../services/sandboxes/Jobs.ts"
import { ReaperLive } from "../services/sandboxes/Reaper.ts"
import { LocalRuntimeLive } from "../runtime/LocalRuntimeLive.ts"
import { withRequestId } from "./RequestId.ts"
import { EDGE_SERVE_OPTIONS, edgeRoutes } from "./Edge.ts"
import { countRequests, metricsRoute } from "./Telemetry.ts"
import { MCP_PATH, mcpRoute, PROJECT_MCP_PATH } from "./Mcp.ts"
import { announce } from "./Welcome.ts"
import { DASHBOARD_ASSETS, DASHBOARD_PAGES, dashboardAsset, dashboardPage } from "./Dashboard.ts"
import { ATTACH_PATH, attachRoute, PROJECT_ATTACH_PATH } from "./Attach.ts"
import { PROJECT_RAW_CONTENT_PATH, RAW_CONTENT_PATH, rawWriteRoute } from "./RawWrites.ts"
import type { RawWriteServices } from "../services/sandboxes/RawFiles.ts"
import type { ProcessesRepo } from "../db/repos/Processes.ts"
import type { SandboxesRepo } from "../db/repos/Sandboxes.ts"
import { NodesRepo } from "../db/repos/Nodes.ts"
import { nowIso } from "../domain/Time.ts"
import { forward, isClustered, ownerUrl, wasForwarded } from "../services/Forwarding.ts"
import { Telemetry } from "../services/Telemetry.ts"
import { provideRepositories, type Repositories } from "../db/Database.ts"
import { IDLE_SECONDS } from "./Sse.ts"
import { ProjectKeyAuthLive, UserAuthLive } from "./Authentication.ts"

export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([
    SystemLive, SessionsLive, OrganizationsLive, MembersLive, ProjectsLive, ApiKeysLive, EventsLive, BillingLive, WebhooksLive, WebhookDeliveriesLive, ProviderCredentialsLive,
    SandboxesLive, EnvironmentsLive, ProjectSandboxesLive, ProjectOperationsLive, OperationsLive, ProcessesLive, FilesystemLive, EndpointsLive, ComputerLive,
    ProjectProcessesLive, ProjectFilesystemLive, ProjectEndpointsLive
  ]),
  Layer.provide([UserAuthLive, ProjectKeyAuthLive, ErrorEnvelopeLive])
)

/**
 * Providers (and their emulators over the local runtime), then the job handlers, which start the runner; the
 * event feed wakes it when events (and their webhook deliveries) are committed.
 */
const sandboxPlaneLive = (plugins: ReadonlyArray<GatewayPlugin>) => Layer.mergeAll(SandboxJobsLive, ReaperLive, EventFeedLive, NodesLive).pipe(
  Layer.provideMerge(ProviderAccounts.Default),
  Layer.provideMerge(ProviderRegistryLive(plugins)),
  Layer.provideMerge(OperationRunnerLive),
  // Merged: /ready states the runtime's limits.
  Layer.provideMerge(LocalRuntimeLive)
)

/** The endpoint listener (its own origin) and the registry of exchanges open through it. */
const EndpointsServingLive = EndpointServerLive.pipe(Layer.provideMerge(EndpointConnectionsLive))

/** The services, with the provider plugins the entry hands in (bin/main.ts: `providers/index.ts`'s). */
export const servicesLive = (plugins: ReadonlyArray<GatewayPlugin>) => Layer.mergeAll(CredentialsLive, IdempotencyStoreLive, sandboxPlaneLive(plugins), CheckpointerLive, EndpointsServingLive, LiveStreamsLive).pipe(
  Layer.provideMerge(WebhookResolverLive),
  Layer.provideMerge(Telemetry.Default),
  Layer.provideMerge(SecretBoxLive),
  Layer.provideMerge(WebhookConfigLive),
  Layer.provideMerge(DatabaseLive),
  Layer.provideMerge(AppConfigLive)
)

/** The routes that call a sandbox's provider synchronously (not through a job): served by the sandbox's node. */
const OWNER_SERVED = /^\/v1\/(?:projects\/[^/]+\/)?sandboxes\/([^/]+)\/(?:files\/content|processes\/[^/]+\/stdin)$/

/** Bun's server; its router answers the polled reads first (FastReads) and hands everything else to the API. */
const ServerLive = Layer.unwrapScoped(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const fast = yield* FastReadsScoped(config)
    // Every request passes the body-size guard, except the plain GETs FastReads answers (a GET has no body).
    const guard = guardBodySize(config.maxBodyBytes, (request, server) => server.fetch(request))
    // A route answers nothing (undefined) when it upgraded the connection to a WebSocket.
    const routes: Record<string, (request: Bun.BunRequest, server: Bun.Server<unknown>) => Response | undefined | Promise<Response | undefined>> = { "/*": guard }
    for (const [route, read] of Object.entries(fast.routes)) routes[route] = (request, server) => (request.method === "GET" ? read(request, server) : guard(request, server))
    // MCP: a project API key alone is enough (its project is implied), or the project in the path.
    const credentials = yield* Credentials
    const runCredentials = Runtime.runPromise(yield* Effect.runtime<never>())
    const mcp = guardBodySize(config.maxBodyBytes, mcpRoute((token) =>
      runCredentials(credentials.resolveApiKey(token)).then((key) => (key._tag === "Some" ? key.value.projectId : undefined), () => undefined)))
    routes[MCP_PATH] = mcp
    routes[PROJECT_MCP_PATH] = mcp
    // The dashboard, the front door: its page at `/` and its own paths, its assets (Dashboard.ts); the API's own routes are untouched.
    for (const page of DASHBOARD_PAGES) routes[page] = dashboardPage(guard)
    routes[DASHBOARD_ASSETS] = dashboardAsset
    // Raw writes stream their body (up to RAW_WRITE_MAX_BYTES): past the body-size guard, which they enforce themselves.
    routes[RAW_CONTENT_PATH] = rawWriteRoute(yield* Effect.runtime<RawWriteServices>(), guard) as (typeof routes)[string]
    routes[PROJECT_RAW_CONTENT_PATH] = routes[RAW_CONTENT_PATH]
    // Requests that call a local sandbox's provider at once go to the node it lives on (services/Forwarding.ts),
    // whichever route would serve them here (the raw-write route included); a terminal attach is relayed there.
    const runRepositories = Runtime.runPromise(yield* Effect.runtime<Repositories>())
    // The only node (on SQLite) asks nothing of the database per request.
    const ownerOf = !isClustered(config)
      ? () => Promise.resolve(undefined)
      : (sandboxId: string) => runRepositories(ownerUrl(config, sandboxId, "api")).catch(() => undefined)
    routes[ATTACH_PATH] = attachRoute(yield* Effect.runtime<ProcessesRepo | SandboxesRepo | ProviderAccounts | LiveStreams>(), config, ownerOf) as (typeof routes)[string]
    routes[PROJECT_ATTACH_PATH] = routes[ATTACH_PATH]
    const scrape = yield* metricsRoute(yield* Effect.runtime<Telemetry | Repositories>())
    if (scrape !== undefined) routes["/metrics"] = scrape
    const viaOwner = (route: (typeof routes)[string]): (typeof routes)[string] => async (request, server) => {
      const owned = OWNER_SERVED.exec(new URL(request.url).pathname)
      if (owned?.[1] !== undefined && !wasForwarded(config, request)) {
        const base = await ownerOf(owned[1])
        if (base !== undefined) return forward(config, request, base)
      }
      return route(request, server)
    }
    for (const path of ["/*", RAW_CONTENT_PATH, PROJECT_RAW_CONTENT_PATH]) routes[path] = viaOwner(routes[path]!)
    // A followed stream (`?follow=true`) is quiet up to 15 s between heartbeats: Bun's default 10 s would cut it.
    const provide = yield* provideRepositories
    return BunHttpServer.layer({
      ...EDGE_SERVE_OPTIONS,
      port: config.port,
      hostname: config.host,
      maxRequestBodySize: SERVER_BODY_LIMIT,
      idleTimeout: IDLE_SECONDS,
      // Outermost, the edge: a request without a usable Host never reaches a route, nor a crash Bun's error page.
      routes: edgeRoutes(countRequests(routes, yield* Telemetry))
    }).pipe(
      // Where the other replicas forward to (docs/operations/scaling-out.md): NODE_URL, else the address it listens on.
      Layer.tap((context) =>
        Effect.gen(function*() {
          const address = Context.get(context, HttpServer.HttpServer).address
          const listening = address._tag === "TcpAddress" ? `http://${address.hostname}:${address.port}` : `http://localhost`
          yield* provide(NodesRepo.setUrl(nodeIdOf(config), config.nodeUrl ?? listening, yield* nowIso))
        }))
    )
  })
)

const ApiServerLive = HttpApiBuilder.serve((app) => withRequestId(HttpMiddleware.logger(app))).pipe(
  // No spans per request: nothing exports them, and the span reads the client address from Bun's server, which
  // a request FastReads hands over (through `server.fetch`) does not carry.
  HttpMiddleware.withTracerDisabledWhen(() => true),
  Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
  Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/v1/openapi.json" })),
  Layer.provide(ApiLive),
  Layer.provideMerge(ServerLive)
)

/** The whole server; once it listens it says where everything is (`operatorCommand`: how to run the CLI here). */
export const httpLive = (operatorCommand: string, plugins: ReadonlyArray<GatewayPlugin>) =>
  Layer.effectDiscard(announce(operatorCommand)).pipe(Layer.provideMerge(ApiServerLive), Layer.provide(servicesLive(plugins)))

/** LOG_LEVEL (default info) decides what is logged, the per-request access log included. */
const LoggingLive = Layer.unwrapEffect(
  Effect.map(
    Config.literal("trace", "debug", "info", "warning", "error", "none")("LOG_LEVEL").pipe(Config.withDefault("info" as const)),
    (level) => Logger.minimumLogLevel(level === "none" ? LogLevel.None : LogLevel.fromLiteral(level === "warning" ? "Warning" : (level.charAt(0).toUpperCase() + level.slice(1)) as LogLevel.Literal))
  )
)

/** Runs the server until it is stopped (SIGINT/SIGTERM). */
export const runServer = (operatorCommand: string, plugins: ReadonlyArray<GatewayPlugin>) =>
  Layer.launch(httpLive(operatorCommand, plugins).pipe(Layer.provide(LoggingLive))).pipe(BunRuntime.runMain)
