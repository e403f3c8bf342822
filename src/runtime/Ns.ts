/**
 * The namespace operations Bun has no API for: NS_GET_USERNS (the user namespace owning a namespace), and a
 * jail's hostname set from the gateway's own thread (setns into its UTS namespace and back), no helper process.
 */
import { dlopen, FFIType } from "bun:ffi"
import * as fs from "node:fs"

/** _IO(0xb7, 0x1), from linux/nsfs.h. */
const NS_GET_USERNS = 0xb701
/** From linux/sched.h. */
const CLONE_NEWUTS = 0x04000000

const loadLibc = () =>
  dlopen("libc.so.6", {
    ioctl: { args: [FFIType.i32, FFIType.u64], returns: FFIType.i32 },
    setns: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
    sethostname: { args: [FFIType.ptr, FFIType.u64], returns: FFIType.i32 }
  })
let libc: ReturnType<typeof loadLibc> | undefined

/**
 * An open fd of the user namespace that owns the namespace at `nsPath` (e.g. /proc/<pid>/ns/net). bwrap
 * --disable-userns runs the sandbox in a second, nested user namespace, while its network namespace belongs to
 * the first: that first one is what slirp4netns must join. The caller closes the fd.
 */
export const owningUserns = (nsPath: string): number => {
  libc ??= loadLibc()
  const fd = fs.openSync(nsPath, "r")
  try {
    const owner = libc.symbols.ioctl(fd, NS_GET_USERNS)
    if (owner < 0) throw new Error(`NS_GET_USERNS failed on ${nsPath}`)
    return owner
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Sets the hostname of the UTS namespace at `nsPath` (a jail's /proc/<pid>/ns/uts): this thread enters it, sets the
 * name and returns to its own (a UTS namespace is per thread, and nothing else runs on this thread meanwhile). The
 * name is the gateway's (a sandbox id), never the sandbox's. Throws when any step fails; back in its own namespace
 * either way, or the process cannot go on (its own hostname would be the jail's).
 */
export const setHostnameIn = (nsPath: string, hostname: string) => {
  libc ??= loadLibc()
  const name = Buffer.from(hostname, "utf8")
  const own = fs.openSync("/proc/thread-self/ns/uts", "r")
  try {
    const target = fs.openSync(nsPath, "r")
    try {
      if (libc.symbols.setns(target, CLONE_NEWUTS) !== 0) throw new Error(`setns into ${nsPath} failed`)
    } finally {
      fs.closeSync(target)
    }
    try {
      if (libc.symbols.sethostname(name, name.length) !== 0) throw new Error("sethostname failed")
    } finally {
      if (libc.symbols.setns(own, CLONE_NEWUTS) !== 0) {
        console.error("fatal: the gateway could not return to its own UTS namespace")
        process.exit(70)
      }
    }
  } finally {
    fs.closeSync(own)
  }
}
