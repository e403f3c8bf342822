/**
 * The local runtime: bwrap jails with an agent inside each (see Jail.ts, AgentChannel.ts and agent/agent.ts).
 * Root only (Host.ts): it mounts each sandbox's disk, runs each sandbox as its own host uid and installs the
 * egress filter.
 *
 * Starting a jail: lease a host uid range (UidLeases.ts), create the sandbox's cgroups and its disk image, then
 * spawn the launcher: it joins the cgroups, mounts the disk in a private mount namespace, drops to the sandbox's
 * uid and execs bwrap, which runs the agent. bwrap's errors and its info (the jail's pid) come back on pipes read
 * while the jail starts, never through a file the sandbox could grow. Jails are spawned detached (own session)
 * so they outlive the gateway; everything the runtime needs to find them again is in state.json, so a new
 * runtime over the same DATA_DIR simply carries on ("re-attach"). With internet, slirp4netns runs as the
 * sandbox's uid in the jail's network namespace, behind the egress filter (Egress.ts).
 *
 * A few warm jails (RUNTIME_WARM_POOL) make create fast: most of a create is starting bwrap and the bun agent,
 * so a warm jail is handed out by renaming its directory and cgroups to the sandbox id, applying the requested
 * limits and hostname, and (with internet) attaching slirp4netns. A disk cannot grow while mounted here (no
 * CAP_SYS_RESOURCE), so only a create asking for the warm jails' disk size (the providers' common default) gets
 * one; others start cold.
 */
import { Config, Effect, Layer, Option } from "effect"
import * as fs from "node:fs"
import type * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { AppConfig } from "../Config.ts"
import { agentSource } from "./agent/source.ts"
import { type AgentAnswer, callAgent, connectBridge, waitForAgent, writeIdentityFiles } from "./AgentChannel.ts"
import * as Wire from "./AgentWire.ts"
import { egressFilterPresent, installEgressFilter } from "./Egress.ts"
import { collectTools, ensureTools, HostError, prepareHost, requireRoot, type Tools, TOOLS_REFRESH_MS, TUN_NODE } from "./Host.ts"
import { applyLimits, cgroupPath, cgroupPids, cgroupProcsFiles, cgroupScope, cgroupsExist, createCgroups, freezerState, PIDS_HEADROOM, PIDS_LIMIT, removeCgroups, renameCgroups, scopeCgroupIds, setFrozen } from "./Cgroups.ts"
import { createDisk, DEFAULT_DISK_MB, identityFiles, keepBlankImage, MAX_DISK_MB, MIN_DISK_MB } from "./Disk.ts"
import { alive, bwrapArgs, DEFAULT_HOST_UID, descendants, diskImage, jailDir, type JailSpec, type JailState, launchCommand, procStart, readState, sandboxesDir, signalAll, writeState } from "./Jail.ts"
import {
  type ExecEvent,
  type ExecInfo,
  LocalRuntime,
  type LocalRuntimeShape,
  RuntimeError,
  type RuntimeSandbox,
  type RuntimeSandboxSpec
} from "./LocalRuntime.ts"
import { owningUserns } from "./Ns.ts"
import { pidsOfUid } from "./Proc.ts"
import { claimUid, type EgressPolicy, leaseHeldBy, MAX_BASE, releaseLeasesOf, releaseUid, sweepLeases, updateLease } from "./UidLeases.ts"

const START_TIMEOUT_MS = 10_000
const DESTROY_TIMEOUT_MS = 5_000
/** Agent calls: small answers, and long polls get their wait plus this margin. */
const CALL_TIMEOUT_MS = 15_000
/** File transfers (up to tens of MiB through the agent's own disk). */
const TRANSFER_TIMEOUT_MS = 120_000
/** How much of bwrap's (or slirp4netns') stderr is kept for the operator's log while a jail starts. */
const START_LOG_BYTES = 16 * 1024
/**
 * A jail directory without state this old, that this process is not creating, is a crashed create (the state is
 * written within moments of the directory: see prepareJail).
 */
const ORPHAN_GRACE_MS = 15_000
/** Ids are directory, cgroup and host names: a safe alphabet. */
const SAFE_ID = /^[A-Za-z0-9_-]{1,100}$/
/** Jails started ahead of demand (no internet, default limits) are named like this until handed out. */
const POOL_PREFIX = "pool-"
const isPooled = (id: string) => id.startsWith(POOL_PREFIX)
/**
 * Disk of warm jails: what the providers' defaults resolve to (a create without disk_mb routed to Daytona gets
 * its 3 GiB default). Creates asking for another size start cold.
 */
export const POOL_DISK_MB = 3072
const POOL_SPEC: JailSpec = { vcpu: 1, memoryMb: 512, diskMb: POOL_DISK_MB, internet: false, env: {}, labels: {} }

const err = (kind: RuntimeError["kind"], message: string, detail?: string) => new RuntimeError({ kind, message, ...(detail !== undefined ? { detail } : {}) })

export interface LocalRuntimeOptions {
  /** Warm jails kept ready (default 0 here; the Layer reads RUNTIME_WARM_POOL). */
  readonly warmPool?: number | undefined
  /** Base of the sandbox host uid ranges (default 1000000; RUNTIME_HOST_UID). */
  readonly hostUid?: number | undefined
  /** false: never use cgroups, even where writable (rlimits and SIGSTOP instead). */
  readonly cgroups?: boolean | undefined
  /** Sandboxes with internet may reach private ranges (RUNTIME_ALLOW_PRIVATE_EGRESS); never the host itself. */
  readonly allowPrivateEgress?: boolean | undefined
  /** Time limit of an agent call with a small answer, and the margin beyond a long poll's wait (default 15 s). */
  readonly agentTimeoutMs?: number | undefined
}

export interface SweepReport {
  /** Jails without a usable state (crashed creates, earlier versions, cgroups left without a directory). */
  readonly jails: ReadonlyArray<string>
  /** uid leases whose jail is gone, host-wide. */
  readonly leases: ReadonlyArray<number>
  /** Loop devices of this DATA_DIR's disks left attached without a running jail. */
  readonly loops: ReadonlyArray<string>
}

export interface LocalRuntimeHandle extends LocalRuntimeShape {
  readonly reap: (keepIds: ReadonlySet<string>) => Effect.Effect<ReadonlyArray<string>, RuntimeError>
  readonly sweep: Effect.Effect<SweepReport, RuntimeError>
  readonly shutdown: Effect.Effect<void>
  /**
   * A jail prepared exactly like a sandbox's (uid, cgroups, disk, launcher, bwrap arguments) but without the
   * agent: each `run` spawns it for one command and returns its stdout. The benchmark's baseline for exec.
   */
  readonly directJail: (id: string, spec: JailSpec) => { readonly run: (command: ReadonlyArray<string>) => Promise<string>; readonly remove: () => Promise<void> }
}

const validateSpec = (spec: RuntimeSandboxSpec) => {
  if (typeof spec.id !== "string" || !SAFE_ID.test(spec.id)) throw err("invalid", "sandbox ids are 1-100 letters, digits, _ or -")
  if (isPooled(spec.id)) throw err("invalid", `sandbox ids cannot start with ${POOL_PREFIX}`)
  if (!(Number.isFinite(spec.vcpu) && spec.vcpu > 0 && spec.vcpu <= 1024)) throw err("invalid", "vcpu must be a positive number")
  if (!(Number.isInteger(spec.memoryMb) && spec.memoryMb >= 16 && spec.memoryMb <= 16 * 1024 * 1024)) throw err("invalid", "memoryMb must be an integer of at least 16")
  if (spec.diskMb !== undefined && !(Number.isInteger(spec.diskMb) && spec.diskMb >= MIN_DISK_MB && spec.diskMb <= MAX_DISK_MB)) {
    throw err("invalid", `diskMb must be an integer from ${MIN_DISK_MB} to ${MAX_DISK_MB}`)
  }
  for (const [k, v] of Object.entries(spec.env ?? {})) {
    if (k === "" || k.includes("=") || k.includes("\0") || typeof v !== "string" || v.includes("\0")) throw err("invalid", `bad environment variable ${k.slice(0, 100)}`)
  }
}

const absolutePath = (p: string) => {
  if (typeof p !== "string" || !p.startsWith("/") || p.includes("\0")) throw err("invalid", "paths must be absolute")
  if (p.length > 8192) throw err("invalid", "the path is too long")
  return p
}

const nonNegativeInt = (name: string, value: number) => {
  if (!Number.isSafeInteger(value) || value < 0) throw err("invalid", `${name} must be a non-negative integer`)
  return value
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

/** The egress filter per uid base, installed once per process (re-checked before each internet sandbox). */
const egressInstalled = new Map<number, string | null>()
let toolsCollected = false

export const makeLocalRuntime = (dataDir: string, options: LocalRuntimeOptions = {}): LocalRuntimeHandle => {
  requireRoot()
  prepareHost()
  const base = options.hostUid ?? DEFAULT_HOST_UID
  if (!(Number.isSafeInteger(base) && base >= 1 && base <= MAX_BASE)) throw new HostError(`RUNTIME_HOST_UID must be an integer from 1 to ${MAX_BASE}`)
  const policy: EgressPolicy = options.allowPrivateEgress === true ? "private" : "strict"
  fs.mkdirSync(sandboxesDir(dataDir), { recursive: true, mode: 0o700 })
  fs.chmodSync(sandboxesDir(dataDir), 0o700)
  const scope = cgroupScope(dataDir)
  const useCgroups = options.cgroups !== false
  /** Blank disk images of the common sizes (Jail.ts createDisk). */
  const blanksDir = path.join(dataDir, "disk-templates")
  keepBlankImage(POOL_DISK_MB)
  keepBlankImage(DEFAULT_DISK_MB)
  if (!egressInstalled.has(base)) egressInstalled.set(base, installEgressFilter(base))
  // Transpiled once here; the tools tmpfs holds one copy per distinct script.
  const agentJs = new Bun.Transpiler({ loader: "ts", target: "bun" }).transformSync(agentSource)
  // A `bun build --compile` gateway is itself bun when run with BUN_BE_BUN=1.
  const bunPath = fs.realpathSync(process.execPath)
  const compiled = import.meta.url.includes("$bunfs") || !/^bun(\.exe)?$/.test(path.basename(bunPath))
  const agentEnv = { ...(compiled ? { BUN_BE_BUN: "1" } : {}), BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0" }
  let tools: Tools = ensureTools(bunPath, agentJs)
  if (!toolsCollected) {
    toolsCollected = true
    collectTools(tools)
  }
  let toolsRefreshed = Date.now()
  /** The tool copies, put back if something removed them since, and marked in use now and then. */
  const currentTools = () => {
    if (!fs.existsSync(tools.bun) || !fs.existsSync(tools.agent) || Date.now() - toolsRefreshed > TOOLS_REFRESH_MS) {
      tools = ensureTools(bunPath, agentJs)
      toolsRefreshed = Date.now()
    }
    return tools
  }

  const callTimeoutMs = options.agentTimeoutMs ?? CALL_TIMEOUT_MS
  const creating = new Map<string, Promise<RuntimeSandbox>>()
  const aborter = new AbortController()
  let closed = false

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
        : { vcpu: os.cpus().length, memoryMb: state.spec.memoryMb, diskMb: state.spec.diskMb, mechanism: "rlimit" }
    }
  }

  // --- agent calls ---------------------------------------------------------------------------------------------

  const agent = (state: JailState, route: string, call: Partial<Parameters<typeof callAgent>[2]> = {}): Promise<AgentAnswer> => {
    if (closed) throw err("unavailable", "the runtime is shut down")
    return callAgent(state, route, { timeoutMs: callTimeoutMs, maxBytes: Wire.MAX_JSON_ANSWER, ...call }, aborter.signal)
  }
  const agentJson = async (state: JailState, route: string, call: Partial<Parameters<typeof callAgent>[2]> = {}) => Wire.okJson(await agent(state, route, call))

  /** Every failure is a RuntimeError in the user's terms; what only an operator needs goes to the log. */
  const toRuntimeError = (e: unknown): RuntimeError => {
    if (e instanceof RuntimeError) return e
    if (e instanceof HostError) return err("internal", "the local runtime is not set up on this host", e.message)
    return err("internal", "the local runtime failed unexpectedly", e instanceof Error ? `${e.name}: ${e.message}` : String(e))
  }
  const run = <A>(f: () => Promise<A> | A) =>
    Effect.tryPromise({ try: async () => f(), catch: toRuntimeError }).pipe(
      Effect.tapError((e) => (e.detail === undefined ? Effect.void : Effect.logWarning("local runtime", { message: e.message, detail: e.detail })))
    )

  const stateOf = (id: string): JailState => {
    if (typeof id !== "string" || !SAFE_ID.test(id) || isPooled(id)) throw err("not_found", "no such sandbox")
    const state = readState(dataDir, id)
    if (state === undefined || !running(state)) throw err("not_found", "no such sandbox")
    return state
  }

  /** The jail is up and not paused (a frozen agent would never answer). */
  const requireRunning = (id: string): JailState => {
    const state = stateOf(id)
    if (state.paused) throw err("conflict", "the sandbox is paused")
    return state
  }

  // --- egress --------------------------------------------------------------------------------------------------

  /** Fails closed: no egress filter, no internet. */
  const requireEgressFilter = async () => {
    if (egressInstalled.get(base) === null && (await egressFilterPresent(base))) return
    const error = installEgressFilter(base)
    egressInstalled.set(base, error)
    if (error !== null) throw err("unavailable", "internet access is not available on this host: its egress filter could not be installed", `nft: ${error}`)
  }

  // --- starting and destroying jails -----------------------------------------------------------------------------

  /** slirp4netns as the sandbox's uid in the jail's network namespace, in the sandbox's cgroups (paused and killed with it). */
  const startSlirp = async (state: JailState): Promise<JailState> => {
    await requireEgressFilter()
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
      // slirp4netns opens /dev/net/tun as the sandbox's uid: a 0666 node, in its own mount namespace only.
      `mount --bind ${TUN_NODE} /dev/net/tun`,
      // Its stderr is a pipe read only while it starts: later writes must not kill it.
      "trap '' PIPE",
      `exec setpriv --reuid=${state.hostUid} --regid=${state.hostUid} --clear-groups nsenter --user=/proc/self/fd/3 --preserve-credentials -- ` +
      "slirp4netns --configure --mtu=65520 --disable-host-loopback --enable-sandbox --enable-seccomp --netns-type=path /proc/self/fd/4 tap0"
    ].join(" && ")
    let slirp: ReturnType<typeof Bun.spawn<"ignore", "ignore", "pipe">>
    try {
      slirp = Bun.spawn(["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script], { cwd: "/", stdio: ["ignore", "ignore", "pipe", userns, netns], detached: true })
    } finally {
      fs.closeSync(userns)
      fs.closeSync(netns)
    }
    slirp.unref()
    const log = drainBounded(slirp.stderr, START_LOG_BYTES)
    const next: JailState = { ...state, slirpPid: slirp.pid, slirpStart: procStart(slirp.pid) }
    writeState(dataDir, next)
    try {
      // Ready once its tap device routes (read from the host through the jail's /proc/<pid>/net).
      const deadline = Date.now() + START_TIMEOUT_MS
      while (Date.now() < deadline) {
        try {
          if (fs.readFileSync(`/proc/${state.childPid}/net/route`, "utf8").includes("tap0")) return next
        } catch {}
        if (slirp.exitCode !== null) break
        await Bun.sleep(1)
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
  const prepareJail = async (id: string, spec: JailSpec, command?: ReadonlyArray<string>) => {
    const dir = jailDir(dataDir, id)
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    fs.chmodSync(dir, 0o700)
    const hostUid = claimUid(base, policy, dir)
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
    const args = bwrapArgs({ tools: currentTools(), hostname: id, cgroup, memoryMb: spec.memoryMb, env: agentEnv, command })
    const launch = launchCommand({
      image: diskImage(dir),
      cgroup,
      hostUid,
      nproc: cgroup === null ? PIDS_LIMIT + PIDS_HEADROOM : null,
      info: command === undefined,
      identity: identityFiles(id, spec.internet),
      args
    })
    return { dir, state, launch }
  }

  const startJail = async (id: string, spec: JailSpec): Promise<JailState> => {
    const prepared = await prepareJail(id, spec)
    const { dir, launch } = prepared
    let state = prepared.state
    const hostUid = state.hostUid
    const child = Bun.spawn(launch, { cwd: "/", stdio: ["ignore", "pipe", "pipe"], detached: true })
    child.unref()
    const errors = drainBounded(child.stderr, START_LOG_BYTES)
    const deadline = Date.now() + START_TIMEOUT_MS
    try {
      state = { ...state, bwrapPid: child.pid, bwrapStart: procStart(child.pid) }
      updateLease(hostUid, { dir, pid: child.pid, start: state.bwrapStart })
      // bwrap writes {"child-pid": n, ...} to stdout and closes it.
      const info = drainBounded(child.stdout, 64 * 1024)
      await Promise.race([info.done, Bun.sleep(START_TIMEOUT_MS)])
      info.stop()
      let childPid = 0
      try {
        childPid = (JSON.parse(info.text()) as { "child-pid"?: unknown })["child-pid"] as number
      } catch {}
      if (!Number.isSafeInteger(childPid) || childPid <= 0) {
        await Promise.race([errors.done, Bun.sleep(200)])
        throw err("internal", "the sandbox could not be started", `launcher: ${errors.text() || `exit ${child.exitCode}`}`)
      }
      state = { ...state, childPid, childStart: procStart(childPid) }
      writeState(dataDir, state)
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
   * Kills every process of the jail (cgroups, pid tree, slirp4netns, anything running as its uid while it holds
   * the lease), removes its cgroups, releases its uid and removes its directory. The disk was mounted only in the
   * launcher's namespace: it goes with the last process.
   */
  const destroyJail = async (id: string) => {
    const dir = jailDir(dataDir, id)
    const state = readState(dataDir, id)
    const legacy = state === undefined ? readLegacyState(dataDir, id) : undefined
    const rel = state?.cgroup ?? (cgroupsExist(cgroupPath(scope, id)) ? cgroupPath(scope, id) : null)
    const ownUid = state !== undefined && leaseHeldBy(state.hostUid, dir) ? state.hostUid : null
    const roots = [
      ...(state ? [[state.bwrapPid, state.bwrapStart], [state.childPid, state.childStart], [state.slirpPid ?? 0, state.slirpStart]] as const : []),
      ...(legacy ? legacy.pids.map((pid) => [pid, null] as const) : [])
    ].filter(([pid, start]) => alive(pid, start)).map(([pid]) => pid)
    if (rel !== null) await setFrozen(rel, false).catch(() => false)
    const deadline = Date.now() + DESTROY_TIMEOUT_MS
    for (;;) {
      let pids = [...(rel === null ? [] : cgroupPids(rel)), ...roots.flatMap((pid) => [pid, ...descendants(pid)])].filter((pid) => pid > 0 && alive(pid))
      // Anything else still running as the sandbox's own uid (a scan of every process: only once the rest is gone).
      if (pids.length === 0 && ownUid !== null) pids = pidsOfUid(ownUid)
      if (pids.length === 0 || Date.now() > deadline) break
      // SIGCONT first: a process stopped by the SIGSTOP fallback must run to die.
      signalAll(pids, "SIGKILL")
      signalAll(pids, "SIGCONT")
      await Bun.sleep(2)
    }
    // A killed process stays charged to its cgroup until its parent reaps it (bwrap's parent may be us).
    while (rel !== null) {
      removeCgroups(rel)
      if (!cgroupsExist(rel) || Date.now() > deadline) break
      await Bun.sleep(2)
    }
    if (legacy !== undefined) legacy.cleanup()
    if (state !== undefined) releaseUid(state.hostUid, dir)
    else releaseLeasesOf(dir)
    fs.rmSync(dir, { recursive: true, force: true })
  }

  // --- warm pool -----------------------------------------------------------------------------------------------

  const poolSize = Math.max(0, options.warmPool ?? 0)
  const pool: Array<string> = []
  const filling = new Set<Promise<void>>()
  const startingPool = new Set<string>()
  // Deferred: starting a jail does synchronous work (its disk, cgroups, the spawn) that must not delay the
  // create that took a warm jail.
  let refillScheduled = false
  const refill = () => {
    if (refillScheduled || closed || poolSize === 0) return
    refillScheduled = true
    setTimeout(() => {
      refillScheduled = false
      fillPool()
    }, 0)
  }
  const fillPool = () => {
    while (!closed && pool.length + filling.size < poolSize) {
      const id = `${POOL_PREFIX}${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`
      startingPool.add(id)
      const p: Promise<void> = startJail(id, POOL_SPEC)
        .then(() => (closed ? destroyJail(id) : void pool.push(id)))
        .catch(() => destroyJail(id))
        .finally(() => {
          startingPool.delete(id)
          filling.delete(p)
        })
      filling.add(p)
    }
  }

  /** Hands out a warm jail under `spec.id`, or undefined when none can be used. */
  const handOut = async (spec: RuntimeSandboxSpec, jailSpec: JailSpec): Promise<RuntimeSandbox | undefined> => {
    if (jailSpec.diskMb !== POOL_DISK_MB) return undefined
    while (pool.length > 0) {
      const from = pool.shift()!
      const warm = readState(dataDir, from)
      if (warm === undefined || !running(warm)) {
        await destroyJail(from)
        continue
      }
      let state: JailState = { ...warm, id: spec.id, createdAt: new Date().toISOString(), spec: jailSpec, cgroup: warm.cgroup === null ? null : cgroupPath(scope, spec.id) }
      try {
        // The lease names the new directory first: the launcher is alive throughout, so it is never stale.
        updateLease(warm.hostUid, { dir: jailDir(dataDir, spec.id), pid: warm.bwrapPid, start: warm.bwrapStart })
        fs.renameSync(jailDir(dataDir, from), jailDir(dataDir, spec.id))
        if (warm.cgroup !== null && state.cgroup !== null) {
          renameCgroups(warm.cgroup, state.cgroup)
          applyLimits(state.cgroup, jailSpec.vcpu, jailSpec.memoryMb)
        }
        writeIdentityFiles(state, identityFiles(spec.id, jailSpec.internet))
        const hostname = Bun.spawn(["nsenter", `--uts=/proc/${warm.childPid}/ns/uts`, "hostname", spec.id.slice(0, 63)], { stdio: ["ignore", "ignore", "ignore"] })
        if ((await hostname.exited) !== 0) throw new Error("the warm jail's hostname could not be set")
        writeState(dataDir, state)
        if (jailSpec.internet) state = await startSlirp(state)
      } catch (e) {
        await destroyJail(spec.id)
        await destroyJail(from)
        // No egress filter: a cold start would fail the same way.
        if (e instanceof RuntimeError && e.kind === "unavailable") throw e
        continue
      }
      refill()
      return toSandbox(state)
    }
    refill()
    return undefined
  }

  // --- the shape -----------------------------------------------------------------------------------------------

  const create = async (spec: RuntimeSandboxSpec): Promise<RuntimeSandbox> => {
    validateSpec(spec)
    if (closed) throw err("unavailable", "the runtime is shut down")
    const pending = creating.get(spec.id)
    if (pending !== undefined) return pending
    const existing = readState(dataDir, spec.id)
    if (existing !== undefined && running(existing)) return toSandbox(existing)
    const jailSpec: JailSpec = {
      vcpu: spec.vcpu,
      memoryMb: spec.memoryMb,
      diskMb: spec.diskMb ?? DEFAULT_DISK_MB,
      internet: spec.internet,
      env: { ...spec.env },
      labels: { ...spec.labels }
    }
    const promise = (async () => {
      if (jailSpec.internet) await requireEgressFilter()
      // A dead leftover under this id (its host rebooted, or its jail was killed): start afresh.
      if (fs.existsSync(jailDir(dataDir, spec.id)) || cgroupsExist(cgroupPath(scope, spec.id))) await destroyJail(spec.id)
      const warm = await handOut(spec, jailSpec)
      if (warm !== undefined) return warm
      try {
        return toSandbox(await startJail(spec.id, jailSpec))
      } catch (e) {
        await destroyJail(spec.id)
        throw e
      }
    })().finally(() => creating.delete(spec.id))
    creating.set(spec.id, promise)
    return promise
  }

  const pauseOrResume = async (id: string, pause: boolean) => {
    const state = stateOf(id)
    const frozen = state.cgroup !== null && freezerState(state.cgroup) === "FROZEN"
    if (state.paused === pause && (state.cgroup === null || frozen === pause)) return
    if (state.cgroup !== null) {
      if (!(await setFrozen(state.cgroup, pause))) throw err("internal", `the sandbox did not ${pause ? "freeze" : "thaw"}`)
    } else {
      // SIGSTOP/SIGCONT of the whole tree, twice over so a process forked meanwhile is caught too.
      const roots = [state.childPid, ...(state.slirpPid !== null && alive(state.slirpPid, state.slirpStart) ? [state.slirpPid] : [])]
      for (let i = 0; i < 2; i++) signalAll(roots.flatMap((pid) => [pid, ...descendants(pid)]), pause ? "SIGSTOP" : "SIGCONT")
    }
    writeState(dataDir, { ...state, paused: pause })
  }

  const busy = (id: string) => pool.includes(id) || startingPool.has(id) || creating.has(id)

  /** Leftovers that are not jails any more: see SweepReport. Never touches a jail with a usable state. */
  const sweep = async (): Promise<SweepReport> => {
    const jails: Array<string> = []
    const onDisk = fs.existsSync(sandboxesDir(dataDir)) ? fs.readdirSync(sandboxesDir(dataDir)) : []
    for (const id of onDisk) {
      if (busy(id) || readState(dataDir, id) !== undefined) continue
      const dir = jailDir(dataDir, id)
      let stat: fs.Stats
      try {
        stat = fs.lstatSync(dir)
      } catch {
        continue
      }
      // A state of an earlier version is no create in progress; a directory without any state may be one.
      const older = fs.existsSync(path.join(dir, "state.json"))
      if (!older && Date.now() - stat.mtimeMs < ORPHAN_GRACE_MS) continue
      await destroyJail(id)
      jails.push(id)
    }
    for (const id of scopeCgroupIds(scope)) {
      if (busy(id) || fs.existsSync(jailDir(dataDir, id))) continue
      await destroyJail(id)
      jails.push(id)
    }
    // An operator may have flushed the ruleset since: sandboxes with internet must not go unfiltered for long.
    if (egressInstalled.get(base) === null && !(await egressFilterPresent(base))) egressInstalled.set(base, installEgressFilter(base))
    const leases = sweepLeases()
    const loops: Array<string> = []
    const prefix = `${sandboxesDir(dataDir)}/`
    let devices: Array<string> = []
    try {
      devices = fs.readdirSync("/sys/block").filter((d) => /^loop\d+$/.test(d))
    } catch {}
    for (const device of devices) {
      let backing = ""
      try {
        backing = fs.readFileSync(`/sys/block/${device}/loop/backing_file`, "utf8").trim()
      } catch {
        continue
      }
      if (!backing.startsWith(prefix)) continue
      const id = backing.slice(prefix.length).split("/")[0]!
      const state = readState(dataDir, id)
      if (busy(id) || (state !== undefined && running(state) && !backing.endsWith(" (deleted)"))) continue
      // Detaches it, or (still in use somewhere) marks it to detach when its last user goes.
      Bun.spawnSync(["losetup", "-d", `/dev/${device}`], { stdio: ["ignore", "ignore", "ignore"] })
      loops.push(device)
    }
    return { jails, leases, loops }
  }

  const reap = async (keep: ReadonlySet<string>) => {
    const onDisk = fs.existsSync(sandboxesDir(dataDir)) ? fs.readdirSync(sandboxesDir(dataDir)) : []
    const ids = new Set([...onDisk, ...scopeCgroupIds(scope)])
    const reaped: Array<string> = []
    for (const id of ids) {
      if (keep.has(id) || busy(id)) continue
      await destroyJail(id)
      reaped.push(id)
    }
    await sweep()
    return reaped
  }

  const runtime: LocalRuntimeHandle = {
    create: (spec) => run(() => create(spec)),
    get: (id) =>
      run(async () => {
        if (typeof id !== "string" || !SAFE_ID.test(id) || isPooled(id)) return Option.none()
        await creating.get(id)?.catch(() => undefined)
        const state = readState(dataDir, id)
        return state === undefined ? Option.none() : Option.some(toSandbox(state))
      }),
    list: run(() =>
      fs.readdirSync(sandboxesDir(dataDir)).filter((id) => !isPooled(id)).flatMap((id) => {
        const state = readState(dataDir, id)
        return state === undefined ? [] : [toSandbox(state)]
      })),
    destroy: (id) =>
      run(async () => {
        if (typeof id !== "string" || !SAFE_ID.test(id) || isPooled(id)) return
        await creating.get(id)?.catch(() => undefined)
        await destroyJail(id)
      }),
    pause: (id) => run(() => pauseOrResume(id, true)),
    resume: (id) => run(() => pauseOrResume(id, false)),
    exec: (id, spec) =>
      run(async () => {
        const state = requireRunning(id)
        if (!Array.isArray(spec.command) || spec.command.length === 0) throw err("invalid", "command must not be empty")
        if (spec.cwd !== undefined) absolutePath(spec.cwd)
        nonNegativeInt("maxOutputBytes", spec.maxOutputBytes)
        if (spec.timeoutMs !== undefined && !(Number.isSafeInteger(spec.timeoutMs) && spec.timeoutMs > 0)) throw err("invalid", "timeoutMs must be a positive integer")
        const body = {
          command: spec.command,
          cwd: spec.cwd,
          env: { ...state.spec.env, ...spec.env },
          timeoutMs: spec.timeoutMs,
          maxOutputBytes: spec.maxOutputBytes,
          tag: spec.tag,
          cgroup: state.mechanism === "cgroup",
          // Where there is no cgroup, each command gets rlimits instead.
          rlimits: state.mechanism === "rlimit" ? { nproc: PIDS_LIMIT, asKb: state.spec.memoryMb * 1024 } : undefined
        }
        return Wire.execInfo(await agentJson(state, "/exec", { method: "POST", body: JSON.stringify(body), contentType: "application/json" }))
      }),
    getExec: (id, execId) => run(async (): Promise<ExecInfo> => Wire.execInfo(await agentJson(requireRunning(id), `/exec/${encodeURIComponent(execId)}`))),
    execEvents: (id, execId, fromSeq, wait) =>
      run(async (): Promise<ReadonlyArray<ExecEvent>> => {
        nonNegativeInt("fromSeq", fromSeq)
        const waitMs = Math.min(60_000, Math.max(0, Math.floor(wait ?? 0)))
        const answer = await agentJson(requireRunning(id), `/exec/${encodeURIComponent(execId)}/events?from=${fromSeq}&wait=${waitMs}`, {
          timeoutMs: waitMs + callTimeoutMs,
          maxBytes: Wire.MAX_EVENTS_ANSWER
        })
        return Wire.execEvents(answer, fromSeq)
      }),
    kill: (id, execId, signal) =>
      run(async () =>
        Wire.acknowledged(await agentJson(requireRunning(id), `/exec/${encodeURIComponent(execId)}/kill?signal=${encodeURIComponent(signal ?? "SIGTERM")}`, { method: "POST" }))),
    sendInput: (id, execId, data, close) =>
      run(async () =>
        Wire.acknowledged(
          await agentJson(requireRunning(id), `/exec/${encodeURIComponent(execId)}/stdin${close ? "?close=1" : ""}`, { method: "POST", body: data.slice(), timeoutMs: TRANSFER_TIMEOUT_MS })
        )),
    readFile: (id, p, offset, limit) =>
      run(async () => {
        const q = `path=${encodeURIComponent(absolutePath(p))}&offset=${nonNegativeInt("offset", offset)}&limit=${nonNegativeInt("limit", limit)}`
        const answer = await agent(requireRunning(id), `/files?${q}`, { timeoutMs: TRANSFER_TIMEOUT_MS, maxBytes: limit + Wire.MAX_READ_SLACK })
        return { ...Wire.readResult(answer, limit), offset }
      }),
    writeFile: (id, p, data, options) =>
      run(async () =>
        Wire.writeResult(
          await agentJson(requireRunning(id), `/files?path=${encodeURIComponent(absolutePath(p))}&mode=${encodeURIComponent(options.mode)}&parents=${options.createParents ? 1 : 0}`, {
            method: "PUT",
            body: data.slice(),
            timeoutMs: TRANSFER_TIMEOUT_MS
          }),
          data.length
        )),
    statFile: (id, p) =>
      run(async () => Option.fromNullable(Wire.statResult(await agentJson(requireRunning(id), `/stat?path=${encodeURIComponent(absolutePath(p))}`)))),
    listFiles: (id, p, options) =>
      run(async () => {
        const max = nonNegativeInt("maxEntries", options.maxEntries)
        const answer = await agentJson(requireRunning(id), `/list?path=${encodeURIComponent(absolutePath(p))}&recursive=${options.recursive ? 1 : 0}&max=${max}`, {
          timeoutMs: TRANSFER_TIMEOUT_MS,
          maxBytes: Wire.maxListAnswer(max)
        })
        return Wire.listResult(answer, max)
      }),
    deleteFile: (id, p, options) =>
      run(async () =>
        Wire.deleteResult(
          await agentJson(requireRunning(id), `/files?path=${encodeURIComponent(absolutePath(p))}&recursive=${options.recursive ? 1 : 0}`, { method: "DELETE", timeoutMs: TRANSFER_TIMEOUT_MS })
        )),
    makeDir: (id, p, options) =>
      run(async () => Wire.acknowledged(await agentJson(requireRunning(id), `/mkdir?path=${encodeURIComponent(absolutePath(p))}&parents=${options.parents ? 1 : 0}`, { method: "POST" }))),
    connectPort: (id, port) =>
      run(async (): Promise<net.Socket> => {
        if (!(Number.isInteger(port) && port >= 1 && port <= 65535)) throw err("invalid", "port must be 1-65535")
        return connectBridge(requireRunning(id), port, 5000, aborter.signal)
      }),
    reap: (keep) => run(() => reap(keep)),
    sweep: run(sweep),
    directJail: (id, spec) => {
      const prepared = prepareJail(id, spec, ["/bin/sh", "-c", 'exec "$@"', "sh"])
      return {
        run: async (argv) => {
          const { launch } = await prepared
          const child = Bun.spawn([...launch, ...argv], { cwd: "/", stdio: ["ignore", "pipe", "inherit"] })
          const out = await new Response(child.stdout).text()
          await child.exited
          return out
        },
        remove: async () => {
          await prepared.catch(() => undefined)
          await destroyJail(id)
        }
      }
    },
    shutdown: Effect.promise(async () => {
      if (closed) return
      closed = true
      aborter.abort()
      await Promise.allSettled([...filling])
      // Warm jails hold nothing of anyone's: they go with the gateway (a crash leaves them for the next start).
      for (const id of pool.splice(0)) await destroyJail(id)
    })
  }

  // Re-attach: warm jails left by a previous gateway process are still good; an internet sandbox whose
  // slirp4netns died gets a new one.
  for (const id of fs.readdirSync(sandboxesDir(dataDir))) {
    const state = readState(dataDir, id)
    if (isPooled(id)) {
      if (state !== undefined && running(state) && pool.length < poolSize) pool.push(id)
      else if (state !== undefined || Date.now() - fs.statSync(jailDir(dataDir, id)).mtimeMs > ORPHAN_GRACE_MS) void destroyJail(id)
    } else if (state !== undefined && state.spec.internet && running(state) && !alive(state.slirpPid ?? 0, state.slirpStart)) {
      void startSlirp(state).catch(() => undefined)
    }
  }
  refill()
  return runtime
}

/**
 * A jail started by an earlier version of this runtime (state.json without `version`, or version 2: its root in
 * the jail directory, every jail as one shared uid): what destroy needs to remove it (its pids, its cgroups, its
 * named network namespace).
 */
const readLegacyState = (dataDir: string, id: string): { pids: Array<number>; cleanup: () => void } | undefined => {
  try {
    const raw = JSON.parse(fs.readFileSync(path.join(jailDir(dataDir, id), "state.json"), "utf8")) as Record<string, unknown>
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

/**
 * RUNTIME_WARM_POOL (default 2) warm jails are kept ready for fast creates; 0 turns it off. RUNTIME_HOST_UID
 * (default 1000000) is the base of the sandboxes' host uid ranges. RUNTIME_ALLOW_PRIVATE_EGRESS=true lets
 * sandboxes with internet reach private ranges. The finalizer does not touch sandboxes (they outlive the
 * gateway); it stops the pool and ends pending agent calls.
 */
export const LocalRuntimeLive = Layer.scoped(
  LocalRuntime,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const warmPool = yield* Config.integer("RUNTIME_WARM_POOL").pipe(Config.withDefault(2), Effect.orDie)
    const hostUid = yield* Config.integer("RUNTIME_HOST_UID").pipe(Config.withDefault(DEFAULT_HOST_UID), Effect.orDie)
    const allowPrivateEgress = yield* Config.boolean("RUNTIME_ALLOW_PRIVATE_EGRESS").pipe(Config.withDefault(false), Effect.orDie)
    const make = Effect.try({
      try: () => makeLocalRuntime(config.dataDir, { warmPool, hostUid, allowPrivateEgress }),
      catch: (e) => new Error(e instanceof HostError ? e.message : `the local runtime could not start: ${(e as Error).message}`)
    }).pipe(Effect.orDie)
    return yield* Effect.acquireRelease(make, (runtime) => runtime.shutdown)
  })
)
