/**
 * A sandbox's consumption, asked of its provider at request time (a read: nothing to make durable). Emulated
 * providers answer from the local runtime; remote ones from their metrics API where they have one; a provider
 * without one is `404 metrics_unavailable`, naming it.
 */
import { Duration, Effect } from "effect"
import type { ProviderError, ProviderMetrics } from "../../providers/Provider.ts"
import { apiError, conflict, NotFound, ServiceUnavailable } from "../../domain/Errors.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import { type Caller, sandboxOf } from "./SandboxAccess.ts"
import { actionFailure, logProviderFailure } from "./ProviderErrors.ts"
import type { SandboxId } from "../../domain/Ids.ts"

const METRICS_TIMEOUT = Duration.seconds(10)
const READABLE = new Set(["ready", "paused"])

const WHAT = "read the sandbox's metrics"

const failure = (e: ProviderError) => {
  if (e.kind === "unsupported") return apiError(NotFound, "metrics_unavailable", `${e.provider} does not report a sandbox's metrics`, { provider: e.provider })
  if (e.kind === "not_found") {
    const gone = actionFailure("invalid_sandbox_state", WHAT, e)
    return conflict(gone.code, gone.message, gone.details)
  }
  const error = actionFailure(`provider_${e.kind}` as const, WHAT, e)
  return e.retryable || e.kind === "unavailable" || e.kind === "timeout_absent"
    ? apiError(ServiceUnavailable, error.code, error.message, error.details)
    : conflict(error.code, error.message, error.details)
}

export const sandboxMetrics = (caller: Caller, sandboxId: SandboxId) =>
  Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (!READABLE.has(sandbox.state)) return yield* conflict("invalid_sandbox_state", `The sandbox is ${sandbox.state}; its metrics are read while it is ready or paused`)
    const target = (yield* ProviderAccounts).target(sandbox)
    if (target === undefined) return yield* conflict("invalid_sandbox_state", "The sandbox has no running provider resource")
    const read = target.provider.metrics
    if (read === undefined) {
      return yield* apiError(NotFound, "metrics_unavailable", `${target.provider.name} does not report a sandbox's metrics`, { provider: target.provider.name })
    }
    const metrics: ProviderMetrics = yield* read(target.resource).pipe(
      Effect.timeoutFail({
        duration: METRICS_TIMEOUT,
        onTimeout: () => apiError(ServiceUnavailable, "provider_timeout", "The provider did not report the sandbox's metrics in time; try again", { provider: target.provider.name })
      }),
      Effect.tapError((e) => (e._tag === "ProviderError" ? logProviderFailure("metrics", e) : Effect.void)),
      Effect.mapError((e) => (e._tag === "ProviderError" ? failure(e) : e))
    )
    return { sandbox, metrics }
  }).pipe(Effect.withSpan("Metrics.sandboxMetrics", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))
