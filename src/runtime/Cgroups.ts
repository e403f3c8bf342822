/**
 * A sandbox's cgroups (v1: pids, memory, cpu, freezer, and cpuacct where the host mounts it apart from cpu) under /sys/fs/cgroup/<controller>/sandbox-gateway/<scope>/<id>,
 * where <scope> is derived from DATA_DIR (two gateways, or two test runs, never share a cgroup). Commands run in a
 * `work` child of the pids and memory cgroups, so a fork bomb or an allocation spree cannot starve the agent.
 * cgroup.procs files are handed to the jail's host uid: its launcher joins them before bwrap runs.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

/** Processes of a sandbox's commands; the agent (its threads count as tasks) and slirp4netns get headroom. */
export const PIDS_LIMIT = 512
export const PIDS_HEADROOM = 64
/** Memory beyond the requested amount for the agent itself (a bun process) and slirp4netns. */
export const AGENT_MEMORY_MB = 96
/** Minimum cpu quota (1% of a core) and the cfs period. */
const CFS_PERIOD_US = 100_000

const CGROUP_ROOT = "/sys/fs/cgroup"
const CGROUP_PARENT = "sandbox-gateway"
/**
 * cpuacct counts a sandbox's CPU time (its metrics). Hosts mount it alone or with cpu (`cpu,cpuacct`, where both
 * names lead to one hierarchy): a cgroup of its own only in the first case, else cpu's cgroup has the counters.
 */
const sameHierarchy = (a: string, b: string) => {
  try {
    return fs.realpathSync(path.join(CGROUP_ROOT, a)) === fs.realpathSync(path.join(CGROUP_ROOT, b))
  } catch {
    return false
  }
}
const CPUACCT_APART = fs.existsSync(path.join(CGROUP_ROOT, "cpuacct", "cpuacct.usage")) && !sameHierarchy("cpu", "cpuacct")
const CPUACCT_DIR = CPUACCT_APART ? "cpuacct" : "cpu"
const CONTROLLERS: ReadonlyArray<string> = ["pids", "memory", "cpu", "freezer", ...(CPUACCT_APART ? ["cpuacct"] : [])]
/** Controllers a jail made before cpuacct had its own cgroup may lack (renaming such a warm jail skips them). */
const OPTIONAL_CONTROLLERS: ReadonlySet<string> = new Set(["cpuacct"])
/** Controllers with a `work` child for the commands. */
const WORK_CONTROLLERS = ["pids", "memory"] as const

/** A short name for this DATA_DIR, so jails of different data dirs never share a cgroup. */
export const cgroupScope = (dataDir: string) => {
  let real = dataDir
  try {
    real = fs.realpathSync(dataDir)
  } catch {}
  return createHash("sha256").update(real).digest("hex").slice(0, 12)
}
export const cgroupPath = (scope: string, id: string) => path.join(CGROUP_PARENT, scope, id)
const dirOf = (controller: string, rel: string) => path.join(CGROUP_ROOT, controller, rel)

/** Ids that have a cgroup in this scope (a jail can be left there even when its directory is gone). */
export const scopeCgroupIds = (scope: string): Array<string> => {
  const ids = new Set<string>()
  for (const controller of CONTROLLERS) {
    try {
      for (const entry of fs.readdirSync(dirOf(controller, path.join(CGROUP_PARENT, scope)), { withFileTypes: true })) {
        if (entry.isDirectory()) ids.add(entry.name)
      }
    } catch {}
  }
  return [...ids]
}

const writeFile = (file: string, value: string) => fs.writeFileSync(file, value)

/**
 * Creates the sandbox's cgroups with its limits; false when the host does not let us (then rlimits apply).
 * cgroup.procs files are handed to the jail's host uid: the jail joins them itself, before bwrap runs.
 */
export const createCgroups = (rel: string, hostUid: number, vcpu: number, memoryMb: number): boolean => {
  try {
    for (const controller of CONTROLLERS) {
      fs.mkdirSync(dirOf(controller, rel), { recursive: true })
      fs.chownSync(path.join(dirOf(controller, rel), "cgroup.procs"), hostUid, hostUid)
    }
    for (const controller of WORK_CONTROLLERS) {
      fs.mkdirSync(path.join(dirOf(controller, rel), "work"), { recursive: true })
      fs.chownSync(path.join(dirOf(controller, rel), "work", "cgroup.procs"), hostUid, hostUid)
    }
    writeFile(path.join(dirOf("pids", rel), "pids.max"), String(PIDS_LIMIT + PIDS_HEADROOM))
    writeFile(path.join(dirOf("pids", rel), "work", "pids.max"), String(PIDS_LIMIT))
    applyLimits(rel, vcpu, memoryMb)
    return true
  } catch {
    removeCgroups(rel)
    return false
  }
}

/** memory(.memsw).limit_in_bytes of one cgroup; memsw must stay ≥ the limit, so it goes first or last. */
const setMemory = (dir: string, bytes: number) => {
  const memsw = path.join(dir, "memory.memsw.limit_in_bytes")
  const tryMemsw = () => {
    try {
      writeFile(memsw, String(bytes))
    } catch {
      // no swap accounting here (or the order was wrong this time): the plain limit applies
    }
  }
  tryMemsw()
  writeFile(path.join(dir, "memory.limit_in_bytes"), String(bytes))
  tryMemsw()
}

/** Memory and cpu limits of an existing sandbox cgroup (also used when a warm jail is handed out). */
export const applyLimits = (rel: string, vcpu: number, memoryMb: number) => {
  const mb = 1024 * 1024
  setMemory(dirOf("memory", rel), (memoryMb + AGENT_MEMORY_MB) * mb)
  setMemory(path.join(dirOf("memory", rel), "work"), memoryMb * mb)
  writeFile(path.join(dirOf("cpu", rel), "cpu.cfs_period_us"), String(CFS_PERIOD_US))
  writeFile(path.join(dirOf("cpu", rel), "cpu.cfs_quota_us"), String(Math.max(1000, Math.round(vcpu * CFS_PERIOD_US))))
}

/** Moves a jail's cgroups to another name (v1 renames a cgroup in place; its tasks stay). */
export const renameCgroups = (from: string, to: string) => {
  for (const controller of CONTROLLERS) {
    if (OPTIONAL_CONTROLLERS.has(controller) && !fs.existsSync(dirOf(controller, from))) continue
    fs.renameSync(dirOf(controller, from), dirOf(controller, to))
  }
}

/** The cgroup.procs files the jail's wrapper joins before it execs bwrap. */
export const cgroupProcsFiles = (rel: string) =>
  CONTROLLERS.filter((c) => !OPTIONAL_CONTROLLERS.has(c) || fs.existsSync(dirOf(c, rel))).map((c) => path.join(dirOf(c, rel), "cgroup.procs"))
/** The `work` cgroup.procs files each command joins (bound into the jail under /run/cgroup/). */
export const workProcsFiles = (rel: string) => ({
  pids: path.join(dirOf("pids", rel), "work", "cgroup.procs"),
  memory: path.join(dirOf("memory", rel), "work", "cgroup.procs")
})

/**
 * Processes in the sandbox's cgroups and their `work` children. `onlyPids`: the pids hierarchy alone, enough for a
 * jail whose every process joined all its cgroups (two files instead of ten, each read under the kernel's cgroup
 * lock, which other jails' creates and destroys hold too).
 */
export const cgroupPids = (rel: string, onlyPids = false): Array<number> => {
  const pids = new Set<number>()
  for (const controller of onlyPids ? ["pids"] : CONTROLLERS) {
    for (const file of [path.join(dirOf(controller, rel), "cgroup.procs"), path.join(dirOf(controller, rel), "work", "cgroup.procs")]) {
      try {
        for (const line of fs.readFileSync(file, "utf8").split("\n")) if (line !== "") pids.add(Number(line))
      } catch {}
    }
  }
  return [...pids]
}

export const cgroupsExist = (rel: string) => CONTROLLERS.some((c) => fs.existsSync(dirOf(c, rel)))

export const removeCgroups = (rel: string) => {
  for (const controller of CONTROLLERS) {
    try {
      fs.rmdirSync(path.join(dirOf(controller, rel), "work"))
    } catch {}
    try {
      fs.rmdirSync(dirOf(controller, rel))
    } catch {}
  }
  // The scope directory goes with its last sandbox.
  for (const controller of CONTROLLERS) {
    try {
      fs.rmdirSync(path.dirname(dirOf(controller, rel)))
    } catch {}
  }
}

export const freezerState = (rel: string): string | undefined => {
  try {
    return fs.readFileSync(path.join(dirOf("freezer", rel), "freezer.state"), "utf8").trim()
  } catch {
    return undefined
  }
}

/** Freezes or thaws and waits until the kernel says it is done (FREEZING → FROZEN). */
export const setFrozen = async (rel: string, frozen: boolean): Promise<boolean> => {
  const file = path.join(dirOf("freezer", rel), "freezer.state")
  if (!fs.existsSync(file)) return false
  const target = frozen ? "FROZEN" : "THAWED"
  const deadline = Date.now() + 5000
  writeFile(file, target)
  while (freezerState(rel) !== target && Date.now() < deadline) {
    await Bun.sleep(1)
    writeFile(file, target)
  }
  return freezerState(rel) === target
}

/** What a sandbox's cgroups count; null where the host does not count it (or the cgroup is gone). */
export interface CgroupUsage {
  /** CPU time of everything in the sandbox (the cpu quota applies to all of it). */
  readonly cpuSeconds: number | null
  /** Memory of the sandbox's commands (the `work` cgroup, whose limit is the requested memory). */
  readonly memoryBytes: number | null
  readonly memoryPeakBytes: number | null
  readonly memoryLimitBytes: number | null
  /** Tasks (processes and threads) of the sandbox's commands. */
  readonly processCount: number | null
}

/** One counter file: a kernel-written decimal number (nothing inside the jail writes these files). */
const counter = (file: string): number | null => {
  try {
    const value = Number(fs.readFileSync(file, "utf8").trim())
    return Number.isSafeInteger(value) && value >= 0 ? value : null
  } catch {
    return null
  }
}

export const cgroupUsage = (rel: string): CgroupUsage => {
  const cpuNs = counter(path.join(dirOf(CPUACCT_DIR, rel), "cpuacct.usage"))
  const work = (controller: string, file: string) => counter(path.join(dirOf(controller, rel), "work", file))
  return {
    cpuSeconds: cpuNs === null ? null : cpuNs / 1e9,
    memoryBytes: work("memory", "memory.usage_in_bytes"),
    memoryPeakBytes: work("memory", "memory.max_usage_in_bytes"),
    memoryLimitBytes: work("memory", "memory.limit_in_bytes"),
    processCount: work("pids", "pids.current")
  }
}
