/**
 * What the local runtime needs from the host, shared by every gateway (and test run) on it, under
 * /run/sandbox-gateway (root-owned; usually on a tmpfs, so gone after a reboot):
 *   stage/   an empty directory; each jail's launcher mounts the sandbox's disk there, in its own mount namespace
 *   tools/   a tmpfs with the agent script and a copy of bun, bound read-only into every jail. Copies, named by
 *            content, so that the jail's /proc/self/mountinfo shows paths of this tmpfs, never the host's bun or
 *            DATA_DIR (a bind mount names the path of its source inside the source's filesystem)
 *   dev/tun  a 0666 tun node (root-only directory): slirp4netns runs as the sandbox's uid and opens /dev/net/tun,
 *            which some hosts make 0600; it is bound over /dev/net/tun in slirp's own mount namespace only
 *   uids/    host-global uid leases (UidLeases.ts)
 * Set-up runs under flock, so concurrent gateways never mount the tmpfs twice.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

export const RUNTIME_ROOT = "/run/sandbox-gateway"
export const STAGE = path.join(RUNTIME_ROOT, "stage")
export const TOOLS = path.join(RUNTIME_ROOT, "tools")
export const TUN_NODE = path.join(RUNTIME_ROOT, "dev", "tun")
export const UIDS_DIR = path.join(RUNTIME_ROOT, "uids")
/** Tool copies nobody refreshed for this long (a runtime refreshes its own every few minutes), or whose source binary is gone, are removed. */
const TOOLS_MAX_IDLE_MS = 60 * 60 * 1000
export const TOOLS_REFRESH_MS = 5 * 60 * 1000

export class HostError extends Error {}

/** The local runtime's guarantees (disk images, uid ranges, nftables) need root: refuse clearly without it. */
export const requireRoot = () => {
  if (process.getuid?.() !== 0) {
    throw new HostError(
      "the local runtime needs root (it mounts each sandbox's disk, runs each sandbox as its own host uid and installs an nftables egress filter): start the gateway as root"
    )
  }
}

const SETUP = `
set -e
mkdir -p ${RUNTIME_ROOT} ${STAGE} ${TOOLS} ${path.dirname(TUN_NODE)} ${UIDS_DIR}
chmod 0755 ${RUNTIME_ROOT} ${STAGE}
chmod 0700 ${path.dirname(TUN_NODE)} ${UIDS_DIR}
mountpoint -q ${TOOLS} || mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs ${TOOLS}
[ -c ${TUN_NODE} ] || mknod -m 0666 ${TUN_NODE} c 10 200
`

let prepared = false

/** Idempotent, once per process. */
export const prepareHost = () => {
  if (prepared) return
  requireRoot()
  fs.mkdirSync(RUNTIME_ROOT, { recursive: true, mode: 0o755 })
  const result = Bun.spawnSync(["flock", path.join(RUNTIME_ROOT, ".lock"), "/bin/sh", "-c", SETUP], { stdio: ["ignore", "ignore", "pipe"] })
  if (result.exitCode !== 0) throw new HostError(`could not prepare ${RUNTIME_ROOT}: ${result.stderr.toString().trim().slice(0, 500)}`)
  prepared = true
}

export interface Tools {
  /** Paths on the tools tmpfs, bound read-only into jails: bun, and the directory of the agent's modules. */
  readonly bun: string
  readonly agent: string
}

const installCopy = (target: string, write: (tmp: string) => void, mode: number) => {
  if (fs.existsSync(target)) {
    const now = new Date()
    try {
      fs.utimesSync(target, now, now)
    } catch {}
    return
  }
  const tmp = path.join(TOOLS, `.tmp-${process.pid}-${crypto.randomUUID()}`)
  try {
    write(tmp)
    fs.chmodSync(tmp, mode)
    // Atomic: a concurrent installer of the same content loses nothing (same bytes under the same name); a
    // directory renamed onto one that exists fails, and the one there is as good.
    try {
      fs.renameSync(tmp, target)
    } catch (e) {
      if (!fs.existsSync(target)) throw e
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

/**
 * Copies of bun (named by its size, mtime and inode: cheap, and a rebuilt or upgraded binary gets a new name) and
 * of the agent's modules (a directory named by their hash) on the tools tmpfs. A `.src` file beside a bun copy names its source,
 * so that `collectTools` can drop copies of binaries that no longer exist (a compiled gateway that was deleted).
 */
export const ensureTools = (bunPath: string, agentFiles: Readonly<Record<string, string>>): Tools => {
  prepareHost()
  const stat = fs.statSync(bunPath)
  const bunKey = createHash("sha256").update(`${bunPath}\0${stat.size}\0${stat.mtimeMs}\0${stat.ino}`).digest("hex").slice(0, 20)
  const bun = path.join(TOOLS, `bun-${bunKey}`)
  installCopy(bun, (tmp) => fs.copyFileSync(bunPath, tmp), 0o755)
  fs.writeFileSync(`${bun}.src`, JSON.stringify({ path: bunPath, size: stat.size, mtimeMs: stat.mtimeMs, ino: stat.ino }), { mode: 0o644 })
  const names = Object.keys(agentFiles).sort()
  const agent = path.join(TOOLS, `agent-${createHash("sha256").update(JSON.stringify(names.map((n) => [n, agentFiles[n]]))).digest("hex").slice(0, 20)}`)
  installCopy(agent, (tmp) => {
    fs.mkdirSync(tmp)
    for (const name of names) fs.writeFileSync(path.join(tmp, name), agentFiles[name]!, { mode: 0o644 })
  }, 0o755)
  return { bun, agent }
}

/**
 * Removes tool copies nobody refreshed for an hour, and bun copies whose source binary is gone or changed (a
 * compiled gateway that was deleted): each bun copy is ~110 MB of memory. A copy still bound into running jails
 * stays alive through those mounts; only new jails need the file, and their runtime puts it back.
 */
export const collectTools = (keep: Tools) => {
  let names: Array<string>
  try {
    names = fs.readdirSync(TOOLS)
  } catch {
    return
  }
  const now = Date.now()
  for (const name of names) {
    const file = path.join(TOOLS, name)
    if (file === keep.bun || file === keep.agent || file === `${keep.bun}.src` || name.endsWith(".src")) continue
    try {
      let stale = now - fs.statSync(file).mtimeMs > TOOLS_MAX_IDLE_MS
      if (name.startsWith("bun-")) {
        try {
          const src = JSON.parse(fs.readFileSync(`${file}.src`, "utf8")) as { path: string; size: number; mtimeMs: number; ino: number }
          const now = fs.statSync(src.path)
          if (now.size !== src.size || now.mtimeMs !== src.mtimeMs || now.ino !== src.ino) stale = true
        } catch {
          stale = true
        }
      }
      // Running jails keep their bound copy (the mount holds it); only new jails need the file.
      if (stale) {
        fs.rmSync(file, { recursive: true, force: true })
        fs.rmSync(`${file}.src`, { force: true })
      }
    } catch {}
  }
}
