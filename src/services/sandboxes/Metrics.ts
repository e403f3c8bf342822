/**
 * A sandbox's consumption, asked of its provider at request time (a read: nothing to make durable). Emulated
 * providers answer from the local runtime; remote ones from their metrics API where they have one; a provider
 * without one is `404 metrics_unavailable`, naming it.
 */
import { Duration, Effect } from "effect"
import type { ProviderError, ProviderMetrics } from "../../../providers/core/Provider.ts"
import { Conflict, conflict, NotFound, ServiceUnavailable } from "../../domain/Errors.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import { type Caller, sandboxOf } from "./Commands.ts"
import { actionFailure, logProviderFailure } from "./ProviderErrors.ts"

const METRICS_TIMEOUT = Duration.seconds(10)
const READABLE = new Set(["ready", "paused"])

const failure = (e: ProviderError) => {
  const error = actionFailure(e.kind === "not_found" ? "invalid_sandbox_state" : `provider_${e.kind}`, "read the sandbox's metrics", e)
  const fields = { code: error.code, message: error.message, details: error.details }
  if (e.kind === "unsupported") return new NotFound({ code: "metrics_unavailable", message: `${e.provider} does not report a sandbox's metrics`, details: { provider: e.provider } })
  return e.retryable || e.kind === "unavailable" || e.kind === "timeout_absent" ? new ServiceUnavailable(fields) : new Conflict(fields)
}

export const sandboxMetrics = (caller: Caller, sandboxId: string) =>
  Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (!READABLE.has(sandbox.state)) return yield* conflict("invalid_sandbox_state", `The sandbox is ${sandbox.state}; its metrics are read while it is ready or paused`)
    const target = (yield* ProviderAccounts).target(sandbox)
    if (target === undefined) return yield* conflict("invalid_sandbox_state", "The sandbox has no running provider resource")
    const read = target.provider.metrics
    if (read === undefined) {
      return yield* new NotFound({ code: "metrics_unavailable", message: `${target.provider.name} does not report a sandbox's metrics`, details: { provider: target.provider.name } })
    }
    const metrics: ProviderMetrics = yield* read(target.resource).pipe(
      Effect.timeoutFail({
        duration: METRICS_TIMEOUT,
        onTimeout: () => new ServiceUnavailable({ code: "provider_timeout", message: "The provider did not report the sandbox's metrics in time; try again", details: { provider: target.provider.name } })
      }),
      Effect.tapError((e) => (e._tag === "ProviderError" ? logProviderFailure("metrics", e) : Effect.void)),
      Effect.mapError((e) => (e._tag === "ProviderError" ? failure(e) : e))
    )
    return { sandbox, metrics }
  })
