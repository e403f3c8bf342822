/**
 * vitest globalSetup of every run, first: the run's own scratch directory as TMPDIR, removed when the run ends
 * (`bun run bench` makes one too).
 * Every temporary DATA_DIR and scratch directory of the run's files, servers and emulators (`os.tmpdir()`) is made
 * in it. Left in /tmp they had added up to ~55 GiB on one machine in a day of runs — and the uid leases of jails
 * in them stayed held, since a lease is reclaimed only once its jail's directory is gone.
 *
 * A directory that still has something mounted under it (a jail a test left running) is not removed: removing
 * would reach into the mount. It is named on stderr instead.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** Mount points under `dir` (mountinfo's fifth field, octal escapes as the kernel writes them). */
const mountsUnder = (dir: string) =>
  fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n")
    .map((line) => (line.split(" ")[4] ?? "").replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))))
    .filter((point) => point.startsWith(`${dir}/`))

/** Makes the run's TMPDIR (also `bun run bench`'s); returns what removes it. */
export const runScratch = () => {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-run-"))
  // As /tmp is: the tests that run a gateway or a cluster as another user make their directories here too.
  fs.chmodSync(scratch, 0o1777)
  process.env["TMPDIR"] = scratch
  return () => {
    const mounted = mountsUnder(scratch)
    for (const entry of fs.readdirSync(scratch)) {
      const dir = path.join(scratch, entry)
      if (mounted.some((point) => point === dir || point.startsWith(`${dir}/`))) continue
      fs.rmSync(dir, { recursive: true, force: true })
    }
    if (mounted.length > 0) console.error(`left in ${scratch}: ${mounted.length} mounts (a jail left running?): ${mounted.slice(0, 5).join(", ")}`)
    else fs.rmSync(scratch, { recursive: true, force: true })
  }
}

export default runScratch
