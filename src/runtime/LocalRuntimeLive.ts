/**
 * The local runtime: bwrap jails with an agent inside each (Jail.ts, AgentChannel.ts, agent/), assembled here from
 * its parts — the host prepared (RuntimeSetup.ts), starting and destroying jails (JailLifecycle.ts), warm jails
 * (WarmPool.ts), clean-up of leftovers (Sweep.ts) and the calls to a jail's agent (AgentCalls.ts) — with the
 * runtime's operations on sandboxes, whose ids and specs are checked first (SpecValidation.ts). Root only (Host.ts):
 * it mounts each sandbox's disk, runs each sandbox as its own host uid and installs the egress filter. Jails outlive
 * the gateway: a new runtime over the same DATA_DIR simply carries on ("re-attach").
 */
import { Config, Effect, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { AppConfig, dnsServersConfig } from "../Config.ts"
import { makeResolver } from "../net/Targets.ts"
import { CALL_TIMEOUT_MS, makeAgentCalls } from "./AgentCalls.ts"
import { makeDesktopCalls } from "./DesktopCalls.ts"
import { cgroupPath, cgroupsExist, freezerState, setFrozen } from "./Cgroups.ts"
import { DEFAULT_DISK_MB } from "./Disk.ts"
import { HostError } from "./Host.ts"
import { alive, DEFAULT_HOST_UID, descendants, jailDir, type JailSpec, type JailState, readState, sandboxesDir, signalAll, writeState } from "./Jail.ts"
import { aboveLimits, hostLimits } from "./HostLimits.ts"
import { makeJailLifecycle } from "./JailLifecycle.ts"
import { jailMetrics } from "./Metrics.ts"
import { type ImagePullProgress, LocalRuntime, type LocalRuntimeShape, RuntimeError, runtimeError as err, type RuntimeSandbox, type RuntimeSandboxSpec } from "./LocalRuntime.ts"
import { makeRuntimeContext, type RuntimeHostOptions } from "./RuntimeSetup.ts"
import { SAFE_ID, validateSpec } from "./SpecValidation.ts"
import { makeSweep, ORPHAN_GRACE_MS, type SweepReport } from "./Sweep.ts"
import { isPooled, makeWarmPool, POOL_SHRINK_MS } from "./WarmPool.ts"
import { ImagePullError } from "./oci/Errors.ts"
import { DEFAULT_IMAGE_LIMITS, type ImageLimits, makeImageCache } from "./oci/ImageCache.ts"
import type { ImageUser } from "./oci/ImageUser.ts"
import { hostPlatform, parsePlatform, platformMatches, platformString } from "./oci/Reference.ts"

export type { SweepReport } from "./Sweep.ts"
export { POOL_DISK_MB } from "./WarmPool.ts"

/** The host's part of them (uid base, cgroups, egress, DNS upstreams) is RuntimeSetup.ts' RuntimeHostOptions. */
export interface LocalRuntimeOptions extends RuntimeHostOptions {
  /** Warm jails kept ready (default 0 here; the Layer reads RUNTIME_WARM_POOL). */
  readonly warmPool?: number | undefined
  /** What the pool may grow to with demand (default: warmPool itself; the Layer reads RUNTIME_WARM_POOL_MAX). */
  readonly warmPoolMax?: number | undefined
  /** How long a grown pool goes without a create finding it empty before it shrinks by one (tests shorten it). */
  readonly warmPoolShrinkMs?: number | undefined
  /** Time limit of an agent call with a small answer, and the margin beyond a long poll's wait (default 15 s). */
  readonly agentTimeoutMs?: number | undefined
  /** A Docker-style registry auth file (REGISTRY_AUTH_FILE). */
  readonly registryAuthFile?: string | undefined
  /** Largest image, compressed and unpacked, in MiB (IMAGE_MAX_MB, default 4096). */
  readonly imageMaxMb?: number | undefined
  /** Size of the layer cache the LRU sweep keeps, in MiB (IMAGE_CACHE_MB, default 20480). */
  readonly imageCacheMb?: number | undefined
  /** Entry and path limits of images and of the cache (IMAGE_MAX_FILES …; oci/ImageCache.ts DEFAULT_IMAGE_LIMITS). */
  readonly imageLimits?: Partial<Omit<ImageLimits, "maxImageBytes" | "maxCacheBytes">> | undefined
  /** Registries may be on loopback, private and link-local addresses (REGISTRY_ALLOW_PRIVATE; default false). */
  readonly registryAllowPrivate?: boolean | undefined
  /** Registries (`host` or `host:port`) that may be on such addresses without it (REGISTRY_PRIVATE_HOSTS). */
  readonly registryPrivateHosts?: ReadonlyArray<string> | undefined
  /** DNS servers for registry host names (REGISTRY_DNS_SERVERS; default the system resolver). */
  readonly registryDnsServers?: ReadonlyArray<string> | undefined
  /** Internet for a sandbox whose creator leaves it unsaid (RUNTIME_DEFAULT_INTERNET; default true). */
  readonly defaultInternet?: boolean | undefined
}

/** The tag of the execution that runs an image sandbox's command (RuntimeImageSpec.command). */
export const IMAGE_COMMAND_TAG = "image-command"

/** What an image's User sets in every process's environment: HOME and USER from its /etc/passwd entry, when it has one. */
const userEnv = (user: ImageUser | undefined): Record<string, string> =>
  user?.name === undefined ? {} : { ...(user.home === undefined ? {} : { HOME: user.home }), USER: user.name }

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

export const makeLocalRuntime = (dataDir: string, options: LocalRuntimeOptions = {}): LocalRuntimeHandle => {
  const ctx = makeRuntimeContext(dataDir, options)
  const { aborter, scope } = ctx
  let closed = false
  const jails = makeJailLifecycle(ctx)
  const images = makeImageCache({
    dataDir,
    authFile: options.registryAuthFile,
    policy: {
      allowPrivate: options.registryAllowPrivate ?? false,
      privateHosts: options.registryPrivateHosts,
      purpose: "image pulls",
      setting: "REGISTRY_ALLOW_PRIVATE",
      resolver: makeResolver(options.registryDnsServers ?? [])
    },
    limits: {
      ...DEFAULT_IMAGE_LIMITS,
      ...options.imageLimits,
      ...(options.imageMaxMb !== undefined ? { maxImageBytes: options.imageMaxMb * 1024 * 1024 } : {}),
      ...(options.imageCacheMb !== undefined ? { maxCacheBytes: options.imageCacheMb * 1024 * 1024 } : {})
    },
    // Every jail that still exists (running or not) keeps its layers: they are its root.
    inUse: () => new Set(fs.readdirSync(sandboxesDir(dataDir)).flatMap((id) => readState(dataDir, id)?.spec.image?.layers ?? []))
  })

  /** Pulls the sandbox's image (or finds it cached): what the jail runs on, or `image_pull_failed` saying why. */
  const pullImage = async (image: Pick<NonNullable<RuntimeSandboxSpec["image"]>, "reference" | "platform">, onProgress?: (progress: ImagePullProgress) => void) => {
    if (ctx.currentTools().rt === null) throw err("unavailable", "sandboxes on OCI images are not available on this host", "the host's dynamic loader or libraries (ldd) were not found")
    const host = hostPlatform()
    const wanted = image.platform === undefined ? host : parsePlatform(image.platform)!
    const named = image.reference.slice(0, 200)
    if (!platformMatches(host, wanted)) {
      throw err("image_pull_failed", `image ${named}: wrong platform: ${platformString(wanted)} images cannot run on this ${platformString(host)} host`)
    }
    try {
      return await images.pull(image.reference, wanted, onProgress)
    } catch (e) {
      if (e instanceof ImagePullError) throw err("image_pull_failed", e.message, e.detail ?? e.reason)
      throw err("image_pull_failed", `image ${named}: the pull failed`, e instanceof Error ? e.message : String(e))
    }
  }
  const pool = makeWarmPool(ctx, jails, {
    size: options.warmPool ?? 0,
    max: options.warmPoolMax ?? options.warmPool ?? 0,
    shrinkMs: options.warmPoolShrinkMs ?? POOL_SHRINK_MS,
    network: options.defaultInternet ?? true
  }, () => closed)
  const creating = new Map<string, Promise<RuntimeSandbox>>()
  const busy = (id: string) => pool.holds(id) || creating.has(id)
  const { reap, sweep } = makeSweep(ctx, jails, busy)

  /** Every failure is a RuntimeError in the user's terms; what only an operator needs goes to the log. */
  const toRuntimeError = (e: unknown): RuntimeError => {
    if (e instanceof RuntimeError) return e
    if (e instanceof HostError) return err("internal", "the local runtime is not set up on this host", e.message)
    return err("internal", "the local runtime failed unexpectedly", e instanceof Error ? `${e.name}: ${e.message}` : String(e))
  }
  /** `f` gets the signal that aborts when the call is interrupted: work it passes it to (an agent call) stops then. */
  const run = <A>(f: (signal: AbortSignal) => Promise<A> | A) =>
    Effect.tryPromise({ try: async (signal) => f(signal), catch: toRuntimeError }).pipe(
      Effect.tapError((e) => (e.detail === undefined ? Effect.void : Effect.logWarning("local runtime", { message: e.message, detail: e.detail })))
    )

  const stateOf = (id: string): JailState => {
    if (typeof id !== "string" || !SAFE_ID.test(id) || isPooled(id)) throw err("not_found", "no such sandbox")
    const state = readState(dataDir, id)
    if (state === undefined || !jails.running(state)) throw err("not_found", "no such sandbox")
    return state
  }

  /** The jail is up and not paused (a frozen agent would never answer). */
  const requireRunning = (id: string): JailState => {
    const state = stateOf(id)
    if (state.paused) throw err("conflict", "the sandbox is paused")
    return state
  }

  const callOptions = { requireRunning, run, callTimeoutMs: options.agentTimeoutMs ?? CALL_TIMEOUT_MS, aborter, isClosed: () => closed }
  const calls = makeAgentCalls(callOptions)
  const desktopCalls = makeDesktopCalls(callOptions)

  const create = async (spec: RuntimeSandboxSpec): Promise<RuntimeSandbox> => {
    validateSpec(spec)
    if (closed) throw err("unavailable", "the runtime is shut down")
    const pending = creating.get(spec.id)
    if (pending !== undefined) return pending
    const existing = readState(dataDir, spec.id)
    if (existing !== undefined && jails.running(existing)) return jails.toSandbox(existing)
    // Never less than asked: a sandbox above what this host has is refused, not clamped.
    const above = aboveLimits(spec, hostLimits(dataDir))
    if (above !== null) throw err("invalid", above)
    const promise = (async () => {
      // Before an image is pulled (slow, and for nothing without the filter); every other create is checked where
      // its network starts (JailNetwork.ts startSlirp).
      if (spec.internet && spec.image !== undefined) await jails.requireEgressFilter()
      const pulled = spec.image === undefined ? undefined : await pullImage(spec.image)
      const jailSpec: JailSpec = {
        vcpu: spec.vcpu,
        memoryMb: spec.memoryMb,
        diskMb: spec.diskMb ?? DEFAULT_DISK_MB,
        internet: spec.internet,
        // Without internet there is no network to filter.
        ...(spec.internet && spec.domains !== undefined ? { domains: { mode: spec.domains.mode, domains: [...spec.domains.domains] } } : {}),
        // The User's home and name first (as Docker sets HOME), then the image's Env: the request's own variables win.
        env: { ...userEnv(pulled?.user), ...pulled?.env, ...spec.env },
        labels: { ...spec.labels },
        ...(pulled !== undefined
          ? {
            image: {
              reference: pulled.reference,
              digest: pulled.digest,
              platform: pulled.platform,
              layers: pulled.layers,
              // As Docker: an image without a WorkingDir works in /.
              workingDir: pulled.workingDir ?? "/",
              uid: pulled.user.uid,
              gid: pulled.user.gid
            }
          }
          : {})
      }
      // A dead leftover under this id (its host rebooted, or its jail was killed): start afresh.
      if (fs.existsSync(jailDir(dataDir, spec.id)) || cgroupsExist(cgroupPath(scope, spec.id))) await jails.destroyJail(spec.id)
      // Warm jails run on the host's system: never for an image.
      const warm = pulled === undefined ? await pool.handOut(spec, jailSpec) : undefined
      if (warm !== undefined) return warm
      let started: RuntimeSandbox
      try {
        started = jails.toSandbox(await jails.startJail(spec.id, jailSpec))
      } catch (e) {
        await jails.destroyJail(spec.id)
        throw e
      }
      if (pulled !== undefined && spec.image?.idle !== true) {
        // As `docker run` starts the image: its Entrypoint with these arguments or else its Cmd, in its WorkingDir,
        // as its User, with its Env. Once: the sandbox outlives it.
        const args = spec.image?.command !== undefined && spec.image.command.length > 0 ? spec.image.command : pulled.cmd
        const command = [...pulled.entrypoint, ...args]
        if (command.length > 0) {
          await Effect.runPromise(calls.exec(spec.id, { command, maxOutputBytes: 1024 * 1024, tag: IMAGE_COMMAND_TAG, stdin: false })).catch(async (e: unknown) => {
            await jails.destroyJail(spec.id)
            throw e
          })
        }
      }
      return started
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

  const runtime: LocalRuntimeHandle = {
    defaultInternet: options.defaultInternet ?? true,
    limits: () => hostLimits(dataDir),
    create: (spec) => run(() => create(spec)),
    get: (id) =>
      run(async () => {
        if (typeof id !== "string" || !SAFE_ID.test(id) || isPooled(id)) return Option.none()
        await creating.get(id)?.catch(() => undefined)
        const state = readState(dataDir, id)
        return state === undefined ? Option.none() : Option.some(jails.toSandbox(state))
      }),
    list: run(() =>
      fs.readdirSync(sandboxesDir(dataDir)).filter((id) => !isPooled(id)).flatMap((id) => {
        const state = readState(dataDir, id)
        return state === undefined ? [] : [jails.toSandbox(state)]
      })),
    destroy: (id) =>
      run(async () => {
        if (typeof id !== "string" || !SAFE_ID.test(id) || isPooled(id)) return
        await creating.get(id)?.catch(() => undefined)
        await jails.destroyJail(id)
      }),
    pause: (id) => run(() => pauseOrResume(id, true)),
    resume: (id) => run(() => pauseOrResume(id, false)),
    metrics: (id) => run(() => jailMetrics(stateOf(id))),
    pullImage: (reference, platform, onProgress) =>
      run(async () => {
        if (typeof reference !== "string" || reference === "" || reference.length > 1024) throw err("invalid", "an image reference is 1-1024 characters")
        if (platform !== undefined && parsePlatform(platform) === undefined) throw err("invalid", "a platform is os/arch[/variant]")
        return { digest: (await pullImage({ reference, platform }, onProgress)).digest }
      }),
    ...calls,
    ...desktopCalls,
    reap: (keep) => run(() => reap(keep)),
    sweep: run(sweep),
    directJail: (id, spec) => {
      const prepared = jails.prepareJail(id, spec, ["/bin/sh", "-c", 'exec "$@"', "sh"])
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
          await jails.destroyJail(id)
        }
      }
    },
    shutdown: Effect.promise(async () => {
      if (closed) return
      closed = true
      aborter.abort()
      await pool.drain()
    })
  }

  // Re-attach: warm jails left by a previous gateway process are still good; an internet sandbox whose
  // slirp4netns died gets a new one.
  for (const id of fs.readdirSync(sandboxesDir(dataDir))) {
    const state = readState(dataDir, id)
    if (isPooled(id)) pool.reattach(id, state, ORPHAN_GRACE_MS)
    else if (state !== undefined && state.spec.internet && jails.running(state) && !alive(state.slirpPid ?? 0, state.slirpStart)) {
      void jails.startSlirp(state).catch(() => undefined)
    } else if (state !== undefined) void jails.ensurePolicy(state).catch(() => undefined)
  }
  pool.refill()
  return runtime
}

/**
 * REGISTRY_AUTH_FILE names a Docker-style auth file with credentials for private registries; REGISTRY_ALLOW_PRIVATE
 * (default false) lets registry requests reach loopback, private and link-local addresses, REGISTRY_PRIVATE_HOSTS
 * only the registries it names; REGISTRY_DNS_SERVERS resolves registry names. IMAGE_MAX_MB (default 4096) and
 * IMAGE_MAX_FILES cap an image, IMAGE_LAYER_MAX_FILES a layer, IMAGE_MAX_PATH_DEPTH and IMAGE_MAX_PATH_BYTES its
 * paths, IMAGE_CACHE_MB (default 20480) and IMAGE_CACHE_MAX_FILES the layer cache.
 * RUNTIME_WARM_POOL (default 2) warm jails are kept ready for fast creates; 0 turns it off. The pool grows with
 * demand up to RUNTIME_WARM_POOL_MAX (default 8; never below RUNTIME_WARM_POOL) and shrinks back. RUNTIME_HOST_UID
 * (default 1000000) is the base of the sandboxes' host uid ranges. RUNTIME_ALLOW_PRIVATE_EGRESS=true lets
 * sandboxes with internet reach private ranges. The finalizer does not touch sandboxes (they outlive the
 * gateway); it stops the pool and ends pending agent calls. RUNTIME_DNS_UPSTREAM (comma-separated `ip[:port]`)
 * names the resolvers that sandboxes with a domain policy reach through their forwarder (default: the host's).
 * RUNTIME_DEFAULT_INTERNET (default true, as every provider's own default) is whether a sandbox reaches the
 * internet when its request leaves it unsaid.
 */
export const LocalRuntimeLive = Layer.scoped(
  LocalRuntime,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const warmPool = yield* Config.integer("RUNTIME_WARM_POOL").pipe(Config.withDefault(2), Effect.orDie)
    const warmPoolMax = yield* Config.integer("RUNTIME_WARM_POOL_MAX").pipe(Config.withDefault(8), Effect.orDie)
    const hostUid = yield* Config.integer("RUNTIME_HOST_UID").pipe(Config.withDefault(DEFAULT_HOST_UID), Effect.orDie)
    const allowPrivateEgress = yield* Config.boolean("RUNTIME_ALLOW_PRIVATE_EGRESS").pipe(Config.withDefault(false), Effect.orDie)
    const registryAuthFile = yield* Config.string("REGISTRY_AUTH_FILE").pipe(Config.option, Effect.orDie)
    const imageMaxMb = yield* Config.integer("IMAGE_MAX_MB").pipe(Config.withDefault(4096), Effect.orDie)
    const imageCacheMb = yield* Config.integer("IMAGE_CACHE_MB").pipe(Config.withDefault(20_480), Effect.orDie)
    const positive = (name: string, fallback: number) =>
      Config.integer(name).pipe(Config.withDefault(fallback), Config.validate({ message: `${name} must be a positive integer`, validation: (n) => n > 0 }), Effect.orDie)
    const imageLimits = {
      maxImageFiles: yield* positive("IMAGE_MAX_FILES", DEFAULT_IMAGE_LIMITS.maxImageFiles),
      maxLayerFiles: yield* positive("IMAGE_LAYER_MAX_FILES", DEFAULT_IMAGE_LIMITS.maxLayerFiles),
      maxPathDepth: yield* positive("IMAGE_MAX_PATH_DEPTH", DEFAULT_IMAGE_LIMITS.maxPathDepth),
      maxPathBytes: yield* positive("IMAGE_MAX_PATH_BYTES", DEFAULT_IMAGE_LIMITS.maxPathBytes),
      maxCacheFiles: yield* positive("IMAGE_CACHE_MAX_FILES", DEFAULT_IMAGE_LIMITS.maxCacheFiles)
    }
    const registryAllowPrivate = yield* Config.boolean("REGISTRY_ALLOW_PRIVATE").pipe(Config.withDefault(false), Effect.orDie)
    const registryPrivateHosts = yield* Config.string("REGISTRY_PRIVATE_HOSTS").pipe(
      Config.withDefault(""),
      Config.map((text) => text.split(",").map((h) => h.trim()).filter((h) => h !== "")),
      Config.validate({
        message: "REGISTRY_PRIVATE_HOSTS must list registry hosts (`name`, `name:port`, `ip:port` or `[ipv6]:port`), comma-separated",
        validation: (hosts) => hosts.every((h) => /^(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?$/.test(h))
      }),
      Effect.orDie
    )
    const registryDnsServers = yield* dnsServersConfig("REGISTRY_DNS_SERVERS").pipe(Effect.orDie)
    const dnsUpstream = yield* Config.string("RUNTIME_DNS_UPSTREAM").pipe(Config.option, Effect.orDie)
    const defaultInternet = yield* Config.boolean("RUNTIME_DEFAULT_INTERNET").pipe(Config.withDefault(true), Effect.orDie)
    const make = Effect.try({
      try: () =>
        makeLocalRuntime(config.dataDir, {
          warmPool,
          warmPoolMax,
          hostUid,
          allowPrivateEgress,
          registryAuthFile: Option.getOrUndefined(registryAuthFile),
          imageMaxMb,
          imageCacheMb,
          imageLimits,
          registryAllowPrivate,
          registryPrivateHosts,
          registryDnsServers,
          defaultInternet,
          dnsUpstreams: Option.getOrUndefined(Option.map(dnsUpstream, (text) => text.split(",").map((t) => t.trim()).filter((t) => t !== "")))
        }),
      catch: (e) => new Error(e instanceof HostError ? e.message : `the local runtime could not start: ${(e as Error).message}`)
    }).pipe(Effect.orDie)
    return yield* Effect.acquireRelease(make, (runtime) => runtime.shutdown)
  })
)
