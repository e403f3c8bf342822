/**
 * What this host can give one sandbox (the local runtime's ceiling): its cores, its memory and the free space of
 * the file system DATA_DIR is on (a sandbox's disk is a sparse image there, so a larger one would fill up before
 * its size). A create asking for more is refused rather than given less; `/ready` reports it, and the emulated
 * providers are never chosen for a request above it (providers/core/localRuntime.ts).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import { MAX_DISK_MB } from "./Disk.ts"
import type { RuntimeLimits, RuntimeSandboxSpec } from "./LocalRuntime.ts"

const MiB = 1024 * 1024

export const hostLimits = (dataDir: string): RuntimeLimits => {
  let diskMb = MAX_DISK_MB
  try {
    const fsStats = fs.statfsSync(dataDir)
    diskMb = Math.min(MAX_DISK_MB, Math.floor((fsStats.bavail * fsStats.bsize) / MiB))
  } catch {
    // No statfs here: the disk size's own bound applies.
  }
  return { vcpu: os.availableParallelism(), memoryMb: Math.floor(os.totalmem() / MiB), diskMb }
}

/** Why a sandbox of this spec cannot be had on this host, or null. A disk left to the default is not checked. */
export const aboveLimits = (spec: Pick<RuntimeSandboxSpec, "vcpu" | "memoryMb" | "diskMb">, limits: RuntimeLimits): string | null => {
  if (spec.vcpu > limits.vcpu) return `this host can give a sandbox at most ${limits.vcpu} vCPUs (${spec.vcpu} asked)`
  if (spec.memoryMb > limits.memoryMb) return `this host can give a sandbox at most ${limits.memoryMb} MB of memory (${spec.memoryMb} asked)`
  if (spec.diskMb !== undefined && spec.diskMb > limits.diskMb) return `this host has ${limits.diskMb} MB of disk free for a sandbox (${spec.diskMb} asked)`
  return null
}
