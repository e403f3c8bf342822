/**
 * Jails that no live sandbox owns are removed (ARCHITECTURE.md §5), at start, every 30 s, and right after each
 * recovered job (a crash left work behind), without waiting for a restart. A jail is kept only while it is its
 * live sandbox's recorded provider resource, or while that sandbox's create job is still pending or running
 * (it may be making or finding that very jail). Everything else goes: jails of stopped, failed or unknown
 * sandboxes, and duplicates a create interrupted by a crash and retried left behind. They go through their
 * provider (so the emulator's books stay right), then the runtime; jails that carry no sandbox id are destroyed
 * directly. Then the runtime sweeps what is not a jail any more (cgroups, loop devices and uid leases left by a
 * crash, jail directories of crashed creates).
 */
import { Duration, Effect, Layer, Queue } from "effect"
import { ProviderRegistry } from "../../../providers/core/Provider.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { LocalRuntime } from "../../runtime/LocalRuntime.ts"
import { OperationRunner } from "../OperationRunner.ts"

const DEAD = new Set(["stopped", "failed", "cleanup_failed"])
export const REAP_EVERY = Duration.seconds(30)

export const ReaperLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const sandboxes = yield* SandboxesRepo
    const runtime = yield* LocalRuntime
    const registry = yield* ProviderRegistry
    const runner = yield* OperationRunner

    const reapOnce = Effect.gen(function*() {
      const jails = yield* runtime.list
      const owners = yield* sandboxes.jailOwners(jails.flatMap((jail) => jail.labels["metal.sandbox_id"] ?? []))
      for (const jail of jails) {
        const sandboxId = jail.labels["metal.sandbox_id"]
        const owner = sandboxId === undefined ? undefined : owners.get(sandboxId)
        const live = owner !== undefined && !DEAD.has(owner.state)
        if (live && (owner.resourceId === jail.id || owner.provisioning)) continue
        const provider = registry.get(jail.labels["provider"] ?? "")
        yield* Effect.logInfo("reaping a jail without a live sandbox", { jail: jail.id, sandbox: sandboxId ?? null, state: owner?.state ?? null, duplicate: live })
        if (provider !== undefined && sandboxId !== undefined) {
          yield* Effect.ignore(provider.destroy({ resourceId: jail.id, resolvedResources: { vcpu: 0, memoryMb: 0, diskMb: null, architecture: "x86_64", providerSize: null }, metadata: {} }))
        }
        // Idempotent: whatever the provider did, the jail is gone afterwards.
        yield* runtime.destroy(jail.id)
      }
      if (runtime.sweep !== undefined) {
        const swept = yield* runtime.sweep
        if (swept.jails.length + swept.leases.length + swept.loops.length > 0) yield* Effect.logInfo("swept runtime leftovers", swept)
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("reaping jails failed", cause)))

    const wake = yield* Queue.sliding<void>(1)
    yield* runner.onRecovered(Queue.offer(wake, undefined))
    yield* reapOnce.pipe(
      Effect.zipRight(Queue.take(wake).pipe(Effect.timeout(REAP_EVERY), Effect.ignore)),
      Effect.forever,
      Effect.forkScoped
    )
  })
)
