/**
 * Leftovers that are not jails any more (SweepReport): directories of crashed creates or earlier versions, cgroups
 * without a directory, uid leases whose jail is gone (host-wide), policy tables of uids no longer leased, and loop devices of this DATA_DIR's disks left
 * attached without a running jail; and `reap`, which destroys every jail but those to keep. Never touches a jail
 * with a usable state or one being made.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { cgroupsExist, scopeCgroupIds } from "./Cgroups.ts"
import { jailDir, readState, sandboxesDir } from "./Jail.ts"
import type { JailLifecycle } from "./JailLifecycle.ts"
import type { RuntimeContext } from "./RuntimeContext.ts"
import { policyTableUids, removePolicyTable } from "./DomainPolicy.ts"
import { isLeased, sweepLeases } from "./UidLeases.ts"

/**
 * A jail directory without state this old, that this process is not creating, is a crashed create (the state is
 * written within moments of the directory: see prepareJail).
 */
export const ORPHAN_GRACE_MS = 15_000

export interface SweepReport {
  /** Jails without a usable state (crashed creates, earlier versions, cgroups left without a directory). */
  readonly jails: ReadonlyArray<string>
  /** uid leases whose jail is gone, host-wide. */
  readonly leases: ReadonlyArray<number>
  /** Loop devices of this DATA_DIR's disks left attached without a running jail. */
  readonly loops: ReadonlyArray<string>
}

/** `busy`: a jail this runtime is making or keeps warm. */
export const makeSweep = (ctx: RuntimeContext, lifecycle: JailLifecycle, busy: (id: string) => boolean) => {
  const { dataDir, scope } = ctx
  const { destroyJail, running } = lifecycle

  /** Leftovers that are not jails any more: see SweepReport. Never touches a jail with a usable state. */
  const sweep = async (): Promise<SweepReport> => {
    const jails: Array<string> = []
    const onDisk = fs.existsSync(sandboxesDir(dataDir)) ? fs.readdirSync(sandboxesDir(dataDir)) : []
    for (const id of onDisk) {
      if (busy(id) || readState(dataDir, id) !== undefined) continue
      const dir = jailDir(dataDir, id)
      let stat: fs.Stats
      try {
        stat = fs.lstatSync(dir)
      } catch {
        continue
      }
      // A state of an earlier version is no create in progress; a directory without any state may be one.
      const older = fs.existsSync(path.join(dir, "state.json"))
      if (!older && Date.now() - stat.mtimeMs < ORPHAN_GRACE_MS) continue
      await destroyJail(id)
      jails.push(id)
    }
    for (const id of scopeCgroupIds(scope)) {
      if (busy(id) || fs.existsSync(jailDir(dataDir, id))) continue
      await destroyJail(id)
      jails.push(id)
    }
    await lifecycle.recheckEgressFilter()
    const leases = sweepLeases()
    // Policy tables of uids nobody leases any more (a jail whose destroy never ran).
    for (const uid of policyTableUids(ctx.base)) if (!isLeased(uid)) await removePolicyTable(ctx.base, uid)
    const loops: Array<string> = []
    const prefix = `${sandboxesDir(dataDir)}/`
    let devices: Array<string> = []
    try {
      devices = fs.readdirSync("/sys/block").filter((d) => /^loop\d+$/.test(d))
    } catch {}
    for (const device of devices) {
      let backing = ""
      try {
        backing = fs.readFileSync(`/sys/block/${device}/loop/backing_file`, "utf8").trim()
      } catch {
        continue
      }
      if (!backing.startsWith(prefix)) continue
      const id = backing.slice(prefix.length).split("/")[0]!
      const state = readState(dataDir, id)
      if (busy(id) || (state !== undefined && running(state) && !backing.endsWith(" (deleted)"))) continue
      // Detaches it, or (still in use somewhere) marks it to detach when its last user goes.
      Bun.spawnSync(["losetup", "-d", `/dev/${device}`], { stdio: ["ignore", "ignore", "ignore"] })
      loops.push(device)
    }
    return { jails, leases, loops }
  }

  const reap = async (keep: ReadonlySet<string>) => {
    const onDisk = fs.existsSync(sandboxesDir(dataDir)) ? fs.readdirSync(sandboxesDir(dataDir)) : []
    const ids = new Set([...onDisk, ...scopeCgroupIds(scope)])
    const reaped: Array<string> = []
    for (const id of ids) {
      if (keep.has(id) || busy(id)) continue
      await destroyJail(id)
      reaped.push(id)
    }
    await sweep()
    return reaped
  }

  return { sweep, reap }
}
