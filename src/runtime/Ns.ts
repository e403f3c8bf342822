/** The one namespace operation Bun has no API for: NS_GET_USERNS (the user namespace owning a namespace). */
import { dlopen, FFIType } from "bun:ffi"
import * as fs from "node:fs"

/** _IO(0xb7, 0x1), from linux/nsfs.h. */
const NS_GET_USERNS = 0xb701

let libc: { readonly symbols: { readonly ioctl: (fd: number, request: number | bigint) => number } } | undefined

/**
 * An open fd of the user namespace that owns the namespace at `nsPath` (e.g. /proc/<pid>/ns/net). bwrap
 * --disable-userns runs the sandbox in a second, nested user namespace, while its network namespace belongs to
 * the first: that first one is what slirp4netns must join. The caller closes the fd.
 */
export const owningUserns = (nsPath: string): number => {
  libc ??= dlopen("libc.so.6", { ioctl: { args: [FFIType.i32, FFIType.u64], returns: FFIType.i32 } })
  const fd = fs.openSync(nsPath, "r")
  try {
    const owner = libc.symbols.ioctl(fd, NS_GET_USERNS)
    if (owner < 0) throw new Error(`NS_GET_USERNS failed on ${nsPath}`)
    return owner
  } finally {
    fs.closeSync(fd)
  }
}
