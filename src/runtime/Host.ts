/**
 * What the local runtime needs from the host, shared by every gateway (and test run) on it, under
 * /run/sandbox-gateway (root-owned; usually on a tmpfs, so gone after a reboot):
 *   stage/   an empty directory; each jail's launcher mounts the sandbox's disk there, in its own mount namespace
 *   tools/   a tmpfs with the agent script, a copy of bun and (rt-*) the host's dynamic loader with the libraries bun
 *            needs plus a shell and sleep, bound read-only into every jail (rt only into jails on an OCI image: the
 *            agent and its shell loop run through that loader, so they need nothing of the image). Copies, named by
 *            content, so that the jail's /proc/self/mountinfo shows paths of this tmpfs, never the host's bun or
 *            DATA_DIR (a bind mount names the path of its source inside the source's filesystem)
 *   dev/tun  a 0666 tun node (root-only directory): slirp4netns runs as the sandbox's uid and opens /dev/net/tun,
 *            which some hosts make 0600; it is bound over /dev/net/tun in slirp's own mount namespace only
 *   uids/    host-global uid leases (UidLeases.ts)
 * Set-up runs under flock, so concurrent gateways never mount the tmpfs twice.
 */
import { Option, Schema } from "effect"
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
  /**
   * The host's loader (`ld.so`), bun's libraries (`lib/`), `sh` and `sleep`: what the agent needs in any image.
   * null when they could not be found (no ldd, a static bun): sandboxes on images are then refused, others run.
   */
  readonly rt: string | null
}

/** The dynamic loader and shared libraries `ldd` names for a binary. */
const linkedFiles = (binary: string): { loader: string | undefined; libs: Array<string> } => {
  const out = Bun.spawnSync(["ldd", binary], { stdio: ["ignore", "pipe", "ignore"] }).stdout.toString()
  const libs: Array<string> = []
  let loader: string | undefined
  for (const line of out.split("\n")) {
    const arrow = /=>\s+(\/\S+)/.exec(line)
    if (arrow !== null) libs.push(arrow[1]!)
    else if (/^\s*(\/\S*ld-linux\S*|\/\S*ld64\S*|\/\S*ld\.so\S*)\s/.test(line)) loader = line.trim().split(/\s+/)[0]
  }
  return { loader, libs }
}

/** What `ldd` says of a binary, kept beside the tools (a JSON file per set of binaries). */
const decodeLinks = Schema.decodeUnknownOption(Schema.parseJson(Schema.Array(Schema.Struct({ loader: Schema.optional(Schema.String), libs: Schema.Array(Schema.String) }))))

/**
 * `linkedFiles` of each binary, remembered on the tools tmpfs: `ldd` runs a shell script and the loader (~50 ms a
 * binary here, three of them at every start). Named by what decides its answer: each binary's path, size, mtime and
 * inode, the loader's cache (`/etc/ld.so.cache`, rewritten by ldconfig when libraries come or go) and
 * LD_LIBRARY_PATH. The libraries' own contents are not in the name: the rt directory is named by them (ensureRt).
 */
const linkedFilesOf = (binaries: ReadonlyArray<string>): ReadonlyArray<{ readonly loader?: string | undefined; readonly libs: ReadonlyArray<string> }> => {
  const identity = (file: string) => {
    try {
      const st = fs.statSync(file)
      return [file, st.size, st.mtimeMs, st.ino]
    } catch {
      return [file, null]
    }
  }
  const key = createHash("sha256").update(JSON.stringify([binaries.map(identity), identity("/etc/ld.so.cache"), process.env["LD_LIBRARY_PATH"] ?? null])).digest("hex").slice(0, 20)
  const file = path.join(TOOLS, `links-${key}.json`)
  try {
    const known = Option.getOrThrow(decodeLinks(fs.readFileSync(file, "utf8")))
    if (known.length === binaries.length) {
      const now = new Date()
      fs.utimesSync(file, now, now) // in use: collectTools keeps it
      return known
    }
  } catch {}
  const linked = binaries.map(linkedFiles)
  const tmp = `${file}.${process.pid}.tmp`
  try {
    fs.writeFileSync(tmp, JSON.stringify(linked), { mode: 0o644 })
    fs.renameSync(tmp, file)
  } catch {
    fs.rmSync(tmp, { force: true })
  }
  return linked
}

const which = (name: string) => {
  for (const dir of ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]) if (fs.existsSync(path.join(dir, name))) return fs.realpathSync(path.join(dir, name))
  throw new HostError(`${name} is missing on this host`)
}

/**
 * The rt directory: the host's loader as `ld.so`, the libraries of bun, sh and sleep in `lib/`, and `sh` and
 * `sleep` themselves. In a jail on an OCI image, `/opt/agent/rt/ld.so --library-path /opt/agent/rt/lib X` runs
 * X with none of the image's files (Alpine has no glibc, a distroless image no shell).
 */
const ensureRt = (bunPath: string): string => {
  const binaries = { bun: bunPath, sh: which("sh"), sleep: which("sleep") }
  const files = new Map<string, string>()
  let loader: string | undefined
  for (const linked of linkedFilesOf(Object.values(binaries))) {
    loader ??= linked.loader
    for (const lib of linked.libs) files.set(path.basename(lib), fs.realpathSync(lib))
  }
  if (loader === undefined) throw new HostError("the host's dynamic loader could not be found (ldd)")
  const loaderReal = fs.realpathSync(loader)
  const sources = [loaderReal, binaries.sh, binaries.sleep, ...[...files.entries()].map(([n, f]) => `${n}=${f}`)]
  const key = createHash("sha256").update(JSON.stringify(sources.map((s) => {
    const file = s.includes("=") ? s.slice(s.indexOf("=") + 1) : s
    const st = fs.statSync(file)
    return [s, st.size, st.mtimeMs, st.ino]
  }))).digest("hex").slice(0, 20)
  const rt = path.join(TOOLS, `rt-${key}`)
  installCopy(rt, (tmp) => {
    fs.mkdirSync(path.join(tmp, "lib"), { recursive: true })
    fs.copyFileSync(loaderReal, path.join(tmp, "ld.so"))
    fs.copyFileSync(binaries.sh, path.join(tmp, "sh"))
    fs.copyFileSync(binaries.sleep, path.join(tmp, "sleep"))
    for (const [name, file] of files) fs.copyFileSync(file, path.join(tmp, "lib", name))
    for (const f of ["ld.so", "sh", "sleep"]) fs.chmodSync(path.join(tmp, f), 0o755)
    for (const name of files.keys()) fs.chmodSync(path.join(tmp, "lib", name), 0o644)
    fs.chmodSync(path.join(tmp, "lib"), 0o755)
  }, 0o755)
  return rt
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
  let rt: string | null = null
  try {
    rt = ensureRt(bunPath)
  } catch (e) {
    console.error(`local runtime: sandboxes on OCI images are not available: ${(e as Error).message}`)
  }
  return { bun, agent, rt }
}

/**
 * Removes tool copies nobody refreshed for an hour, and bun copies whose source binary is gone or changed (a
 * compiled gateway that was deleted): each bun copy is ~110 MB of memory. A copy still bound into running jails
 * stays alive through those mounts; only new jails need the file, and their runtime puts it back.
 */
/** A bun copy's `.src` file: the file it was copied from, as it was then (an unreadable one makes the copy stale). */
const decodeToolSource = Schema.decodeUnknownOption(Schema.parseJson(Schema.Struct({ path: Schema.String, size: Schema.Number, mtimeMs: Schema.Number, ino: Schema.Number })))

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
    if (file === keep.bun || file === keep.agent || file === keep.rt || file === `${keep.bun}.src` || name.endsWith(".src")) continue
    try {
      let stale = now - fs.statSync(file).mtimeMs > TOOLS_MAX_IDLE_MS
      if (name.startsWith("bun-")) {
        try {
          const src = Option.getOrThrow(decodeToolSource(fs.readFileSync(`${file}.src`, "utf8")))
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
