/**
 * The Prime Intellect sandboxes plugin. `remote` when PRIME_API_KEY is set; PRIME_API_URL (default
 * https://api.primeintellect.ai) and PRIME_TEAM_ID (the team sandboxes are made in; `provider_options.prime.team_id`
 * wins per request) are optional. Otherwise `emulated`, against the built-in emulator over the local runtime (whose
 * metrics are the sandbox's own, read by the runtime). BYOK: `api_key` and `team_id`.
 *
 * Differences from the brief and the reference, after Prime's SDK (details in adapter/index.ts): API paths are
 * under `/api/v1`; the gateway base is `<gateway_url>/<user_ns>/<job_id>` and download/upload take `path` and
 * `sandbox_id` as query parameters; the protobuf schema is built in code with @bufbuild/protobuf instead of the
 * reference's hand codec; isolation is declared `vm` (create sends `vm: true`); newer Prime features (egress
 * lists, arm64, pause/checkpoints, exposed ports) stay refused, as in the reference.
 */
import { Config, type ConfigError, Effect, type Scope } from "effect"
import type { AppConfig } from "../../src/Config.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { envValue } from "../core/env.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import type { SandboxProvider } from "../../src/providers/Provider.ts"
import { DEFAULT_API_URL, makePrimeProvider } from "./adapter/index.ts"
import { primeEmulator } from "./emulator/index.ts"

export const PrimePlugin: Effect.Effect<SandboxProvider, ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const apiKey = yield* envValue("PRIME_API_KEY")
  if (apiKey !== undefined) {
    return makePrimeProvider({
      apiUrl: yield* Config.string("PRIME_API_URL").pipe(Config.withDefault(DEFAULT_API_URL)),
      apiKey,
      teamId: yield* envValue("PRIME_TEAM_ID"),
      mode: "remote"
    })
  }
  const emulator = yield* primeEmulator
  return onLocalRuntime(makePrimeProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }), yield* LocalRuntime)
})
