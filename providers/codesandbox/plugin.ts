/**
 * The CodeSandbox plugin (issue 12 item 4). `remote` when CODESANDBOX_API_KEY is set; CODESANDBOX_API_URL (default
 * https://api.codesandbox.io), CODESANDBOX_TEMPLATE_ID (the template forked for environment sources, default
 * `pcz35m`), CODESANDBOX_VM_TIER (the smallest tier started, default Nano), CODESANDBOX_WORKSPACE_ID and
 * CODESANDBOX_CREDIT_RATE_USD (USD per credit, default 0.01486) are optional. Otherwise `emulated`, against the
 * built-in emulator over the local runtime (whose metrics are the jail's own). BYOK: `api_key`, and optionally
 * `workspace_id`, `vm_tier`, `credit_rate_usd`.
 *
 * Lifecycle only: commands and files of a CodeSandbox VM are reached only through its SDK's websocket, so the
 * plugin declares no process, files or endpoints (adapter/wire.ts), and `auto` never routes a runtime request here.
 */
import { Config, ConfigError, Effect, type Scope } from "effect"
import type { AppConfig } from "../../src/Config.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { envValue } from "../core/env.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import type { SandboxProvider } from "../../src/providers/Provider.ts"
import { DEFAULT_API_URL, isTier, makeCodeSandboxProvider } from "./adapter/index.ts"
import { codesandboxEmulator } from "./emulator/index.ts"

export const CodeSandboxPlugin: Effect.Effect<SandboxProvider, ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const apiKey = yield* envValue("CODESANDBOX_API_KEY")
  if (apiKey !== undefined) {
    const tier = yield* envValue("CODESANDBOX_VM_TIER")
    if (tier !== undefined && !isTier(tier)) {
      return yield* Effect.fail(ConfigError.InvalidData(["CODESANDBOX_VM_TIER"], "CODESANDBOX_VM_TIER must be one of Pico, Nano, Micro, Small, Medium, Large, XLarge"))
    }
    const rate = yield* envValue("CODESANDBOX_CREDIT_RATE_USD")
    const rateUsd = rate === undefined ? undefined : Number(rate)
    if (rateUsd !== undefined && !(Number.isFinite(rateUsd) && rateUsd > 0)) {
      return yield* Effect.fail(ConfigError.InvalidData(["CODESANDBOX_CREDIT_RATE_USD"], "CODESANDBOX_CREDIT_RATE_USD must be a positive number of USD per credit"))
    }
    return makeCodeSandboxProvider({
      apiUrl: yield* Config.string("CODESANDBOX_API_URL").pipe(Config.withDefault(DEFAULT_API_URL)),
      apiKey,
      templateId: yield* envValue("CODESANDBOX_TEMPLATE_ID"),
      vmTier: tier,
      workspaceId: yield* envValue("CODESANDBOX_WORKSPACE_ID"),
      creditRateMicrousd: rateUsd === undefined ? undefined : Math.round(rateUsd * 1_000_000),
      mode: "remote"
    })
  }
  const emulator = yield* codesandboxEmulator
  return onLocalRuntime(makeCodeSandboxProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }), yield* LocalRuntime, emulator.runtimeIdOf)
})
