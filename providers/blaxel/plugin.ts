/**
 * The Blaxel plugin. `remote` when an API key is set (BL_API_KEY or BLAXEL_API_KEY), which then needs its
 * workspace (BL_WORKSPACE or BLAXEL_WORKSPACE: a key without one stops the gateway at start); BLAXEL_API_URL
 * (default https://api.blaxel.ai/v0), BLAXEL_ACCOUNT_ID (for cost; else the workspace's), BLAXEL_REGION,
 * BLAXEL_DEFAULT_IMAGE (blaxel/base-image:latest) and BLAXEL_DEFAULT_MEMORY_MB (2048) are optional. Otherwise
 * `emulated`, against the built-in emulator over the local runtime.
 */
import { Config, ConfigError, Effect, type Scope } from "effect"
import type { AppConfig } from "../../src/Config.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { envValue } from "../core/env.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import type { SandboxProvider } from "../../src/providers/Provider.ts"
import { DEFAULT_IMAGE, makeBlaxelProvider } from "./adapter/index.ts"
import { blaxelEmulator } from "./emulator/index.ts"

export const BlaxelPlugin: Effect.Effect<SandboxProvider, ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const apiKey = yield* envValue("BL_API_KEY", "BLAXEL_API_KEY")
  if (apiKey !== undefined) {
    const workspace = yield* envValue("BL_WORKSPACE", "BLAXEL_WORKSPACE")
    if (workspace === undefined) return yield* Effect.fail(ConfigError.MissingData(["BL_WORKSPACE"], "a Blaxel API key needs its workspace: set BL_WORKSPACE (or BLAXEL_WORKSPACE)"))
    return makeBlaxelProvider({
      apiUrl: yield* Config.string("BLAXEL_API_URL").pipe(Config.withDefault("https://api.blaxel.ai/v0")),
      apiKey,
      workspace,
      accountId: yield* envValue("BLAXEL_ACCOUNT_ID"),
      region: yield* envValue("BLAXEL_REGION"),
      defaultImage: yield* Config.string("BLAXEL_DEFAULT_IMAGE").pipe(Config.withDefault(DEFAULT_IMAGE)),
      defaultMemoryMb: yield* Config.integer("BLAXEL_DEFAULT_MEMORY_MB").pipe(Config.withDefault(2048), Config.validate({ message: "BLAXEL_DEFAULT_MEMORY_MB must be at least 512", validation: (n) => n >= 512 })),
      mode: "remote"
    })
  }
  const emulator = yield* blaxelEmulator
  const provider = makeBlaxelProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, workspace: emulator.workspace, mode: "emulated" })
  return onLocalRuntime(provider, yield* LocalRuntime, emulator.runtimeIdOf)
})
