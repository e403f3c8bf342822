/** Wiring only: the API with its handlers, the services they need, and the Bun HTTP server with the route table's routes (Routes.ts). */
import { HttpApiBuilder, HttpApiSwagger, HttpMiddleware, HttpServer } from "@effect/platform"
import { BunHttpServer, BunRuntime } from "@effect/platform-bun"
import { Config, Context, Effect, Layer, Logger, LogLevel } from "effect"
import { AppConfig, AppConfigLive, WebhookConfigLive } from "../Config.ts"
import { CredentialsLive } from "../services/Credentials.ts"
import { ProviderAccounts } from "../services/ProviderAccounts.ts"
import { LiveStreamsLive } from "../services/LiveStreams.ts"
import { recordApiUrl } from "../services/Nodes.ts"
import { CheckpointerLive, DatabaseLive, provideServiceContext } from "../services/ServiceContext.ts"
import { SERVER_BODY_LIMIT } from "./BodyLimits.ts"
import { countRequests } from "./Telemetry.ts"
import { apiListenerRoutes, DOCS_PATH, OPENAPI_PATH } from "./Routes.ts"
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
import { OperationRunnerLive } from "../services/OperationRunner.ts"
import { ProviderRegistryLive } from "../services/ProviderRegistryLive.ts"
import type { GatewayPlugin } from "../providers/registry.ts"
import { SandboxJobsLive } from "../services/sandboxes/Jobs.ts"
import { ReaperLive } from "../services/sandboxes/Reaper.ts"
import { LocalRuntimeLive } from "../runtime/LocalRuntimeLive.ts"
import { withRequestId } from "./RequestId.ts"
import { EDGE_SERVE_OPTIONS, edgeRoutes } from "./Edge.ts"
import { announce } from "./Welcome.ts"
import { Telemetry } from "../services/Telemetry.ts"
import { TracingLive } from "../services/Tracing.ts"
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

/** Bun's server with the API listener's routes (Routes.ts: the off-contract ones first, everything else to the API). */
const ServerLive = Layer.unwrapScoped(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const routes = yield* apiListenerRoutes(config)
    const provide = yield* provideServiceContext
    return BunHttpServer.layer({
      ...EDGE_SERVE_OPTIONS,
      port: config.port,
      hostname: config.host,
      maxRequestBodySize: SERVER_BODY_LIMIT,
      // A followed stream (`?follow=true`) is quiet up to 15 s between heartbeats: Bun's default 10 s would cut it.
      idleTimeout: IDLE_SECONDS,
      // Outermost, the edge: a request without a usable Host never reaches a route, nor a crash Bun's error page.
      routes: edgeRoutes(countRequests(routes, yield* Telemetry))
    }).pipe(
      // Where the other replicas forward to (docs/operations/scaling-out.md): NODE_URL, else the address it listens on.
      Layer.tap((context) =>
        Effect.gen(function*() {
          const address = Context.get(context, HttpServer.HttpServer).address
          const listening = address._tag === "TcpAddress" ? `http://${address.hostname}:${address.port}` : `http://localhost`
          yield* provide(recordApiUrl(config, config.nodeUrl ?? listening))
        }))
    )
  })
)

const ApiServerLive = HttpApiBuilder.serve((app) => withRequestId(HttpMiddleware.logger(app))).pipe(
  // The platform's own request span is off: withRequestId opens ours. The platform's reads the client address from
  // Bun's server, which a request FastReads hands over (through `server.fetch`) does not carry.
  HttpMiddleware.withTracerDisabledWhen(() => true),
  Layer.provide(HttpApiSwagger.layer({ path: DOCS_PATH })),
  Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: OPENAPI_PATH })),
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
  Layer.launch(httpLive(operatorCommand, plugins).pipe(Layer.provide(TracingLive), Layer.provide(LoggingLive))).pipe(BunRuntime.runMain)
