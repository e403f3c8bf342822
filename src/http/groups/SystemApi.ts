/** Unauthenticated operational routes: liveness, readiness (checks the database) and version metadata. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { failsWith, ServiceUnavailable } from "../../domain/Errors.ts"

export const Health = Schema.Struct({ status: Schema.Literal("ok") }).annotations({ identifier: "Health" })
export const NodeStatus = Schema.Struct({
  id: Schema.String,
  url: Schema.NullOr(Schema.String),
  heartbeat_age_seconds: Schema.Number,
  lost: Schema.Boolean
}).annotations({ identifier: "NodeStatus" })
export const LocalRuntimeStatus = Schema.Struct({
  max_vcpu: Schema.Number,
  max_memory_mb: Schema.Int,
  max_disk_mb: Schema.Int,
  default_internet: Schema.Boolean
}).annotations({
  identifier: "LocalRuntimeStatus",
  description: "What this node's local runtime (behind the emulated providers) can give one sandbox — its cores, its memory, the free disk of DATA_DIR — and whether a sandbox whose request says nothing of the internet gets it (RUNTIME_DEFAULT_INTERNET). A request above it is never placed on an emulated provider."
})
export const Ready = Schema.Struct({
  status: Schema.Literal("ready"),
  checks: Schema.Struct({ database: Schema.Literal("ok"), engine: Schema.optional(Schema.Literal("sqlite", "pg")) }),
  node_id: Schema.optional(Schema.String),
  nodes: Schema.optional(Schema.Array(NodeStatus).annotations({
    description: "Every gateway node on this database (docs/operations/scaling-out.md) and the age of its last heartbeat."
  })),
  local_runtime: Schema.optional(LocalRuntimeStatus)
}).annotations({ identifier: "Ready" })
export const Meta = Schema.Struct({
  name: Schema.String,
  version: Schema.String,
  api_version: Schema.Literal("v1")
}).annotations({ identifier: "Meta" })

export class SystemApi extends HttpApiGroup.make("system")
  .add(HttpApiEndpoint.get("health", "/health").addSuccess(Health))
  .add(
    HttpApiEndpoint.get("ready", "/ready")
      .addError(failsWith(ServiceUnavailable, "not_ready"))
      .addSuccess(Ready)
  )
  .add(HttpApiEndpoint.get("meta", "/v1/meta").addSuccess(Meta))
  .annotate(OpenApi.Title, "System")
  .annotate(OpenApi.Description, "Liveness, readiness and version; no authentication.")
{}
