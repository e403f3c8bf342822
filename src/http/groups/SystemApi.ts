/** Unauthenticated operational routes: liveness, readiness (checks the database) and version metadata. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ServiceUnavailableWire } from "../../domain/Errors.ts"

export const Health = Schema.Struct({ status: Schema.Literal("ok") }).annotations({ identifier: "Health" })
export const NodeStatus = Schema.Struct({
  id: Schema.String,
  url: Schema.NullOr(Schema.String),
  heartbeat_age_seconds: Schema.Number,
  lost: Schema.Boolean
}).annotations({ identifier: "NodeStatus" })
export const Ready = Schema.Struct({
  status: Schema.Literal("ready"),
  checks: Schema.Struct({ database: Schema.Literal("ok"), engine: Schema.optional(Schema.Literal("sqlite", "pg")) }),
  node_id: Schema.optional(Schema.String),
  nodes: Schema.optional(Schema.Array(NodeStatus).annotations({
    description: "Every gateway node on this database (docs/operations/scaling-out.md) and the age of its last heartbeat."
  }))
}).annotations({ identifier: "Ready" })
export const Meta = Schema.Struct({
  name: Schema.String,
  version: Schema.String,
  api_version: Schema.Literal("v1")
}).annotations({ identifier: "Meta" })

export class SystemApi extends HttpApiGroup.make("system")
  .add(HttpApiEndpoint.get("health", "/health").addSuccess(Health))
  .add(HttpApiEndpoint.get("ready", "/ready").addSuccess(Ready).addError(ServiceUnavailableWire))
  .add(HttpApiEndpoint.get("meta", "/v1/meta").addSuccess(Meta))
  .annotate(OpenApi.Title, "System")
  .annotate(OpenApi.Description, "Liveness, readiness and version; no authentication.")
{}
