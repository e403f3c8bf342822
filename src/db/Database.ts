/**
 * The db layer as one Layer: the connection (src/db/Sql.ts), the dialect seam (src/db/Dialect.ts), transactions
 * (src/db/Db.ts) and one repository per aggregate (src/db/repos/). Services and handlers use the repositories;
 * nothing outside src/db writes SQL (checked by scripts/check-layers.ts).
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Db } from "./Db.ts"
import { Dialect } from "./Dialect.ts"
import { BillingRepo } from "./repos/Billing.ts"
import { EndpointsRepo } from "./repos/Endpoints.ts"
import { RecordingsRepo } from "./repos/Recordings.ts"
import { EventsRepo } from "./repos/Events.ts"
import { IdempotencyRepo } from "./repos/Idempotency.ts"
import { JobsRepo } from "./repos/Jobs.ts"
import { NodesRepo } from "./repos/Nodes.ts"
import { OperationsRepo } from "./repos/Operations.ts"
import { OrganizationsRepo } from "./repos/Organizations.ts"
import { ProcessesRepo } from "./repos/Processes.ts"
import { ProjectsRepo } from "./repos/Projects.ts"
import { ProviderCredentialsRepo } from "./repos/ProviderCredentials.ts"
import { RuntimeOperationsRepo } from "./repos/RuntimeOperations.ts"
import { SandboxesRepo } from "./repos/Sandboxes.ts"
import { UsageRepo } from "./repos/Usage.ts"
import { UsersRepo } from "./repos/Users.ts"
import { WebhookDeliveriesRepo } from "./repos/WebhookDeliveries.ts"
import { WebhooksRepo } from "./repos/Webhooks.ts"
import { SqlLive } from "./Sql.ts"
import { makePgDialect } from "./PgDialect.ts"
import { makeSqliteDialect } from "./SqliteDialect.ts"

export const RepositoriesLive = Layer.mergeAll(
  Db.Default,
  EventsRepo.Default,
  UsersRepo.Default,
  OrganizationsRepo.Default,
  ProjectsRepo.Default,
  BillingRepo.Default,
  UsageRepo.Default,
  WebhooksRepo.Default,
  WebhookDeliveriesRepo.Default,
  ProviderCredentialsRepo.Default,
  IdempotencyRepo.Default,
  JobsRepo.Default,
  SandboxesRepo.Default,
  OperationsRepo.Default,
  ProcessesRepo.Default,
  RuntimeOperationsRepo.Default,
  EndpointsRepo.Default,
  RecordingsRepo.Default,
  NodesRepo.Default
)

/** Every repository, transactions and the dialect: what services and handlers may ask for. */
export type Repositories = Layer.Layer.Success<typeof RepositoriesLive> | Dialect

const TAGS = [
  Db, Dialect, EventsRepo, UsersRepo, OrganizationsRepo, ProjectsRepo, BillingRepo, UsageRepo, WebhooksRepo, WebhookDeliveriesRepo, ProviderCredentialsRepo,
  IdempotencyRepo, JobsRepo, SandboxesRepo, OperationsRepo, ProcessesRepo, RuntimeOperationsRepo, EndpointsRepo, RecordingsRepo, NodesRepo
] as const

/**
 * The repositories of the current context, and nothing else. Capture them once (when a handler group or job
 * handler is built) and provide them to the effects run later: a whole captured context would also carry the
 * layer's Scope, and resources acquired by a request would then live as long as the server.
 */
export const repositories: Effect.Effect<Context.Context<Repositories>, never, Repositories> = Effect.map(
  Effect.context<Repositories>(),
  Context.pick(...TAGS)
)

/** `Effect.provide` of the captured repositories. */
export const provideRepositories = Effect.map(repositories, (context) => Effect.provide(context))

/** The dialect of the connected engine. */
export const DialectLive = Layer.effect(
  Dialect,
  Effect.map(SqlClient.SqlClient, (sql) => sql.onDialectOrElse({ pg: () => makePgDialect(sql), orElse: () => makeSqliteDialect(sql) }))
)

/** Connection, migrations, dialect and repositories (the SqlClient stays visible to tests and the checkpointer). */
export const DatabaseLive = RepositoriesLive.pipe(Layer.provideMerge(DialectLive), Layer.provideMerge(SqlLive))
