/**
 * Each sandbox runs as its own host uid (ARCHITECTURE.md §5), so per-user kernel limits (inotify instances and
 * watches, RLIMIT_NPROC, ...) are per sandbox. A sandbox owns a range of 65536 uids; its jail runs as the first.
 * Ranges are slots above RUNTIME_HOST_UID (the base): slots [1, 4096) are "strict" (no private egress), slots
 * [4096, 8192) "private" (RUNTIME_ALLOW_PRIVATE_EGRESS=true), so the host-global egress filter tells the two
 * policies apart by uid alone (Egress.ts). Slot 0 is never handed out: it is the single uid every jail of
 * earlier versions ran as.
 *
 * Leases are host-global files /run/sandbox-gateway/uids/<uid>, created with O_EXCL (two gateways or test runs
 * never share one) and holding the owner's jail directory and, once started, its launcher's pid and start time.
 * A lease is stale when that process is gone and that directory no longer exists; stale leases are reclaimed, with
 * the cgroups their jails left.
 */
import { Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { cgroupPath, cgroupScope, cgroupsExist, removeCgroups } from "./Cgroups.ts"
import { UIDS_DIR } from "./Host.ts"
import { RuntimeError } from "./LocalRuntime.ts"
import { alive } from "./Proc.ts"
import { replaceFile } from "./ReplaceFile.ts"

export const RANGE_SIZE = 65536
export const SLOTS_PER_POLICY = 4096
export type EgressPolicy = "strict" | "private"

/** First uid of a slot. */
export const uidOf = (base: number, policy: EgressPolicy, slot: number) => base + ((policy === "private" ? SLOTS_PER_POLICY : 0) + slot) * RANGE_SIZE
/** Every uid any sandbox of this base can run as (for the egress filter), and the strict part of it. */
export const allRange = (base: number) => ({ first: uidOf(base, "strict", 1), last: uidOf(base, "private", SLOTS_PER_POLICY) - 1 })
export const strictRange = (base: number) => ({ first: uidOf(base, "strict", 1), last: uidOf(base, "strict", SLOTS_PER_POLICY) - 1 })

/** The largest base for which every uid stays below 2^31 (bwrap cannot map uids above that). */
export const MAX_BASE = 2 ** 31 - 1 - 2 * SLOTS_PER_POLICY * RANGE_SIZE

/** A lease file: its owner's jail directory and, once started, its launcher (a pid of 0 and no start before). */
export const Lease = Schema.Struct({
  dir: Schema.String,
  pid: Schema.optionalWith(Schema.Number.pipe(Schema.int(), Schema.nonNegative()), { default: () => 0 }),
  start: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null })
})
export type Lease = typeof Lease.Type
/** A file that is not a lease (half-written by a crash, or corrupt) reads as none. */
const decodeLease = Schema.decodeUnknownOption(Schema.parseJson(Lease))

const leaseFile = (uid: number) => path.join(UIDS_DIR, String(uid))
/** The temporary file a writer fills before renaming it over the lease (`<uid>.<pid>.tmp`), and its name's pattern. */
const leaseTemp = (uid: number, pid: number) => `${leaseFile(uid)}.${pid}.tmp`
const LEASE_TEMP = /^\d+\.(\d+)\.tmp$/

const readLease = (uid: number): Lease | undefined => {
  let text: string
  try {
    text = fs.readFileSync(leaseFile(uid), "utf8")
  } catch {
    return undefined
  }
  return Option.getOrUndefined(decodeLease(text))
}

const isStale = (lease: Lease | undefined) => lease === undefined || (!alive(lease.pid, lease.start) && !fs.existsSync(lease.dir))

/**
 * A stale lease's jail may have left its cgroups behind (its gateway died before destroying it): they go with the
 * lease, wherever its DATA_DIR was — also one removed since, which no gateway of its own will sweep again. While
 * they still hold a process, the uid still runs something, and the lease stays.
 */
const cgroupsRemoved = (dir: string) => {
  const rel = cgroupPath(cgroupScope(path.dirname(path.dirname(dir))), path.basename(dir))
  removeCgroups(rel)
  return !cgroupsExist(rel)
}

/** A lease file that is unreadable (half-written by a crash) is stale only once it is old enough. */
const removeIfStale = (uid: number) => {
  const lease = readLease(uid)
  if (lease === undefined) {
    try {
      if (Date.now() - fs.statSync(leaseFile(uid)).mtimeMs < 60_000) return false
    } catch {
      return false
    }
  } else if (!isStale(lease) || !cgroupsRemoved(lease.dir)) return false
  fs.rmSync(leaseFile(uid), { force: true })
  return true
}

let cursor = 0

/**
 * Claims a free uid range for the jail directory `dir`; throws when every slot of the policy is taken. `reclaimed`:
 * the uid was taken from a stale lease, whose holder's destroy never ran (what it left for its uid must go first).
 */
export const claimUid = (base: number, policy: EgressPolicy, dir: string): { readonly uid: number; readonly reclaimed: boolean } => {
  let reclaimed = -1
  const content = JSON.stringify({ dir, pid: 0, start: null } satisfies Lease)
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < SLOTS_PER_POLICY - 1; i++) {
      const slot = 1 + ((cursor + i) % (SLOTS_PER_POLICY - 1))
      const uid = uidOf(base, policy, slot)
      try {
        const fd = fs.openSync(leaseFile(uid), fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600)
        try {
          fs.writeSync(fd, content)
        } finally {
          fs.closeSync(fd)
        }
        cursor = slot
        return { uid, reclaimed: uid === reclaimed }
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
        // Taken. On the second round, leases of jails that are gone are reclaimed.
        if (round === 1 && removeIfStale(uid)) {
          reclaimed = uid
          i--
        }
      }
    }
  }
  throw new RuntimeError({ kind: "unavailable", message: "this host runs as many sandboxes as it can (every sandbox uid range is in use)" })
}

/** Records the jail's launcher (or its new directory, after a warm jail is renamed). Atomic. */
export const updateLease = (uid: number, lease: Lease) =>
  replaceFile(leaseFile(uid), JSON.stringify(lease), { mode: 0o600, temp: leaseTemp(uid, process.pid) })

/** Whether anyone holds a lease of `uid` now. */
export const isLeased = (uid: number) => fs.existsSync(leaseFile(uid))

/** Whether `uid` is leased to this jail directory now (so its processes are this jail's alone). */
export const leaseHeldBy = (uid: number, dir: string) => readLease(uid)?.dir === dir

/** Releases the lease of `uid` if it is this jail directory's (never someone else's lease of a reused uid). */
export const releaseUid = (uid: number, dir: string) => {
  if (readLease(uid)?.dir === dir) fs.rmSync(leaseFile(uid), { force: true })
}

/** The uids leased to a jail directory (when its state, which names the uid, was lost). */
export const leasesOf = (dir: string): Array<number> => listLeases().map(Number).filter((uid) => readLease(uid)?.dir === dir)

/** Releases every lease held for a jail directory. */
export const releaseLeasesOf = (dir: string) => {
  for (const uid of leasesOf(dir)) fs.rmSync(leaseFile(uid), { force: true })
}

/** What is in the leases' directory: leases (`<uid>`) and the temporary files of their writes. */
const entries = (): Array<string> => {
  try {
    return fs.readdirSync(UIDS_DIR)
  } catch {
    return []
  }
}
const isLeaseName = (name: string) => /^\d+$/.test(name)
const listLeases = () => entries().filter(isLeaseName)

/**
 * Leases whose jail is gone (its launcher dead, its directory removed): removed. Returns their uids. A lease's
 * temporary file (leaseTemp) whose writer is dead goes too: a gateway killed between
 * writing it and renaming it into place left it.
 */
export const sweepLeases = (): Array<number> => {
  const names = entries()
  for (const name of names) {
    const writer = LEASE_TEMP.exec(name)?.[1]
    if (writer !== undefined && !alive(Number(writer))) fs.rmSync(path.join(UIDS_DIR, name), { force: true })
  }
  return names.filter(isLeaseName).map(Number).filter(removeIfStale)
}

/** Leases held for jail directories under `sandboxesDir` (for tests and the reaper's bookkeeping). */
export const leasesUnder = (sandboxesDir: string): Array<{ uid: number; lease: Lease }> =>
  listLeases().flatMap((name) => {
    const lease = readLease(Number(name))
    return lease !== undefined && path.dirname(lease.dir) === sandboxesDir ? [{ uid: Number(name), lease }] : []
  })
