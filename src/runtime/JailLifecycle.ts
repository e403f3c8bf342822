/**
 * Starting and destroying jails. Starting: lease a host uid range (UidLeases.ts), create the sandbox's cgroups
 * and its disk image, then spawn the launcher: it joins the cgroups, mounts the disk in a private mount namespace,
 * drops to the sandbox's uid and execs bwrap, which runs the agent. bwrap's errors and its info (the jail's pid)
 * come back on pipes read while the jail starts, never through a file the sandbox could grow. Jails are spawned
 * detached (own session) so they outlive the gateway; everything needed to find them again is in state.json.
 * With internet, slirp4netns runs as the sandbox's uid in the jail's network namespace, behind the egress filter
 * (Egress.ts), which fails closed; with a domain policy, its DNS forwarder and nftables table come first
 * (DomainPolicy.ts). Destroying kills every process of the jail and removes what it held.
 */
import { Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { waitForAgent } from "./AgentChannel.ts"
import { cgroupPath, cgroupPids, cgroupProcsFiles, cgroupsExist, createCgroups, freezerState, PIDS_HEADROOM, PIDS_LIMIT, removeCgroups, setFrozen } from "./Cgroups.ts"
import { createDisk, diskImage, identityFiles } from "./Disk.ts"
import { FORWARDER_ADDRESS, installPolicyTable, policyTableName, policyTablePresent, removePolicyTable } from "./DomainPolicy.ts"
import { egressFilterPresent, installEgressFilter } from "./Egress.ts"
import { type Tools, TUN_NODE } from "./Host.ts"
import { alive, bwrapArgs, descendants, jailDir, type JailSpec, type JailState, launchCommand, LEASH_CLAIMED, procStart, readState, sandboxesDir, signalAll, writeState } from "./Jail.ts"
import { RuntimeError, runtimeError as err, type RuntimeSandbox } from "./LocalRuntime.ts"
import { owningUserns } from "./Ns.ts"
import { layerDir } from "./oci/ImageCache.ts"
import { backoff, nextCheck, pidsOfUid } from "./Proc.ts"
import { claimUid, type EgressPolicy, leaseHeldBy, leasesOf, releaseLeasesOf, releaseUid, updateLease } from "./UidLeases.ts"

const START_TIMEOUT_MS = 10_000
const DESTROY_TIMEOUT_MS = 5_000
/** How much of bwrap's (or slirp4netns') stderr is kept for the operator's log while a jail starts. */
const START_LOG_BYTES = 16 * 1024

/** What the runtime's parts share: where jails live and how they are made. */
/** Whether a /proc/net/route table has a default route (destination 0.0.0.0/0) through `iface`. */
export const hasDefaultRoute = (table: string, iface: string): boolean =>
  table.split("\n").some((line) => {
    const [name, destination, , , , , , mask] = line.trim().split(/\s+/)
    return name === iface && destination === "00000000" && mask === "00000000"
  })

export interface RuntimeContext {
  readonly dataDir: string
  /** Base of the sandbox uid ranges, and which sub-range (egress policy) this runtime leases from. */
  readonly base: number
  readonly policy: EgressPolicy
  /** This DATA_DIR's cgroup scope (Cgroups.ts), and whether cgroups are used at all. */
  readonly scope: string
  readonly useCgroups: boolean
  /** Blank disk images of the common sizes (Disk.ts createDisk). */
  readonly blanksDir: string
  /** Environment of the agent process (bun settings). */
  readonly agentEnv: Record<string, string>
  /** The tool copies on the tools tmpfs (put back if something removed them). */
  readonly currentTools: () => Tools
  /** Aborted when the runtime shuts down: pending agent calls end. */
  readonly aborter: AbortController
  /** Where the DNS forwarders of sandboxes with a domain policy send the names they allow (the host's resolvers). */
  readonly dnsUpstreams: ReadonlyArray<{ readonly host: string; readonly port: number }>
}

/** Collects up to `max` bytes of a stream in the background (the rest is read and dropped) until stopped. */
const drainBounded = (stream: ReadableStream<Uint8Array>, max: number) => {
  const reader = stream.getReader()
  const chunks: Array<Uint8Array> = []
  let kept = 0
  let stopped = false
  const done = (async () => {
    try {
      while (!stopped) {
        const { done, value } = await reader.read()
        if (done) return
        if (kept < max) {
          chunks.push(value.subarray(0, max - kept))
          kept += Math.min(value.length, max - kept)
        }
      }
    } catch {}
  })()
  return {
    done,
    text: () => Buffer.concat(chunks).toString("utf8").trim(),
    /** Closes our end: from now on nothing the jail writes there reaches the gateway. */
    stop: () => {
      stopped = true
      void reader.cancel().catch(() => undefined)
    }
  }
}

/**
 * Any user of the jail may listen on ports below 1024, as in a Docker container (it sets the same): an image's
 * server (nginx on 80) runs as built, without the capability it would otherwise need. The setting is the jail's
 * own network namespace's; nothing outside it changes.
 */
const allowLowPorts = async (childPid: number) => {
  // /proc/sys/net is the writer's network namespace's: the jail's, entered here.
  const child = Bun.spawn(["nsenter", `--net=/proc/${childPid}/ns/net`, "/bin/sh", "-c", "echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start"], { cwd: "/", stdio: ["ignore", "ignore", "pipe"] })
  const [code, stderr] = await Promise.all([child.exited, new Response(child.stderr).text()])
  if (code !== 0) throw err("internal", "the sandbox could not be started", `ip_unprivileged_port_start: ${stderr.slice(0, 300)}`)
}

/** Whether the host's /dev/net/tun is the tun device and anyone may open it (as usual): then no node of ours is bound over it. */
const tunOpenToAll = (() => {
  try {
    const tun = fs.statSync("/dev/net/tun")
    return tun.isCharacterDevice() && tun.rdev === ((10 << 8) | 200) && (tun.mode & 0o666) === 0o666
  } catch {
    return false
  }
})()

/** The egress filter per uid base, installed once per process (re-checked before each internet sandbox). */
const egressInstalled = new Map<number, string | null>()

export const makeJailLifecycle = (ctx: RuntimeContext) => {
  const { aborter, agentEnv, base, blanksDir, currentTools, dataDir, dnsUpstreams, policy, scope, useCgroups } = ctx
  /** The write ends of warm jails' leashes, by jail id (held only by this process: Bun's pipes are close-on-exec). */
  const leashes = new Map<string, Bun.FileSink>()
  if (!egressInstalled.has(base)) egressInstalled.set(base, installEgressFilter(base))

  const running = (state: JailState) => alive(state.childPid, state.childStart) && alive(state.bwrapPid, state.bwrapStart)

  const toSandbox = (state: JailState): RuntimeSandbox => {
    const frozen = state.cgroup !== null && ["FROZEN", "FREEZING"].includes(freezerState(state.cgroup) ?? "")
    return {
      id: state.id,
      state: !running(state) ? "stopped" : state.paused || frozen ? "paused" : "running",
      createdAt: state.createdAt,
      labels: state.spec.labels,
      applied: state.mechanism === "cgroup"
        ? { vcpu: state.spec.vcpu, memoryMb: state.spec.memoryMb, diskMb: state.spec.diskMb, mechanism: "cgroup" }
        // Without a cpu cgroup nothing holds the sandbox to its share: it can use every core of the host.
        : { vcpu: os.cpus().length, memoryMb: state.spec.memoryMb, diskMb: state.spec.diskMb, mechanism: "rlimit" },
      ...(state.spec.image !== undefined
        ? {
          image: {
            reference: state.spec.image.reference,
            digest: state.spec.image.digest,
            platform: state.spec.image.platform,
            // A jail made before WorkingDir defaulted to / has the agent's default.
            workingDir: state.spec.image.workingDir ?? "/workspace"
          }
        }
        : {})
    }
  }

  /**
   * Whether the filter is in place, asked of nft by one check at a time: a caller joins the next check to start,
   * never one already under way (which may have looked before the caller asked), so concurrent creates share one
   * process instead of one each.
   */
  const filterPresent = nextCheck(() => egressFilterPresent(base))

  /** Fails closed: no egress filter, no internet. */
  const requireEgressFilter = async () => {
    if (egressInstalled.get(base) === null && (await filterPresent())) return
    const error = installEgressFilter(base)
    egressInstalled.set(base, error)
    if (error !== null) throw err("unavailable", "internet access is not available on this host: its egress filter could not be installed", `nft: ${error}`)
  }

  /**
   * The sandbox's policy table (re-made empty unless `keepTable` and it is there) and a new DNS forwarder in its
   * cgroups (an earlier one is killed), as root with only the capabilities it needs; ready once it listens.
   */
  const startPolicy = async (state: JailState, keepTable = false): Promise<JailState> => {
    const domains = state.spec.domains
    if (domains === undefined) return state
    if (!(keepTable && (await policyTablePresent(base, state.hostUid)))) {
      const error = await installPolicyTable(base, state.hostUid)
      if (error !== null) throw err("unavailable", "domain policies are not available on this host: the sandbox's network filter could not be installed", `nft: ${error}`)
    }
    if (state.dnsPid && alive(state.dnsPid, state.dnsStart ?? null)) signalAll([state.dnsPid], "SIGKILL")
    const tools = currentTools()
    // The forwarder's address on the jail's loopback (idempotent: "exists" is fine).
    Bun.spawnSync(["nsenter", `--net=/proc/${state.childPid}/ns/net`, "ip", "addr", "replace", `${FORWARDER_ADDRESS}/32`, "dev", "lo"], { stdio: ["ignore", "ignore", "ignore"] })
    const config = {
      listen: FORWARDER_ADDRESS,
      upstreams: dnsUpstreams,
      table: policyTableName(base, state.hostUid),
      policy: { mode: domains.mode, domains: domains.domains },
      watch: { pid: state.childPid, start: state.childStart }
    }
    const join = state.cgroup === null ? [] : cgroupProcsFiles(state.cgroup).map((f) => `echo $$ > '${f}'`)
    // Its output pipes are read only while it starts: later writes must not kill it.
    // sys_admin for setns into the jail's network, net_bind_service for port 53: it keeps only net_admin once listening.
    const script = [...join, "trap '' PIPE", `exec setpriv --bounding-set=-all,+net_admin,+net_bind_service,+sys_admin --inh-caps=-all --no-new-privs "$@"`].join(" && ")
    const netns = fs.openSync(`/proc/${state.childPid}/ns/net`, "r")
    let child: ReturnType<typeof Bun.spawn<"ignore", "pipe", "pipe">>
    try {
      child = Bun.spawn(["/bin/sh", "-c", script, "sh", tools.bun, path.join(tools.agent, "dnsForwarder.js"), JSON.stringify(config)], {
        cwd: "/",
        stdio: ["ignore", "pipe", "pipe", netns],
        detached: true,
        env: { ...agentEnv, PATH: "/usr/sbin:/usr/bin:/sbin:/bin" }
      })
    } finally {
      fs.closeSync(netns)
    }
    child.unref()
    const log = drainBounded(child.stderr, START_LOG_BYTES)
    const ready = drainBounded(child.stdout, 64)
    const next: JailState = { ...state, dnsPid: child.pid, dnsStart: procStart(child.pid) }
    writeState(dataDir, next)
    try {
      const deadline = Date.now() + START_TIMEOUT_MS
      const pause = backoff()
      while (Date.now() < deadline && child.exitCode === null) {
        if (ready.text().includes("ready")) return next
        await pause()
      }
      await Promise.race([log.done, Bun.sleep(100)])
      throw err("internal", "the sandbox's DNS resolver did not start", `dns forwarder: ${log.text() || `exit ${child.exitCode}`}`)
    } finally {
      ready.stop()
      log.stop()
    }
  }

  /** A running sandbox with a domain policy has its table and its forwarder (after a flush of the ruleset, a crash). */
  const ensurePolicy = async (state: JailState) => {
    if (!state.spec.internet || state.spec.domains === undefined || !running(state)) return
    const present = await policyTablePresent(base, state.hostUid)
    if (present && alive(state.dnsPid ?? 0, state.dnsStart ?? null)) return
    // A re-made table is empty: a forwarder that remembers what it admitted must start afresh too.
    await startPolicy(state, present)
  }

  /** An operator may have flushed the ruleset since: sandboxes with internet must not go unfiltered for long. */
  const recheckEgressFilter = async () => {
    if (egressInstalled.get(base) === null && !(await egressFilterPresent(base))) egressInstalled.set(base, installEgressFilter(base))
    let ids: Array<string> = []
    try {
      ids = fs.readdirSync(sandboxesDir(dataDir))
    } catch {}
    for (const id of ids) {
      const state = readState(dataDir, id)
      if (state !== undefined) await ensurePolicy(state).catch(() => undefined)
    }
  }

  /** slirp4netns as the sandbox's uid in the jail's network namespace, in the sandbox's cgroups (paused and killed with it). */
  const startSlirp = async (initial: JailState): Promise<JailState> => {
    await requireEgressFilter()
    // Table and forwarder first: slirp4netns never runs without them.
    const state = initial.spec.domains !== undefined ? await startPolicy(initial) : initial
    const join = state.cgroup === null ? [] : cgroupProcsFiles(state.cgroup).map((f) => `echo $$ > '${f}'`)
    const netns = fs.openSync(`/proc/${state.childPid}/ns/net`, "r")
    let userns: number
    try {
      // The user namespace owning the jail's network (bwrap's first one): slirp4netns joins it as its root, which
      // is the sandbox's host uid, so it may configure the jail's network and nothing else.
      userns = owningUserns(`/proc/self/fd/${netns}`)
    } catch (e) {
      fs.closeSync(netns)
      throw e
    }
    const script = [
      ...join,
      // slirp4netns opens /dev/net/tun as the sandbox's uid: the host's when anyone may open it, else the runtime's
      // 0666 node, bound over it in slirp4netns' own mount namespace only.
      ...(tunOpenToAll ? [] : [`mount --bind ${TUN_NODE} /dev/net/tun`]),
      // Its stderr is a pipe read only while it starts: later writes must not kill it.
      "trap '' PIPE",
      `exec setpriv --reuid=${state.hostUid} --regid=${state.hostUid} --clear-groups nsenter --user=/proc/self/fd/3 --preserve-credentials -- ` +
      "slirp4netns --configure --mtu=65520 --disable-host-loopback --enable-sandbox --enable-seccomp --netns-type=path /proc/self/fd/4 tap0"
    ].join(" && ")
    let slirp: ReturnType<typeof Bun.spawn<"ignore", "ignore", "pipe">>
    try {
      slirp = Bun.spawn([...(tunOpenToAll ? [] : ["unshare", "--mount", "--propagation", "private"]), "/bin/sh", "-c", script], { cwd: "/", stdio: ["ignore", "ignore", "pipe", userns, netns], detached: true })
    } finally {
      fs.closeSync(userns)
      fs.closeSync(netns)
    }
    slirp.unref()
    const log = drainBounded(slirp.stderr, START_LOG_BYTES)
    const next: JailState = { ...state, slirpPid: slirp.pid, slirpStart: procStart(slirp.pid) }
    writeState(dataDir, next)
    try {
      // Ready once the default route goes through its tap device (read from the host through the jail's
      // /proc/<pid>/net): slirp4netns adds the subnet's route first and the default route after it, and a
      // connection made in between fails with "network unreachable".
      const deadline = Date.now() + START_TIMEOUT_MS
      const pause = backoff()
      while (Date.now() < deadline) {
        try {
          if (hasDefaultRoute(fs.readFileSync(`/proc/${state.childPid}/net/route`, "utf8"), "tap0")) return next
        } catch {}
        if (slirp.exitCode !== null) break
        await pause()
      }
      throw err("internal", "the sandbox's network did not come up", `slirp4netns: ${log.text()}`)
    } finally {
      log.stop()
    }
  }

  /**
   * A jail's directory, uid lease, state, cgroups and disk, and the launcher that starts it running `command`
   * (default: the agent). The state is written as soon as the uid is leased, so a crash from then on leaves a
   * jail the reaper finds by its labels; only a crash in the instant before leaves a bare directory (swept).
   */
  const prepareJail = async (id: string, spec: JailSpec, command?: ReadonlyArray<string>, leashed = false) => {
    const dir = jailDir(dataDir, id)
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    fs.chmodSync(dir, 0o700)
    const { uid: hostUid, reclaimed } = claimUid(base, policy, dir)
    // A stale lease's holder never ran its destroy: its policy table (if it had one) goes before the uid is used.
    if (reclaimed) await removePolicyTable(base, hostUid)
    const rel = useCgroups ? cgroupPath(scope, id) : null
    let state: JailState = {
      version: 3,
      id,
      createdAt: new Date().toISOString(),
      spec,
      mechanism: rel === null ? "rlimit" : "cgroup",
      cgroup: rel,
      hostUid,
      bwrapPid: 0,
      bwrapStart: null,
      childPid: 0,
      childStart: null,
      slirpPid: null,
      slirpStart: null,
      paused: false
    }
    writeState(dataDir, state)
    const cgroup = rel !== null && createCgroups(rel, hostUid, spec.vcpu, spec.memoryMb) ? rel : null
    if (cgroup !== rel) {
      state = { ...state, mechanism: "rlimit", cgroup: null }
      writeState(dataDir, state)
    }
    try {
      await createDisk(dir, spec.diskMb, blanksDir)
    } catch (e) {
      throw err("internal", "the sandbox's disk could not be created", (e as Error).message)
    }
    const args = bwrapArgs({ tools: currentTools(), hostname: id, cgroup, memoryMb: spec.memoryMb, env: agentEnv, command, image: spec.image !== undefined, uid: spec.image?.uid, gid: spec.image?.gid, leashed })
    const launch = launchCommand({
      image: diskImage(dir),
      cgroup,
      hostUid,
      nproc: cgroup === null ? PIDS_LIMIT + PIDS_HEADROOM : null,
      info: command === undefined,
      identity: identityFiles(id, spec.internet),
      layers: spec.image?.layers.map((digest) => layerDir(dataDir, digest)),
      workingDir: spec.image?.workingDir,
      args
    })
    return { dir, state, launch }
  }

  /**
   * `leashed`: a warm jail, ended by its own loop unless `claim` reaches it while this process holds the write end
   * of its launcher's stdin (Jail.ts LEASHED_AGENT_LOOP).
   */
  const startJail = async (id: string, spec: JailSpec, options: { readonly leashed?: boolean } = {}): Promise<JailState> => {
    const leashed = options.leashed === true && spec.image === undefined
    const prepared = await prepareJail(id, spec, undefined, leashed)
    const { dir, launch } = prepared
    let state = prepared.state
    const hostUid = state.hostUid
    const child = Bun.spawn(launch, { cwd: "/", stdio: [leashed ? "pipe" : "ignore", "pipe", "pipe"], detached: true })
    child.unref()
    if (leashed && child.stdin !== undefined) {
      child.stdin.unref()
      leashes.set(id, child.stdin)
    }
    const errors = drainBounded(child.stderr, START_LOG_BYTES)
    const deadline = Date.now() + START_TIMEOUT_MS
    try {
      state = { ...state, bwrapPid: child.pid, bwrapStart: procStart(child.pid) }
      updateLease(hostUid, { dir, pid: child.pid, start: state.bwrapStart })
      // bwrap writes {"child-pid": n, ...} to stdout and closes it.
      const info = drainBounded(child.stdout, 64 * 1024)
      await Promise.race([info.done, Bun.sleep(START_TIMEOUT_MS)])
      info.stop()
      const childPid = Option.match(decodeLaunchInfo(info.text()), { onNone: () => 0, onSome: (launched) => launched["child-pid"] })
      if (childPid === 0) {
        await Promise.race([errors.done, Bun.sleep(200)])
        throw err("internal", "the sandbox could not be started", `launcher: ${errors.text() || `exit ${child.exitCode}`}`)
      }
      state = { ...state, childPid, childStart: procStart(childPid) }
      writeState(dataDir, state)
      if (spec.image !== undefined) await allowLowPorts(childPid)
      if (spec.internet) state = await startSlirp(state)
      await waitForAgent(state, deadline, aborter.signal, () => running(state))
      return state
    } catch (e) {
      if (e instanceof RuntimeError && e.detail === undefined && errors.text() !== "") throw err(e.kind, e.message, `launcher: ${errors.text()}`)
      throw e
    } finally {
      errors.stop()
    }
  }

  /**
   * Kills every process of the jail, removes its cgroups, releases its uid and removes its directory. The disk was
   * mounted only in the launcher's namespace: it goes with the last process. A jail that ran in its cgroups is found
   * there whole: its launcher, slirp4netns and DNS forwarder join them before they run anything, and a process
   * can only move between cgroups whose cgroup.procs it may write (the sandbox's own two), so reading a few cgroup
   * files finds everything. Otherwise (rlimits, no state, earlier versions) the pid trees of its processes and,
   * once they are gone, anything running as its uid while it holds the lease: scans of every process on the host.
   */
  const destroyJail = async (id: string) => {
    letGo(id)
    const dir = jailDir(dataDir, id)
    const state = readState(dataDir, id)
    const legacy = state === undefined ? readLegacyState(dataDir, id) : undefined
    const rel = state?.cgroup ?? (cgroupsExist(cgroupPath(scope, id)) ? cgroupPath(scope, id) : null)
    const ownUid = state !== undefined && leaseHeldBy(state.hostUid, dir) ? state.hostUid : null
    const roots = [
      ...(state ? [[state.bwrapPid, state.bwrapStart], [state.childPid, state.childStart], [state.slirpPid ?? 0, state.slirpStart], [state.dnsPid ?? 0, state.dnsStart ?? null]] as const : []),
      ...(legacy ? legacy.pids.map((pid) => [pid, null] as const) : [])
    ].filter(([pid, start]) => alive(pid, start)).map(([pid]) => pid)
    const whole = rel !== null && state?.mechanism === "cgroup" && state.cgroup === rel
    if (rel !== null) await setFrozen(rel, false).catch(() => false)
    const deadline = Date.now() + DESTROY_TIMEOUT_MS
    const pause = backoff()
    for (;;) {
      const trees = whole ? roots : roots.flatMap((pid) => [pid, ...descendants(pid)])
      let pids = [...(rel === null ? [] : cgroupPids(rel, whole)), ...trees].filter((pid) => pid > 0 && alive(pid))
      // Anything else still running as the sandbox's own uid (a scan of every process: only once the rest is gone).
      if (pids.length === 0 && ownUid !== null && !whole) pids = pidsOfUid(ownUid)
      if (pids.length === 0 || Date.now() > deadline) break
      // SIGCONT first: a process stopped by the SIGSTOP fallback must run to die.
      signalAll(pids, "SIGKILL")
      signalAll(pids, "SIGCONT")
      await pause()
    }
    // A killed process stays charged to its cgroup until its parent reaps it (bwrap's parent may be us).
    const again = backoff()
    while (rel !== null) {
      removeCgroups(rel)
      if (!cgroupsExist(rel) || Date.now() > deadline) break
      await again()
    }
    if (legacy !== undefined) legacy.cleanup()
    // Only while the uid is still this jail's: another sandbox may hold it (and its own table) now. Without a state,
    // whether it had a policy is unknown: the tables of its leases go too.
    if (state !== undefined && ownUid !== null && state.spec.domains !== undefined) await removePolicyTable(base, state.hostUid)
    if (state !== undefined) releaseUid(state.hostUid, dir)
    else {
      for (const uid of leasesOf(dir)) await removePolicyTable(base, uid)
      releaseLeasesOf(dir)
    }
    fs.rmSync(dir, { recursive: true, force: true })
  }

  /** Lets a warm jail's leash go: it keeps running once this process is gone. False when this process holds none. */
  const claim = async (id: string): Promise<boolean> => {
    const leash = leashes.get(id)
    if (leash === undefined) return false
    leashes.delete(id)
    try {
      leash.write(LEASH_CLAIMED)
      await leash.end()
      return true
    } catch {
      return false
    }
  }
  /** Closes a leash unclaimed (the jail ends itself; destroy kills it anyway). */
  const letGo = (id: string) => {
    const leash = leashes.get(id)
    leashes.delete(id)
    try {
      void Promise.resolve(leash?.end()).catch(() => undefined)
    } catch {}
  }

  return { running, toSandbox, requireEgressFilter, recheckEgressFilter, ensurePolicy, startSlirp, prepareJail, startJail, destroyJail, claim }
}

export type JailLifecycle = ReturnType<typeof makeJailLifecycle>

/** What bwrap writes to its info fd once the jail runs: its first process's pid. */
const decodeLaunchInfo = Schema.decodeUnknownOption(Schema.parseJson(Schema.Struct({ "child-pid": Schema.Number.pipe(Schema.int(), Schema.positive()) })))
/** An earlier version's state.json: any JSON object, its fields checked one by one where used. */
const decodeLegacyState = Schema.decodeUnknownOption(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown })))

/**
 * A jail started by an earlier version of this runtime (state.json without `version`, or version 2: its root in
 * the jail directory, every jail as one shared uid): what destroy needs to remove it (its pids, its cgroups, its
 * named network namespace).
 */
const readLegacyState = (dataDir: string, id: string): { pids: Array<number>; cleanup: () => void } | undefined => {
  try {
    const raw = Option.getOrThrow(decodeLegacyState(fs.readFileSync(path.join(jailDir(dataDir, id), "state.json"), "utf8")))
    if (raw["version"] !== undefined && raw["version"] !== 2) return undefined
    const pids = [raw["bwrapPid"], raw["childPid"], raw["slirpPid"]].filter((p): p is number => typeof p === "number" && p > 0)
    const legacyCgroup = typeof raw["cgroup"] === "string" ? raw["cgroup"] : path.join("sandbox-gateway", id)
    return {
      pids: [...pids, ...cgroupPids(legacyCgroup)],
      cleanup: () => {
        removeCgroups(legacyCgroup)
        if (raw["version"] === undefined && (raw["spec"] as { internet?: boolean } | undefined)?.internet) {
          Bun.spawnSync(["ip", "netns", "del", `sgw-${id}`], { stdio: ["ignore", "ignore", "ignore"] })
        }
      }
    }
  } catch {
    return undefined
  }
}

