/**
 * The Modal emulator: an in-process fake of `ModalApi` (the SDK calls the adapter makes) over the local runtime,
 * one Modal sandbox = one runtime sandbox.
 *
 * Why not a gRPC server the real SDK talks to, as planned: Bun's node:http2 server does carry a unary gRPC call
 * from the SDK (tried: `AuthTokenGet` arrives and its trailers are read), but `modal` 0.11.1 makes that emulator
 * impractical here: (1) it ships its protobuf definitions only as code inside dist/index.js and exports none of
 * them (no .proto files either), so a server could not decode with the SDK's own definitions without copying or
 * patching the SDK; (2) its server URL comes only from MODAL_SERVER_URL / ~/.modal.toml, read from the process
 * environment at construction (the `endpoint` option is ignored); (3) every exec and every filesystem call goes
 * to a second gRPC service (the task command router, at a URL from SandboxCreateV2, with a JWT), and files are a
 * JSON protocol of a helper binary run by exec. So the adapter's code path is kept identical through `ModalApi`,
 * which the real SDK implements (adapter/sdk.ts) and this fake implements.
 *
 * What it keeps like Modal: apps by name (created on first use), sandbox names unique among an app's running
 * sandboxes (AlreadyExists otherwise), tags, the sandbox timeout (it is terminated then), `poll` (null while it
 * runs), terminate, resource usage metered as Modal meters it (CPU core-nanoseconds from the jail's cgroup,
 * reserved memory × time in GiB-nanoseconds), kept after the end; the token id and secret are checked on every call
 * (unauthenticated otherwise). Its books survive a restart (DATA_DIR/emulators/modal).
 *
 * What it does not reproduce: images — it never pulls one; every sandbox runs on the local runtime's system
 * (the adapter then declares no `oci_image` source), and `command` is not run; the image's default directory
 * (the fake's is the runtime's `/workspace`); GPUs, tunnels, volumes, secrets.
 */
import { Effect, Option, type Scope, Schema } from "effect"
import * as crypto from "node:crypto"
import { AppConfig } from "../../../src/Config.ts"
import { defaultInternetOf, LocalRuntime, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow, scopedEmulator } from "../../core/emulator/server.ts"
import { emulatorHome, emulatorKey, persistentState } from "../../core/emulator/state.ts"
import { jailLabels } from "../../../src/providers/jailLabels.ts"
import { type ModalApi, ModalApiError, type ModalFileInfo, type ModalProcess, type ModalResourceUsage } from "../adapter/api.ts"
import { TAG_SANDBOX_ID } from "../adapter/index.ts"

const Sandbox = Schema.Struct({
  sandboxId: Schema.String,
  appName: Schema.String,
  name: Schema.String,
  runtimeId: Schema.String,
  tags: Schema.Record({ key: Schema.String, value: Schema.String }),
  cpu: Schema.Number,
  memoryMiB: Schema.Number,
  createdAt: Schema.Number,
  timeoutMs: Schema.Number,
  endedAt: Schema.NullOr(Schema.Number),
  exitCode: Schema.NullOr(Schema.Number),
  cpuCoreNanosecs: Schema.Number
})
const State = Schema.Struct({
  apps: Schema.mutable(Schema.Record({ key: Schema.String, value: Schema.String })),
  sandboxes: Schema.mutable(Schema.Record({ key: Schema.String, value: Schema.mutable(Sandbox) }))
})
type State = typeof State.Type
type Sandbox = State["sandboxes"][string]

/** The exit code of a sandbox ended by terminate or by its timeout (SIGKILL, as a shell reports it). */
const KILLED = 137
const MAX_OUTPUT_BYTES = 128 * 1024 * 1024
const SWEEP_MS = 1000

export interface ModalEmulatorInfo {
  readonly tokenId: string
  readonly tokenSecret: string
  /** The API with these credentials (wrong ones fail every call with `auth`). */
  readonly api: (tokenId: string, tokenSecret: string) => ModalApi
  readonly runtimeIdOf: (sandboxId: string) => string | undefined
}
export interface ModalEmulatorHandle extends ModalEmulatorInfo {
  readonly stop: () => void
}

/** Runtime failures as the SDK would report them. */
const runtimeCall = async <A, E>(effect: Effect.Effect<A, E>): Promise<A> => {
  try {
    return await runOrThrow(effect)
  } catch (e) {
    const kind = (e as { kind?: unknown }).kind
    const message = e instanceof Error ? e.message : String((e as { message?: unknown }).message ?? e)
    throw new ModalApiError(kind === "not_found" ? "not_found" : kind === "invalid" ? "invalid" : "internal", message)
  }
}

/** An async queue of chunks, ended once. */
const channel = () => {
  const chunks: Array<Uint8Array> = []
  let ended = false
  let wake: (() => void) | undefined
  const iterable: AsyncIterable<Uint8Array> = {
    async *[Symbol.asyncIterator]() {
      for (;;) {
        const next = chunks.shift()
        if (next !== undefined) {
          yield next
          continue
        }
        if (ended) return
        await new Promise<void>((r) => (wake = r))
      }
    }
  }
  const poke = () => {
    const w = wake
    wake = undefined
    w?.()
  }
  return { iterable, push: (c: Uint8Array) => (chunks.push(c), poke()), end: () => ((ended = true), poke()) }
}

export const startModalEmulator = (dataDir: string, runtime: LocalRuntimeShape): ModalEmulatorHandle => {
  const home = emulatorHome(dataDir, "modal")
  const tokenId = "ak-emulator"
  const tokenSecret = `as-${emulatorKey(home)}`
  const { state, save } = persistentState(home, State, (): State => ({ apps: {}, sandboxes: {} }))

  const byId = (sandboxId: string) => {
    const s = state.sandboxes[sandboxId]
    if (s === undefined) throw new ModalApiError("not_found", `Sandbox ${sandboxId} not found`)
    return s
  }
  const memGibNanosecs = (s: Sandbox) => (s.memoryMiB / 1024) * ((s.endedAt ?? Date.now()) - s.createdAt) * 1e6

  /** Reads the jail's CPU time into the record while it runs; ends the record when the jail is gone. */
  const observe = async (s: Sandbox) => {
    if (s.endedAt !== null) return
    const jail = await runOrThrow(runtime.get(s.runtimeId)).catch(() => Option.none())
    if (Option.isNone(jail) || jail.value.state === "stopped") {
      s.endedAt = Date.now()
      s.exitCode = KILLED
      save()
      return
    }
    const m = await runOrThrow(runtime.metrics(s.runtimeId)).catch(() => undefined)
    if (m?.cpuSeconds != null) s.cpuCoreNanosecs = Math.round(m.cpuSeconds * 1e9)
  }

  const end = async (s: Sandbox) => {
    if (s.endedAt !== null) return
    await observe(s)
    if (s.endedAt === null) {
      s.endedAt = Date.now()
      s.exitCode = KILLED
    }
    save()
    await runOrThrow(runtime.destroy(s.runtimeId)).catch(() => {})
  }

  const running = async (sandboxId: string) => {
    const s = byId(sandboxId)
    await observe(s)
    if (s.endedAt !== null) throw new ModalApiError("conflict", `Sandbox ${sandboxId} has already finished`)
    return s
  }

  const sweep = setInterval(() => {
    for (const s of Object.values(state.sandboxes)) {
      if (s.endedAt === null && Date.now() >= s.createdAt + s.timeoutMs) void end(s)
    }
  }, SWEEP_MS)

  const creating = new Map<string, Promise<string>>()

  const fileInfo = (entry: { readonly path: string; readonly type: string; readonly sizeBytes: number; readonly modifiedAt: string }): ModalFileInfo => ({
    path: entry.path,
    type: entry.type === "directory" ? "directory" : entry.type === "symlink" ? "symlink" : "file",
    size: entry.sizeBytes,
    modifiedTime: Math.floor(Date.parse(entry.modifiedAt) / 1000)
  })

  const unauthenticated: ModalApi = new Proxy({} as ModalApi, {
    get: () => () => Promise.reject(new ModalApiError("auth", "Invalid token id or secret (UNAUTHENTICATED)"))
  })

  const api: ModalApi = {
    createSandbox: (appName, _image, spec) => {
      const key = `${appName}/${spec.name}`
      const pending = creating.get(key)
      if (pending !== undefined) return pending.then(() => Promise.reject(new ModalApiError("already_exists", `Sandbox named ${spec.name} already exists`)))
      const run = (async () => {
        state.apps[appName] ??= `ap-${crypto.randomBytes(11).toString("hex")}`
        for (const s of Object.values(state.sandboxes)) {
          if (s.appName === appName && s.name === spec.name && s.endedAt === null) {
            await observe(s)
            if (s.endedAt === null) throw new ModalApiError("already_exists", `Sandbox named ${spec.name} already exists in app ${appName}`)
          }
        }
        if (spec.cpu <= 0 || spec.memoryMiB < 128) throw new ModalApiError("invalid", "cpu must be positive and memory at least 128 MiB")
        const sandboxId = `sb-${crypto.randomBytes(11).toString("hex")}`
        const runtimeId = `modal-${sandboxId}`
        await runtimeCall(runtime.create({
          id: runtimeId,
          vcpu: spec.cpu * 2,
          memoryMb: spec.memoryMiB,
          // Not said: Modal's default (network on), as the local runtime gives it.
          internet: spec.blockNetwork === undefined ? defaultInternetOf(runtime) : !spec.blockNetwork,
          env: spec.env,
          labels: jailLabels("modal", sandboxId, spec.tags[TAG_SANDBOX_ID])
        }))
        state.sandboxes[sandboxId] = {
          sandboxId,
          appName,
          name: spec.name,
          runtimeId,
          tags: { ...spec.tags },
          cpu: spec.cpu,
          memoryMiB: spec.memoryMiB,
          createdAt: Date.now(),
          timeoutMs: spec.timeoutMs,
          endedAt: null,
          exitCode: null,
          cpuCoreNanosecs: 0
        }
        save()
        return sandboxId
      })()
      creating.set(key, run)
      return run.finally(() => creating.delete(key))
    },
    sandboxFromName: async (appName, name) => {
      for (const s of Object.values(state.sandboxes)) {
        if (s.appName === appName && s.name === name && s.endedAt === null) {
          await observe(s)
          if (s.endedAt === null) return s.sandboxId
        }
      }
      throw new ModalApiError("not_found", `Sandbox with name '${name}' not found in App '${appName}'`)
    },
    getTags: async (sandboxId) => ({ ...byId(sandboxId).tags }),
    poll: async (sandboxId) => {
      const s = byId(sandboxId)
      await observe(s)
      return s.exitCode
    },
    terminate: async (sandboxId) => end(byId(sandboxId)),
    resourceUsage: async (sandboxId): Promise<ModalResourceUsage> => {
      const s = byId(sandboxId)
      await observe(s)
      return { cpuCoreNanosecs: s.cpuCoreNanosecs, memGibNanosecs: Math.round(memGibNanosecs(s)), gpuNanosecs: 0, gpuType: null }
    },
    exec: async (sandboxId, command, spec) => {
      const s = await running(sandboxId)
      const started = await runtimeCall(runtime.exec(s.runtimeId, {
        command,
        ...(spec.workdir === undefined ? {} : { cwd: spec.workdir }),
        env: spec.env ?? {},
        ...(spec.timeoutMs === undefined ? {} : { timeoutMs: spec.timeoutMs }),
        maxOutputBytes: MAX_OUTPUT_BYTES,
        stdin: true
      }))
      const stdout = channel()
      const stderr = channel()
      // One reader of the runtime's ordered events feeds both streams; the exit code resolves `wait`.
      const exit = (async () => {
        for (let seen = 0;;) {
          const events = await runtimeCall(runtime.execEvents(s.runtimeId, started.execId, seen, 1000)).catch(() => undefined)
          if (events === undefined) {
            stdout.end()
            stderr.end()
            throw new ModalApiError("not_found", "The Sandbox is unavailable. This Sandbox may have already shut down.")
          }
          seen += events.length
          for (const e of events) {
            if (e.type === "exit") {
              stdout.end()
              stderr.end()
              return e.exitCode ?? (e.timedOut ? KILLED : 128 + 9)
            }
            ;(e.type === "stdout" ? stdout : stderr).push(e.data)
          }
        }
      })()
      exit.catch(() => {})
      const process: ModalProcess = {
        stdout: stdout.iterable,
        stderr: stderr.iterable,
        writeStdin: (data) => runtimeCall(runtime.sendInput(s.runtimeId, started.execId, data, false)),
        closeStdin: () => runtimeCall(runtime.sendInput(s.runtimeId, started.execId, new Uint8Array(0), true)),
        wait: () => exit
      }
      return process
    },
    readBytes: async (sandboxId, p) => {
      const s = await running(sandboxId)
      const stat = await runtimeCall(runtime.statFile(s.runtimeId, p))
      if (Option.isNone(stat)) throw new ModalApiError("not_found", `No such file or directory: ${p}`)
      if (stat.value.type === "directory") throw new ModalApiError("is_directory", `Is a directory: ${p}`)
      const parts: Array<Uint8Array> = []
      for (let offset = 0; offset < stat.value.sizeBytes;) {
        const chunk = await runtimeCall(runtime.readFile(s.runtimeId, p, offset, Math.min(4 << 20, stat.value.sizeBytes - offset)))
        if (chunk.data.length === 0) break
        parts.push(chunk.data.slice())
        offset += chunk.data.length
      }
      return new Uint8Array(Buffer.concat(parts))
    },
    writeBytes: async (sandboxId, p, data) => {
      const s = await running(sandboxId)
      const stat = await runtimeCall(runtime.statFile(s.runtimeId, p))
      if (Option.isSome(stat) && stat.value.type === "directory") throw new ModalApiError("is_directory", `Is a directory: ${p}`)
      await runtimeCall(runtime.writeFile(s.runtimeId, p, data, { mode: "overwrite", createParents: true }))
    },
    stat: async (sandboxId, p) => {
      const s = await running(sandboxId)
      const stat = await runtimeCall(runtime.statFile(s.runtimeId, p))
      if (Option.isNone(stat)) throw new ModalApiError("not_found", `No such file or directory: ${p}`)
      return fileInfo(stat.value)
    },
    listFiles: async (sandboxId, p) => {
      const s = await running(sandboxId)
      const stat = await runtimeCall(runtime.statFile(s.runtimeId, p))
      if (Option.isNone(stat)) throw new ModalApiError("not_found", `No such file or directory: ${p}`)
      if (stat.value.type !== "directory") throw new ModalApiError("not_a_directory", `Not a directory: ${p}`)
      const listed = await runtimeCall(runtime.listFiles(s.runtimeId, p, { recursive: false, maxEntries: 100_000 }))
      return listed.entries.map(fileInfo).sort((a, b) => a.path.localeCompare(b.path))
    },
    remove: async (sandboxId, p, recursive) => {
      const s = await running(sandboxId)
      const stat = await runtimeCall(runtime.statFile(s.runtimeId, p))
      if (Option.isNone(stat)) throw new ModalApiError("not_found", `No such file or directory: ${p}`)
      if (stat.value.type === "directory" && !recursive) {
        const listed = await runtimeCall(runtime.listFiles(s.runtimeId, p, { recursive: false, maxEntries: 1 }))
        if (listed.entries.length > 0) throw new ModalApiError("directory_not_empty", `Directory not empty: ${p}`)
      }
      await runtimeCall(runtime.deleteFile(s.runtimeId, p, { recursive }))
    }
  }

  return {
    tokenId,
    tokenSecret,
    api: (id, secret) => (id === tokenId && secret === tokenSecret ? api : unauthenticated),
    runtimeIdOf: (sandboxId) => state.sandboxes[sandboxId]?.runtimeId,
    stop: () => clearInterval(sweep)
  }
}

/** The emulator for the running gateway: started in the caller's scope, stopped when it closes. */
export const modalEmulator: Effect.Effect<ModalEmulatorInfo, never, AppConfig | LocalRuntime | Scope.Scope> = scopedEmulator(startModalEmulator, (h) => ({ tokenId: h.tokenId, tokenSecret: h.tokenSecret, api: h.api, runtimeIdOf: h.runtimeIdOf }))
