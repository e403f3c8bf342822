/**
 * At start, jails that no live sandbox record owns are removed (DESIGN.md §5): those of stopped, failed or
 * unknown sandboxes go through their provider (so the emulator's books stay right), and jails that carry no
 * sandbox id at all are destroyed directly. Sandboxes still being provisioned are left to their job, which
 * reconciles by sandbox id.
 */
import { Effect, Layer } from "effect"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { LocalRuntime } from "../../runtime/LocalRuntime.ts"
import { ProviderRegistry } from "../../../providers/core/Provider.ts"

const DEAD = new Set(["stopped", "failed", "cleanup_failed"])

export const ReaperLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const sandboxes = yield* SandboxesRepo
    const runtime = yield* LocalRuntime
    const registry = yield* ProviderRegistry
    const jails = yield* runtime.list
    for (const jail of jails) {
      const sandboxId = jail.labels["metal.sandbox_id"]
      const state = sandboxId === undefined ? undefined : yield* sandboxes.stateOf(sandboxId)
      if (sandboxId !== undefined && state !== undefined && !DEAD.has(state)) continue
      const provider = registry.get(jail.labels["provider"] ?? "")
      yield* Effect.logInfo("reaping a jail without a live sandbox", { jail: jail.id, sandbox: sandboxId ?? null, state: state ?? null })
      if (provider !== undefined && sandboxId !== undefined) {
        yield* Effect.ignore(provider.destroy({ resourceId: jail.id, resolvedResources: { vcpu: 0, memoryMb: 0, diskMb: null, architecture: "x86_64", providerSize: null }, metadata: {} }))
      }
      // Idempotent: whatever the provider did, the jail is gone afterwards.
      yield* runtime.destroy(jail.id)
    }
  }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("reaping jails failed", cause)))
)
