/**
 * One sandbox = one bwrap jail (ARCHITECTURE.md §5). On the host, `DATA_DIR/sandboxes/<id>/` (root only, 0700) holds:
 *   state.json  what the runtime needs to re-attach after a gateway restart (0600)
 *   disk.img    the sandbox's disk (Disk.ts): a sparse ext4 image of `diskMb` (0600)
 * The disk is mounted (loop, nosuid, nodev, discard) only inside the jail's own launcher mount namespace, at
 * STAGE: the host's mount table never holds it, nothing else can pin it, and it goes (loop device included) when
 * the jail's last process exits. The gateway reaches it through /proc/<launcher pid>/root (AgentChannel.ts).
 *
 * Read-only from the host: /usr (plus the merged-/usr symlinks), a few /etc files, and the agent script and bun
 * copied to the tools tmpfs (Host.ts). A sandbox on an OCI image sees none of the host's system: its root is an
 * overlayfs mounted by the launcher (IMAGE below) whose lower layers are the image's, from the layer cache
 * (oci/ImageCache.ts), each bound read-only through an idmapped mount that shows the cache's root-owned files as
 * the sandbox's own uid; its upper layer is on the sandbox's disk. The agent then runs through the host's loader
 * copied to the tools tmpfs (/opt/agent/rt), needing nothing of the image. Never the host's home, /root, the project or DATA_DIR, and no mount of
 * the jail names a host path. bwrap runs as the sandbox's own host uid (UidLeases.ts); inside, processes are uid
 * 1000 (on an image: its User, root when it names none) in new user, pid, ipc, uts, cgroup, mount and network
 * namespaces, with no capabilities and no further user namespaces. The user namespace maps that one uid (and one
 * gid) to the sandbox's host uid: uid 0 inside is the same unprivileged host uid, with no capability in any
 * namespace (bwrap's --cap-drop ALL empties even the bounding set), so it gains nothing over uid 1000. Limits use cgroup v1 (Cgroups.ts); without cgroups, the launcher's RLIMIT_NPROC bounds the
 * whole sandbox (its uid is its own, so the count is its own).
 */
import { Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { cgroupProcsFiles, workProcsFiles } from "./Cgroups.ts"
import { DISK_OWNED, DISK_ROOT, DISK_RUN, ETC_DIRS, ETC_FILES, SANDBOX_UID } from "./Disk.ts"
import { STAGE, type Tools } from "./Host.ts"
import type { RuntimeDomainPolicy } from "./LocalRuntime.ts"
import { replaceFile } from "./ReplaceFile.ts"

export { alive, descendants, procStart, signalAll } from "./Proc.ts"

/** Default base of the sandbox uid ranges (RUNTIME_HOST_UID). Root never runs jails. */
export const DEFAULT_HOST_UID = 1_000_000

/** The OCI image a jail runs on (what was pulled: the layers are pinned by digest). */
const Text = Schema.String
const Pid = Schema.Number.pipe(Schema.int(), Schema.nonNegative())
const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })
/** The sandbox's domain policy, of the shape LocalRuntime.ts declares (the compiler keeps the two the same). */
const DomainPolicyField: Schema.Schema<RuntimeDomainPolicy> = Schema.Struct({ mode: Schema.Literal("allow", "deny"), domains: Schema.Array(Text) })

export const JailImage = Schema.Struct({
  reference: Text,
  digest: Text,
  platform: Text,
  /** Layer digests, bottom first (oci/ImageCache.ts layerDir). */
  layers: Schema.Array(Text),
  /** The image's WorkingDir: the default cwd of commands. */
  workingDir: Schema.optional(Text),
  /** The uid and gid its processes run as inside the jail: its config's User (oci/ImageUser.ts). */
  uid: Pid,
  gid: Pid
})
export type JailImage = typeof JailImage.Type

export const JailSpec = Schema.Struct({
  vcpu: Schema.Number,
  memoryMb: Schema.Number,
  diskMb: Schema.Number,
  internet: Schema.Boolean,
  /** The sandbox's domain policy (internet only: DomainPolicy.ts). */
  domains: Schema.optional(DomainPolicyField),
  env: StringMap,
  labels: StringMap,
  image: Schema.optional(JailImage)
})
export type JailSpec = typeof JailSpec.Type

/** A jail's state.json: written by the runtime alone, decoded when read (a crash may have left anything there). */
export const JailState = Schema.Struct({
  version: Schema.Literal(3),
  id: Text,
  createdAt: Text,
  spec: JailSpec,
  mechanism: Schema.Literal("cgroup", "rlimit"),
  /** cgroup path under each controller (sandbox-gateway/<scope>/<id>), null under rlimits. */
  cgroup: Schema.NullOr(Text),
  /** The first uid of the sandbox's leased range: every process of the jail runs as it on the host. */
  hostUid: Pid,
  /**
   * Host pid of the launcher (bwrap's monitor, in the mount namespace that holds the disk) and of the jail's
   * first process (the pid-namespace init), with their start times.
   */
  bwrapPid: Pid,
  bwrapStart: Schema.NullOr(Text),
  childPid: Pid,
  childStart: Schema.NullOr(Text),
  slirpPid: Schema.NullOr(Pid),
  slirpStart: Schema.NullOr(Text),
  /** The DNS forwarder of a sandbox with a domain policy (DomainPolicy.ts); absent in states of earlier versions. */
  dnsPid: Schema.optional(Schema.NullOr(Pid)),
  dnsStart: Schema.optional(Schema.NullOr(Text)),
  paused: Schema.Boolean
})
export type JailState = typeof JailState.Type

/** Fields a newer runtime may add are kept as they are, not dropped by a rewrite of the state. */
const decodeState = Schema.decodeUnknownOption(Schema.parseJson(JailState), { onExcessProperty: "preserve" })

export const sandboxesDir = (dataDir: string) => path.join(dataDir, "sandboxes")
export const jailDir = (dataDir: string, id: string) => path.join(sandboxesDir(dataDir), id)
export const diskImage = (dir: string) => path.join(dir, "disk.img")

/**
 * A path inside a running jail's disk as the host sees it: through the launcher's /proc root (its mount
 * namespace holds the disk at STAGE). For tests and diagnostics; the gateway itself goes through a verified
 * /proc/<pid> handle (AgentChannel.ts), never a bare pid.
 */
export const diskPath = (state: Pick<JailState, "bwrapPid">, ...rel: Array<string>) => path.join(`/proc/${state.bwrapPid}/root${STAGE}`, ...rel)

/**
 * The states last read, each kept while its file is the same one: writeState replaces the file by a rename, so
 * every write is a new inode with a new mtime. Every agent call reads its jail's state first, and decoding it cost
 * more than the call's own work on the gateway's side.
 */
const statesRead = new Map<string, { readonly ino: bigint; readonly mtimeNs: bigint; readonly size: bigint; readonly state: JailState | undefined }>()
const MAX_STATES_KEPT = 4096

/** The jail's state; undefined when there is none, or none this runtime can read (not JSON, another version, another shape). */
export const readState = (dataDir: string, id: string): JailState | undefined => {
  const file = path.join(jailDir(dataDir, id), "state.json")
  let stat: fs.BigIntStats
  let text: string
  try {
    stat = fs.statSync(file, { bigint: true })
    const kept = statesRead.get(file)
    if (kept !== undefined && kept.ino === stat.ino && kept.mtimeNs === stat.mtimeNs && kept.size === stat.size) return kept.state
    text = fs.readFileSync(file, "utf8")
  } catch {
    statesRead.delete(file)
    return undefined
  }
  const state = Option.getOrUndefined(decodeState(text))
  if (statesRead.size >= MAX_STATES_KEPT) statesRead.clear()
  // Kept under what was seen before the read: a file replaced in between is read again next time.
  statesRead.set(file, { ino: stat.ino, mtimeNs: stat.mtimeNs, size: stat.size, state })
  return state
}

/** Replaced whole, so a concurrent reader never sees half a file. */
export const writeState = (dataDir: string, state: JailState) =>
  replaceFile(path.join(jailDir(dataDir, state.id), "state.json"), JSON.stringify(state), { mode: 0o600 })

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

/**
 * A warm jail's loop (WarmPool.ts): the same loop, with a leash. The launcher's stdin is a pipe the gateway holds;
 * a background reader waits on it: "claimed" (a create took the jail) lets it go, and anything else — the
 * end of the pipe when the gateway dies, even by SIGKILL — ends every process of the jail (kill -1 spares only the
 * jail's init, which then exits). A warm jail holds nothing of anyone's, so it never outlives its gateway.
 * Asynchronous lists get /dev/null as stdin, so the pipe goes to the reader as fd 4; nothing else keeps it.
 */
const LEASHED_AGENT_LOOP = [
  "/bin/sh",
  "-c",
  'exec 3>&2 >/dev/null 2>/dev/null 4<&0 </dev/null; { read -r word <&4; [ "$word" = claimed ] || kill -KILL -1; } 3>&- & exec 4<&-; (exec "$0" /opt/agent/lib/main.js 2>&3 3>&-); exec 3>&-; while :; do sleep 0.2; "$0" /opt/agent/lib/main.js; done',
  "/opt/agent/bun"
]
/** What the gateway writes on a warm jail's leash when a create takes it. */
export const LEASH_CLAIMED = "claimed\n"

/** Where the launcher builds an image jail's root on the disk: the overlay, its upper and work dirs, the idmapped layers. */
export const IMAGE_DIR = "image"
const RT = "/opt/agent/rt"
/** In an image jail: runs a host binary through the host's loader (Host.ts ensureRt). */
const RT_EXEC = [`${RT}/ld.so`, "--library-path", `${RT}/lib`] as const
/** The agent's shell in an image jail (AGENT_SHELL): the host's, through the host's loader. */
export const RT_SHELL = [...RT_EXEC, `${RT}/sh`]

/** The agent loop of an image jail: the same loop, but the shell, sleep and bun run through the host's loader. */
const RT_AGENT_LOOP = [
  ...RT_SHELL,
  "-c",
  'exec 3>&2 >/dev/null 2>/dev/null; (exec "$0" --library-path "$1" "$2" /opt/agent/lib/main.js 2>&3 3>&-); exec 3>&-; while :; do "$0" --library-path "$1" "$3" 0.2; "$0" --library-path "$1" "$2" /opt/agent/lib/main.js; done',
  `${RT}/ld.so`,
  `${RT}/lib`,
  "/opt/agent/bun",
  `${RT}/sleep`
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
  /** The root is an OCI image (the overlay the launcher mounts): nothing of the host's system is bound. */
  readonly image?: boolean | undefined
  /** A warm jail: the agent loop ends the jail when the launcher's stdin closes unclaimed (LEASHED_AGENT_LOOP). */
  readonly leashed?: boolean | undefined
  /** Who the jail's processes are inside (default SANDBOX_UID): an image's User. Either way the sandbox's one host uid. */
  readonly uid?: number | undefined
  readonly gid?: number | undefined
}) => {
  const args: Array<string> = []
  if (options.image === true) args.push("--bind", path.join(STAGE, IMAGE_DIR, "merged"), "/")
  else {
    args.push("--bind", path.join(STAGE, DISK_ROOT), "/", "--ro-bind", "/usr", "/usr")
    for (const name of ETC_FILES) if (fs.existsSync(`/etc/${name}`)) args.push("--ro-bind", `/etc/${name}`, `/etc/${name}`)
    for (const name of ETC_DIRS) if (fs.existsSync(`/etc/${name}`)) args.push("--ro-bind", `/etc/${name}`, `/etc/${name}`)
  }
  args.push(
    "--proc", "/proc",
    "--dev", "/dev",
    // Shared memory is memory: half the sandbox's at most, and charged to its memory cgroup.
    "--perms", "1777", "--size", String(Math.max(1, Math.floor(options.memoryMb / 2)) * 1024 * 1024), "--tmpfs", "/dev/shm",
    "--bind", path.join(STAGE, DISK_RUN), "/run/agent",
    "--ro-bind", options.tools.agent, "/opt/agent/lib",
    "--ro-bind", options.tools.bun, "/opt/agent/bun"
  )
  if (options.image === true) {
    if (options.tools.rt === null) throw new Error("the host's loader and libraries for the agent are missing")
    args.push("--ro-bind", options.tools.rt, RT)
  }
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
    "--uid", String(options.uid ?? SANDBOX_UID),
    "--gid", String(options.gid ?? SANDBOX_UID),
    "--new-session",
    "--cap-drop", "ALL",
    "--chdir", "/workspace",
    "--clearenv",
    "--setenv", "HOME", "/workspace",
    "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
    "--setenv", "AGENT_RUN_DIR", "/run/agent"
  )
  if (options.image === true) args.push("--setenv", "AGENT_SHELL", JSON.stringify(RT_SHELL))
  for (const [k, v] of Object.entries(options.env)) args.push("--setenv", k, v)
  args.push("--", ...(options.command ?? (options.image === true ? RT_AGENT_LOOP : options.leashed === true ? LEASHED_AGENT_LOOP : AGENT_LOOP)))
  return args
}

/** Where the launcher gets the write end of the jail's lifeline (Lifeline.ts). */
export const LAUNCHER_LIFELINE_FD = 3

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
  /** The launcher is given the write end of the jail's lifeline as fd LAUNCHER_LIFELINE_FD: the jail's pid 1 keeps it (Lifeline.ts). */
  readonly lifeline?: boolean | undefined
  /** /etc files that name the sandbox (identityFiles), written before the jail runs anything. */
  readonly identity: Record<string, string>
  /** An image jail: the cached layer directories (bottom first) its root is made of, and its WorkingDir. */
  readonly layers?: ReadonlyArray<string> | undefined
  readonly workingDir?: string | undefined
  readonly args: ReadonlyArray<string>
}): Array<string> => {
  // printf's format: only ids (a safe alphabet) and fixed text go in, but escape what printf and the quotes treat.
  const literal = (text: string) => `'${text.replaceAll("\\", "\\\\").replaceAll("%", "%%").replaceAll("'", "").replaceAll("\n", "\\n")}'`
  const layers = options.layers
  const etc = layers === undefined ? path.join(STAGE, DISK_ROOT, "etc") : path.join(STAGE, IMAGE_DIR, "upper", "etc")
  const steps = [
    ...(options.cgroup === null ? [] : cgroupProcsFiles(options.cgroup).map((f) => `echo $$ > '${f}'`)),
    // noinit_itable: the image is sparse, its inode tables already read as zeros (no background zeroing).
    `mount -t ext4 -o loop,nosuid,nodev,discard,noinit_itable "$0" ${STAGE}`,
    `chown ${options.hostUid}:${options.hostUid} ${DISK_OWNED.map((p) => path.join(STAGE, p)).join(" ")}`,
    ...(layers === undefined ? [] : imageRootSteps(layers, options.hostUid, options.workingDir)),
    ...Object.entries(options.identity).map(([name, text]) => `printf ${literal(text)} > ${path.join(etc, name)}`),
    // Everything of the upper layer is the sandbox's (so the merged directories it shadows stay the sandbox's).
    ...(layers === undefined ? [] : [`chown -R ${options.hostUid}:${options.hostUid} ${path.join(STAGE, IMAGE_DIR, "upper")}`, overlayMount(layers.length)]),
    // dash calls the process limit -p, other shells -u.
    ...(options.nproc === null ? [] : [`{ ulimit -p ${options.nproc} 2>/dev/null || ulimit -u ${options.nproc}; }`]),
    `exec setpriv --reuid=${options.hostUid} --regid=${options.hostUid} --clear-groups bwrap${options.info ? " --info-fd 1" : ""}${options.lifeline === true ? ` --sync-fd ${LAUNCHER_LIFELINE_FD}` : ""} "$@"`
  ]
  return ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", steps.join(" && "), options.image, ...options.args]
}

/**
 * Makes the idmapped layers of an image jail (a python3 helper: util-linux's mount cannot make idmapped mounts
 * before 2.39). For each `src dst` pair: a detached clone of `src` (open_tree), made read-only, nosuid, nodev and
 * idmapped through a user namespace mapping 0 to the sandbox's host uid (mount_setattr), attached at `dst`
 * (move_mount) — in the launcher's own mount namespace only. The cache's files belong to root; through the
 * mount they belong to the sandbox's host uid, which is whatever uid the jail runs as inside (its image's User).
 */
const IDMAP_HELPER = String.raw`
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def check(r, what):
    if r < 0:
        e = ctypes.get_errno(); raise OSError(e, what + ": " + os.strerror(e))
    return r
uid = int(sys.argv[1]); pairs = sys.argv[2:]
r1, w1 = os.pipe(); r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    ok = libc.unshare(0x10000000) == 0
    os.write(w1, b"1" if ok else b"0"); os.read(r2, 1); os._exit(0)
try:
    if os.read(r1, 1) != b"1": raise OSError("unshare of a user namespace failed")
    for f, t in (("uid_map", "0 %d 1" % uid), ("setgroups", "deny"), ("gid_map", "0 %d 1" % uid)):
        with open("/proc/%d/%s" % (pid, f), "w") as h: h.write(t)
    ns = os.open("/proc/%d/ns/user" % pid, os.O_RDONLY | os.O_CLOEXEC)
    attr = ctypes.create_string_buffer(struct.pack("QQQQ", 0x100000 | 1 | 2 | 4, 0, 0, ns), 32)
    for i in range(0, len(pairs), 2):
        fd = check(libc.syscall(428, -100, pairs[i].encode(), 1 | 0o2000000), "open_tree")
        check(libc.syscall(442, fd, b"", 0x1000, attr, 32), "mount_setattr")
        check(libc.syscall(429, fd, b"", -100, pairs[i + 1].encode(), 4), "move_mount")
        os.close(fd)
finally:
    os.write(w2, b"x"); os.waitpid(pid, 0)
`

const SAFE_WORKDIR = /^\/[A-Za-z0-9._\/-]{0,200}$/
const UPPER_DIRS = ["workspace", "tmp", "etc", "proc", "dev", "run/agent", "run/cgroup", "opt/agent/lib", "opt/agent/rt"]
const UPPER_FILES = ["opt/agent/bun", "run/cgroup/pids.procs", "run/cgroup/memory.procs"]

/**
 * Launcher steps of an image jail, on the freshly mounted disk: the overlay's directories (the upper layer with
 * the jail's mount points, /workspace and /tmp, the sandbox's own), then the idmapped layers at l0, l1, ….
 */
const imageRootSteps = (layers: ReadonlyArray<string>, hostUid: number, workingDir: string | undefined): Array<string> => {
  const dir = path.join(STAGE, IMAGE_DIR)
  const upper = path.join(dir, "upper")
  const q = (p: string) => `'${p.replaceAll("'", "")}'`
  // The WorkingDir exists, as Docker makes it (only a plain path: it is created in the fresh upper layer).
  const work = workingDir !== undefined && SAFE_WORKDIR.test(workingDir) && !workingDir.split("/").includes("..") ? [path.join(upper, workingDir)] : []
  return [
    `mkdir -p ${[upper, path.join(dir, "work"), path.join(dir, "merged"), ...layers.map((_, i) => path.join(dir, `l${i}`)), ...UPPER_DIRS.map((d) => path.join(upper, d)), ...work].join(" ")}`,
    `touch ${UPPER_FILES.map((f) => path.join(upper, f)).join(" ")}`,
    `chmod 1777 ${path.join(upper, "tmp")}`,
    `python3 -c ${q(IDMAP_HELPER)} ${hostUid} ${layers.map((l, i) => `${q(l)} ${path.join(dir, `l${i}`)}`).join(" ")}`
  ]
}

/** The overlay: the image's layers (topmost first, as overlayfs lists them) under the sandbox's upper layer. */
const overlayMount = (count: number) => {
  const dir = path.join(STAGE, IMAGE_DIR)
  const lower = Array.from({ length: count }, (_, i) => path.join(dir, `l${count - 1 - i}`)).join(":")
  return `mount -t overlay overlay -o lowerdir=${lower},upperdir=${dir}/upper,workdir=${dir}/work,nosuid,nodev ${dir}/merged`
}
