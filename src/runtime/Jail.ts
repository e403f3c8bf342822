/**
 * One sandbox = one bwrap jail (DESIGN.md §5). Layout under `DATA_DIR/sandboxes/<id>/`:
 *   root/       the jail's writable root: /workspace (home, default cwd), /tmp, and root-owned mount points and
 *               /etc files (passwd and group of the sandbox user, hostname, hosts, resolv.conf)
 *   run/        bound at /run/agent: the agent's unix sockets and its kept executions (execs/)
 *   state.json  what the runtime needs to re-attach after a gateway restart (never visible in the jail)
 *   info.json   bwrap's --info-fd output (the child pid); jail.log its stderr
 * Read-only from the host: /usr (plus the merged-/usr symlinks), a few /etc files, the agent script and the bun
 * binary. Never the host's home, /root, the project or DATA_DIR. bwrap runs as an unprivileged host uid
 * (HOST_UID), so even the kernel sees the jail's processes as nobody in particular; inside they are uid 1000 in
 * new user, pid, ipc, uts, cgroup, mount and network namespaces, with no capabilities and no further user
 * namespaces. Limits use cgroup v1 (pids, memory, cpu, freezer) under
 * /sys/fs/cgroup/<controller>/sandbox-gateway/<scope>/<id>, where <scope> is derived from DATA_DIR (two
 * gateways, or two test runs, never share a cgroup); commands run in a `work` child of the pids and memory
 * cgroups, so a fork bomb or an allocation spree cannot starve the agent.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

/** The sandbox user inside the jail. */
export const SANDBOX_UID = 1000
/** The host uid the jails run as (root never runs jails: that uid would be kuid 0 on the host). */
export const DEFAULT_HOST_UID = 1_000_000
/** Processes of a sandbox's commands; the agent (its threads count as tasks) and slirp4netns get headroom. */
export const PIDS_LIMIT = 512
const PIDS_HEADROOM = 64
/** Memory beyond the requested amount for the agent itself (a bun process) and slirp4netns. */
export const AGENT_MEMORY_MB = 96
export const DEFAULT_DISK_MB = 10_240
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
  readonly version: 2
  readonly id: string
  readonly createdAt: string
  readonly spec: JailSpec
  readonly mechanism: "cgroup" | "rlimit"
  /** cgroup path under each controller (sandbox-gateway/<scope>/<id>), null under rlimits. */
  readonly cgroup: string | null
  readonly hostUid: number
  /** Host pid of bwrap and of the jail's first process (the pid-namespace init), with their start times. */
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
export const runDir = (dataDir: string, id: string) => path.join(jailDir(dataDir, id), "run")
export const agentSocket = (dataDir: string, id: string) => path.join(runDir(dataDir, id), "agent.sock")
export const bridgeSocket = (dataDir: string, id: string) => path.join(runDir(dataDir, id), "bridge.sock")

export const readState = (dataDir: string, id: string): JailState | undefined => {
  try {
    const state = JSON.parse(fs.readFileSync(path.join(jailDir(dataDir, id), "state.json"), "utf8")) as Partial<JailState>
    if (state.version !== 2) return undefined
    return state as JailState
  } catch {
    return undefined
  }
}

/** Atomic (rename), so a concurrent reader never sees half a file. */
export const writeState = (dataDir: string, state: JailState) => {
  const file = path.join(jailDir(dataDir, state.id), "state.json")
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(state))
  fs.renameSync(`${file}.tmp`, file)
}

// processes ----------------------------------------------------------------------------------------------------

/** Field 22 of /proc/<pid>/stat (start time in clock ticks): tells a pid apart from a later one reusing it. */
export const procStart = (pid: number): string | null => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null
  } catch {
    return null
  }
}

/** A running process (not a zombie) that is still the one started at `start` (when known). */
export const alive = (pid: number, start: string | null = null) => {
  if (!(pid > 0)) return false
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    if (fields[0] === "Z" || fields[0] === "X") return false
    return start === null || fields[19] === start
  } catch {
    return false
  }
}

/** Every descendant of `pid` (for SIGSTOP/SIGKILL where there is no cgroup). */
export const descendants = (pid: number): Array<number> => {
  const children = new Map<number, Array<number>>()
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      const list = children.get(ppid)
      if (list === undefined) children.set(ppid, [Number(entry)])
      else list.push(Number(entry))
    } catch {}
  }
  const out: Array<number> = []
  const stack = [pid]
  while (stack.length > 0) {
    for (const child of children.get(stack.pop()!) ?? []) {
      out.push(child)
      stack.push(child)
    }
  }
  return out
}

export const signalAll = (pids: ReadonlyArray<number>, signal: NodeJS.Signals) => {
  for (const pid of pids) {
    if (!(pid > 0)) continue
    try {
      process.kill(pid, signal)
    } catch {}
  }
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

// the jail's files and bwrap arguments ----------------------------------------------------------------------------

/** Host /etc entries bound read-only when they exist (the minimum a shell, python and TLS need). */
const ETC_FILES = ["ld.so.cache", "ld.so.conf", "nsswitch.conf", "localtime", "mime.types", "protocols", "services", "host.conf", "ssl/openssl.cnf"]
const ETC_DIRS = ["ssl/certs", "ca-certificates", "alternatives", "ld.so.conf.d", "python3", "python3.11"]
/** Merged /usr: these are symlinks into /usr in the jail. */
const USR_LINKS = [["bin", "usr/bin"], ["sbin", "usr/sbin"], ["lib", "usr/lib"], ["lib64", "usr/lib64"], ["lib32", "usr/lib32"]] as const

/** Per-sandbox files that name it (rewritten when a warm jail is handed out). */
export const writeIdentity = (dataDir: string, id: string, internet: boolean) => {
  const etc = path.join(jailDir(dataDir, id), "root", "etc")
  fs.writeFileSync(path.join(etc, "hostname"), `${id}\n`)
  fs.writeFileSync(path.join(etc, "hosts"), `127.0.0.1 localhost ${id}\n::1 localhost ip6-localhost ip6-loopback\n`)
  // slirp4netns serves DNS at 10.0.2.3; without internet there is nothing to ask.
  fs.writeFileSync(path.join(etc, "resolv.conf"), internet ? "nameserver 10.0.2.3\n" : "")
}

/**
 * The jail's root: writable by the sandbox user (like a VM's disk), except /etc, /run and /opt, which hold
 * the runtime's files and bind-mount points (created here, root-owned, so bwrap never has to create them).
 */
export const prepareRoot = (dataDir: string, id: string, hostUid: number, internet: boolean, cgroups: boolean) => {
  const dir = jailDir(dataDir, id)
  const root = path.join(dir, "root")
  fs.mkdirSync(root, { recursive: true })
  fs.chownSync(root, hostUid, hostUid)
  for (const sub of ["workspace", "tmp"]) {
    fs.mkdirSync(path.join(root, sub), { recursive: true })
    fs.chownSync(path.join(root, sub), hostUid, hostUid)
  }
  fs.chmodSync(path.join(root, "tmp"), 0o1777)
  for (const sub of ["etc", "usr", "proc", "dev", "run/agent", "opt/agent", ...(cgroups ? ["run/cgroup"] : [])]) fs.mkdirSync(path.join(root, sub), { recursive: true })
  for (const [name, target] of USR_LINKS) {
    if (fs.existsSync(`/${name}`) && !fs.existsSync(path.join(root, name))) fs.symlinkSync(target, path.join(root, name))
  }
  for (const name of ETC_FILES) {
    if (!fs.existsSync(`/etc/${name}`)) continue
    fs.mkdirSync(path.dirname(path.join(root, "etc", name)), { recursive: true })
    fs.writeFileSync(path.join(root, "etc", name), "")
  }
  for (const name of ETC_DIRS) if (fs.existsSync(`/etc/${name}`)) fs.mkdirSync(path.join(root, "etc", name), { recursive: true })
  for (const file of ["opt/agent/agent.js", "opt/agent/bun", ...(cgroups ? ["run/cgroup/pids.procs", "run/cgroup/memory.procs"] : [])]) fs.writeFileSync(path.join(root, file), "")
  fs.writeFileSync(path.join(root, "etc", "passwd"), `root:x:0:0:root:/root:/bin/sh\nuser:x:${SANDBOX_UID}:${SANDBOX_UID}:sandbox:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`)
  fs.writeFileSync(path.join(root, "etc", "group"), `root:x:0:\nuser:x:${SANDBOX_UID}:\nnogroup:x:65534:\n`)
  writeIdentity(dataDir, id, internet)
  const run = runDir(dataDir, id)
  fs.mkdirSync(run, { recursive: true, mode: 0o700 })
  fs.chownSync(run, hostUid, hostUid)
  return root
}

/** bwrap's arguments; paths are as bwrap sees them (the staging path when the gateway is root). */
export const bwrapArgs = (options: {
  readonly root: string
  readonly run: string
  readonly agentFile: string
  readonly bunPath: string
  readonly hostname: string
  readonly cgroup: string | null
  readonly env: Record<string, string>
  /** What the jail runs; default the agent, kept up by a shell loop. */
  readonly command?: ReadonlyArray<string> | undefined
}) => {
  const args = ["--bind", options.root, "/", "--ro-bind", "/usr", "/usr"]
  for (const name of ETC_FILES) if (fs.existsSync(`/etc/${name}`)) args.push("--ro-bind", `/etc/${name}`, `/etc/${name}`)
  for (const name of ETC_DIRS) if (fs.existsSync(`/etc/${name}`)) args.push("--ro-bind", `/etc/${name}`, `/etc/${name}`)
  args.push(
    "--proc", "/proc",
    "--dev", "/dev",
    "--perms", "1777", "--tmpfs", "/dev/shm",
    "--bind", options.run, "/run/agent",
    "--ro-bind", options.agentFile, "/opt/agent/agent.js",
    "--ro-bind", options.bunPath, "/opt/agent/bun"
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
  // A shell loop keeps the agent up: a crashed agent comes back and reloads its executions from /run/agent.
  args.push("--", ...(options.command ?? ["/bin/sh", "-c", 'while :; do "$0" /opt/agent/agent.js; sleep 0.2; done', "/opt/agent/bun"]))
  return args
}

/** Where a root gateway stages a jail's directory (in a private mount namespace), so bwrap reaches it by one path. */
export const STAGE = "/run/sandbox-gateway/stage"

/**
 * The host command that starts a jail: join its cgroups first (everything bwrap starts is accounted from its
 * first fork), then, as root, stage the jail's directory in a private mount namespace and drop to `hostUid`
 * before bwrap runs with `args`. bwrap writes its info (the sandbox's pid) to fd 3.
 */
export const launchCommand = (options: {
  readonly dir: string
  readonly cgroup: string | null
  readonly isRoot: boolean
  /** Bind bun into the stage (when the host's bun is not reachable by `hostUid`). */
  readonly stageBun: string | null
  readonly hostUid: number
  readonly args: ReadonlyArray<string>
}): Array<string> => {
  const steps = [
    ...(options.cgroup === null ? [] : cgroupProcsFiles(options.cgroup).map((f) => `echo $$ > '${f}'`)),
    ...(options.isRoot ? [`mount --bind "$0" ${STAGE}`] : []),
    ...(options.stageBun !== null ? [`mount --bind '${options.stageBun}' ${STAGE}/bun`] : []),
    options.isRoot ? `exec setpriv --reuid=${options.hostUid} --regid=${options.hostUid} --clear-groups bwrap --info-fd 3 "$@"` : `exec bwrap --info-fd 3 "$@"`
  ]
  const script = steps.join(" && ")
  return options.isRoot
    ? ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, options.dir, ...options.args]
    : ["/bin/sh", "-c", script, options.dir, ...options.args]
}
