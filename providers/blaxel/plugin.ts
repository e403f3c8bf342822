/**
 * The Blaxel plugin. `remote` when an API key is set (BL_API_KEY or BLAXEL_API_KEY), which then needs its
 * workspace (BL_WORKSPACE or BLAXEL_WORKSPACE: a key without one stops the gateway at start); BLAXEL_API_URL
 * (default https://api.blaxel.ai/v0), BLAXEL_ACCOUNT_ID (for cost; else the workspace's), BLAXEL_REGION,
 * BLAXEL_DEFAULT_IMAGE (blaxel/base-image:latest) and BLAXEL_DEFAULT_MEMORY_MB (2048) are optional. Otherwise
 * `emulated`, against the built-in emulator over the local runtime.
 */
import { Config, ConfigError, Effect, Option, type Scope } from "effect"
import type { AppConfig } from "../../src/Config.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import type { SandboxProvider } from "../core/Provider.ts"
import { DEFAULT_IMAGE, makeBlaxelProvider } from "./adapter/index.ts"
import { blaxelEmulator } from "./emulator/index.ts"

/** The first of these variables that is set and not blank. */
const firstOf = (...names: ReadonlyArray<string>) =>
  Effect.map(Effect.all(names.map((n) => Config.option(Config.string(n)))), (values) =>
    Option.firstSomeOf(values.map((v) => Option.filter(v, (s) => s.trim() !== ""))))

export const BlaxelPlugin: Effect.Effect<SandboxProvider, ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const apiKey = yield* firstOf("BL_API_KEY", "BLAXEL_API_KEY")
  if (Option.isSome(apiKey)) {
    const workspace = yield* firstOf("BL_WORKSPACE", "BLAXEL_WORKSPACE")
    if (Option.isNone(workspace)) return yield* Effect.fail(ConfigError.MissingData(["BL_WORKSPACE"], "a Blaxel API key needs its workspace: set BL_WORKSPACE (or BLAXEL_WORKSPACE)"))
    return makeBlaxelProvider({
      apiUrl: yield* Config.string("BLAXEL_API_URL").pipe(Config.withDefault("https://api.blaxel.ai/v0")),
      apiKey: apiKey.value,
      workspace: workspace.value,
      accountId: Option.getOrUndefined(yield* firstOf("BLAXEL_ACCOUNT_ID")),
      region: Option.getOrUndefined(yield* firstOf("BLAXEL_REGION")),
      defaultImage: yield* Config.string("BLAXEL_DEFAULT_IMAGE").pipe(Config.withDefault(DEFAULT_IMAGE)),
      defaultMemoryMb: yield* Config.integer("BLAXEL_DEFAULT_MEMORY_MB").pipe(Config.withDefault(2048), Config.validate({ message: "BLAXEL_DEFAULT_MEMORY_MB must be at least 512", validation: (n) => n >= 512 })),
      mode: "remote"
    })
  }
  const emulator = yield* blaxelEmulator
  const provider = makeBlaxelProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, workspace: emulator.workspace, mode: "emulated" })
  return onLocalRuntime(provider, yield* LocalRuntime, emulator.runtimeIdOf)
})
