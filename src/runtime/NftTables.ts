/**
 * Whether an nftables table is there, asked of the kernel from the gateway's own process through libnftables (the
 * library the nft program is built on) when the host has it: a library call of about half a millisecond instead of
 * starting nft, ~20 ms here, before every sandbox with internet (the egress filter's check). Where the library
 * cannot be loaded, or a call of it fails to start, the nft program answers as before. Either way the answer is
 * read after the caller asked, and anything but "listed" is "not there", which only ever refuses more: the caller
 * then installs the table with the nft program (Egress.ts, DomainPolicy.ts) or fails closed.
 */
import { dlopen, FFIType } from "bun:ffi"

const symbols = {
  nft_ctx_new: { args: [FFIType.u32], returns: FFIType.ptr },
  nft_ctx_free: { args: [FFIType.ptr], returns: FFIType.void },
  nft_ctx_buffer_output: { args: [FFIType.ptr], returns: FFIType.i32 },
  nft_ctx_buffer_error: { args: [FFIType.ptr], returns: FFIType.i32 },
  nft_run_cmd_from_buffer: { args: [FFIType.ptr, FFIType.cstring], returns: FFIType.i32 }
} as const

type Library = ReturnType<typeof dlopen<typeof symbols>>["symbols"]

let library: Library | null | undefined
const loaded = (): Library | null => {
  if (library === undefined) {
    try {
      library = dlopen("libnftables.so.1", symbols).symbols
    } catch {
      library = null
    }
  }
  return library
}

/** Which of the two ways answers on this host (for the tests and the benchmarks). */
export const nftTablesVia = (): "library" | "program" => (loaded() === null ? "program" : "library")

/** A table name as nft takes it: letters, digits and underscores only (ours all are), never a second command. */
const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/

/** One `list table` through the library: true when listed, false when not, null when the library could not ask. */
const listedByLibrary = (lib: Library, family: string, name: string): boolean | null => {
  const ctx = lib.nft_ctx_new(0)
  if (typeof ctx !== "number") return null
  try {
    // Its output and errors kept in the context's buffers (freed with it), never written to the gateway's stdout.
    lib.nft_ctx_buffer_output(ctx)
    lib.nft_ctx_buffer_error(ctx)
    return lib.nft_run_cmd_from_buffer(ctx, Buffer.from(`list table ${family} ${name}\0`)) === 0
  } finally {
    lib.nft_ctx_free(ctx)
  }
}

const listedByProgram = async (family: string, name: string): Promise<boolean> => {
  try {
    // The gateway's environment as it is now (Bun would otherwise look nft up in the PATH it started with).
    return (await Bun.spawn(["nft", "list", "table", family, name], { stdio: ["ignore", "ignore", "ignore"], env: { ...process.env } }).exited) === 0
  } catch {
    return false
  }
}

/** Whether the table `family name` is in the kernel's ruleset now. */
export const nftTablePresent = async (family: "inet", name: string): Promise<boolean> => {
  if (!NAME.test(name)) return false
  const lib = loaded()
  const listed = lib === null ? null : listedByLibrary(lib, family, name)
  return listed ?? (await listedByProgram(family, name))
}
