/**
 * Warm jails (RUNTIME_WARM_POOL) make create fast: most of a create is starting bwrap and the bun agent, so a warm
 * jail is handed out by renaming its directory and cgroups to the sandbox id, applying the requested limits and
 * hostname, and (with internet) checking the egress filter. A warm jail's network (slirp4netns, tied to the
 * jail's life by its lifeline: Lifeline.ts) starts ahead while the latest create asked for internet; a create
 * without it has the network taken away first, one with it but given a jail without one starts it. A disk cannot
 * grow while mounted here (no CAP_SYS_RESOURCE), so a create takes only a warm jail of the disk size it asks for.
 * The pool follows the size creates ask for: each provider's emulator has its own default (E2B 10 GiB, Daytona
 * 3 GiB, Cloudflare 12 GiB…), so new warm jails get the size of the latest create; one that finds none of its size counts as finding the pool
 * empty (below) and, with the pool at its ceiling, replaces an idle jail of another size; when the pool shrinks,
 * jails of a size no longer asked for go first. (Replacing one at every such create was tried: with creates back to
 * back, the extra destroy and start made them slower.)
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

/** How long after a handout the pool starts refilling (see `refill`): the create's own work there takes ~5 ms. */
const REFILL_DELAY_MS = 25

/** Jails started ahead of demand (no internet, default limits) are named like this until handed out. */
export const POOL_PREFIX = "pool-"
export const isPooled = (id: string) => id.startsWith(POOL_PREFIX)
/**
 * Disk of warm jails until a create asks for another size: what the gateway's default route resolves to (a create
 * without disk_mb routed to Daytona gets its 3 GiB default).
 */
export const POOL_DISK_MB = 3072
const poolSpec = (diskMb: number): JailSpec => ({ vcpu: 1, memoryMb: 512, diskMb, internet: false, env: {}, labels: {} })

/** How long the pool keeps a size it grew to without a create finding it empty, before it shrinks by one. */
export const POOL_SHRINK_MS = 60_000

export const makeWarmPool = (
  ctx: RuntimeContext,
  jails: JailLifecycle,
  sizing: { readonly size: number; readonly max: number; readonly shrinkMs: number; readonly network: boolean },
  isClosed: () => boolean
) => {
  const { dataDir, scope } = ctx
  const { claim, destroyJail, lifelines, requireEgressFilter, running, startAhead, startJail, startSlirp, stopAhead, toSandbox } = jails
  const floor = Math.max(0, sizing.size)
  const ceiling = floor === 0 ? 0 : Math.max(floor, sizing.max)
  /** The size the pool fills to now: from `floor` up to `ceiling`, with demand. */
  let poolSize = floor
  let quietSince = 0
  /** The disk size new warm jails get: the one the latest create asked for. */
  let diskMb = POOL_DISK_MB
  /** Whether new warm jails get their network ahead: the latest create asked for internet (at first: the default). */
  let network = sizing.network
  /** Each warm jail's disk size, ready or on its way. */
  const sizes = new Map<string, number>()
  /** Creates waiting for a jail on its way, by the disk size they wait for. */
  const waiting = new Map<number, number>()
  const pool: Array<string> = []
  /** Warm jails on their way, with their disk sizes. */
  const filling = new Map<Promise<void>, number>()
  const startingPool = new Set<string>()
  const ofSize = (wanted: number) => (id: string) => sizes.get(id) === wanted
  const onTheWay = (wanted: number) => [...filling].filter(([, size]) => size === wanted).map(([p]) => p)
  /** Takes a jail out of the pool (to hand it out or destroy it). */
  const take = (index: number) => {
    const [id] = pool.splice(index, 1)
    sizes.delete(id!)
    return id!
  }
  /** Warm jails being destroyed off the create's path: the pool's drain waits for them too. */
  const discarding = new Set<Promise<void>>()
  const discard = (id: string) => {
    const p: Promise<void> = destroyJail(id).catch(() => undefined).finally(() => discarding.delete(p))
    discarding.add(p)
  }
  let refillScheduled = false
  /**
   * Starts what the pool lacks, REFILL_DELAY_MS later: starting a jail blocks the event loop for 1–4 ms (its disk,
   * its cgroups, the spawn), which would otherwise fall inside the create that just took a jail (its answer, its
   * ready transaction), in the same process.
   */
  const refill = () => {
    if (refillScheduled || isClosed() || poolSize === 0) return
    refillScheduled = true
    setTimeout(() => {
      refillScheduled = false
      fillPool()
    }, REFILL_DELAY_MS)
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
    // One of a size no longer asked for goes first.
    const stale = pool.findIndex((id) => sizes.get(id) !== diskMb)
    if (pool.length + filling.size > poolSize && pool.length > 0) discard(take(stale === -1 ? pool.length - 1 : stale))
  }, sizing.shrinkMs / 4)
  shrink?.unref()
  const startOne = () => {
    const id = `${POOL_PREFIX}${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`
    const size = diskMb
    startingPool.add(id)
    sizes.set(id, size)
    const ahead = network
    const p: Promise<void> = startJail(id, poolSpec(size), { leashed: true })
      .then((state) => (ahead && !isClosed() ? startAhead(state) : state))
      .then(() => (isClosed() ? destroyJail(id) : void pool.push(id)))
      .catch(() => destroyJail(id))
      .finally(() => {
        startingPool.delete(id)
        filling.delete(p)
        if (!pool.includes(id)) sizes.delete(id)
      })
    filling.set(p, size)
  }
  const fillPool = () => {
    while (!isClosed() && pool.length + filling.size < poolSize) startOne()
  }

  /** Hands out a warm jail under `spec.id`, or undefined when none can be used. */
  const handOut = async (spec: RuntimeSandboxSpec, jailSpec: JailSpec): Promise<RuntimeSandbox | undefined> => {
    if (ceiling === 0) return undefined
    const wanted = jailSpec.diskMb
    diskMb = wanted
    network = jailSpec.internet
    const waitingNow = () => waiting.get(wanted) ?? 0
    if (!pool.some(ofSize(wanted))) {
      missed()
      // No room left to grow: an idle jail of another size makes room for one of this size.
      const other = pool.findIndex((id) => sizes.get(id) !== wanted)
      if (other !== -1 && pool.length + filling.size >= poolSize) discard(take(other))
      // Each create waiting has a jail on its way: one is started now for this one when there are fewer; the rest
      // of the pool's refill waits until they are handed out.
      if (onTheWay(wanted).length <= waitingNow() && !isClosed()) startOne()
    }
    // With internet, the egress filter's check (an nft process) runs while the jail is renamed and claimed.
    const filterChecked = jailSpec.internet && (pool.some(ofSize(wanted)) || onTheWay(wanted).length > 0) ? requireEgressFilter() : undefined
    filterChecked?.catch(() => undefined)
    while (pool.some(ofSize(wanted)) || onTheWay(wanted).length > 0) {
      // None ready, some on their way: the first of them to be ready (or to fail) is waited for.
      if (!pool.some(ofSize(wanted))) {
        waiting.set(wanted, waitingNow() + 1)
        await Promise.race(onTheWay(wanted)).finally(() => waiting.set(wanted, waitingNow() - 1))
        continue
      }
      const from = take(pool.findIndex(ofSize(wanted)))
      let warm = readState(dataDir, from)
      if (warm === undefined || !running(warm)) {
        await destroyJail(from)
        continue
      }
      // A network started ahead goes first when the create asked for none.
      if (!jailSpec.internet && warm.slirpPid !== null) {
        try {
          warm = await stopAhead(warm)
        } catch {
          await destroyJail(from)
          continue
        }
      }
      let state: JailState = { ...warm, id: spec.id, createdAt: new Date().toISOString(), spec: jailSpec, cgroup: warm.cgroup === null ? null : cgroupPath(scope, spec.id) }
      try {
        // The lease names the new directory first: the launcher is alive throughout, so it is never stale.
        updateLease(warm.hostUid, { dir: jailDir(dataDir, spec.id), pid: warm.bwrapPid, start: warm.bwrapStart })
        fs.renameSync(jailDir(dataDir, from), jailDir(dataDir, spec.id))
        lifelines.rename(from, spec.id)
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
        lifelines.drop(spec.id)
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
      if (state !== undefined || Date.now() - fs.statSync(jailDir(dataDir, id)).mtimeMs > orphanGraceMs) discard(id)
    },
    /** Warm jails hold nothing of anyone's: they go with the gateway (a crash leaves them for the next start). */
    drain: async () => {
      clearInterval(shrink)
      await Promise.allSettled([...filling.keys()])
      // One at a time (each kills and unmounts); one that fails does not keep the others alive.
      for (const id of pool.splice(0)) await destroyJail(id).catch(() => undefined)
      await Promise.allSettled([...discarding])
      sizes.clear()
    }
  }
}
