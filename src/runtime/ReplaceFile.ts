/**
 * Replacing a small file whole, so that a reader at any moment finds the old file or the new one, never half of
 * one nor none: the runtime's jail states and uid leases, the emulators' state.
 *
 * The new content is written beside the file and swapped in. A rename over an existing file costs ~100 µs on ext4
 * (its auto_da_alloc starts writing the new file's data out before the rename, so that a power loss cannot leave
 * it empty), several times per create. An exchange of the two names (renameat2 RENAME_EXCHANGE) is not a rename
 * over anything, so it skips that: ~20 µs with the unlink of the old file after it. Both names exist throughout.
 * What these files describe (a jail, its uid, an emulated sandbox) does not outlive a power loss anyway. Where the
 * exchange cannot be made (no file there yet, no renameat2, a filesystem without it), a plain rename does it.
 */
import { dlopen, FFIType } from "bun:ffi"
import * as fs from "node:fs"

const AT_FDCWD = -100
const RENAME_EXCHANGE = 2

const loadLibc = () =>
  dlopen("libc.so.6", { renameat2: { args: [FFIType.i32, FFIType.cstring, FFIType.i32, FFIType.cstring, FFIType.u32], returns: FFIType.i32 } })
let libc: ReturnType<typeof loadLibc> | null | undefined

const exchanged = (a: string, b: string): boolean => {
  try {
    libc ??= loadLibc()
  } catch {
    libc = null
  }
  return libc !== null && libc.symbols.renameat2(AT_FDCWD, Buffer.from(`${a}\0`), AT_FDCWD, Buffer.from(`${b}\0`), RENAME_EXCHANGE) === 0
}

/** Replaces `file` with `data` (created with `mode`), through `temp` beside it (one writer at a time per `temp`). */
export const replaceFile = (file: string, data: string, options: { readonly mode: number; readonly temp?: string }) => {
  const temp = options.temp ?? `${file}.tmp`
  fs.writeFileSync(temp, data, { mode: options.mode })
  if (exchanged(temp, file)) fs.rmSync(temp, { force: true })
  else fs.renameSync(temp, file)
}
