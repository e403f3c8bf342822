import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { AppConfig, nodeIdOf } from "../../Config.ts"
import { apiError, ServiceUnavailable } from "../../domain/Errors.ts"
import { defaultInternetOf, LocalRuntime } from "../../runtime/LocalRuntime.ts"
import { readiness } from "../../services/Readiness.ts"
import { provideServiceContext } from "../../services/ServiceContext.ts"
import { Api } from "../Api.ts"
import { GATEWAY_VERSION } from "../../domain/Version.ts"

export const SystemLive = HttpApiBuilder.group(Api, "system", (handlers) =>
  Effect.gen(function*() {
    const provide = yield* provideServiceContext
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
        readiness.pipe(
          provide,
          Effect.map(({ engine, nodes }) => ({
            status: "ready" as const,
            checks: { database: "ok" as const, engine },
            node_id: nodeId,
            nodes: nodes.map((n) => ({ id: n.id, url: n.url, heartbeat_age_seconds: n.heartbeatAgeSeconds, lost: n.lost })),
            ...localRuntime()
          })),
          Effect.catchAllCause(() =>
            apiError(ServiceUnavailable, "not_ready", "The database is not reachable", { checks: { database: "error" } })
          )
        ))
      .handle("meta", () => Effect.succeed({ name: "sandbox-gateway", version: GATEWAY_VERSION, api_version: "v1" as const }))
  }))
