/**
 * The Runloop plugin. `remote` when RUNLOOP_API_KEY is set; RUNLOOP_API_URL (default https://api.runloop.ai),
 * RUNLOOP_BLUEPRINT_ID (the blueprint environment sources start from; Runloop's default image otherwise),
 * RUNLOOP_RESOURCE_SIZE (the smallest preset to use, X_SMALL..XX_LARGE) and, for an OEM account, all three of
 * RUNLOOP_VCPU_HOUR_RATE_USD, RUNLOOP_MEMORY_GB_HOUR_RATE_USD and RUNLOOP_DISK_GB_HOUR_RATE_USD (its own prices,
 * instead of the preset prices) are optional. Otherwise `emulated`, against the built-in emulator over the local
 * runtime (whose metrics are the devbox's own, read by the runtime).
 */
import { Config, ConfigError, Effect, type Scope } from "effect"
import type { AppConfig } from "../../src/Config.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { envValue } from "../core/env.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import type { SandboxProvider } from "../../src/providers/Provider.ts"
import { RUNLOOP_PRESETS } from "../../src/providers/resources.ts"
import { DEFAULT_API_URL, makeRunloopProvider, oemRatesOf } from "./adapter/index.ts"
import { runloopEmulator } from "./emulator/index.ts"

const RATE_VARIABLES = ["RUNLOOP_VCPU_HOUR_RATE_USD", "RUNLOOP_MEMORY_GB_HOUR_RATE_USD", "RUNLOOP_DISK_GB_HOUR_RATE_USD"] as const

export const RunloopPlugin: Effect.Effect<SandboxProvider, ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const apiKey = yield* envValue("RUNLOOP_API_KEY")
  if (apiKey !== undefined) {
    const resourceSize = yield* envValue("RUNLOOP_RESOURCE_SIZE")
    if (resourceSize !== undefined && !RUNLOOP_PRESETS.some((p) => p.size === resourceSize)) {
      return yield* Effect.fail(ConfigError.InvalidData(["RUNLOOP_RESOURCE_SIZE"], `RUNLOOP_RESOURCE_SIZE must be one of ${RUNLOOP_PRESETS.map((p) => p.size).join(", ")}`))
    }
    const [vcpu, memory, disk] = yield* Effect.all(RATE_VARIABLES.map((name) => envValue(name)))
    const oemRates = oemRatesOf({ vcpu, memory, disk })
    if (oemRates === undefined && [vcpu, memory, disk].some((v) => v !== undefined)) {
      return yield* Effect.fail(ConfigError.InvalidData([RATE_VARIABLES[0]], `${RATE_VARIABLES.join(", ")} go together, each a non-negative number of USD`))
    }
    return makeRunloopProvider({
      apiUrl: yield* Config.string("RUNLOOP_API_URL").pipe(Config.withDefault(DEFAULT_API_URL)),
      apiKey,
      blueprintId: yield* envValue("RUNLOOP_BLUEPRINT_ID"),
      resourceSize,
      oemRates,
      mode: "remote"
    })
  }
  const emulator = yield* runloopEmulator
  return onLocalRuntime(makeRunloopProvider({ apiUrl: emulator.apiUrl, apiKey: emulator.apiKey, mode: "emulated" }), yield* LocalRuntime)
})
