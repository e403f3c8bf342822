/**
 * Destroying a jail: every process of it killed, its cgroups, uid lease, policy table and directory removed —
 * jails of earlier versions of this runtime included.
 */
import { Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { cgroupPath, cgroupPids, cgroupsExist, removeCgroups, setFrozen } from "./Cgroups.ts"
import { removePolicyTable } from "./DomainPolicy.ts"
import { alive, descendants, jailDir, readState, signalAll } from "./Jail.ts"
import { backoff, pidsOfUid } from "./Proc.ts"
import type { RuntimeContext } from "./RuntimeContext.ts"
import { leaseHeldBy, leasesOf, releaseLeasesOf, releaseUid } from "./UidLeases.ts"

const DESTROY_TIMEOUT_MS = 5_000

export const makeJailRemoval = (ctx: RuntimeContext) => {
  const { base, dataDir, scope } = ctx

  /**
   * Kills every process of the jail, removes its cgroups, releases its uid and removes its directory. The disk was
   * mounted only in the launcher's namespace: it goes with the last process. A jail that ran in its cgroups is found
   * there whole: its launcher, slirp4netns and DNS forwarder join them before they run anything, and a process
   * can only move between cgroups whose cgroup.procs it may write (the sandbox's own two), so reading a few cgroup
   * files finds everything. Otherwise (rlimits, no state, earlier versions) the pid trees of its processes and,
   * once they are gone, anything running as its uid while it holds the lease: scans of every process on the host.
   */
  const destroyJail = async (id: string) => {
    const dir = jailDir(dataDir, id)
    const state = readState(dataDir, id)
    const legacy = state === undefined ? readLegacyState(dataDir, id) : undefined
    const rel = state?.cgroup ?? (cgroupsExist(cgroupPath(scope, id)) ? cgroupPath(scope, id) : null)
    const ownUid = state !== undefined && leaseHeldBy(state.hostUid, dir) ? state.hostUid : null
    const roots = [
      ...(state ? [[state.bwrapPid, state.bwrapStart], [state.childPid, state.childStart], [state.slirpPid ?? 0, state.slirpStart], [state.dnsPid ?? 0, state.dnsStart ?? null]] as const : []),
      ...(legacy ? legacy.pids.map((pid) => [pid, null] as const) : [])
    ].filter(([pid, start]) => alive(pid, start)).map(([pid]) => pid)
    const whole = rel !== null && state?.mechanism === "cgroup" && state.cgroup === rel
    if (rel !== null) await setFrozen(rel, false).catch(() => false)
    const deadline = Date.now() + DESTROY_TIMEOUT_MS
    const pause = backoff()
    for (;;) {
      const trees = whole ? roots : roots.flatMap((pid) => [pid, ...descendants(pid)])
      let pids = [...(rel === null ? [] : cgroupPids(rel, whole)), ...trees].filter((pid) => pid > 0 && alive(pid))
      // Anything else still running as the sandbox's own uid (a scan of every process: only once the rest is gone).
      if (pids.length === 0 && ownUid !== null && !whole) pids = pidsOfUid(ownUid)
      if (pids.length === 0 || Date.now() > deadline) break
      // SIGCONT first: a process stopped by the SIGSTOP fallback must run to die.
      signalAll(pids, "SIGKILL")
      signalAll(pids, "SIGCONT")
      await pause()
    }
    // A killed process stays charged to its cgroup until its parent reaps it (bwrap's parent may be us).
    const again = backoff()
    while (rel !== null) {
      removeCgroups(rel)
      if (!cgroupsExist(rel) || Date.now() > deadline) break
      await again()
    }
    if (legacy !== undefined) legacy.cleanup()
    // Only while the uid is still this jail's: another sandbox may hold it (and its own table) now. Without a state,
    // whether it had a policy is unknown: the tables of its leases go too.
    if (state !== undefined && ownUid !== null && state.spec.domains !== undefined) await removePolicyTable(base, state.hostUid)
    if (state !== undefined) releaseUid(state.hostUid, dir)
    else {
      for (const uid of leasesOf(dir)) await removePolicyTable(base, uid)
      releaseLeasesOf(dir)
    }
    fs.rmSync(dir, { recursive: true, force: true })
  }

  return destroyJail
}

/** An earlier version's state.json: any JSON object, its fields checked one by one where used. */
const decodeLegacyState = Schema.decodeUnknownOption(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown })))

/**
 * A jail started by an earlier version of this runtime (state.json without `version`, or version 2: its root in
 * the jail directory, every jail as one shared uid): what destroy needs to remove it (its pids, its cgroups, its
 * named network namespace).
 */
const readLegacyState = (dataDir: string, id: string): { pids: Array<number>; cleanup: () => void } | undefined => {
  try {
    const raw = Option.getOrThrow(decodeLegacyState(fs.readFileSync(path.join(jailDir(dataDir, id), "state.json"), "utf8")))
    if (raw["version"] !== undefined && raw["version"] !== 2) return undefined
    const pids = [raw["bwrapPid"], raw["childPid"], raw["slirpPid"]].filter((p): p is number => typeof p === "number" && p > 0)
    const legacyCgroup = typeof raw["cgroup"] === "string" ? raw["cgroup"] : path.join("sandbox-gateway", id)
    return {
      pids: [...pids, ...cgroupPids(legacyCgroup)],
      cleanup: () => {
        removeCgroups(legacyCgroup)
        if (raw["version"] === undefined && (raw["spec"] as { internet?: boolean } | undefined)?.internet) {
          Bun.spawnSync(["ip", "netns", "del", `sgw-${id}`], { stdio: ["ignore", "ignore", "ignore"] })
        }
      }
    }
  } catch {
    return undefined
  }
}
