/**
 * One sandbox = one bwrap jail (ARCHITECTURE.md §5). On the host, `DATA_DIR/sandboxes/<id>/` (root only, 0700) holds:
 *   state.json  what the runtime needs to re-attach after a gateway restart (0600)
 *   disk.img    the sandbox's disk (Disk.ts): a sparse ext4 image of `diskMb` (0600)
 * The disk is mounted (loop, nosuid, nodev, discard) only inside the jail's own launcher mount namespace, at
 * STAGE: the host's mount table never holds it, nothing else can pin it, and it goes (loop device included) when
 * the jail's last process exits. The gateway reaches it through /proc/<launcher pid>/root (AgentChannel.ts).
 *
 * Read-only from the host: /usr (plus the merged-/usr symlinks), a few /etc files, and the agent script and bun
 * copied to the tools tmpfs (Host.ts). Never the host's home, /root, the project or DATA_DIR, and no mount of
 * the jail names a host path. bwrap runs as the sandbox's own host uid (UidLeases.ts); inside, processes are uid
 * 1000 in new user, pid, ipc, uts, cgroup, mount and network namespaces, with no capabilities and no further
 * user namespaces. Limits use cgroup v1 (Cgroups.ts); without cgroups, the launcher's RLIMIT_NPROC bounds the
 * whole sandbox (its uid is its own, so the count is its own).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { cgroupProcsFiles, workProcsFiles } from "./Cgroups.ts"
import { DISK_OWNED, DISK_ROOT, DISK_RUN, ETC_DIRS, ETC_FILES, SANDBOX_UID } from "./Disk.ts"
import { STAGE, type Tools } from "./Host.ts"

export { alive, descendants, procStart, signalAll } from "./Proc.ts"

/** Default base of the sandbox uid ranges (RUNTIME_HOST_UID). Root never runs jails. */
export const DEFAULT_HOST_UID = 1_000_000

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

/** The command the jail runs: a shell loop keeps the agent up (a crashed agent comes back and reloads its executions). */
const AGENT_LOOP = [
  "/bin/sh",
  "-c",
  // Only the first agent's stderr is the launcher's pipe (read while the jail starts, closed after). The shell
  // itself writes to /dev/null, so its "Killed" note on a dead agent can never hit the closed pipe (SIGPIPE
  // would end the jail): the first agent's redirection lives in a subshell, not in the shell.
  'exec 3>&2 >/dev/null 2>/dev/null; (exec "$0" /opt/agent/lib/main.js 2>&3 3>&-); exec 3>&-; while :; do sleep 0.2; "$0" /opt/agent/lib/main.js; done',
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
    "--ro-bind", options.tools.agent, "/opt/agent/lib",
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
