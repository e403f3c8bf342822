/**
 * Jails that no live sandbox owns are removed (ARCHITECTURE.md §5), at start, every 30 s, and right after each
 * recovered job (a crash left work behind), without waiting for a restart. Every emulator labels the jails it
 * makes (src/providers/jailLabels.ts): its provider, the resource id it handed back (what the adapter records as
 * the sandbox's resourceId; jails made before that label existed: the jail's own id) and our sandbox id when the
 * create carried it. A jail is kept only while that resource is its live sandbox's recorded one, or while that
 * sandbox's create job is still pending or running (it may be making or finding that very jail). Everything else
 * goes: jails of stopped, failed or unknown sandboxes, jails without a sandbox id, and duplicates a create
 * interrupted by a crash and retried left behind. They go through their emulated provider with their resource id
 * (so the emulator's books stay right), then the runtime. Then the runtime sweeps what is not a jail any more
 * (cgroups, loop devices and uid leases left by a crash, jail directories of crashed creates).
 */
import { Duration, Effect, Layer, LogLevel, Queue } from "effect"
import { PROVIDER_LABEL, RESOURCE_LABEL, SANDBOX_LABEL } from "../../providers/jailLabels.ts"
import { ProviderRegistry } from "../../providers/Provider.ts"
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
      const owners = yield* sandboxes.jailOwners(jails.flatMap((jail) => jail.labels[SANDBOX_LABEL] ?? []))
      let reaped = 0
      for (const jail of jails) {
        const sandboxId = jail.labels[SANDBOX_LABEL]
        const resourceId = jail.labels[RESOURCE_LABEL] ?? jail.id
        const owner = sandboxId === undefined ? undefined : owners.get(sandboxId)
        const live = owner !== undefined && !DEAD.has(owner.state)
        if (live && (owner.resourceId === resourceId || owner.provisioning)) continue
        const provider = registry.get(jail.labels[PROVIDER_LABEL] ?? "")
        yield* Effect.logInfo("reaping a jail without a live sandbox", { jail: jail.id, resource: resourceId, sandbox: sandboxId ?? null, state: owner?.state ?? null, duplicate: live })
        // Only an emulator makes local jails: a provider on a real account is never sent an emulator's resource id.
        if (provider?.mode === "emulated") {
          yield* Effect.ignore(provider.destroy({ resourceId, resolvedResources: { vcpu: 0, memoryMb: 0, diskMb: null, architecture: "x86_64", providerSize: null }, metadata: {} }))
        }
        // Idempotent: whatever the provider did, the jail is gone afterwards.
        yield* runtime.destroy(jail.id)
        reaped++
      }
      if (runtime.sweep !== undefined) {
        const swept = yield* runtime.sweep
        if (swept.jails.length + swept.leases.length + swept.loops.length > 0) yield* Effect.logInfo("swept runtime leftovers", swept)
      }
      // Every pass says it is over (at debug level when it removed nothing), so operators and tests can tell.
      yield* Effect.logWithLevel(reaped > 0 ? LogLevel.Info : LogLevel.Debug, "reaper pass over", { reaped })
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
