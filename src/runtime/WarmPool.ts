/**
 * Warm jails (RUNTIME_WARM_POOL) make create fast: most of a create is starting bwrap and the bun agent, so a warm
 * jail is handed out by renaming its directory and cgroups to the sandbox id, applying the requested limits and
 * hostname, and (with internet) attaching slirp4netns. A disk cannot grow while mounted here (no
 * CAP_SYS_RESOURCE), so only a create asking for the warm jails' disk size (the providers' common default) gets
 * one; others start cold.
 *
 * Sized to demand: the pool keeps `size` jails (RUNTIME_WARM_POOL) and grows by one, up to `max`
 * (RUNTIME_WARM_POOL_MAX), for each create that found it empty; after a minute without such a create it shrinks by
 * one toward `size`. A create that finds no warm jail but one on its way waits for that one rather than starting
 * its own beside it: the one under way started earlier, so it is ready sooner, and two starts at once would share
 * the cores and both be late.
 */
import * as fs from "node:fs"
import { applyLimits, cgroupPath, renameCgroups } from "./Cgroups.ts"
import { writeIdentityFiles } from "./JailView.ts"
import { identityFiles } from "./Disk.ts"
import { jailDir, type JailSpec, type JailState, readState, writeState } from "./Jail.ts"
import type { JailLifecycle } from "./JailLifecycle.ts"
import type { RuntimeContext } from "./RuntimeContext.ts"
import { RuntimeError, type RuntimeSandbox, type RuntimeSandboxSpec } from "./LocalRuntime.ts"
import { setHostnameIn } from "./Ns.ts"
import { updateLease } from "./UidLeases.ts"

/** Jails started ahead of demand (no internet, default limits) are named like this until handed out. */
export const POOL_PREFIX = "pool-"
export const isPooled = (id: string) => id.startsWith(POOL_PREFIX)
/**
 * Disk of warm jails: what the providers' defaults resolve to (a create without disk_mb routed to Daytona gets
 * its 3 GiB default). Creates asking for another size start cold.
 */
export const POOL_DISK_MB = 3072
const POOL_SPEC: JailSpec = { vcpu: 1, memoryMb: 512, diskMb: POOL_DISK_MB, internet: false, env: {}, labels: {} }

/** How long the pool keeps a size it grew to without a create finding it empty, before it shrinks by one. */
export const POOL_SHRINK_MS = 60_000

export const makeWarmPool = (
  ctx: RuntimeContext,
  jails: JailLifecycle,
  sizing: { readonly size: number; readonly max: number; readonly shrinkMs: number },
  isClosed: () => boolean
) => {
  const { dataDir, scope } = ctx
  const { claim, destroyJail, requireEgressFilter, running, startJail, startSlirp, toSandbox } = jails
  const floor = Math.max(0, sizing.size)
  const ceiling = floor === 0 ? 0 : Math.max(floor, sizing.max)
  /** The size the pool fills to now: from `floor` up to `ceiling`, with demand. */
  let poolSize = floor
  let quietSince = 0
  /** Creates waiting for a jail on its way. */
  let waiting = 0
  const pool: Array<string> = []
  const filling = new Set<Promise<void>>()
  const startingPool = new Set<string>()
  // Deferred: starting a jail does synchronous work (its disk, cgroups, the spawn) that must not delay the
  // create that took a warm jail.
  let refillScheduled = false
  const refill = () => {
    if (refillScheduled || isClosed() || poolSize === 0) return
    refillScheduled = true
    setTimeout(() => {
      refillScheduled = false
      fillPool()
    }, 0)
  }
  /** A create found no warm jail ready: the pool grows by one (up to its ceiling). */
  const missed = () => {
    quietSince = Date.now()
    poolSize = Math.min(ceiling, poolSize + 1)
  }
  // A minute without a miss: one size smaller, and an idle jail above that size goes (only a pool that can grow).
  const shrink = ceiling === floor ? undefined : setInterval(() => {
    if (poolSize <= floor || Date.now() - quietSince < sizing.shrinkMs || isClosed()) return
    poolSize--
    quietSince = Date.now()
    if (pool.length + filling.size > poolSize && pool.length > 0) void destroyJail(pool.pop()!)
  }, sizing.shrinkMs / 4)
  shrink?.unref()
  const startOne = () => {
    const id = `${POOL_PREFIX}${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`
    startingPool.add(id)
    const p: Promise<void> = startJail(id, POOL_SPEC, { leashed: true })
      .then(() => (isClosed() ? destroyJail(id) : void pool.push(id)))
      .catch(() => destroyJail(id))
      .finally(() => {
        startingPool.delete(id)
        filling.delete(p)
      })
    filling.add(p)
  }
  const fillPool = () => {
    while (!isClosed() && pool.length + filling.size < poolSize) startOne()
  }

  /** Hands out a warm jail under `spec.id`, or undefined when none can be used. */
  const handOut = async (spec: RuntimeSandboxSpec, jailSpec: JailSpec): Promise<RuntimeSandbox | undefined> => {
    if (jailSpec.diskMb !== POOL_DISK_MB || ceiling === 0) return undefined
    if (pool.length === 0) {
      missed()
      // Each create waiting has a jail on its way: one is started now for this one when there are fewer; the rest
      // of the pool's refill waits until they are handed out.
      if (filling.size <= waiting && !isClosed()) startOne()
    }
    // With internet, the egress filter's check (an nft process) runs while the jail is renamed and claimed.
    const filterChecked = jailSpec.internet && pool.length + filling.size > 0 ? requireEgressFilter() : undefined
    filterChecked?.catch(() => undefined)
    while (pool.length > 0 || filling.size > 0) {
      // None ready, some on their way: the first of them to be ready (or to fail) is waited for.
      if (pool.length === 0) {
        waiting++
        await Promise.race(filling).finally(() => waiting--)
        continue
      }
      const from = pool.shift()!
      const warm = readState(dataDir, from)
      if (warm === undefined || !running(warm)) {
        await destroyJail(from)
        continue
      }
      let state: JailState = { ...warm, id: spec.id, createdAt: new Date().toISOString(), spec: jailSpec, cgroup: warm.cgroup === null ? null : cgroupPath(scope, spec.id) }
      try {
        // The lease names the new directory first: the launcher is alive throughout, so it is never stale.
        updateLease(warm.hostUid, { dir: jailDir(dataDir, spec.id), pid: warm.bwrapPid, start: warm.bwrapStart })
        fs.renameSync(jailDir(dataDir, from), jailDir(dataDir, spec.id))
        if (warm.cgroup !== null && state.cgroup !== null) {
          renameCgroups(warm.cgroup, state.cgroup)
          applyLimits(state.cgroup, jailSpec.vcpu, jailSpec.memoryMb)
        }
        writeIdentityFiles(state, identityFiles(spec.id, jailSpec.internet))
        setHostnameIn(`/proc/${warm.childPid}/ns/uts`, spec.id.slice(0, 63))
        // From here the jail is the sandbox's: it must outlive this process (until then it dies with it).
        if (!(await claim(from))) throw new Error("the warm jail's leash is not this process's")
        writeState(dataDir, state)
        if (jailSpec.internet) state = await startSlirp(state, filterChecked)
      } catch (e) {
        await destroyJail(spec.id)
        await destroyJail(from)
        // No egress filter: a cold start would fail the same way.
        if (e instanceof RuntimeError && e.kind === "unavailable") throw e
        continue
      }
      refill()
      return toSandbox(state)
    }
    refill()
    return undefined
  }

  return {
    refill,
    handOut,
    /** A jail of the pool, or one being started for it. */
    holds: (id: string) => pool.includes(id) || startingPool.has(id),
    /**
     * A warm jail a previous gateway process left: destroyed (its leash went with that process, so it has ended
     * itself or is ending). A bare directory may be a jail being prepared: removed only once older than the grace.
     */
    reattach: (id: string, state: JailState | undefined, orphanGraceMs: number) => {
      if (state !== undefined || Date.now() - fs.statSync(jailDir(dataDir, id)).mtimeMs > orphanGraceMs) void destroyJail(id)
    },
    /** Warm jails hold nothing of anyone's: they go with the gateway (a crash leaves them for the next start). */
    drain: async () => {
      clearInterval(shrink)
      await Promise.allSettled([...filling])
      for (const id of pool.splice(0)) await destroyJail(id)
    }
  }
}
