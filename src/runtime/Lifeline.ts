/**
 * A jail's lifeline: a pipe whose only writer is the jail's pid 1. The gateway makes it when it starts the jail,
 * gives the write end to the launcher, which bwrap keeps with --sync-fd (in its init process only, passed to nothing
 * the jail runs), and closes its own copy at once. Its reading end sees POLLHUP when that init ends, which is when
 * the jail ends, however it ends: destroyed, its leash dropped when the gateway died by SIGKILL, its DATA_DIR
 * removed. slirp4netns takes one as --exit-fd, so a sandbox's network never outlives its jail; that is what lets a
 * warm jail's network start ahead of its create.
 *
 * An anonymous pipe rather than a FIFO beside the disk: the jail can read its init's fd links, and a pipe's names no
 * host path. The reading end lives in the gateway (never reopened through the jail's /proc, which the sandbox could
 * tamper with) until the jail's slirp4netns has it; a slirp4netns started again by a later gateway has none.
 */
import { dlopen, FFIType } from "bun:ffi"
import * as fs from "node:fs"

const O_CLOEXEC = 0o2000000

const loadLibc = () => dlopen("libc.so.6", { pipe2: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.i32 } })
let libc: ReturnType<typeof loadLibc> | null | undefined

/** A new pipe, both ends close-on-exec (no other spawn inherits them), or undefined when none could be made. */
const makePipe = (): { readonly read: number; readonly write: number } | undefined => {
  try {
    libc ??= loadLibc()
  } catch {
    libc = null
  }
  const fds = new Int32Array(2)
  if (libc === null || libc.symbols.pipe2(fds, O_CLOEXEC) !== 0) return undefined
  return { read: fds[0]!, write: fds[1]! }
}

const close = (fd: number) => {
  try {
    fs.closeSync(fd)
  } catch {}
}

/** The reading ends this process holds, by jail id. */
export const makeLifelines = () => {
  const held = new Map<string, number>()
  return {
    /**
     * A lifeline for the jail `id` about to start: the write end to give its launcher (the caller closes it as soon
     * as the launcher is spawned: while this process holds a writer, the jail's end is never seen). Undefined when
     * no pipe could be made: the jail starts without one.
     */
    make: (id: string): number | undefined => {
      const pipe = makePipe()
      if (pipe === undefined) return undefined
      const earlier = held.get(id)
      if (earlier !== undefined) close(earlier)
      held.set(id, pipe.read)
      return pipe.write
    },
    /** The jail's reading end, while this process holds one (passed to a spawn, it stays held here). */
    get: (id: string): number | undefined => held.get(id),
    /** A warm jail handed out under its sandbox's id. */
    rename: (from: string, to: string) => {
      const fd = held.get(from)
      held.delete(from)
      if (fd !== undefined) held.set(to, fd)
    },
    /** Lets the jail's reading end go (its slirp4netns has its own, or it needs none). */
    drop: (id: string) => {
      const fd = held.get(id)
      held.delete(id)
      if (fd !== undefined) close(fd)
    }
  }
}

export type Lifelines = ReturnType<typeof makeLifelines>
