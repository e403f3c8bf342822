/**
 * The Northflank plugin (issue 12 item 5). `remote` when NORTHFLANK_API_TOKEN is set, which then needs
 * NORTHFLANK_PROJECT_ID (a token without one stops the gateway at start); NORTHFLANK_TEAM_ID (paths under
 * `/teams/{team}`), NORTHFLANK_API_URL (default https://api.northflank.com/v1), NORTHFLANK_DEPLOYMENT_PLAN
 * (`nf-compute-200`), NORTHFLANK_DEFAULT_IMAGE (`ubuntu:22.04`) and NORTHFLANK_EPHEMERAL_STORAGE_MB (2048) are
 * optional. Otherwise `emulated`, against the built-in emulator over the local runtime, on the host's architecture
 * only. BYOK: `api_token`, `project_id`, optionally `team_id`.
 *
 * Lifecycle only: a Northflank container's shell is reached only through its exec websocket, so the plugin declares
 * no process, files or endpoints (adapter/wire.ts), and `auto` never routes a runtime request here.
 */
import { Config, ConfigError, Effect, type Scope } from "effect"
import type { AppConfig } from "../../src/Config.ts"
import { emulatedCapabilities } from "../../src/providers/Capabilities.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { envValue } from "../core/env.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import type { SandboxProvider } from "../../src/providers/Provider.ts"
import { DEFAULT_API_URL, DEFAULT_IMAGE, DEFAULT_PLAN, makeNorthflankProvider, NORTHFLANK_CAPABILITIES } from "./adapter/index.ts"
import { EMULATED_ARCHITECTURES, northflankEmulator } from "./emulator/index.ts"

export const NorthflankPlugin: Effect.Effect<SandboxProvider, ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const apiToken = yield* envValue("NORTHFLANK_API_TOKEN")
  if (apiToken !== undefined) {
    const projectId = yield* envValue("NORTHFLANK_PROJECT_ID")
    if (projectId === undefined) return yield* Effect.fail(ConfigError.MissingData(["NORTHFLANK_PROJECT_ID"], "a Northflank API token needs its project: set NORTHFLANK_PROJECT_ID"))
    return makeNorthflankProvider({
      apiUrl: yield* Config.string("NORTHFLANK_API_URL").pipe(Config.withDefault(DEFAULT_API_URL)),
      apiToken,
      projectId,
      teamId: yield* envValue("NORTHFLANK_TEAM_ID"),
      deploymentPlan: yield* Config.string("NORTHFLANK_DEPLOYMENT_PLAN").pipe(Config.withDefault(DEFAULT_PLAN)),
      defaultImage: yield* Config.string("NORTHFLANK_DEFAULT_IMAGE").pipe(Config.withDefault(DEFAULT_IMAGE)),
      ephemeralStorageMb: yield* Config.integer("NORTHFLANK_EPHEMERAL_STORAGE_MB").pipe(
        Config.withDefault(2048),
        Config.validate({ message: "NORTHFLANK_EPHEMERAL_STORAGE_MB must be a positive number of MB", validation: (n) => n > 0 })
      ),
      mode: "remote"
    })
  }
  const emulator = yield* northflankEmulator
  // The emulator runs images (its default image is the runtime's base system) on the host's architecture only.
  const capabilities = emulatedCapabilities(NORTHFLANK_CAPABILITIES, { runsImages: true })
  const provider = makeNorthflankProvider({
    apiUrl: emulator.apiUrl,
    apiToken: emulator.apiToken,
    projectId: emulator.projectId,
    architectures: capabilities.architectures.filter((a) => EMULATED_ARCHITECTURES.includes(a)),
    mode: "emulated"
  })
  return onLocalRuntime(provider, yield* LocalRuntime, emulator.runtimeIdOf)
})
