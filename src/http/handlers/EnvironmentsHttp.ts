/** `/v1/environments`: the catalogue, with the configured providers that take environment sources. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { ENVIRONMENTS } from "../../domain/Environments.ts"
import { ProviderRegistry } from "../../providers/Provider.ts"
import { Api } from "../Api.ts"

export const EnvironmentsLive = HttpApiBuilder.group(Api, "environments", (handlers) =>
  Effect.gen(function*() {
    const registry = yield* ProviderRegistry
    const providers = registry.all.filter((p) => p.capabilities.sources.includes("environment")).map((p) => p.name)
    return handlers.handle("list", () =>
      Effect.succeed({
        environments: ENVIRONMENTS.map((e) => ({ name: e.name, versions: [...e.versions], default_version: "latest", description: e.description, providers }))
      }))
  }))
