/**
 * A verified handle on a running jail's disk (ARCHITECTURE.md §5 threat model: everything in the jail is hostile).
 * The disk is reached through /proc/<launcher>/root, by a directory fd of /proc/<pid> opened and checked against
 * the launcher's start time, then used as /proc/self/fd/<n>/…: a later process reusing the pid can never be
 * reached by a handle opened for the earlier one. Through it the gateway adopts the agent's sockets
 * (AgentChannel.ts), reads a jail's metrics (Metrics.ts) and rewrites a warm jail's identity files (WarmPool.ts).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { DISK_ROOT } from "./Disk.ts"
import { STAGE } from "./Host.ts"
import { type JailState } from "./Jail.ts"
import { runtimeError } from "./LocalRuntime.ts"

/** The failure of every call to a jail's agent or through its disk: a RuntimeError the user is shown. */
export const unavailable = (message: string, detail?: string) => runtimeError("unavailable", message, detail)

/** A verified handle on a running jail's disk, valid until `close`. */
export interface JailView {
  /** The disk's root as a path of this process (/proc/self/fd/<n>/root/<STAGE>). */
  readonly base: string
  readonly close: () => void
}

export const openView = (state: Pick<JailState, "bwrapPid" | "bwrapStart">): JailView => {
  let fd: number
  try {
    fd = fs.openSync(`/proc/${state.bwrapPid}`, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  } catch {
    throw unavailable("the sandbox is not running")
  }
  try {
    const stat = fs.readFileSync(`/proc/self/fd/${fd}/stat`, "utf8")
    const start = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
    if (start !== state.bwrapStart) throw new Error("a different process")
  } catch {
    fs.closeSync(fd)
    throw unavailable("the sandbox is not running")
  }
  let open = true
  return {
    base: `/proc/self/fd/${fd}/root${STAGE}`,
    close: () => {
      if (open) fs.closeSync(fd)
      open = false
    }
  }
}

/**
 * Rewrites the /etc files that name the sandbox (a warm jail handed out under a new id). /etc is root-owned in
 * the jail, but the jail's root is the sandbox's: the directory is opened without following links and checked
 * to be root's before anything is written through it.
 */
export const writeIdentityFiles = (state: JailState, files: Record<string, string>) => {
  const view = openView(state)
  try {
    const etc = path.join(view.base, DISK_ROOT, "etc")
    const dir = fs.openSync(etc, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW)
    try {
      const stat = fs.fstatSync(dir)
      if (stat.uid !== 0) throw new Error("the jail's /etc is not the runtime's")
      for (const [name, content] of Object.entries(files)) {
        // Written over, then cut to its new length: a truncation to nothing first makes ext4 write the file out
        // at its close (auto_da_alloc, ~150 µs a file here), and nothing reads these before the handout ends.
        const fd = fs.openSync(`/proc/self/fd/${dir}/${name}`, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW, 0o644)
        try {
          const bytes = Buffer.from(content)
          fs.writeSync(fd, bytes, 0, bytes.length, 0)
          fs.ftruncateSync(fd, bytes.length)
        } finally {
          fs.closeSync(fd)
        }
      }
    } finally {
      fs.closeSync(dir)
    }
  } finally {
    view.close()
  }
}
