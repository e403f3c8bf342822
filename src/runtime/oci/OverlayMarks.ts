/**
 * overlayfs' own marks, made and read through libc (node has no mknod or xattr calls): a whiteout (a 0/0
 * character device: the path is deleted in the layers below) and an opaque directory (the layers below do not
 * show through it). Unpack.ts makes them from a layer's `.wh.` entries; ImageUser.ts reads them back.
 */
import { dlopen, FFIType } from "bun:ffi"
import type * as fs from "node:fs"
import * as path from "node:path"

const libc = (() => {
  try {
    return dlopen("libc.so.6", {
      mknod: { args: [FFIType.ptr, FFIType.u32, FFIType.u64], returns: FFIType.i32 },
      lsetxattr: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.i32], returns: FFIType.i32 },
      lgetxattr: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64], returns: FFIType.i64 }
    }).symbols
  } catch {
    return undefined
  }
})()
const cstr = (s: string) => Buffer.from(`${s}\0`)

/** An overlayfs whiteout: a 0/0 character device. */
export const whiteout = (file: string) => {
  if (libc === undefined || libc.mknod(cstr(file), 0o020000, 0n) !== 0) throw new Error(`mknod whiteout failed for ${path.basename(file)}`)
}
export const markOpaque = (dir: string) => {
  if (libc === undefined || libc.lsetxattr(cstr(dir), cstr("trusted.overlay.opaque"), Buffer.from("y"), 1n, 0) !== 0) throw new Error("setting an opaque directory failed")
}

/** Whether an unpacked entry is a whiteout (what `whiteout` made): the path is deleted in the layers below. */
export const isWhiteout = (stat: fs.Stats) => stat.isCharacterDevice() && stat.rdev === 0
/** Whether an unpacked directory is opaque (what `markOpaque` made): the layers below do not show through it. */
export const isOpaque = (dir: string) => {
  if (libc === undefined) throw new Error("reading an opaque mark needs libc")
  const value = Buffer.alloc(1)
  return Number(libc.lgetxattr(cstr(dir), cstr("trusted.overlay.opaque"), value, 1n)) === 1 && value[0] === 0x79
}
