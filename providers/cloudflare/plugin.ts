/**
 * The Cloudflare Sandbox plugin. Cloudflare's SDK runs only inside Workers, so `remote` means a bridge Worker the
 * operator deployed (`bridge/`): its URL in CLOUDFLARE_SANDBOX_API_URL (or CLOUDFLARE_BRIDGE_URL) and its token in
 * CLOUDFLARE_SANDBOX_API_KEY (or CLOUDFLARE_BRIDGE_TOKEN) — a URL without a token stops the gateway at start.
 * CLOUDFLARE_ACCOUNT_ID with CLOUDFLARE_ANALYTICS_API_TOKEN (both or neither) turn cost on (Cloudflare's container
 * analytics); CLOUDFLARE_ANALYTICS_URL overrides the GraphQL endpoint. Otherwise `emulated`, against the built-in
 * bridge emulator over the local runtime. BYOK: `api_url`, `api_key`, `account_id`, `analytics_token`.
 */
import { Config, ConfigError, Effect, type Scope } from "effect"
import type { AppConfig } from "../../src/Config.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { envValue } from "../core/env.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import type { SandboxProvider } from "../../src/providers/Provider.ts"
import { DEFAULT_ANALYTICS_URL, makeCloudflareProvider } from "./adapter/index.ts"
import { cloudflareEmulator } from "./emulator/index.ts"

export const CloudflarePlugin: Effect.Effect<SandboxProvider, ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const apiUrl = yield* envValue("CLOUDFLARE_SANDBOX_API_URL", "CLOUDFLARE_BRIDGE_URL")
  if (apiUrl !== undefined) {
    if (!/^https?:\/\/[^/]/.test(apiUrl)) {
      return yield* Effect.fail(ConfigError.InvalidData(["CLOUDFLARE_SANDBOX_API_URL"], "CLOUDFLARE_SANDBOX_API_URL must be the bridge Worker's http(s) URL"))
    }
    const apiKey = yield* envValue("CLOUDFLARE_SANDBOX_API_KEY", "CLOUDFLARE_BRIDGE_TOKEN")
    if (apiKey === undefined) {
      return yield* Effect.fail(ConfigError.MissingData(["CLOUDFLARE_SANDBOX_API_KEY"], "the Cloudflare bridge needs its token: set CLOUDFLARE_SANDBOX_API_KEY (or CLOUDFLARE_BRIDGE_TOKEN)"))
    }
    const accountId = yield* envValue("CLOUDFLARE_ACCOUNT_ID")
    const analyticsToken = yield* envValue("CLOUDFLARE_ANALYTICS_API_TOKEN")
    if ((accountId === undefined) !== (analyticsToken === undefined)) {
      return yield* Effect.fail(ConfigError.InvalidData(["CLOUDFLARE_ACCOUNT_ID"], "CLOUDFLARE_ACCOUNT_ID and CLOUDFLARE_ANALYTICS_API_TOKEN go together (they turn cost on)"))
    }
    return makeCloudflareProvider({
      apiUrl,
      apiKey,
      accountId,
      analyticsToken,
      analyticsUrl: yield* Config.string("CLOUDFLARE_ANALYTICS_URL").pipe(Config.withDefault(DEFAULT_ANALYTICS_URL)),
      mode: "remote"
    })
  }
  const emulator = yield* cloudflareEmulator
  const provider = makeCloudflareProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" })
  return onLocalRuntime(provider, yield* LocalRuntime, emulator.runtimeIdOf)
})
