/**
 * The Freestyle plugin (issue 11). `remote` when FREESTYLE_API_KEY is set; FREESTYLE_API_URL (default
 * https://api.freestyle.sh, paths under `/v5`) and FREESTYLE_SNAPSHOT_ID (the snapshot environment sources start
 * from, default `freestyle/ubuntu-sm`) are optional. Otherwise `emulated`, against the built-in emulator over the
 * local runtime (whose metrics are the VM's own, read by the runtime). BYOK: `api_key`.
 *
 * The routes and shapes are those of Freestyle's SDK (`freestyle` 0.2.17, see adapter/index.ts): `/v5`, VMs by slug,
 * the firewall as the internet switch, resizes in MiB, `DELETE fs/remove`; no older route is kept. Env and cwd
 * travel in the `exec-await` shell line.
 */
import { Config, type ConfigError, Effect, type Scope } from "effect"
import type { AppConfig } from "../../src/Config.ts"
import { defaultInternetOf, LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { envValue } from "../core/env.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import type { SandboxProvider } from "../../src/providers/Provider.ts"
import { DEFAULT_API_URL, makeFreestyleProvider } from "./adapter/index.ts"
import { freestyleEmulator } from "./emulator/index.ts"

export const FreestylePlugin: Effect.Effect<SandboxProvider, ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const apiKey = yield* envValue("FREESTYLE_API_KEY")
  if (apiKey !== undefined) {
    return makeFreestyleProvider({
      apiUrl: yield* Config.string("FREESTYLE_API_URL").pipe(Config.withDefault(DEFAULT_API_URL)),
      apiKey,
      snapshotId: yield* envValue("FREESTYLE_SNAPSHOT_ID"),
      mode: "remote"
    })
  }
  const emulator = yield* freestyleEmulator
  const runtime = yield* LocalRuntime
  // Freestyle has no default network (its firewall is required): an unsaid internet gets the local runtime's.
  return onLocalRuntime(makeFreestyleProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated", internetByDefault: defaultInternetOf(runtime) }), runtime)
})
