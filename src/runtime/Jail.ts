/**
 * One sandbox = one bwrap jail (DESIGN.md §5). On the host, `DATA_DIR/sandboxes/<id>/` (root only, 0700) holds:
 *   state.json  what the runtime needs to re-attach after a gateway restart (0600)
 *   disk.img    the sandbox's disk: a sparse ext4 image of `diskMb` (0600). Its filesystem holds
 *                 root/  the jail's root: /workspace (home, default cwd), /tmp, and root-owned mount points and
 *                        /etc files (passwd and group of the sandbox user, hostname, hosts, resolv.conf)
 *                 run/   bound at /run/agent: the agent's unix sockets and its kept executions (execs/)
 *                 ctl/   root only, never in the jail: where the gateway moves ("adopts") the agent's sockets
 *               so the disk limit covers everything the sandbox can write (but /dev/shm and /dev, which are
 *               memory and count against its memory limit).
 * The disk is mounted (loop, nosuid, nodev, discard) only inside the jail's own launcher mount namespace, at
 * STAGE: the host's mount table never holds it, nothing else can pin it, and it goes (loop device included) when
 * the jail's last process exits. The gateway reaches it through /proc/<launcher pid>/root (AgentChannel.ts).
 *
 * Read-only from the host: /usr (plus the merged-/usr symlinks), a few /etc files, and the agent script and bun
 * copied to the tools tmpfs (Host.ts). Never the host's home, /root, the project or DATA_DIR, and no mount of
 * the jail names a host path. bwrap runs as the sandbox's own host uid (UidLeases.ts); inside, processes are uid
 * 1000 in new user, pid, ipc, uts, cgroup, mount and network namespaces, with no capabilities and no further
 * user namespaces. Limits use cgroup v1 (pids, memory, cpu, freezer) under
 * /sys/fs/cgroup/<controller>/sandbox-gateway/<scope>/<id>, where <scope> is derived from DATA_DIR (two
 * gateways, or two test runs, never share a cgroup); commands run in a `work` child of the pids and memory
 * cgroups, so a fork bomb or an allocation spree cannot starve the agent. Without cgroups, the launcher's
 * RLIMIT_NPROC bounds the whole sandbox (its uid is its own, so the count is its own).
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { STAGE, type Tools } from "./Host.ts"

export { alive, descendants, procStart, signalAll } from "./Proc.ts"

/** The sandbox user inside the jail. */
export const SANDBOX_UID = 1000
/** Default base of the sandbox uid ranges (RUNTIME_HOST_UID). Root never runs jails. */
export const DEFAULT_HOST_UID = 1_000_000
/** Processes of a sandbox's commands; the agent (its threads count as tasks) and slirp4netns get headroom. */
export const PIDS_LIMIT = 512
export const PIDS_HEADROOM = 64
/** Memory beyond the requested amount for the agent itself (a bun process) and slirp4netns. */
export const AGENT_MEMORY_MB = 96
/** Disk of a sandbox whose request names none. */
export const DEFAULT_DISK_MB = 10_240
/** Smallest and largest disk: a filesystem needs some room; a sparse image must stay within host file limits. */
export const MIN_DISK_MB = 32
export const MAX_DISK_MB = 1024 * 1024
/** Minimum cpu quota (1% of a core) and the cfs period. */
const CFS_PERIOD_US = 100_000

const CGROUP_ROOT = "/sys/fs/cgroup"
const CGROUP_PARENT = "sandbox-gateway"
const CONTROLLERS = ["pids", "memory", "cpu", "freezer"] as const
/** Controllers with a `work` child for the commands. */
const WORK_CONTROLLERS = ["pids", "memory"] as const

export interface JailSpec {
  readonly vcpu: number
  readonly memoryMb: number
  readonly diskMb: number
  readonly internet: boolean
  readonly env: Record<string, string>
  readonly labels: Record<string, string>
}

export interface JailState {
  readonly version: 3
  readonly id: string
  readonly createdAt: string
  readonly spec: JailSpec
  readonly mechanism: "cgroup" | "rlimit"
  /** cgroup path under each controller (sandbox-gateway/<scope>/<id>), null under rlimits. */
  readonly cgroup: string | null
  /** The first uid of the sandbox's leased range: every process of the jail runs as it on the host. */
  readonly hostUid: number
  /**
   * Host pid of the launcher (bwrap's monitor, in the mount namespace that holds the disk) and of the jail's
   * first process (the pid-namespace init), with their start times.
   */
  readonly bwrapPid: number
  readonly bwrapStart: string | null
  readonly childPid: number
  readonly childStart: string | null
  readonly slirpPid: number | null
  readonly slirpStart: string | null
  readonly paused: boolean
}

export const sandboxesDir = (dataDir: string) => path.join(dataDir, "sandboxes")
export const jailDir = (dataDir: string, id: string) => path.join(sandboxesDir(dataDir), id)
export const diskImage = (dir: string) => path.join(dir, "disk.img")

/** Directories of the disk's filesystem. */
export const DISK_ROOT = "root"
export const DISK_RUN = "run"
export const DISK_CTL = "ctl"

/**
 * A path inside a running jail's disk as the host sees it: through the launcher's /proc root (its mount
 * namespace holds the disk at STAGE). For tests and diagnostics; the gateway itself goes through a verified
 * /proc/<pid> handle (AgentChannel.ts), never a bare pid.
 */
export const diskPath = (state: Pick<JailState, "bwrapPid">, ...rel: Array<string>) => path.join(`/proc/${state.bwrapPid}/root${STAGE}`, ...rel)

export const readState = (dataDir: string, id: string): JailState | undefined => {
  try {
    const state = JSON.parse(fs.readFileSync(path.join(jailDir(dataDir, id), "state.json"), "utf8")) as Partial<JailState>
    if (state.version !== 3) return undefined
    return state as JailState
  } catch {
    return undefined
  }
}

/** Atomic (rename), so a concurrent reader never sees half a file. */
export const writeState = (dataDir: string, state: JailState) => {
  const file = path.join(jailDir(dataDir, state.id), "state.json")
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(state), { mode: 0o600 })
  fs.renameSync(`${file}.tmp`, file)
}

// cgroups ------------------------------------------------------------------------------------------------------

/** A short name for this DATA_DIR, so jails of different data dirs never share a cgroup. */
export const cgroupScope = (dataDir: string) => {
  let real = dataDir
  try {
    real = fs.realpathSync(dataDir)
  } catch {}
  return createHash("sha256").update(real).digest("hex").slice(0, 12)
}
export const cgroupPath = (scope: string, id: string) => path.join(CGROUP_PARENT, scope, id)
const dirOf = (controller: string, rel: string) => path.join(CGROUP_ROOT, controller, rel)

/** Ids that have a cgroup in this scope (a jail can be left there even when its directory is gone). */
export const scopeCgroupIds = (scope: string): Array<string> => {
  const ids = new Set<string>()
  for (const controller of CONTROLLERS) {
    try {
      for (const entry of fs.readdirSync(dirOf(controller, path.join(CGROUP_PARENT, scope)), { withFileTypes: true })) {
        if (entry.isDirectory()) ids.add(entry.name)
      }
    } catch {}
  }
  return [...ids]
}

const writeFile = (file: string, value: string) => fs.writeFileSync(file, value)

/**
 * Creates the sandbox's cgroups with its limits; false when the host does not let us (then rlimits apply).
 * cgroup.procs files are handed to the jail's host uid: the jail joins them itself, before bwrap runs.
 */
export const createCgroups = (rel: string, hostUid: number, vcpu: number, memoryMb: number): boolean => {
  try {
    for (const controller of CONTROLLERS) {
      fs.mkdirSync(dirOf(controller, rel), { recursive: true })
      fs.chownSync(path.join(dirOf(controller, rel), "cgroup.procs"), hostUid, hostUid)
    }
    for (const controller of WORK_CONTROLLERS) {
      fs.mkdirSync(path.join(dirOf(controller, rel), "work"), { recursive: true })
      fs.chownSync(path.join(dirOf(controller, rel), "work", "cgroup.procs"), hostUid, hostUid)
    }
    writeFile(path.join(dirOf("pids", rel), "pids.max"), String(PIDS_LIMIT + PIDS_HEADROOM))
    writeFile(path.join(dirOf("pids", rel), "work", "pids.max"), String(PIDS_LIMIT))
    applyLimits(rel, vcpu, memoryMb)
    return true
  } catch {
    removeCgroups(rel)
    return false
  }
}

/** memory(.memsw).limit_in_bytes of one cgroup; memsw must stay ≥ the limit, so it goes first or last. */
const setMemory = (dir: string, bytes: number) => {
  const memsw = path.join(dir, "memory.memsw.limit_in_bytes")
  const tryMemsw = () => {
    try {
      writeFile(memsw, String(bytes))
    } catch {
      // no swap accounting here (or the order was wrong this time): the plain limit applies
    }
  }
  tryMemsw()
  writeFile(path.join(dir, "memory.limit_in_bytes"), String(bytes))
  tryMemsw()
}

/** Memory and cpu limits of an existing sandbox cgroup (also used when a warm jail is handed out). */
export const applyLimits = (rel: string, vcpu: number, memoryMb: number) => {
  const mb = 1024 * 1024
  setMemory(dirOf("memory", rel), (memoryMb + AGENT_MEMORY_MB) * mb)
  setMemory(path.join(dirOf("memory", rel), "work"), memoryMb * mb)
  writeFile(path.join(dirOf("cpu", rel), "cpu.cfs_period_us"), String(CFS_PERIOD_US))
  writeFile(path.join(dirOf("cpu", rel), "cpu.cfs_quota_us"), String(Math.max(1000, Math.round(vcpu * CFS_PERIOD_US))))
}

/** Moves a jail's cgroups to another name (v1 renames a cgroup in place; its tasks stay). */
export const renameCgroups = (from: string, to: string) => {
  for (const controller of CONTROLLERS) fs.renameSync(dirOf(controller, from), dirOf(controller, to))
}

/** The cgroup.procs files the jail's wrapper joins before it execs bwrap. */
export const cgroupProcsFiles = (rel: string) => CONTROLLERS.map((c) => path.join(dirOf(c, rel), "cgroup.procs"))
/** The `work` cgroup.procs files each command joins (bound into the jail under /run/cgroup/). */
export const workProcsFiles = (rel: string) => ({
  pids: path.join(dirOf("pids", rel), "work", "cgroup.procs"),
  memory: path.join(dirOf("memory", rel), "work", "cgroup.procs")
})

export const cgroupPids = (rel: string): Array<number> => {
  const pids = new Set<number>()
  for (const controller of CONTROLLERS) {
    for (const file of [path.join(dirOf(controller, rel), "cgroup.procs"), path.join(dirOf(controller, rel), "work", "cgroup.procs")]) {
      try {
        for (const line of fs.readFileSync(file, "utf8").split("\n")) if (line !== "") pids.add(Number(line))
      } catch {}
    }
  }
  return [...pids]
}

export const cgroupsExist = (rel: string) => CONTROLLERS.some((c) => fs.existsSync(dirOf(c, rel)))

export const removeCgroups = (rel: string) => {
  for (const controller of CONTROLLERS) {
    try {
      fs.rmdirSync(path.join(dirOf(controller, rel), "work"))
    } catch {}
    try {
      fs.rmdirSync(dirOf(controller, rel))
    } catch {}
  }
  // The scope directory goes with its last sandbox.
  for (const controller of CONTROLLERS) {
    try {
      fs.rmdirSync(path.dirname(dirOf(controller, rel)))
    } catch {}
  }
}

export const freezerState = (rel: string): string | undefined => {
  try {
    return fs.readFileSync(path.join(dirOf("freezer", rel), "freezer.state"), "utf8").trim()
  } catch {
    return undefined
  }
}

/** Freezes or thaws and waits until the kernel says it is done (FREEZING → FROZEN). */
export const setFrozen = async (rel: string, frozen: boolean): Promise<boolean> => {
  const file = path.join(dirOf("freezer", rel), "freezer.state")
  if (!fs.existsSync(file)) return false
  const target = frozen ? "FROZEN" : "THAWED"
  const deadline = Date.now() + 5000
  writeFile(file, target)
  while (freezerState(rel) !== target && Date.now() < deadline) {
    await Bun.sleep(1)
    writeFile(file, target)
  }
  return freezerState(rel) === target
}

// the jail's disk and bwrap arguments -----------------------------------------------------------------------------

/** Host /etc entries bound read-only when they exist (the minimum a shell, python and TLS need). */
const ETC_FILES = ["ld.so.cache", "ld.so.conf", "nsswitch.conf", "localtime", "mime.types", "protocols", "services", "host.conf", "ssl/openssl.cnf"]
const ETC_DIRS = ["ssl/certs", "ca-certificates", "alternatives", "ld.so.conf.d", "python3", "python3.11"]
/** Merged /usr: these are symlinks into /usr in the jail. */
const USR_LINKS = [["bin", "usr/bin"], ["sbin", "usr/sbin"], ["lib", "usr/lib"], ["lib64", "usr/lib64"], ["lib32", "usr/lib32"]] as const

/** Per-sandbox /etc files that name it (rewritten when a warm jail is handed out). */
export const identityFiles = (id: string, internet: boolean): Record<string, string> => ({
  hostname: `${id}\n`,
  hosts: `127.0.0.1 localhost ${id}\n::1 localhost ip6-localhost ip6-loopback\n`,
  // slirp4netns serves DNS at 10.0.2.3; without internet there is nothing to ask.
  "resolv.conf": internet ? "nameserver 10.0.2.3\n" : ""
})

/**
 * The disk's initial content, laid out in a directory `tpl` and written into an image by mkfs.ext4 -d (no mount
 * needed): the jail's root, writable by the sandbox user (like a VM's disk) except /etc, /run and /opt, which
 * hold the runtime's files and bind-mount points (root-owned, so bwrap never has to create them); the agent's
 * run directory (0700); and the root-only ctl directory. Nothing in it depends on the sandbox: the launcher gives
 * root/, /workspace, /tmp and run/ to the sandbox's uid once the disk is mounted (DISK_OWNED), and the /etc files
 * that name the sandbox are written once it runs (identityFiles).
 */
const writeTemplate = (tpl: string) => {
  const root = path.join(tpl, DISK_ROOT)
  fs.mkdirSync(root, { recursive: true, mode: 0o755 })
  for (const sub of ["workspace", "tmp"]) fs.mkdirSync(path.join(root, sub), { mode: 0o755 })
  fs.chmodSync(path.join(root, "tmp"), 0o1777)
  for (const sub of ["etc", "usr", "proc", "dev", "run/agent", "opt/agent", "run/cgroup"]) fs.mkdirSync(path.join(root, sub), { recursive: true, mode: 0o755 })
  for (const [name, target] of USR_LINKS) if (fs.existsSync(`/${name}`)) fs.symlinkSync(target, path.join(root, name))
  for (const name of ETC_FILES) {
    if (!fs.existsSync(`/etc/${name}`)) continue
    fs.mkdirSync(path.dirname(path.join(root, "etc", name)), { recursive: true, mode: 0o755 })
    fs.writeFileSync(path.join(root, "etc", name), "", { mode: 0o644 })
  }
  for (const name of ETC_DIRS) if (fs.existsSync(`/etc/${name}`)) fs.mkdirSync(path.join(root, "etc", name), { recursive: true, mode: 0o755 })
  for (const file of ["opt/agent/agent.js", "opt/agent/bun", "run/cgroup/pids.procs", "run/cgroup/memory.procs"]) fs.writeFileSync(path.join(root, file), "", { mode: 0o644 })
  fs.writeFileSync(path.join(root, "etc", "passwd"), `root:x:0:0:root:/root:/bin/sh\nuser:x:${SANDBOX_UID}:${SANDBOX_UID}:sandbox:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`, { mode: 0o644 })
  fs.writeFileSync(path.join(root, "etc", "group"), `root:x:0:\nuser:x:${SANDBOX_UID}:\nnogroup:x:65534:\n`, { mode: 0o644 })
  for (const name of Object.keys(identityFiles("localhost", false))) fs.writeFileSync(path.join(root, "etc", name), "", { mode: 0o644 })
  fs.mkdirSync(path.join(tpl, DISK_RUN), { mode: 0o700 })
  fs.mkdirSync(path.join(tpl, DISK_CTL), { mode: 0o700 })
}

/** Paths of the disk (relative to its root) the sandbox's uid owns: chowned by the launcher once mounted. */
export const DISK_OWNED = [DISK_ROOT, `${DISK_ROOT}/workspace`, `${DISK_ROOT}/tmp`, DISK_RUN]

/** What the template holds, as a key: a blank image made from another layout is never used. */
const templateKey = () =>
  createHash("sha256").update(JSON.stringify({ v: 1, etc: ETC_FILES.filter((n) => fs.existsSync(`/etc/${n}`)), dirs: ETC_DIRS.filter((n) => fs.existsSync(`/etc/${n}`)), links: USR_LINKS.filter(([n]) => fs.existsSync(`/${n}`)) })).digest("hex").slice(0, 12)

/** Sizes whose blank image is kept (the warm pool's and the default): others are made with mkfs each time. */
const BLANK_SIZES = new Set<number>()
export const keepBlankImage = (diskMb: number) => BLANK_SIZES.add(diskMb)

const mkfs = async (image: string, diskMb: number) => {
  const tpl = `${image}.tpl`
  fs.rmSync(tpl, { recursive: true, force: true })
  fs.mkdirSync(tpl, { mode: 0o755 })
  try {
    writeTemplate(tpl)
    const fd = fs.openSync(image, "w", 0o600)
    try {
      fs.ftruncateSync(fd, diskMb * 1024 * 1024)
    } finally {
      fs.closeSync(fd)
    }
    // Lazy inode tables: ~10 ms for any size. No journal: a disk never outlives a host crash (after a reboot its
    // jail is gone and the sandbox is destroyed), and without one more of disk_mb is the sandbox's.
    const child = Bun.spawn(["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "lazy_itable_init=1,root_owner=0:0", "-d", tpl, image], {
      stdio: ["ignore", "ignore", "pipe"]
    })
    const [code, stderr] = await Promise.all([child.exited, new Response(child.stderr).text()])
    if (code !== 0) throw new Error(`mkfs.ext4: ${stderr.trim().slice(0, 300)}`)
  } finally {
    fs.rmSync(tpl, { recursive: true, force: true })
  }
}

/**
 * Creates `disk.img` in the jail directory: sparse, `diskMb` large, an ext4 filesystem with the initial content.
 * For the common sizes a blank image is made once (under `blanksDir`) and copied sparsely (~5 ms, no fsync); other
 * sizes get their own mkfs (~10 ms, and an fsync that can stall behind other I/O). Both run as children the event
 * loop does not wait on.
 */
export const createDisk = async (dir: string, diskMb: number, blanksDir: string) => {
  const image = diskImage(dir)
  if (!BLANK_SIZES.has(diskMb)) return mkfs(image, diskMb)
  const blank = path.join(blanksDir, `${diskMb}-${templateKey()}.img`)
  if (!fs.existsSync(blank)) {
    fs.mkdirSync(blanksDir, { recursive: true, mode: 0o700 })
    const tmp = `${blank}.${process.pid}.${crypto.randomUUID()}`
    try {
      await mkfs(tmp, diskMb)
      fs.renameSync(tmp, blank)
    } finally {
      fs.rmSync(tmp, { force: true })
    }
    // Blanks of this size made from an earlier layout are of no use any more.
    for (const name of fs.readdirSync(blanksDir)) {
      if (name.startsWith(`${diskMb}-`) && name.endsWith(".img") && path.join(blanksDir, name) !== blank) fs.rmSync(path.join(blanksDir, name), { force: true })
    }
  }
  const cp = Bun.spawn(["cp", "--sparse=always", blank, image], { stdio: ["ignore", "ignore", "pipe"] })
  const [code, stderr] = await Promise.all([cp.exited, new Response(cp.stderr).text()])
  if (code !== 0) throw new Error(`copying the blank disk: ${stderr.trim().slice(0, 300)}`)
  fs.chmodSync(image, 0o600)
}

/** The command the jail runs: a shell loop keeps the agent up (a crashed agent comes back and reloads its executions). */
const AGENT_LOOP = [
  "/bin/sh",
  "-c",
  // Only the first agent's stderr is the launcher's pipe (read while the jail starts, closed after). The shell
  // itself writes to /dev/null, so its "Killed" note on a dead agent can never hit the closed pipe (SIGPIPE
  // would end the jail): the first agent's redirection lives in a subshell, not in the shell.
  'exec 3>&2 >/dev/null 2>/dev/null; (exec "$0" /opt/agent/agent.js 2>&3 3>&-); exec 3>&-; while :; do sleep 0.2; "$0" /opt/agent/agent.js; done',
  "/opt/agent/bun"
]

/** bwrap's arguments; paths are as bwrap sees them, in the launcher's mount namespace (the disk at STAGE). */
export const bwrapArgs = (options: {
  readonly tools: Tools
  readonly hostname: string
  readonly cgroup: string | null
  readonly memoryMb: number
  readonly env: Record<string, string>
  /** What the jail runs; default the agent, kept up by a shell loop. */
  readonly command?: ReadonlyArray<string> | undefined
}) => {
  const args = ["--bind", path.join(STAGE, DISK_ROOT), "/", "--ro-bind", "/usr", "/usr"]
  for (const name of ETC_FILES) if (fs.existsSync(`/etc/${name}`)) args.push("--ro-bind", `/etc/${name}`, `/etc/${name}`)
  for (const name of ETC_DIRS) if (fs.existsSync(`/etc/${name}`)) args.push("--ro-bind", `/etc/${name}`, `/etc/${name}`)
  args.push(
    "--proc", "/proc",
    "--dev", "/dev",
    // Shared memory is memory: half the sandbox's at most, and charged to its memory cgroup.
    "--perms", "1777", "--size", String(Math.max(1, Math.floor(options.memoryMb / 2)) * 1024 * 1024), "--tmpfs", "/dev/shm",
    "--bind", path.join(STAGE, DISK_RUN), "/run/agent",
    "--ro-bind", options.tools.agent, "/opt/agent/agent.js",
    "--ro-bind", options.tools.bun, "/opt/agent/bun"
  )
  if (options.cgroup !== null) {
    const work = workProcsFiles(options.cgroup)
    args.push("--bind", work.pids, "/run/cgroup/pids.procs", "--bind", work.memory, "/run/cgroup/memory.procs")
  }
  args.push(
    // Every namespace is new (the network too: only its own loopback, unless slirp4netns is attached later).
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--hostname", options.hostname.slice(0, 63),
    "--uid", String(SANDBOX_UID),
    "--gid", String(SANDBOX_UID),
    "--new-session",
    "--cap-drop", "ALL",
    "--chdir", "/workspace",
    "--clearenv",
    "--setenv", "HOME", "/workspace",
    "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
    "--setenv", "AGENT_RUN_DIR", "/run/agent"
  )
  for (const [k, v] of Object.entries(options.env)) args.push("--setenv", k, v)
  args.push("--", ...(options.command ?? AGENT_LOOP))
  return args
}

/**
 * The host command that starts a jail, as root: join its cgroups first (everything the jail starts is accounted
 * from its first fork), enter a private mount namespace, mount the disk at STAGE there, give the sandbox's
 * parts of it to the sandbox's uid and write the /etc files that name it, bound the process count
 * (rlimit mode), drop to the sandbox's host uid and exec bwrap with `args`. bwrap writes its info (the jail's
 * pid) to stdout and closes it; its errors go to stderr.
 */
export const launchCommand = (options: {
  readonly image: string
  readonly cgroup: string | null
  readonly hostUid: number
  /** RLIMIT_NPROC of the whole jail (its uid's process count), or null for none (cgroups bound it). */
  readonly nproc: number | null
  /** bwrap writes its info (the jail's pid) to stdout (false: a direct jail, whose stdout is its command's). */
  readonly info: boolean
  /** /etc files that name the sandbox (identityFiles), written before the jail runs anything. */
  readonly identity: Record<string, string>
  readonly args: ReadonlyArray<string>
}): Array<string> => {
  // printf's format: only ids (a safe alphabet) and fixed text go in, but escape what printf and the quotes treat.
  const literal = (text: string) => `'${text.replaceAll("\\", "\\\\").replaceAll("%", "%%").replaceAll("'", "").replaceAll("\n", "\\n")}'`
  const steps = [
    ...(options.cgroup === null ? [] : cgroupProcsFiles(options.cgroup).map((f) => `echo $$ > '${f}'`)),
    // noinit_itable: the image is sparse, its inode tables already read as zeros (no background zeroing).
    `mount -t ext4 -o loop,nosuid,nodev,discard,noinit_itable "$0" ${STAGE}`,
    `chown ${options.hostUid}:${options.hostUid} ${DISK_OWNED.map((p) => path.join(STAGE, p)).join(" ")}`,
    ...Object.entries(options.identity).map(([name, text]) => `printf ${literal(text)} > ${path.join(STAGE, DISK_ROOT, "etc", name)}`),
    // dash calls the process limit -p, other shells -u.
    ...(options.nproc === null ? [] : [`{ ulimit -p ${options.nproc} 2>/dev/null || ulimit -u ${options.nproc}; }`]),
    `exec setpriv --reuid=${options.hostUid} --regid=${options.hostUid} --clear-groups bwrap${options.info ? " --info-fd 1" : ""} "$@"`
  ]
  return ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", steps.join(" && "), options.image, ...options.args]
}
