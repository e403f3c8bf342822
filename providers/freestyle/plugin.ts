/**
 * The Freestyle plugin (issue 11). `remote` when FREESTYLE_API_KEY is set; FREESTYLE_API_URL (default
 * https://api.freestyle.sh, paths under `/v5`) and FREESTYLE_SNAPSHOT_ID (the snapshot environment sources start
 * from, default `freestyle/ubuntu-sm`) are optional. Otherwise `emulated`, against the built-in emulator over the
 * local runtime (whose metrics are the VM's own, read by the runtime). BYOK: `api_key`.
 *
 * Where the reference, the brief and Freestyle's public docs differ, see adapter/index.ts: the reference's `/v5`
 * paths, `pause`/`start` and `fs/*` routes are followed (the public OpenAPI still documents `/v1`, `suspend` and
 * `files/{path}`); env and cwd travel in the `exec-await` shell line; no firewall or internet switch is claimed.
 */
import { Config, type ConfigError, Effect, Option, type Scope } from "effect"
import type { AppConfig } from "../../src/Config.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import type { SandboxProvider } from "../core/Provider.ts"
import { DEFAULT_API_URL, makeFreestyleProvider } from "./adapter/index.ts"
import { freestyleEmulator } from "./emulator/index.ts"

/** The variable when set and not blank. */
const optional = (name: string) => Effect.map(Config.option(Config.string(name)), (v) => Option.getOrUndefined(Option.filter(v, (s) => s.trim() !== "")))

export const FreestylePlugin: Effect.Effect<SandboxProvider, ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const apiKey = yield* optional("FREESTYLE_API_KEY")
  if (apiKey !== undefined) {
    return makeFreestyleProvider({
      apiUrl: yield* Config.string("FREESTYLE_API_URL").pipe(Config.withDefault(DEFAULT_API_URL)),
      apiKey,
      snapshotId: yield* optional("FREESTYLE_SNAPSHOT_ID"),
      mode: "remote"
    })
  }
  const emulator = yield* freestyleEmulator
  return onLocalRuntime(makeFreestyleProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }), yield* LocalRuntime)
})
