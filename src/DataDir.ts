/**
 * DATA_DIR holds the database (process output, file contents, emails), the secrets key and every sandbox's disk:
 * it is root's alone. At start the folder is made 0700 and, when it already exists (created by an earlier version,
 * or by hand), everything in it is fixed: directories 0700, files 0600. Inside a sandbox's directory only its own
 * files are touched (state, disk image), never what an earlier version kept there for the jail itself.
 * The database file is created 0600 before SQLite opens it: SQLite gives its -wal and -shm files the mode of the
 * database file.
 */
import * as fs from "node:fs"
import * as path from "node:path"

/** The files of a sandbox's own directory the runtime writes (an earlier version kept the jail's root there too). */
const SANDBOX_FILES = new Set(["state.json", "disk.img"])

const chmod = (file: string, stat: fs.Stats, mode: number) => {
  if ((stat.mode & 0o7777) === mode) return
  try {
    fs.chmodSync(file, mode)
  } catch {
    // Not ours to change (a CLI run by another user): the gateway, which runs as root, fixes it.
  }
}

const fix = (file: string, depth: number, insideSandboxes: boolean) => {
  let stat: fs.Stats
  try {
    stat = fs.lstatSync(file)
  } catch {
    return
  }
  if (stat.isSymbolicLink()) return
  if (stat.isDirectory()) {
    chmod(file, stat, 0o700)
    let names: Array<string> = []
    try {
      names = fs.readdirSync(file)
    } catch {}
    for (const name of names) {
      // A sandbox's directory (sandboxes/<id>, depth 2): only its state and disk image.
      if (insideSandboxes && depth === 2 && !SANDBOX_FILES.has(name)) continue
      fix(path.join(file, name), depth + 1, insideSandboxes || (depth === 0 && name === "sandboxes"))
    }
  } else if (stat.isFile()) {
    chmod(file, stat, 0o600)
  }
}

/**
 * Why `dir` cannot be a DATA_DIR, if it cannot: a directory others share (the root, a world-writable or sticky one
 * such as /tmp) would be made root's alone, everything in it with it. Undefined when it can (or does not exist yet).
 */
export const sharedDirectoryReason = (dir: string): string | undefined => {
  const resolved = path.resolve(dir)
  if (resolved === "/") return "DATA_DIR cannot be the root directory"
  let stat: fs.Stats
  try {
    stat = fs.statSync(resolved)
  } catch {
    return undefined
  }
  if (stat.isDirectory() && (stat.mode & 0o1002) !== 0) {
    return `DATA_DIR ${resolved} is a shared directory (world-writable or sticky, like /tmp): use a directory of its own inside it, such as ${path.join(resolved, "sandbox-gateway")}`
  }
  return undefined
}

/** `databaseName` undefined: the database is not in DATA_DIR (PostgreSQL). */
export const secureDataDir = (dataDir: string, databaseName: string | undefined = "gateway.sqlite") => {
  const shared = sharedDirectoryReason(dataDir)
  if (shared !== undefined) throw new Error(shared)
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  fix(dataDir, 0, false)
  if (databaseName === undefined) return
  const database = path.join(dataDir, databaseName)
  try {
    fs.closeSync(fs.openSync(database, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600))
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
  }
}
