/**
 * `bun run bench --load --acct`: the CPU of every process that ended during the run, by program, from the
 * kernel's process accounting (acct(2), called through bun:ffi: no package needed). It names what the cgroup
 * split cannot: of a sandbox's CPU, how much its agent (bun), slirp4netns, bwrap or the shell commands took.
 * Accounting is machine-wide and counts a process when it exits: read it on a machine with nothing else running,
 * and know that processes still running when it stops (the gateway, the warm pool's jails) are not in it.
 */
import { dlopen, FFIType, ptr } from "bun:ffi"
import * as fs from "node:fs"

/** struct acct_v3 (linux/acct.h): 64 bytes a record. */
const RECORD = 64
const AHZ = 100

/** comp_t: 13-bit mantissa, 3-bit base-8 exponent, in AHZ ticks. */
const comp = (v: number) => (v & 0x1fff) << (3 * ((v >> 13) & 7))

export interface ProgramCpu {
  readonly program: string
  /** Processes of a sandbox's host uid (RUNTIME_HOST_UID's range) or of root and the rest. */
  readonly sandboxed: boolean
  readonly count: number
  readonly cpuMs: number
}

/** The records of `file`, summed by program and by whether they ran as a sandbox uid (≥ firstSandboxUid). */
export const readAccounting = (file: string, firstSandboxUid: number): Array<ProgramCpu> => {
  const data = fs.readFileSync(file)
  const sums = new Map<string, { program: string; sandboxed: boolean; count: number; ticks: number }>()
  for (let at = 0; at + RECORD <= data.length; at += RECORD) {
    if (data[at + 1] !== 3) continue // ac_version: v3 only
    const uid = data.readUInt32LE(at + 8)
    const ticks = comp(data.readUInt16LE(at + 32)) + comp(data.readUInt16LE(at + 34))
    const program = data.subarray(at + 48, at + 64).toString("latin1").replace(/\0.*$/s, "")
    const sandboxed = uid >= firstSandboxUid
    const key = `${sandboxed}:${program}`
    const sum = sums.get(key) ?? { program, sandboxed, count: 0, ticks: 0 }
    sum.count++
    sum.ticks += ticks
    sums.set(key, sum)
  }
  return [...sums.values()].map((s) => ({ program: s.program, sandboxed: s.sandboxed, count: s.count, cpuMs: (s.ticks * 1000) / AHZ })).sort((a, b) => b.cpuMs - a.cpuMs)
}

const libc = () => dlopen("libc.so.6", { acct: { args: [FFIType.ptr], returns: FFIType.i32 } })

/** Turns accounting on into `file` (created empty); returns a function that turns it off. Throws when refused. */
export const startAccounting = (file: string): (() => void) => {
  fs.writeFileSync(file, "")
  const { symbols, close } = libc()
  const name = Buffer.from(`${file}\0`)
  if (symbols.acct(ptr(name)) !== 0) {
    close()
    throw new Error("acct(2) refused: process accounting needs root and a kernel built with BSD process accounting")
  }
  return () => {
    symbols.acct(null)
    close()
  }
}
