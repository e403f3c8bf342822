/**
 * What a running sandbox consumes, read on the host from what the kernel keeps about it — never from a file the
 * sandbox can write: its cgroups (CPU time, memory of its commands, their task count), its disk's filesystem
 * (statfs through the launcher's verified /proc handle: the disk is mounted only in the launcher's namespace),
 * and its network namespace's interface counters (/proc/<jail init>/net/dev, opened the same verified way:
 * a pid reused by another process is never read).
 */
import * as fs from "node:fs"
import { cgroupUsage } from "./Cgroups.ts"
import type { JailState } from "./Jail.ts"
import { openView } from "./JailView.ts"
import type { RuntimeMetrics } from "./LocalRuntime.ts"

/** net/dev is one line per interface; a netns holds lo and slirp's tap. Anything longer is not read. */
const MAX_NET_DEV_BYTES = 64 * 1024

/** The contents of /proc/<pid>/<file> if that pid is still the process started at `start`. */
const readProcOf = (pid: number, start: string | null, file: string, maxBytes: number): string | null => {
  let fd: number
  try {
    fd = fs.openSync(`/proc/${pid}`, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  } catch {
    return null
  }
  try {
    const stat = fs.readFileSync(`/proc/self/fd/${fd}/stat`, "utf8")
    if (stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] !== start) return null
    const handle = fs.openSync(`/proc/self/fd/${fd}/${file}`, fs.constants.O_RDONLY)
    try {
      const buffer = Buffer.alloc(maxBytes)
      const n = fs.readSync(handle, buffer, 0, maxBytes, null)
      return buffer.subarray(0, n).toString("utf8")
    } finally {
      fs.closeSync(handle)
    }
  } catch {
    return null
  } finally {
    fs.closeSync(fd)
  }
}

/** Bytes received and sent on every interface but loopback (traffic that left or entered the sandbox). */
export const parseNetDev = (text: string): { readonly rx: number; readonly tx: number } | null => {
  let rx = 0
  let tx = 0
  for (const line of text.split("\n").slice(2)) {
    const colon = line.indexOf(":")
    if (colon < 0) continue
    if (line.slice(0, colon).trim() === "lo") continue
    const fields = line.slice(colon + 1).trim().split(/\s+/).map(Number)
    if (fields.length < 16 || !fields.every((n) => Number.isSafeInteger(n) && n >= 0)) return null
    rx += fields[0]!
    tx += fields[8]!
  }
  return { rx, tx }
}

export const jailMetrics = (state: JailState): RuntimeMetrics => {
  const usage = state.cgroup === null
    ? { cpuSeconds: null, memoryBytes: null, memoryPeakBytes: null, memoryLimitBytes: null, processCount: null }
    : cgroupUsage(state.cgroup)
  let diskBytes: number | null = null
  let diskLimitBytes: number | null = null
  try {
    const view = openView(state)
    try {
      const fsStat = fs.statfsSync(view.base)
      diskLimitBytes = fsStat.blocks * fsStat.bsize
      diskBytes = (fsStat.blocks - fsStat.bfree) * fsStat.bsize
    } finally {
      view.close()
    }
  } catch {}
  const netDev = readProcOf(state.childPid, state.childStart, "net/dev", MAX_NET_DEV_BYTES)
  const network = netDev === null ? null : parseNetDev(netDev)
  return {
    collectedAt: new Date().toISOString(),
    ...usage,
    diskBytes,
    diskLimitBytes,
    networkRxBytes: network?.rx ?? null,
    networkTxBytes: network?.tx ?? null
  }
}
