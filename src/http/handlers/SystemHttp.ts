import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { AppConfig, nodeIdOf } from "../../Config.ts"
import { Db } from "../../db/Db.ts"
import { Dialect } from "../../db/Dialect.ts"
import { NodesRepo } from "../../db/repos/Nodes.ts"
import { apiError, ServiceUnavailable } from "../../domain/Errors.ts"
import { defaultInternetOf, LocalRuntime } from "../../runtime/LocalRuntime.ts"
import { Api } from "../Api.ts"
import { GATEWAY_VERSION } from "../../domain/Version.ts"

export const SystemLive = HttpApiBuilder.group(Api, "system", (handlers) =>
  Effect.gen(function*() {
    const db = yield* Db
    const nodes = yield* NodesRepo
    const dialect = yield* Dialect
    const nodeId = nodeIdOf(yield* AppConfig)
    const runtime = Option.getOrUndefined(yield* Effect.serviceOption(LocalRuntime))
    const localRuntime = () => {
      const limits = runtime?.limits?.()
      return limits === undefined || runtime === undefined
        ? {}
        : { local_runtime: { max_vcpu: limits.vcpu, max_memory_mb: limits.memoryMb, max_disk_mb: limits.diskMb, default_internet: defaultInternetOf(runtime) } }
    }
    return handlers
      .handle("health", () => Effect.succeed({ status: "ok" as const }))
      .handle("ready", () =>
        db.ping.pipe(
          Effect.zipRight(nodes.all),
          Effect.map((rows) => {
            const now = Date.now()
            return {
              status: "ready" as const,
              checks: { database: "ok" as const, engine: dialect.engine === "pg" ? "pg" as const : "sqlite" as const },
              node_id: nodeId,
              nodes: rows.map((n) => ({
                id: n.id,
                url: n.url,
                heartbeat_age_seconds: Math.max(0, Math.round((now - Date.parse(n.heartbeat_at)) / 100) / 10),
                lost: n.lost_at !== null
              })),
              ...localRuntime()
            }
          }),
          Effect.catchAllCause(() =>
            apiError(ServiceUnavailable, "not_ready", "The database is not reachable", { checks: { database: "error" } })
          )
        ))
      .handle("meta", () => Effect.succeed({ name: "sandbox-gateway", version: GATEWAY_VERSION, api_version: "v1" as const }))
  }))
