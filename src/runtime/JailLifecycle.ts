/**
 * Starting and destroying jails. Starting: lease a host uid range (UidLeases.ts), create the sandbox's cgroups
 * and its disk image, then spawn the launcher: it joins the cgroups, mounts the disk in a private mount namespace,
 * drops to the sandbox's uid and execs bwrap, which runs the agent. bwrap's errors and its info (the jail's pid)
 * come back on pipes read while the jail starts, never through a file the sandbox could grow. Jails are spawned
 * detached (own session) so they outlive the gateway; everything needed to find them again is in state.json.
 * With internet, the jail's network (slirp4netns behind the egress filter, the domain policy's DNS forwarder and
 * table) starts next (JailNetwork.ts). Destroying kills every process of the jail and removes what it held
 * (JailRemoval.ts).
 */
import { Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import { waitForAgent } from "./AgentChannel.ts"
import { cgroupPath, createCgroups, freezerState, PIDS_HEADROOM, PIDS_LIMIT } from "./Cgroups.ts"
import { createDisk, diskImage, identityFiles } from "./Disk.ts"
import { removePolicyTable } from "./DomainPolicy.ts"
import { alive, bwrapArgs, jailDir, type JailSpec, type JailState, launchCommand, LEASH_CLAIMED, procStart, writeState } from "./Jail.ts"
import { allowLowPorts, makeJailNetwork } from "./JailNetwork.ts"
import { makeLifelines } from "./Lifeline.ts"
import { makeJailRemoval } from "./JailRemoval.ts"
import { RuntimeError, runtimeError as err, type RuntimeSandbox } from "./LocalRuntime.ts"
import { layerDir } from "./oci/ImageCache.ts"
import { drainBounded } from "./Proc.ts"
import { type RuntimeContext, START_LOG_BYTES, START_TIMEOUT_MS } from "./RuntimeContext.ts"
import { claimUid, updateLease } from "./UidLeases.ts"

/** Its tests read /proc/net/route with the same check as startSlirp. */

export const makeJailLifecycle = (ctx: RuntimeContext) => {
  const { aborter, agentEnv, base, blanksDir, currentTools, dataDir, policy, scope, useCgroups } = ctx
  /** The write ends of warm jails' leashes, by jail id (held only by this process: Bun's pipes are close-on-exec). */
  const leashes = new Map<string, Bun.FileSink>()

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

  /** The reading ends of jails' lifelines, until their slirp4netns has one (Lifeline.ts). */
  const lifelines = makeLifelines()
  const { requireEgressFilter, recheckEgressFilter, ensurePolicy, startSlirp, startAhead, stopAhead } = makeJailNetwork(ctx, running, lifelines)
  const removeJail = makeJailRemoval(ctx)

  /**
   * A jail's directory, uid lease, state, cgroups and disk, and the launcher that starts it running `command`
   * (default: the agent). The state is written as soon as the uid is leased, so a crash from then on leaves a
   * jail the reaper finds by its labels; only a crash in the instant before leaves a bare directory (swept).
   */
  const prepareJail = async (id: string, spec: JailSpec, command?: ReadonlyArray<string>, leashed = false, lifeline = false) => {
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
      lifeline,
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
    // Its network is tied to its life (Lifeline.ts): the launcher gets the lifeline's write end, and this process
    // keeps none of it (else the jail's end would never be seen).
    const lifeline = lifelines.make(id)
    let prepared: Awaited<ReturnType<typeof prepareJail>>
    let child: ReturnType<typeof Bun.spawn<"pipe" | "ignore", "pipe", "pipe">>
    try {
      prepared = await prepareJail(id, spec, undefined, leashed, lifeline !== undefined)
      // The lifeline's write end is the launcher's fd 3 (Jail.ts LAUNCHER_LIFELINE_FD).
      child = Bun.spawn(prepared.launch, { cwd: "/", stdio: [leashed ? "pipe" : "ignore", "pipe", "pipe", lifeline ?? "ignore"], detached: true })
    } catch (e) {
      lifelines.drop(id)
      throw e
    } finally {
      if (lifeline !== undefined) fs.closeSync(lifeline)
    }
    const { dir } = prepared
    let state = prepared.state
    const hostUid = state.hostUid
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
      lifelines.drop(id)
      if (e instanceof RuntimeError && e.detail === undefined && errors.text() !== "") throw err(e.kind, e.message, `launcher: ${errors.text()}`)
      throw e
    } finally {
      errors.stop()
      // A warm jail's is kept for its network, started ahead or at its handout (WarmPool.ts).
      if (!leashed) lifelines.drop(id)
    }
  }

  /** A warm jail's leash is let go first (JailRemoval.ts does the rest). */
  const destroyJail = async (id: string) => {
    letGo(id)
    lifelines.drop(id)
    await removeJail(id)
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

  return { running, toSandbox, requireEgressFilter, recheckEgressFilter, ensurePolicy, startSlirp, startAhead, stopAhead, prepareJail, startJail, destroyJail, claim, lifelines }
}

export type JailLifecycle = ReturnType<typeof makeJailLifecycle>

/** What bwrap writes to its info fd once the jail runs: its first process's pid. */
const decodeLaunchInfo = Schema.decodeUnknownOption(Schema.parseJson(Schema.Struct({ "child-pid": Schema.Number.pipe(Schema.int(), Schema.positive()) })))
