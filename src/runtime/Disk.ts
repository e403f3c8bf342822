/**
 * A sandbox's disk: a sparse ext4 image of its `diskMb` (`disk.img` in its jail directory), made from a template
 * laid out here (no mount needed: mkfs.ext4 -d). Its filesystem holds
 *   root/  the jail's root: /workspace (home, default cwd), /tmp, and root-owned mount points and /etc files
 *          (passwd and group of the sandbox user, hostname, hosts, resolv.conf)
 *   run/   bound at /run/agent: the agent's unix sockets and its kept executions (execs/)
 *   ctl/   root only, never in the jail: where the gateway moves ("adopts") the agent's sockets
 * so the disk limit covers everything the sandbox can write (but /dev/shm and /dev, which are memory).
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

/** The sandbox user inside the jail. */
export const SANDBOX_UID = 1000
/** Disk of a sandbox whose request names none. */
export const DEFAULT_DISK_MB = 10_240
/** Smallest and largest disk: a filesystem needs some room; a sparse image must stay within host file limits. */
export const MIN_DISK_MB = 32
export const MAX_DISK_MB = 1024 * 1024
export const diskImage = (dir: string) => path.join(dir, "disk.img")

/** Directories of the disk's filesystem. */
export const DISK_ROOT = "root"
export const DISK_RUN = "run"
export const DISK_CTL = "ctl"

/** Host /etc entries bound read-only when they exist (the minimum a shell, python and TLS need). */
export const ETC_FILES = ["ld.so.cache", "ld.so.conf", "nsswitch.conf", "localtime", "mime.types", "protocols", "services", "host.conf", "ssl/openssl.cnf"]
// fonts, X11, chromium: what a desktop's programs read (fontconfig's configuration, X resources, the browser's settings).
export const ETC_DIRS = ["ssl/certs", "ca-certificates", "alternatives", "ld.so.conf.d", "python3", "python3.11", "fonts", "X11", "chromium", "chromium.d"]
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
  for (const sub of ["etc", "usr", "proc", "dev", "run/agent", "opt/agent/lib", "run/cgroup"]) fs.mkdirSync(path.join(root, sub), { recursive: true, mode: 0o755 })
  for (const [name, target] of USR_LINKS) if (fs.existsSync(`/${name}`)) fs.symlinkSync(target, path.join(root, name))
  for (const name of ETC_FILES) {
    if (!fs.existsSync(`/etc/${name}`)) continue
    fs.mkdirSync(path.dirname(path.join(root, "etc", name)), { recursive: true, mode: 0o755 })
    fs.writeFileSync(path.join(root, "etc", name), "", { mode: 0o644 })
  }
  for (const name of ETC_DIRS) if (fs.existsSync(`/etc/${name}`)) fs.mkdirSync(path.join(root, "etc", name), { recursive: true, mode: 0o755 })
  for (const file of ["opt/agent/bun", "run/cgroup/pids.procs", "run/cgroup/memory.procs"]) fs.writeFileSync(path.join(root, file), "", { mode: 0o644 })
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
  createHash("sha256").update(JSON.stringify({ v: 2, etc: ETC_FILES.filter((n) => fs.existsSync(`/etc/${n}`)), dirs: ETC_DIRS.filter((n) => fs.existsSync(`/etc/${n}`)), links: USR_LINKS.filter(([n]) => fs.existsSync(`/${n}`)) })).digest("hex").slice(0, 12)

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
