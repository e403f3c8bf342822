import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Db } from "../../db/Db.ts"
import { ServiceUnavailable } from "../../domain/Errors.ts"
import { Api } from "../Api.ts"

export const VERSION = "0.1.0"

export const SystemLive = HttpApiBuilder.group(Api, "system", (handlers) =>
  Effect.gen(function*() {
    const db = yield* Db
    return handlers
      .handle("health", () => Effect.succeed({ status: "ok" as const }))
      .handle("ready", () =>
        db.ping.pipe(
          Effect.as({ status: "ready" as const, checks: { database: "ok" as const } }),
          Effect.catchAllCause(() =>
            new ServiceUnavailable({ code: "not_ready", message: "The database is not reachable", details: { checks: { database: "error" } } })
          )
        ))
      .handle("meta", () => Effect.succeed({ name: "sandbox-gateway", version: VERSION, api_version: "v1" as const }))
  }))
