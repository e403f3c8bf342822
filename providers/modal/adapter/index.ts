/**
 * Modal adapter (reference/providers.md §3.2 "modal"). Modal has no REST API: everything goes through its
 * JavaScript SDK (`modal` 0.11.1, gRPC), reached through `ModalApi` (api.ts) — the real SDK in remote mode
 * (sdk.ts), the in-process emulator over the local runtime otherwise (../emulator/). The code below is the same
 * for both.
 *
 * - Create: app `MODAL_APP_NAME` (default `metal-sandboxes`, created if missing), the image from its registry
 *   (the `oci_image` source's, else `python:3.13-slim` for `metal/python` and `node:22-slim` otherwise), then a
 *   sandbox named `metal-<id>` with cpu = vCPU / 2 (a Modal core is two vCPUs), memoryMiB, timeoutMs (the runtime
 *   timeout plus five minutes, a safety net behind the gateway's own timer), env, tags (our ids) and blockNetwork
 *   when the internet is off. A name already in use (AlreadyExists: a retry) is looked up by name and checked
 *   against our tag; a create whose outcome is unknown is reconciled the same way. Readiness is an exec that
 *   makes `/workspace` (the gateway's working directory, which Modal's images lack), retried until it exits 0.
 * - Exec: `sandbox.exec` in binary mode; stdout and stderr are read together and numbered in the order their
 *   chunks arrive (interleaved); stdin stays open for `sendInput` when asked, else it is closed at once. Modal has
 *   no way to signal an exec, so there is no cancel (as declared). The events live in this process: Modal's SDK
 *   cannot attach to an exec it did not start, so after a gateway restart an execution reads as not_found.
 * - Files: the SDK's filesystem (`sandbox.filesystem`: stat, readBytes, writeBytes, listFiles, remove). Reads are
 *   of whole files, so a file over 10 MiB is refused; `create` and missing parents are checked with `stat`
 *   first (the SDK's write always overwrites and makes parents).
 * - Destroy reads the sandbox's resource usage (kept for the final cost sync), then terminates it; an absent
 *   sandbox is success.
 * - Cost: `provider_metered` from `sandboxGetResourceUsage` (CPU core-nanoseconds and GiB-nanoseconds) at
 *   Modal's rate card: 141,912 µUSD per core-hour and 24,012 µUSD per GiB-hour (2026-09-11). GPU usage is
 *   refused (this adapter never asks for a GPU, so any means the sandbox is not ours to price).
 * - No pause, no endpoints (Modal's tunnels are fixed at create and cannot be revoked).
 */
import { Effect } from "effect"
import * as path from "node:path"
import { emulatedCapabilities } from "../../../src/providers/Capabilities.ts"
import type { ExecEvent } from "../../../src/runtime/LocalRuntime.ts"
import { makeProvider, type ProviderCalls } from "../../core/makeProvider.ts"
import { News } from "../../core/news.ts"
import { type CreateInput, type ProviderFileEntry, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { type ModalApi, ModalApiError, type ModalProcess, type ModalResourceUsage } from "./api.ts"
import { checkWrite } from "../../../src/providers/errors.ts"

export { type ModalApi, ModalApiError } from "./api.ts"

import { call, cpuFor, fail, imageFor, MODAL_CAPABILITIES, type ModalProviderConfig, NAME, orAbsent, RATE_CARD, sandboxName, TAG_SANDBOX_ID, usageCostMicrousd, WORKSPACE } from "./wire.ts"
export { cpuFor, DEFAULT_APP_NAME, DEFAULT_IMAGE, errorOf, fail, imageFor, MODAL_CAPABILITIES, type ModalProviderConfig, NAME, PYTHON_IMAGE, RATE_CARD, sandboxName, TAG_SANDBOX_ID, usageCostMicrousd, WORKSPACE } from "./wire.ts"

interface Execution {
  readonly events: Array<ExecEvent>
  readonly process: ModalProcess
  readonly stdin: boolean
  done: boolean
  /** Input written in call order. */
  input: Promise<void>
  waiters: Array<() => void>
  /** Told with the waiters, for a quiet command's job (`execNews`). */
  readonly news: News
}

const modalCalls = (config: ModalProviderConfig): ProviderCalls => {
  const { api, appName } = config
  const emulated = config.mode === "emulated"
  // The emulator does not pull images: it runs every sandbox on the local runtime's system (emulator/index.ts).
  const capabilities = emulated ? emulatedCapabilities(MODAL_CAPABILITIES, { runsImages: false }) : MODAL_CAPABILITIES
  const readyTimeoutMs = config.readyTimeoutMs ?? (emulated ? 60_000 : 300_000)
  const readyPollMs = config.readyPollMs ?? (emulated ? 50 : 1000)
  const eventsWaitMs = config.eventsWaitMs ?? (emulated ? 100 : 1000)
  const files = capabilities.files!
  const executions = new Map<string, Execution>()
  /** Usage read at destroy, for the cost sync that follows it. */
  const finalUsage = new Map<string, ModalResourceUsage>()

  const sandboxOf = (input: CreateInput, sandboxId: string): ProviderSandbox => ({
    resourceId: sandboxId,
    resolvedResources: {
      vcpu: input.resources.vcpu,
      memoryMb: input.resources.memoryMb,
      diskMb: null,
      architecture: input.resources.architecture === "any" ? "x86_64" : input.resources.architecture,
      providerSize: typeof input.providerOptions["size"] === "string" ? input.providerOptions["size"] : null
    },
    metadata: { appName, name: sandboxName(input.sandboxId), cpu: cpuFor(input.resources.vcpu), memoryMiB: input.resources.memoryMb, image: imageFor(input.source) }
  })

  /** The running sandbox named for `sandboxId` when it carries our tag. */
  const findByName = (sandboxId: string) =>
    Effect.gen(function*() {
      const id = yield* orAbsent(call("sandbox lookup", () => api.sandboxFromName(appName, sandboxName(sandboxId))))
      if (id === undefined) return undefined
      const tags = yield* call("sandbox tags", () => api.getTags(id))
      return tags[TAG_SANDBOX_ID] === sandboxId ? id : undefined
    })

  /** Runs `mkdir -p /workspace` until it exits 0: the sandbox answers execs, and the gateway's directory is there. */
  const awaitReady = (sandboxId: string) =>
    Effect.gen(function*() {
      const deadline = Date.now() + readyTimeoutMs
      for (;;) {
        const outcome = yield* Effect.either(call("readiness exec", async () => {
          const p = await api.exec(sandboxId, ["mkdir", "-p", WORKSPACE], {})
          await p.closeStdin().catch(() => {})
          const drain = async (s: AsyncIterable<Uint8Array>) => {
            for await (const _ of s);
          }
          await Promise.all([drain(p.stdout), drain(p.stderr)])
          return p.wait()
        }))
        if (outcome._tag === "Right" && outcome.right === 0) return
        const exited = yield* orAbsent(call("sandbox poll", () => api.poll(sandboxId)))
        if (exited === undefined || exited !== null) return yield* fail("unavailable", `modal sandbox ${sandboxId} ended before it was ready`)
        if (Date.now() > deadline) {
          const why = outcome._tag === "Left" ? outcome.left.message : `exit ${outcome.right}`
          return yield* fail("timeout_absent", `modal sandbox ${sandboxId} was not ready within ${readyTimeoutMs} ms (${why})`)
        }
        yield* Effect.sleep(readyPollMs)
      }
    })

  const create: SandboxProvider["create"] = (input) =>
    Effect.gen(function*() {
      if (input.source.kind === "provider_template") return yield* unsupported(NAME, "provider templates")
      if (input.source.kind === "oci_image" && !capabilities.sources.includes("oci_image")) return yield* unsupported(NAME, "OCI images on its emulator")
      const name = sandboxName(input.sandboxId)
      const spec = {
        name,
        cpu: cpuFor(input.resources.vcpu),
        memoryMiB: Math.ceil(input.resources.memoryMb),
        timeoutMs: (input.lifecycle.runtimeTimeoutSeconds + 300) * 1000,
        env: { ...input.environment },
        tags: { [TAG_SANDBOX_ID]: input.sandboxId, "metal.organization_id": input.organizationId, "metal.project_id": input.projectId },
        // Unsaid: left out, Modal's default (network on).
        ...(input.internetAccess === undefined ? {} : { blockNetwork: !input.internetAccess }),
        ...(input.source.kind === "oci_image" && input.source.command !== undefined ? { command: input.source.command } : {})
      }
      const created = yield* call("sandbox create", () => api.createSandbox(appName, imageFor(input.source), spec), { mutating: true }).pipe(
        Effect.catchIf((e) => e.kind === "customer", () =>
          // AlreadyExists: the name is in use; ours (a retried create) when it carries our tag.
          findByName(input.sandboxId).pipe(
            Effect.flatMap((id) => id === undefined ? Effect.fail(fail("customer", `modal sandbox name ${name} is in use by another sandbox`)) : Effect.succeed(id))
          ))
      )
      yield* awaitReady(created)
      return sandboxOf(input, created)
    })

  const reconcileCreate: SandboxProvider["reconcileCreate"] = (sandboxId) =>
    findByName(sandboxId).pipe(
      Effect.map((id) =>
        id === undefined ? null : {
          resourceId: id,
          resolvedResources: { vcpu: 0, memoryMb: 0, diskMb: null, architecture: "x86_64", providerSize: null },
          metadata: { appName, name: sandboxName(sandboxId) }
        }
      )
    )

  /** A sandbox that has finished is gone for good at Modal (nothing resumes it): absent, like one never made. */
  const inspect: SandboxProvider["inspect"] = (sandbox) =>
    orAbsent(call("sandbox poll", () => api.poll(sandbox.resourceId))).pipe(
      Effect.map((code) => (code === undefined ? "absent" as const : code === null ? "running" as const : "absent" as const))
    )

  const destroy: SandboxProvider["destroy"] = (sandbox) =>
    Effect.gen(function*() {
      const usage = yield* Effect.either(call("resource usage", () => api.resourceUsage(sandbox.resourceId)))
      if (usage._tag === "Right") finalUsage.set(sandbox.resourceId, usage.right)
      yield* orAbsent(call("sandbox terminate", () => api.terminate(sandbox.resourceId), { mutating: true }))
    })

  const getCost: SandboxProvider["getCost"] = (sandbox, window) =>
    Effect.gen(function*() {
      const live = yield* orAbsent(call("resource usage", () => api.resourceUsage(sandbox.resourceId)))
      const usage = live ?? finalUsage.get(sandbox.resourceId)
      if (usage === undefined) return null
      if (usage.gpuNanosecs > 0) return yield* fail("unsupported", `modal sandbox ${sandbox.resourceId} used a GPU (${usage.gpuType ?? "unknown"}), which this rate card does not price`)
      return {
        amountMicrousd: BigInt(Math.round(usageCostMicrousd(usage))),
        measuredThrough: window.to,
        provenance: "provider_metered" as const,
        confidence: "high" as const,
        rateCardVersion: RATE_CARD.version
      }
    })

  // ---- processes ----

  const wake = (x: Execution) => {
    const waiters = x.waiters
    x.waiters = []
    for (const w of waiters) w()
    x.news.tell()
  }

  /** Reads stdout and stderr together into numbered events (in arrival order, within the output limit), then the exit. */
  const pump = async (x: Execution, maxOutputBytes: number, timeoutMs: number) => {
    const started = Date.now()
    let kept = 0
    let truncated = false
    const read = async (stream: AsyncIterable<Uint8Array>, type: "stdout" | "stderr") => {
      for await (const chunk of stream) {
        if (chunk.length === 0) continue
        const room = maxOutputBytes - kept
        if (room <= 0) {
          truncated = true
          continue
        }
        const data = chunk.length > room ? chunk.slice(0, room) : chunk
        if (data.length < chunk.length) truncated = true
        kept += data.length
        x.events.push({ seq: x.events.length, type, data })
        wake(x)
      }
    }
    let exitCode: number | null = null
    try {
      await Promise.all([read(x.process.stdout, "stdout"), read(x.process.stderr, "stderr")])
      exitCode = await x.process.wait()
    } catch {
      exitCode = null
    }
    const timedOut = Date.now() - started >= timeoutMs && exitCode !== 0
    x.events.push({ seq: x.events.length, type: "exit", exitCode, signal: timedOut ? "SIGKILL" : null, cancelled: false, timedOut, outputTruncated: truncated })
    x.done = true
    wake(x)
  }

  const exec: SandboxProvider["exec"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (input.pty !== undefined) return yield* unsupported(NAME, "terminals")
      if (input.command.length === 0) return yield* fail("invalid_request", "an empty command")
      const timeoutMs = Math.min(input.timeoutSeconds, capabilities.process!.maxTimeoutSeconds) * 1000
      const process = yield* call("exec", () =>
        api.exec(sandbox.resourceId, input.command, { workdir: input.cwd ?? WORKSPACE, env: input.environment, timeoutMs }), { mutating: true })
      const executionId = `modal:${crypto.randomUUID()}`
      const x: Execution = { events: [], process, stdin: input.stdin === true, done: false, input: Promise.resolve(), waiters: [], news: new News() }
      if (!x.stdin) x.input = process.closeStdin().catch(() => {})
      executions.set(executionId, x)
      void pump(x, Math.min(input.maxOutputBytes, capabilities.process!.maxOutputBytes), timeoutMs)
      return { executionId }
    })

  const executionOf = (executionId: string) => {
    const x = executions.get(executionId)
    return x === undefined
      ? Effect.fail(fail("not_found", `modal execution ${executionId} is not known here (Modal cannot re-attach to an exec after a gateway restart)`))
      : Effect.succeed(x)
  }

  const execEvents: SandboxProvider["execEvents"] = (_sandbox, executionId, fromSeq) =>
    Effect.gen(function*() {
      const x = yield* executionOf(executionId)
      if (x.events.length <= fromSeq && !x.done) {
        yield* Effect.async<void>((resume) => {
          const done = () => resume(Effect.void)
          x.waiters.push(done)
          const timer = setTimeout(() => {
            x.waiters = x.waiters.filter((w) => w !== done)
            done()
          }, eventsWaitMs)
          return Effect.sync(() => clearTimeout(timer))
        })
      }
      return x.events.slice(fromSeq)
    })

  /** Its output is read as it comes (`pump`), so a quiet command's job waits on that. */
  const execNews: NonNullable<SandboxProvider["execNews"]> = (_sandbox, executionId, maxMs) =>
    Effect.suspend(() => {
      const x = executions.get(executionId)
      // Unknown here (`execEvents` says so at once) or over.
      return x === undefined || x.done ? Effect.void : x.news.wait(maxMs)
    })

  const sendInput: NonNullable<SandboxProvider["sendInput"]> = (_sandbox, executionId, data, eof) =>
    Effect.gen(function*() {
      const x = yield* executionOf(executionId)
      if (!x.stdin) return yield* fail("invalid_request", `modal execution ${executionId} was not started with stdin`)
      const next = x.input.then(async () => {
        if (data.length > 0) await x.process.writeStdin(data)
        if (eof) await x.process.closeStdin()
      })
      x.input = next.catch(() => {})
      yield* call("stdin write", () => next)
    })

  // ---- files ----

  const absolute = (p: string) => (p.startsWith("/") ? Effect.succeed(path.posix.normalize(p)) : Effect.fail(fail("invalid_request", `${p} is not an absolute path`)))
  const statOf = (sandbox: ProviderSandbox, p: string) => orAbsent(call("stat", () => api.stat(sandbox.resourceId, p)))

  const readFile: SandboxProvider["readFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      const p = yield* absolute(input.path)
      const info = yield* statOf(sandbox, p)
      if (info === undefined) return yield* fail("not_found", `${p} does not exist`)
      if (info.type === "directory") return yield* fail("invalid_request", `${p} is a directory`)
      if (info.size > files.maxReadBytes) return yield* fail("invalid_request", `${p} is larger than ${files.maxReadBytes} bytes (Modal reads whole files)`)
      const all = yield* call("read file", () => api.readBytes(sandbox.resourceId, p))
      const start = Math.min(input.offsetBytes, all.length)
      const data = all.slice(start, start + Math.min(input.maxBytes, files.maxReadBytes))
      return { data, offsetBytes: input.offsetBytes, sizeBytes: all.length, eof: start + data.length >= all.length }
    })

  const writeFile: SandboxProvider["writeFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      yield* checkWrite(NAME, files, input)
      const p = yield* absolute(input.path)
      if (p === "/" || input.path.endsWith("/")) return yield* fail("invalid_request", `${input.path} names no file`)
      const existing = yield* statOf(sandbox, p)
      if (existing?.type === "directory") return yield* fail("invalid_request", `${p} is a directory`)
      if (existing !== undefined && input.mode === "create") return yield* fail("customer", `${p} already exists`)
      if (existing === undefined && !input.createParents) {
        const parent = yield* statOf(sandbox, path.posix.dirname(p))
        if (parent === undefined) return yield* fail("not_found", `${path.posix.dirname(p)} does not exist`)
        if (parent.type !== "directory") return yield* fail("invalid_request", `${path.posix.dirname(p)} is not a directory`)
      }
      yield* call("write file", () => api.writeBytes(sandbox.resourceId, p, input.data))
      return { bytesWritten: input.data.length, created: existing === undefined }
    })

  const entryOf = (info: { readonly path: string; readonly type: "file" | "directory" | "symlink"; readonly size: number; readonly modifiedTime: number }): ProviderFileEntry => ({
    path: info.path,
    type: info.type,
    sizeBytes: info.size,
    modifiedAt: new Date(info.modifiedTime * 1000).toISOString()
  })

  const listFiles: SandboxProvider["listFiles"] = (sandbox, input) =>
    Effect.gen(function*() {
      const p = yield* absolute(input.path)
      const root = yield* statOf(sandbox, p)
      if (root === undefined) return yield* fail("not_found", `${p} does not exist`)
      if (root.type !== "directory") return { entries: [entryOf(root)], truncated: false }
      const max = Math.min(input.maxEntries, files.maxListEntries)
      const entries: Array<ProviderFileEntry> = []
      const queue = [p]
      while (queue.length > 0) {
        const dir = queue.shift()!
        const listed = yield* orAbsent(call("list files", () => api.listFiles(sandbox.resourceId, dir)))
        for (const info of listed ?? []) {
          if (entries.length >= max) return { entries, truncated: true }
          entries.push(entryOf(info))
          if (input.recursive && info.type === "directory") queue.push(info.path)
        }
      }
      return { entries, truncated: false }
    })

  const deleteFile: SandboxProvider["deleteFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      const p = yield* absolute(input.path)
      if (p === "/") return yield* fail("invalid_request", "the root cannot be deleted")
      const removed = yield* orAbsent(call("remove", () => api.remove(sandbox.resourceId, p, input.recursive).then(() => true)))
      return { deleted: removed === true }
    })

  return {
    capabilities,
    create,
    reconcileCreate,
    inspect,
    destroy,
    pause: () => Effect.fail(unsupported(NAME, "pause")),
    resume: () => Effect.fail(unsupported(NAME, "resume")),
    getCost,
    exec,
    execEvents,
    execNews,
    execNewsAfterMs: 0,
    cancelExec: () => Effect.fail(unsupported(NAME, "cancelling a command")),
    sendInput,
    readFile,
    writeFile,
    listFiles,
    deleteFile,
    exposeHttpEndpoint: () => Effect.fail(unsupported(NAME, "HTTP endpoints")),
    revokeHttpEndpoint: () => Effect.fail(unsupported(NAME, "HTTP endpoints"))
  }
}

export const makeModalProvider = makeProvider(NAME, {
  // Modal's calls read their config as it is (the SDK client is in it).
  context: (config: ModalProviderConfig) => config,
  calls: modalCalls,
  // BYOK: the SDK client for an organization's own token, when the config says how to make one.
  byok: (config) => {
    const apiFor = config.apiFor
    return apiFor === undefined ? undefined : (credentials) => ({ ...config, api: apiFor(credentials) })
  }
})
