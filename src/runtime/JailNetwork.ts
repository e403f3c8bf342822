/**
 * A jail's network. With internet, slirp4netns runs as the sandbox's uid in the jail's network namespace, behind
 * the egress filter (Egress.ts), which fails closed; with a domain policy, its DNS forwarder and nftables table come
 * first (DomainPolicy.ts). Both are re-checked for running sandboxes (after a flush of the ruleset, a crash).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { cgroupProcsFiles } from "./Cgroups.ts"
import { FORWARDER_ADDRESS, installPolicyTable, policyTableName, policyTablePresent } from "./DomainPolicy.ts"
import { egressFilterPresent, installEgressFilter } from "./Egress.ts"
import { TUN_NODE } from "./Host.ts"
import { alive, type JailState, procStart, readState, sandboxesDir, signalAll, writeState } from "./Jail.ts"
import type { Lifelines } from "./Lifeline.ts"
import { runtimeError as err, type RuntimeError } from "./LocalRuntime.ts"
import { owningUserns } from "./Ns.ts"
import { backoff, drainBounded, nextCheck } from "./Proc.ts"
import { type RuntimeContext, START_LOG_BYTES, START_TIMEOUT_MS } from "./RuntimeContext.ts"

/** Whether a /proc/net/route table has a default route (destination 0.0.0.0/0) through `iface`. */
export const hasDefaultRoute = (table: string, iface: string): boolean =>
  table.split("\n").some((line) => {
    const [name, destination, , , , , , mask] = line.trim().split(/\s+/)
    return name === iface && destination === "00000000" && mask === "00000000"
  })

/** Whether the default route of the network namespace of `pid` goes through `iface`. */
const routedThrough = (pid: number, iface: string): boolean => {
  try {
    return hasDefaultRoute(fs.readFileSync(`/proc/${pid}/net/route`, "utf8"), iface)
  } catch {
    return false
  }
}

/** Whether the network namespace of `pid` (read from the host through its /proc/<pid>/net) has the device `iface`. */
const hasDevice = (pid: number, iface: string): boolean => {
  try {
    return fs.readFileSync(`/proc/${pid}/net/dev`, "utf8").split("\n").some((line) => line.trim().startsWith(`${iface}:`))
  } catch {
    return false
  }
}

/**
 * Any user of the jail may listen on ports below 1024, as in a Docker container (it sets the same): an image's
 * server (nginx on 80) runs as built, without the capability it would otherwise need. The setting is the jail's
 * own network namespace's; nothing outside it changes.
 */
export const allowLowPorts = async (childPid: number) => {
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

/** Where slirp4netns gets the reading end of its jail's lifeline (Lifeline.ts), as --exit-fd: its spawn's stdio[5]. */
const SLIRP_LIFELINE_FD = 5

/** The egress filter per uid base, installed once per process (re-checked before each internet sandbox). */
const egressInstalled = new Map<number, string | null>()

/** `running`: whether a jail's processes are still its own (JailLifecycle.ts). */
export const makeJailNetwork = (ctx: RuntimeContext, running: (state: JailState) => boolean, lifelines: Lifelines) => {
  const { agentEnv, base, currentTools, dataDir, dnsUpstreams } = ctx
  if (!egressInstalled.has(base)) egressInstalled.set(base, installEgressFilter(base))

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

  /**
   * The sandbox's network: slirp4netns as the sandbox's uid in the jail's network namespace, in the sandbox's cgroups
   * (paused and killed with it). `filterChecked`: the egress filter's check for this create, begun by the caller
   * alongside its own work (a warm jail's handout); without it the check is made here. Either way slirp4netns never
   * starts before it passed. A warm jail's slirp4netns started ahead (`startAhead`) is kept: nothing of the sandbox
   * has run in the jail yet, and the check and the domain policy are in place before anything does.
   */
  const startSlirp = async (initial: JailState, filterChecked?: Promise<void>): Promise<JailState> => {
    await (filterChecked ?? requireEgressFilter())
    // Table and forwarder first: no code of the sandbox reaches the network without them.
    const state = initial.spec.domains !== undefined ? await startPolicy(initial) : initial
    const ahead = alive(state.slirpPid ?? 0, state.slirpStart)
    if (ahead && routedThrough(state.childPid, "tap0")) return state
    // One started ahead whose network is not up is replaced.
    const first = await launchSlirp(ahead ? await stopAhead(state) : state)
    if (first.ok) return first.state
    // One that ended while it started is started once more (seen once in the test suite under heavy load, where it
    // failed a create with a 500); what it said is kept in the operator's log. One that did not come up in time is not.
    if (!first.exited) throw first.error
    console.error(`local runtime: slirp4netns of ${state.id} ended while it started; starting it again. ${first.error.detail ?? ""}`)
    const second = await launchSlirp(state)
    if (second.ok) return second.state
    throw second.error
  }

  /**
   * A warm jail's network, started ahead of the create that takes it (WarmPool.ts) once the egress filter is in
   * place. Only in a jail with a lifeline: a slirp4netns that could outlive its jail (a pool's gateway killed, its
   * DATA_DIR removed) is never started ahead; without an egress filter the jail stays without one. Throws when it
   * did not come up (the jail is not used).
   */
  const startAhead = async (state: JailState): Promise<JailState> => {
    try {
      await requireEgressFilter()
    } catch {
      return state
    }
    const started = await launchSlirp(state, true)
    if (!started.ok) throw started.error
    return started.state
  }

  /**
   * A warm jail's network started ahead, taken away for a create without internet: its slirp4netns killed, and
   * done once it has ended and the jail's tap device is gone (it goes with slirp4netns' last fd of it).
   */
  const stopAhead = async (state: JailState): Promise<JailState> => {
    if (alive(state.slirpPid ?? 0, state.slirpStart)) signalAll([state.slirpPid!], "SIGKILL")
    const deadline = Date.now() + START_TIMEOUT_MS
    const pause = backoff()
    while (alive(state.slirpPid ?? 0, state.slirpStart) || hasDevice(state.childPid, "tap0")) {
      if (Date.now() > deadline) throw err("internal", "the sandbox could not be started", "the warm jail's network did not go away")
      await pause()
    }
    const next: JailState = { ...state, slirpPid: null, slirpStart: null }
    writeState(dataDir, next)
    return next
  }

  /**
   * One start of slirp4netns for the jail; when it fails, whether it ended by itself (rather than timed out).
   * `tied`: it must end with the jail (its lifeline as --exit-fd), or not start at all.
   */
  const launchSlirp = async (state: JailState, tied = false): Promise<{ readonly ok: true; readonly state: JailState } | { readonly ok: false; readonly exited: boolean; readonly error: RuntimeError }> => {
    const join = state.cgroup === null ? [] : cgroupProcsFiles(state.cgroup).map((f) => `echo $$ > '${f}'`)
    const lifeline = lifelines.get(state.id)
    if (tied && lifeline === undefined) return { ok: false, exited: false, error: err("internal", "the sandbox's network did not come up", "the jail has no lifeline") }
    const fds: Array<number> = []
    let slirp: ReturnType<typeof Bun.spawn<"ignore", "pipe", "pipe">>
    try {
      const netns = fs.openSync(`/proc/${state.childPid}/ns/net`, "r")
      fds.push(netns)
      // The user namespace owning the jail's network (bwrap's first one): slirp4netns joins it as its root, which
      // is the sandbox's host uid, so it may configure the jail's network and nothing else.
      const userns = owningUserns(`/proc/self/fd/${netns}`)
      fds.push(userns)
      const script = [
        ...join,
        // slirp4netns opens /dev/net/tun as the sandbox's uid: the host's when anyone may open it, else the runtime's
        // 0666 node, bound over it in slirp4netns' own mount namespace only.
        ...(tunOpenToAll ? [] : [`mount --bind ${TUN_NODE} /dev/net/tun`]),
        // Its stderr is a pipe read only while it starts: later writes must not kill it.
        "trap '' PIPE",
        `exec setpriv --reuid=${state.hostUid} --regid=${state.hostUid} --clear-groups nsenter --user=/proc/self/fd/3 --preserve-credentials -- ` +
        // --ready-fd: it writes to its standard output once the network is configured (nothing else is written there).
        // --exit-fd: it ends when the jail does (its lifeline), whoever is left to kill it.
        `slirp4netns --configure --ready-fd=1${lifeline === undefined ? "" : ` --exit-fd=${SLIRP_LIFELINE_FD}`} --mtu=65520 --disable-host-loopback --enable-sandbox --enable-seccomp --netns-type=path /proc/self/fd/4 tap0`
      ].join(" && ")
      slirp = Bun.spawn([...(tunOpenToAll ? [] : ["unshare", "--mount", "--propagation", "private"]), "/bin/sh", "-c", script], { cwd: "/", stdio: ["ignore", "pipe", "pipe", userns, netns, lifeline ?? "ignore"], detached: true })
    } finally {
      for (const fd of fds) fs.closeSync(fd)
    }
    slirp.unref()
    const log = drainBounded(slirp.stderr, START_LOG_BYTES)
    const ready = slirp.stdout.getReader()
    const next: JailState = { ...state, slirpPid: slirp.pid, slirpStart: procStart(slirp.pid) }
    writeState(dataDir, next)
    try {
      // Ready once the default route goes through its tap device (read from the host through the jail's
      // /proc/<pid>/net): slirp4netns adds the subnet's route first and the default route after it, and a
      // connection made in between fails with "network unreachable". Its ready signal (or its end) says when to
      // look, instead of polling from the start (polls backing off overshot the ~25 ms it takes by ~10 ms).
      const deadline = Date.now() + START_TIMEOUT_MS
      let timer: ReturnType<typeof setTimeout> | undefined
      await Promise.race([ready.read().catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, START_TIMEOUT_MS)))])
      clearTimeout(timer)
      const pause = backoff()
      while (Date.now() < deadline) {
        if (routedThrough(state.childPid, "tap0")) return { ok: true, state: next }
        if (slirp.exitCode !== null) break
        await pause()
      }
      return { ok: false, exited: slirp.exitCode !== null, error: err("internal", "the sandbox's network did not come up", `slirp4netns: ${log.text()}`) }
    } finally {
      log.stop()
      void ready.cancel().catch(() => undefined)
    }
  }

  return { requireEgressFilter, recheckEgressFilter, ensurePolicy, startSlirp, startAhead, stopAhead }
}
