/**
 * The local runtime: bwrap jails with an agent inside each (see Jail.ts and agent/agent.ts).
 *
 * Starting a jail (as root): a wrapper shell joins the sandbox's cgroups, enters a private mount namespace where
 * the sandbox's directory is bound at a fixed, world-traversable staging path (DATA_DIR itself stays 0700), drops
 * to the unprivileged HOST_UID and execs bwrap, which runs the agent. Jails are spawned detached (own session)
 * so they outlive the gateway; everything the runtime needs to find them again is in state.json, so a new
 * runtime over the same DATA_DIR simply carries on ("re-attach"). With internet, slirp4netns is attached to the
 * jail's network namespace (found through bwrap's --info-fd) after the jail started.
 *
 * A few warm jails (RUNTIME_WARM_POOL) make create fast: most of a create is starting bwrap and the bun agent,
 * so a warm jail is handed out by renaming its directory and cgroups to the sandbox id, applying the requested
 * limits and hostname, and (with internet) attaching slirp4netns.
 */
import { Config, Effect, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { AppConfig } from "../Config.ts"
import { agentSource } from "./agent/source.ts"
import {
  agentSocket,
  alive,
  applyLimits,
  bridgeSocket,
  bwrapArgs,
  cgroupPath,
  cgroupPids,
  cgroupProcsFiles,
  cgroupScope,
  cgroupsExist,
  createCgroups,
  DEFAULT_DISK_MB,
  DEFAULT_HOST_UID,
  descendants,
  freezerState,
  jailDir,
  launchCommand,
  STAGE,
  type JailSpec,
  type JailState,
  PIDS_LIMIT,
  prepareRoot,
  procStart,
  readState,
  removeCgroups,
  renameCgroups,
  sandboxesDir,
  scopeCgroupIds,
  setFrozen,
  signalAll,
  writeIdentity,
  writeState
} from "./Jail.ts"
import {
  type ExecEvent,
  type ExecInfo,
  type FileEntry,
  LocalRuntime,
  type LocalRuntimeShape,
  RuntimeError,
  type RuntimeSandbox,
  type RuntimeSandboxSpec
} from "./LocalRuntime.ts"

const AGENT_START_TIMEOUT_MS = 10_000
const DESTROY_TIMEOUT_MS = 5_000
/** Where a jail's directory is bound, inside the private mount namespace of its own wrapper only. */
/** Ids are directory, cgroup and host names: a safe alphabet. */
const SAFE_ID = /^[A-Za-z0-9_-]{1,100}$/
/** Jails started ahead of demand (no internet, default limits) are named like this until handed out. */
const POOL_PREFIX = "pool-"
const isPooled = (id: string) => id.startsWith(POOL_PREFIX)
const POOL_SPEC: JailSpec = { vcpu: 1, memoryMb: 512, diskMb: DEFAULT_DISK_MB, internet: false, env: {}, labels: {} }

const err = (kind: RuntimeError["kind"], message: string) => new RuntimeError({ kind, message })

export interface LocalRuntimeOptions {
  /** Warm jails kept ready (default 0 here; the Layer reads RUNTIME_WARM_POOL). */
  readonly warmPool?: number | undefined
  /** The host uid jails run as when the gateway is root (default 1000000). */
  readonly hostUid?: number | undefined
  /** false: never use cgroups, even where writable (rlimits and SIGSTOP instead). */
  readonly cgroups?: boolean | undefined
}

export interface LocalRuntimeHandle extends LocalRuntimeShape {
  readonly reap: (keepIds: ReadonlySet<string>) => Effect.Effect<ReadonlyArray<string>, RuntimeError>
  readonly shutdown: Effect.Effect<void>
  /**
   * A jail prepared exactly like a sandbox's (root, cgroups, staging, bwrap arguments) but without the agent:
   * each `run` spawns it for one command and returns its stdout. The benchmark's baseline for exec.
   */
  readonly directJail: (id: string, spec: JailSpec) => { readonly run: (command: ReadonlyArray<string>) => Promise<string>; readonly remove: () => Promise<void> }
}

/** Every path component searchable and the file readable by anyone (so bwrap as HOST_UID can bind it). */
const worldReachable = (file: string) => {
  try {
    let current = file
    if ((fs.statSync(current).mode & 0o005) !== 0o005) return false
    while (current !== "/") {
      current = path.dirname(current)
      if ((fs.statSync(current).mode & 0o001) === 0) return false
    }
    return true
  } catch {
    return false
  }
}

const validateSpec = (spec: RuntimeSandboxSpec) => {
  if (typeof spec.id !== "string" || !SAFE_ID.test(spec.id)) throw err("invalid", "sandbox ids are 1-100 letters, digits, _ or -")
  if (isPooled(spec.id)) throw err("invalid", `sandbox ids cannot start with ${POOL_PREFIX}`)
  if (!(Number.isFinite(spec.vcpu) && spec.vcpu > 0 && spec.vcpu <= 1024)) throw err("invalid", "vcpu must be a positive number")
  if (!(Number.isInteger(spec.memoryMb) && spec.memoryMb >= 16 && spec.memoryMb <= 16 * 1024 * 1024)) throw err("invalid", "memoryMb must be an integer of at least 16")
  if (spec.diskMb !== undefined && !(Number.isInteger(spec.diskMb) && spec.diskMb > 0)) throw err("invalid", "diskMb must be a positive integer")
  for (const [k, v] of Object.entries(spec.env ?? {})) {
    if (k === "" || k.includes("=") || k.includes("\0") || typeof v !== "string" || v.includes("\0")) throw err("invalid", `bad environment variable ${k}`)
  }
}

const absolutePath = (p: string) => {
  if (typeof p !== "string" || !p.startsWith("/") || p.includes("\0")) throw err("invalid", "paths must be absolute")
  return p
}

const nonNegativeInt = (name: string, value: number) => {
  if (!Number.isSafeInteger(value) || value < 0) throw err("invalid", `${name} must be a non-negative integer`)
  return value
}

export const makeLocalRuntime = (dataDir: string, options: LocalRuntimeOptions = {}): LocalRuntimeHandle => {
  fs.mkdirSync(sandboxesDir(dataDir), { recursive: true })
  const isRoot = process.getuid?.() === 0
  const hostUid = isRoot ? options.hostUid ?? DEFAULT_HOST_UID : process.getuid?.() ?? 0
  const scope = cgroupScope(dataDir)
  const useCgroups = options.cgroups !== false
  if (isRoot) fs.mkdirSync(STAGE, { recursive: true, mode: 0o755 })
  // Transpiled once here; each jail gets a copy of plain JavaScript (no per-start TypeScript transpile).
  const agentJs = new Bun.Transpiler({ loader: "ts", target: "bun" }).transformSync(agentSource)
  // A `bun build --compile` gateway is itself bun when run with BUN_BE_BUN=1.
  const bunPath = fs.realpathSync(process.execPath)
  const compiled = import.meta.url.includes("$bunfs") || !/^bun(\.exe)?$/.test(path.basename(bunPath))
  const stageBun = isRoot && !worldReachable(bunPath)
  const agentEnv = { ...(compiled ? { BUN_BE_BUN: "1" } : {}), BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0" }

  const creating = new Map<string, Promise<RuntimeSandbox>>()
  const aborter = new AbortController()
  let closed = false

  const toSandbox = (state: JailState): RuntimeSandbox => {
    const running = alive(state.childPid, state.childStart)
    const frozen = state.cgroup !== null && ["FROZEN", "FREEZING"].includes(freezerState(state.cgroup) ?? "")
    return {
      id: state.id,
      state: !running ? "stopped" : state.paused || frozen ? "paused" : "running",
      createdAt: state.createdAt,
      labels: state.spec.labels,
      applied: state.mechanism === "cgroup"
        ? { vcpu: state.spec.vcpu, memoryMb: state.spec.memoryMb, diskMb: state.spec.diskMb, mechanism: "cgroup" }
        // Without a cpu cgroup nothing holds the sandbox to its share: it can use every core of the host.
        : { vcpu: os.cpus().length, memoryMb: state.spec.memoryMb, diskMb: state.spec.diskMb, mechanism: "rlimit" }
    }
  }

  // --- agent calls ---------------------------------------------------------------------------------------------

  const agentFetch = async (id: string, route: string, init: RequestInit = {}): Promise<Response> => {
    if (closed) throw err("unavailable", "the runtime is shut down")
    try {
      return await fetch(`http://agent${route}`, { ...init, signal: aborter.signal, unix: agentSocket(dataDir, id) } as RequestInit)
    } catch (e) {
      throw err("unavailable", `the sandbox agent does not answer: ${(e as Error).message}`)
    }
  }

  const agentJson = async <A>(id: string, route: string, init: RequestInit = {}): Promise<A> => {
    const response = await agentFetch(id, route, init)
    let body: A & { kind?: RuntimeError["kind"]; message?: string }
    try {
      body = (await response.json()) as typeof body
    } catch {
      throw err("unavailable", `the sandbox agent answered ${response.status} without a readable body`)
    }
    if (!response.ok) throw err(body.kind ?? "internal", body.message ?? `agent answered ${response.status}`)
    return body
  }

  const run = <A>(f: () => Promise<A> | A) =>
    Effect.tryPromise({
      try: async () => f(),
      catch: (e) => (e instanceof RuntimeError ? e : err("internal", (e as Error).message ?? String(e)))
    })

  const stateOf = (id: string): JailState => {
    if (typeof id !== "string" || !SAFE_ID.test(id) || isPooled(id)) throw err("not_found", "no such sandbox")
    const state = readState(dataDir, id)
    if (state === undefined || !alive(state.childPid, state.childStart)) throw err("not_found", "no such sandbox")
    return state
  }

  /** The jail is up and not paused (a frozen agent would never answer). */
  const requireRunning = (id: string): JailState => {
    const state = stateOf(id)
    if (state.paused) throw err("conflict", "the sandbox is paused")
    return state
  }

  // --- starting and destroying jails -----------------------------------------------------------------------------

  const logTail = (id: string) => {
    try {
      return fs.readFileSync(path.join(jailDir(dataDir, id), "jail.log"), "utf8").slice(-2000)
    } catch {
      return ""
    }
  }

  const waitForAgent = async (state: JailState) => {
    const deadline = Date.now() + AGENT_START_TIMEOUT_MS
    const socket = agentSocket(dataDir, state.id)
    while (Date.now() < deadline) {
      if (fs.existsSync(socket)) {
        try {
          const response = await fetch("http://agent/health", { unix: socket } as RequestInit)
          if (response.ok) return
        } catch {}
      }
      if (!alive(state.childPid, state.childStart)) break
      await Bun.sleep(1)
    }
    const log = logTail(state.id)
    throw err("internal", `the sandbox agent did not start${log ? `: ${log}` : ""}`)
  }

  /** slirp4netns for the jail's network namespace, in the sandbox's cgroups (paused and killed with it). */
  const startSlirp = async (state: JailState): Promise<JailState> => {
    const join = state.cgroup === null ? "" : cgroupProcsFiles(state.cgroup).map((f) => `echo $$ > '${f}'`).join(" && ") + " && "
    const log = fs.openSync(path.join(jailDir(dataDir, state.id), "jail.log"), "a")
    const slirp = Bun.spawn(
      ["/bin/sh", "-c", `${join}exec slirp4netns --configure --mtu=65520 --disable-host-loopback --enable-sandbox --enable-seccomp --netns-type=path "$0" tap0`, `/proc/${state.childPid}/ns/net`],
      { cwd: "/", stdio: ["ignore", log, log], detached: true }
    )
    slirp.unref()
    fs.closeSync(log)
    const next: JailState = { ...state, slirpPid: slirp.pid, slirpStart: procStart(slirp.pid) }
    writeState(dataDir, next)
    // Ready once its tap device routes (read from the host through the jail's /proc/<pid>/net).
    const deadline = Date.now() + AGENT_START_TIMEOUT_MS
    while (Date.now() < deadline) {
      try {
        if (fs.readFileSync(`/proc/${state.childPid}/net/route`, "utf8").includes("tap0")) return next
      } catch {}
      if (slirp.exitCode !== null) break
      await Bun.sleep(1)
    }
    throw err("internal", `slirp4netns did not come up: ${logTail(state.id)}`)
  }

  /** A jail's directory, root and cgroups, and the host command that starts it running `command` (default: the agent). */
  const prepareJail = (id: string, spec: JailSpec, command?: ReadonlyArray<string>) => {
    const dir = jailDir(dataDir, id)
    fs.mkdirSync(dir, { recursive: true })
    // Traversable (not listable) so bwrap, as HOST_UID, reaches root/ and run/ through the staging bind.
    fs.chmodSync(dir, 0o711)
    const rel = useCgroups ? cgroupPath(scope, id) : null
    const cgroup = rel !== null && createCgroups(rel, hostUid, spec.vcpu, spec.memoryMb) ? rel : null
    prepareRoot(dataDir, id, hostUid, spec.internet, cgroup !== null)
    fs.writeFileSync(path.join(dir, "agent.js"), agentJs, { mode: 0o644 })
    if (stageBun) fs.writeFileSync(path.join(dir, "bun"), "")
    const base = isRoot ? STAGE : dir
    const args = bwrapArgs({
      root: path.join(base, "root"),
      run: path.join(base, "run"),
      agentFile: path.join(base, "agent.js"),
      bunPath: stageBun ? path.join(base, "bun") : bunPath,
      hostname: id,
      cgroup,
      env: agentEnv,
      command
    })
    return { dir, cgroup, command: launchCommand({ dir, cgroup, isRoot, stageBun: stageBun ? bunPath : null, hostUid, args }) }
  }

  const startJail = async (id: string, spec: JailSpec): Promise<JailState> => {
    const { dir, cgroup, command } = prepareJail(id, spec)
    const infoFile = path.join(dir, "info.json")
    const info = fs.openSync(infoFile, "w")
    const log = fs.openSync(path.join(dir, "jail.log"), "w")
    const child = Bun.spawn(command, { cwd: "/", stdio: ["ignore", log, log, info], detached: true })
    child.unref()
    fs.closeSync(info)
    fs.closeSync(log)
    let state: JailState = {
      version: 2,
      id,
      createdAt: new Date().toISOString(),
      spec,
      mechanism: cgroup === null ? "rlimit" : "cgroup",
      cgroup,
      hostUid,
      bwrapPid: child.pid,
      bwrapStart: procStart(child.pid),
      childPid: 0,
      childStart: null,
      slirpPid: null,
      slirpStart: null,
      paused: false
    }
    writeState(dataDir, state)
    const deadline = Date.now() + AGENT_START_TIMEOUT_MS
    let childPid = 0
    while (childPid === 0 && Date.now() < deadline) {
      try {
        childPid = (JSON.parse(fs.readFileSync(infoFile, "utf8")) as { "child-pid": number })["child-pid"]
      } catch {
        if (child.exitCode !== null) break
        await Bun.sleep(1)
      }
    }
    if (childPid === 0) throw err("internal", `the jail did not start: ${logTail(id)}`)
    state = { ...state, childPid, childStart: procStart(childPid) }
    writeState(dataDir, state)
    if (spec.internet) state = await startSlirp(state)
    await waitForAgent(state)
    return state
  }

  /** Kills every process of the jail (cgroup, pid tree, slirp4netns), removes its cgroups and its directory. */
  const destroyJail = async (id: string) => {
    const state = readState(dataDir, id)
    const rel = state?.cgroup ?? (cgroupsExist(cgroupPath(scope, id)) ? cgroupPath(scope, id) : null)
    const legacy = state === undefined ? readLegacyState(dataDir, id) : undefined
    const roots = [
      ...(state ? [[state.bwrapPid, state.bwrapStart], [state.childPid, state.childStart], [state.slirpPid ?? 0, state.slirpStart]] as const : []),
      ...(legacy ? legacy.pids.map((pid) => [pid, null] as const) : [])
    ].filter(([pid, start]) => alive(pid, start)).map(([pid]) => pid)
    if (rel !== null) await setFrozen(rel, false).catch(() => false)
    const deadline = Date.now() + DESTROY_TIMEOUT_MS
    for (;;) {
      const pids = [...(rel === null ? [] : cgroupPids(rel)), ...roots.flatMap((pid) => [pid, ...descendants(pid)])].filter((pid) => pid > 0 && alive(pid))
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
    fs.rmSync(jailDir(dataDir, id), { recursive: true, force: true })
  }

  // --- warm pool -----------------------------------------------------------------------------------------------

  const poolSize = Math.max(0, options.warmPool ?? 0)
  const pool: Array<string> = []
  const filling = new Set<Promise<void>>()
  const startingPool = new Set<string>()
  // Deferred: starting a jail does synchronous work (its root, cgroups, the spawn) that must not delay the
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
  const adopt = async (spec: RuntimeSandboxSpec, jailSpec: JailSpec): Promise<RuntimeSandbox | undefined> => {
    while (pool.length > 0) {
      const from = pool.shift()!
      const warm = readState(dataDir, from)
      if (warm === undefined || !alive(warm.childPid, warm.childStart)) {
        await destroyJail(from)
        continue
      }
      let state: JailState = { ...warm, id: spec.id, createdAt: new Date().toISOString(), spec: jailSpec, cgroup: warm.cgroup === null ? null : cgroupPath(scope, spec.id) }
      try {
        fs.renameSync(jailDir(dataDir, from), jailDir(dataDir, spec.id))
        if (warm.cgroup !== null && state.cgroup !== null) {
          renameCgroups(warm.cgroup, state.cgroup)
          applyLimits(state.cgroup, jailSpec.vcpu, jailSpec.memoryMb)
        }
        writeIdentity(dataDir, spec.id, jailSpec.internet)
        const hostname = Bun.spawnSync(["nsenter", `--uts=/proc/${warm.childPid}/ns/uts`, "hostname", spec.id.slice(0, 63)], { stdio: ["ignore", "ignore", "pipe"] })
        if (hostname.exitCode !== 0) throw new Error(`hostname: ${hostname.stderr.toString()}`)
        writeState(dataDir, state)
        if (jailSpec.internet) state = await startSlirp(state)
      } catch {
        await destroyJail(spec.id)
        await destroyJail(from)
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
    if (existing !== undefined && alive(existing.childPid, existing.childStart)) return toSandbox(existing)
    const jailSpec: JailSpec = {
      vcpu: spec.vcpu,
      memoryMb: spec.memoryMb,
      diskMb: spec.diskMb ?? DEFAULT_DISK_MB,
      internet: spec.internet,
      env: { ...spec.env },
      labels: { ...spec.labels }
    }
    const promise = (async () => {
      // A dead leftover under this id (its host rebooted, or its jail was killed): start afresh.
      if (fs.existsSync(jailDir(dataDir, spec.id)) || cgroupsExist(cgroupPath(scope, spec.id))) await destroyJail(spec.id)
      const warm = await adopt(spec, jailSpec)
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

  const reap = async (keep: ReadonlySet<string>) => {
    const onDisk = fs.existsSync(sandboxesDir(dataDir)) ? fs.readdirSync(sandboxesDir(dataDir)) : []
    const ids = new Set([...onDisk, ...scopeCgroupIds(scope)])
    const reaped: Array<string> = []
    for (const id of ids) {
      if (keep.has(id) || pool.includes(id) || startingPool.has(id) || creating.has(id)) continue
      await destroyJail(id)
      reaped.push(id)
    }
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
        return agentJson<ExecInfo>(id, "/exec", { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } })
      }),
    getExec: (id, execId) => run(() => agentJson<ExecInfo>(requireRunning(id).id, `/exec/${encodeURIComponent(execId)}`)),
    execEvents: (id, execId, fromSeq, wait) =>
      run(async () => {
        nonNegativeInt("fromSeq", fromSeq)
        const waitMs = Math.max(0, Math.floor(wait ?? 0))
        const body = await agentJson<{ events: Array<Record<string, unknown>> }>(
          requireRunning(id).id,
          `/exec/${encodeURIComponent(execId)}/events?from=${fromSeq}&wait=${waitMs}`
        )
        return body.events.map((e): ExecEvent =>
          e["type"] === "exit"
            ? (e as unknown as ExecEvent)
            : { seq: e["seq"] as number, type: e["type"] as "stdout" | "stderr", data: Buffer.from(e["data"] as string, "base64") }
        )
      }),
    kill: (id, execId, signal) =>
      run(async () => void (await agentJson(requireRunning(id).id, `/exec/${encodeURIComponent(execId)}/kill?signal=${encodeURIComponent(signal ?? "SIGTERM")}`, { method: "POST" }))),
    sendInput: (id, execId, data, close) =>
      run(async () =>
        void (await agentJson(requireRunning(id).id, `/exec/${encodeURIComponent(execId)}/stdin${close ? "?close=1" : ""}`, { method: "POST", body: data.slice() }))),
    readFile: (id, p, offset, limit) =>
      run(async () => {
        const q = `path=${encodeURIComponent(absolutePath(p))}&offset=${nonNegativeInt("offset", offset)}&limit=${nonNegativeInt("limit", limit)}`
        const response = await agentFetch(requireRunning(id).id, `/files?${q}`)
        if (!response.ok) {
          const body = (await response.json().catch(() => ({}))) as { kind?: RuntimeError["kind"]; message?: string }
          throw err(body.kind ?? "internal", body.message ?? `agent answered ${response.status}`)
        }
        return {
          data: new Uint8Array(await response.arrayBuffer()),
          offset,
          size: Number(response.headers.get("x-size")),
          eof: response.headers.get("x-eof") === "true"
        }
      }),
    writeFile: (id, p, data, options) =>
      run(() =>
        agentJson<{ bytesWritten: number; created: boolean }>(
          requireRunning(id).id,
          `/files?path=${encodeURIComponent(absolutePath(p))}&mode=${encodeURIComponent(options.mode)}&parents=${options.createParents ? 1 : 0}`,
          { method: "PUT", body: data.slice() }
        )),
    statFile: (id, p) =>
      run(async () => {
        const body = await agentJson<{ entry: FileEntry | null }>(requireRunning(id).id, `/stat?path=${encodeURIComponent(absolutePath(p))}`)
        return Option.fromNullable(body.entry)
      }),
    listFiles: (id, p, options) =>
      run(() =>
        agentJson<{ entries: Array<FileEntry>; truncated: boolean }>(
          requireRunning(id).id,
          `/list?path=${encodeURIComponent(absolutePath(p))}&recursive=${options.recursive ? 1 : 0}&max=${nonNegativeInt("maxEntries", options.maxEntries)}`
        )),
    deleteFile: (id, p, options) =>
      run(async () =>
        (await agentJson<{ deleted: boolean }>(requireRunning(id).id, `/files?path=${encodeURIComponent(absolutePath(p))}&recursive=${options.recursive ? 1 : 0}`, { method: "DELETE" }))
          .deleted),
    makeDir: (id, p, options) =>
      run(async () => void (await agentJson(requireRunning(id).id, `/mkdir?path=${encodeURIComponent(absolutePath(p))}&parents=${options.parents ? 1 : 0}`, { method: "POST" }))),
    connectPort: (id, port) =>
      run(async () => {
        if (!(Number.isInteger(port) && port >= 1 && port <= 65535)) throw err("invalid", "port must be 1-65535")
        requireRunning(id)
        // An agent that is restarting (see agent.ts) opens its bridge again within moments.
        const deadline = Date.now() + 2000
        while (!fs.existsSync(bridgeSocket(dataDir, id)) && Date.now() < deadline) await Bun.sleep(2)
        return new Promise<net.Socket>((resolve, reject) => {
          const socket = net.connect(bridgeSocket(dataDir, id))
          let head = Buffer.alloc(0)
          const fail = (message: string) => {
            socket.destroy()
            reject(err("unavailable", message))
          }
          const onData = (chunk: Buffer) => {
            head = Buffer.concat([head, chunk])
            const newline = head.indexOf(10)
            if (newline < 0) return
            socket.off("data", onData)
            socket.pause()
            if (head.subarray(0, newline).toString() !== "OK") return fail(`nothing listens on port ${port} in the sandbox`)
            const rest = head.subarray(newline + 1)
            if (rest.length > 0) socket.unshift(rest)
            socket.removeAllListeners("error")
            socket.removeAllListeners("close")
            resolve(socket)
          }
          socket.on("data", onData)
          socket.once("error", (e) => fail(e.message))
          socket.once("close", () => fail(`nothing listens on port ${port} in the sandbox`))
          socket.write(`PORT ${port}\n`)
        })
      }),
    reap: (keep) => run(() => reap(keep)),
    directJail: (id, spec) => {
      const { dir, command } = prepareJail(id, spec, ["/bin/sh", "-c", 'exec "$@"', "sh"])
      return {
        run: async (argv) => {
          const info = fs.openSync(path.join(dir, "info.json"), "w")
          const child = Bun.spawn([...command, ...argv], { cwd: "/", stdio: ["ignore", "pipe", "inherit", info] })
          fs.closeSync(info)
          const out = await new Response(child.stdout).text()
          await child.exited
          return out
        },
        remove: () => destroyJail(id)
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
  if (fs.existsSync(sandboxesDir(dataDir))) {
    for (const id of fs.readdirSync(sandboxesDir(dataDir))) {
      const state = readState(dataDir, id)
      if (isPooled(id)) {
        if (state !== undefined && alive(state.childPid, state.childStart) && pool.length < poolSize) pool.push(id)
        else void destroyJail(id)
      } else if (state !== undefined && state.spec.internet && alive(state.childPid, state.childStart) && !alive(state.slirpPid ?? 0, state.slirpStart)) {
        void startSlirp(state).catch(() => undefined)
      }
    }
  }
  refill()
  return runtime
}

/**
 * A jail started by the first version of this runtime (state.json without `version`): what destroy needs to
 * remove it (its pids, its cgroups directly under sandbox-gateway/, its named network namespace).
 */
const readLegacyState = (dataDir: string, id: string): { pids: Array<number>; cleanup: () => void } | undefined => {
  try {
    const raw = JSON.parse(fs.readFileSync(path.join(jailDir(dataDir, id), "state.json"), "utf8")) as Record<string, unknown>
    if (raw["version"] !== undefined) return undefined
    const pids = [raw["bwrapPid"], raw["childPid"], raw["slirpPid"]].filter((p): p is number => typeof p === "number" && p > 0)
    const legacyCgroup = path.join("sandbox-gateway", id)
    return {
      pids: [...pids, ...cgroupPids(legacyCgroup)],
      cleanup: () => {
        removeCgroups(legacyCgroup)
        if ((raw["spec"] as { internet?: boolean } | undefined)?.internet) Bun.spawnSync(["ip", "netns", "del", `sgw-${id}`], { stdio: ["ignore", "ignore", "ignore"] })
      }
    }
  } catch {
    return undefined
  }
}

/**
 * RUNTIME_WARM_POOL (default 2) warm jails are kept ready for fast creates; 0 turns it off. RUNTIME_HOST_UID
 * (default 1000000) is the unprivileged host uid the jails run as. The finalizer does not touch sandboxes
 * (they outlive the gateway); it stops the pool and ends pending agent calls.
 */
export const LocalRuntimeLive = Layer.scoped(
  LocalRuntime,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const warmPool = yield* Config.integer("RUNTIME_WARM_POOL").pipe(Config.withDefault(2), Effect.orDie)
    const hostUid = yield* Config.integer("RUNTIME_HOST_UID").pipe(Config.withDefault(DEFAULT_HOST_UID), Effect.orDie)
    return yield* Effect.acquireRelease(Effect.sync(() => makeLocalRuntime(config.dataDir, { warmPool, hostUid })), (runtime) => runtime.shutdown)
  })
)
