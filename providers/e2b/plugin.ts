/**
 * The E2B plugin. `remote` when E2B_API_KEY is set: the control API at E2B_API_URL (default
 * `https://api.<E2B_DOMAIN>`, the domain defaulting to e2b.app) and envd at E2B_SANDBOX_URL, which is either one
 * host for every sandbox (default `https://sandbox.<domain>`, routed by the `E2b-Sandbox-Id` header as the SDK
 * does) or a host pattern such as `https://{port}-{sandboxId}.e2b.app`. E2B_TEMPLATE_ID (default `base`) is the
 * template for `environment` sources. Otherwise `emulated`, against the built-in emulator over the local runtime.
 *
 * Both sides are on E2B's current API, the routes its SDK (`e2b` 2.x) calls: `/v2/sandboxes` to create and list,
 * `/v2/sandboxes/{id}/connect` to resume, and `/sandboxes/{id}` (get, kill), `/sandboxes/{id}/pause` and
 * `/sandboxes/{id}/timeout`, which E2B has not replaced. No deprecated v1 route is kept: neither the adapter nor the
 * SDK calls one (test/sdk/e2b.test.ts drives the SDK against the emulator).
 */
import { Config, Effect, type Scope } from "effect"
import type { ConfigError } from "effect/ConfigError"
import type { AppConfig } from "../../src/Config.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import type { SandboxProvider } from "../../src/providers/Provider.ts"
import { envValue } from "../core/env.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import { makeE2BProvider } from "./adapter/index.ts"
import { e2bEmulator } from "./emulator/index.ts"

export const E2BPlugin: Effect.Effect<SandboxProvider, ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  // An empty E2B_API_KEY counts as unset.
  const apiKey = yield* envValue("E2B_API_KEY")
  const defaultTemplate = yield* Config.string("E2B_TEMPLATE_ID").pipe(Config.withDefault("base"))
  if (apiKey !== undefined) {
    const domain = yield* Config.string("E2B_DOMAIN").pipe(Config.withDefault("e2b.app"))
    const apiUrl = yield* Config.string("E2B_API_URL").pipe(Config.withDefault(`https://api.${domain}`))
    const sandboxUrl = yield* Config.string("E2B_SANDBOX_URL").pipe(Config.withDefault(`https://sandbox.${domain}`))
    return makeE2BProvider({ apiUrl, sandboxUrl, apiKey, mode: "remote", defaultTemplate })
  }
  const emulator = yield* e2bEmulator
  // Emulated sandboxes are local-runtime jails: their metrics come from the runtime, in more detail than E2B's.
  return onLocalRuntime(makeE2BProvider({ ...emulator, mode: "emulated", defaultTemplate }), yield* LocalRuntime)
})
