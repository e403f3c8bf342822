/**
 * The Vercel emulator's sandboxes: `POST /v4/sandboxes` (a 409 for a name in use), `GET|DELETE
 * /v2/sandboxes/{name}?projectId=`, and the session's `GET /v2/sandboxes/sessions/{id}`, `POST …/stop` and `POST
 * …/extend-timeout`. A session ends at its timeout (its jail goes; the record stays until deleted); one whose
 * jail died reads as `failed`. Usage (active CPU from the jail's cgroup, egress from its network namespace) is
 * reported on the session and the sandbox, as Vercel meters it. Every runtime runs on the local runtime's one base
 * system; an `image` is pulled and run by the local runtime as built (a pull that fails is a 400 saying so; the
 * session's cwd is its WorkingDir); `ports` are refused (no routes are served).
 */
import { Option, Schema } from "effect"
import * as crypto from "node:crypto"
import { defaultInternetOf, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import { jailLabels } from "../../core/jailLabels.ts"
import { TAG_SANDBOX_ID } from "../adapter/wire.ts"
import type { Books, EmulatedSandbox } from "./books.ts"
import { HttpFailure, json, readBody, StringMap } from "./http.ts"
import { sweepEvery } from "../../core/emulator/state.ts"

/** Vercel states no disk size; the emulator gives the runtime's common 3 GiB (the size its warm jails have). */
const DISK_MB = 3072
const MB_PER_VCPU = 2048
const DEFAULT_TIMEOUT_MS = 5 * 60 * 1000
const MAX_TIMEOUT_MS = 5 * 3600 * 1000
const SWEEP_MS = 1000
/** Where a session's commands start (Vercel's is /vercel/sandbox; the local runtime's home is /workspace). */
export const SESSION_CWD = "/workspace"
/** A session's working directory: on an image, its WorkingDir (or /), as the runtime runs it. */
export const sessionCwd = (s: EmulatedSandbox) => s.cwd ?? SESSION_CWD

const Name = Schema.String.pipe(Schema.pattern(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/))
const CreateSandbox = Schema.Struct({
  name: Name,
  projectId: Schema.String,
  persistent: Schema.optional(Schema.Boolean),
  runtime: Schema.optional(Schema.Literal("node22", "node24", "node26", "python3.13")),
  image: Schema.optional(Schema.String),
  resources: Schema.optional(Schema.Struct({ vcpus: Schema.Int.pipe(Schema.between(1, 8)) })),
  timeout: Schema.optional(Schema.Int.pipe(Schema.between(1000, MAX_TIMEOUT_MS))),
  ports: Schema.optional(Schema.Array(Schema.Int)),
  networkPolicy: Schema.optional(Schema.Union(
    Schema.Struct({ mode: Schema.Literal("allow-all", "deny-all") }),
    // Only domain names are enforced here: CIDR lists are refused rather than ignored.
    Schema.Struct({ mode: Schema.Literal("custom"), allowedDomains: Schema.Array(Schema.String).pipe(Schema.maxItems(256)) })
  )),
  env: Schema.optional(StringMap),
  tags: Schema.optional(StringMap)
})
const ExtendTimeout = Schema.Struct({ duration: Schema.Int.pipe(Schema.positive()) })

export const makeControl = (books: Books, runtime: LocalRuntimeShape, options: { readonly onStopped: (s: EmulatedSandbox) => void }) => {
  const { state, save } = books
  const creating = new Map<string, Promise<EmulatedSandbox>>()

  /** Reads the jail's usage into the record (while it runs); whether the jail is still alive. */
  const observe = async (s: EmulatedSandbox) => {
    if (s.status !== "running") return
    const jail = await run(runtime.get(s.runtimeId)).catch(() => Option.none())
    if (Option.isNone(jail) || jail.value.state === "stopped") {
      s.status = "failed"
      s.stoppedAt = Date.now()
      save()
      return
    }
    const m = await run(runtime.metrics(s.runtimeId)).catch(() => undefined)
    if (m !== undefined) {
      s.activeCpuMs = Math.round((m.cpuSeconds ?? 0) * 1000)
      s.egressBytes = m.networkTxBytes ?? 0
      s.ingressBytes = m.networkRxBytes ?? 0
    }
  }

  const sessionWire = (s: EmulatedSandbox) => ({
    id: s.sessionId,
    memory: s.memory,
    vcpus: s.vcpus,
    region: "local",
    runtime: s.runtime,
    timeout: s.timeout,
    status: s.status,
    requestedAt: s.startedAt,
    startedAt: s.startedAt,
    ...(s.stoppedAt === null ? {} : { stoppedAt: s.stoppedAt }),
    duration: (s.stoppedAt ?? Date.now()) - s.startedAt,
    createdAt: s.createdAt,
    cwd: sessionCwd(s),
    updatedAt: Date.now(),
    networkPolicy: networkPolicyOf(s),
    activeCpuDurationMs: s.activeCpuMs,
    networkTransfer: { ingress: s.ingressBytes, egress: s.egressBytes }
  })
  /** The policy as Vercel's API shows it: allow-all, deny-all, or custom with its domains. */
  const networkPolicyOf = (s: EmulatedSandbox) =>
    !s.internet ? { mode: "deny-all" } : s.allowedDomains !== undefined ? { mode: "custom", allowedDomains: s.allowedDomains } : { mode: "allow-all" }

  const sandboxWire = (s: EmulatedSandbox) => ({
    name: s.name,
    persistent: false,
    region: "local",
    vcpus: s.vcpus,
    memory: s.memory,
    runtime: s.runtime,
    timeout: s.timeout,
    networkPolicy: networkPolicyOf(s),
    totalEgressBytes: s.egressBytes,
    totalIngressBytes: s.ingressBytes,
    totalActiveCpuDurationMs: s.activeCpuMs,
    totalDurationMs: (s.stoppedAt ?? Date.now()) - s.startedAt,
    createdAt: s.createdAt,
    updatedAt: Date.now(),
    currentSessionId: s.sessionId,
    status: s.status,
    cwd: sessionCwd(s),
    tags: s.tags
  })
  const full = async (s: EmulatedSandbox) => {
    await observe(s)
    return { sandbox: sandboxWire(s), session: sessionWire(s), routes: [] }
  }

  const projectOf = (url: URL) => {
    const projectId = url.searchParams.get("projectId") ?? url.searchParams.get("project")
    if (projectId !== books.projectId) throw new HttpFailure(404, "not_found", `Project ${projectId ?? "(none)"} not found`)
  }
  const sandboxOr404 = (name: string) => {
    const s = state.sandboxes[name]
    if (s === undefined) throw new HttpFailure(404, "not_found", `Sandbox ${name} not found`)
    return s
  }
  const sessionOr404 = (sessionId: string) => {
    const s = books.bySession(sessionId)
    if (s === undefined) throw new HttpFailure(404, "not_found", `Session ${sessionId} not found`)
    return s
  }

  const create = async (request: Request) => {
    const body = await readBody(request, CreateSandbox)
    if (body.projectId !== books.projectId) throw new HttpFailure(404, "not_found", `Project ${body.projectId} not found`)
    if ((body.ports ?? []).length > 0) throw new HttpFailure(400, "bad_request", "the emulator serves no routes")
    if (body.persistent === true) throw new HttpFailure(400, "bad_request", "persistent sandboxes are not emulated")
    const name = body.name
    if (state.sandboxes[name] !== undefined || creating.has(name)) throw new HttpFailure(409, "conflict", `Sandbox ${name} already exists`)
    const pending = (async () => {
      const vcpus = body.resources?.vcpus ?? 2
      const now = Date.now()
      const sandbox: EmulatedSandbox = {
        name,
        projectId: body.projectId,
        runtimeId: crypto.randomUUID(),
        sessionId: `sbx_${crypto.randomBytes(12).toString("hex")}`,
        status: "running",
        runtime: body.runtime ?? "node24",
        vcpus,
        memory: vcpus * MB_PER_VCPU,
        timeout: body.timeout ?? DEFAULT_TIMEOUT_MS,
        // No policy: Vercel's default (allow-all), as the local runtime gives it.
        internet: body.networkPolicy === undefined ? defaultInternetOf(runtime) : body.networkPolicy.mode !== "deny-all",
        ...(body.networkPolicy?.mode === "custom" ? { allowedDomains: [...body.networkPolicy.allowedDomains] } : {}),
        env: { ...body.env },
        tags: { ...body.tags },
        createdAt: now,
        startedAt: now,
        stoppedAt: null,
        activeCpuMs: 0,
        egressBytes: 0,
        ingressBytes: 0
      }
      const created = await run(runtime.create({
        id: sandbox.runtimeId,
        vcpu: vcpus,
        memoryMb: sandbox.memory,
        diskMb: DISK_MB,
        internet: sandbox.internet,
        ...(sandbox.allowedDomains !== undefined ? { domains: { mode: "allow" as const, domains: sandbox.allowedDomains } } : {}),
        env: sandbox.env,
        // A sandbox's id at Vercel is its name; ours is one of its tags.
        labels: jailLabels("vercel", name, sandbox.tags[TAG_SANDBOX_ID]),
        ...(body.image !== undefined ? { image: { reference: body.image } } : {})
      }))
      if (created.image !== undefined) sandbox.cwd = created.image.workingDir
      state.sandboxes[name] = sandbox
      save()
      return sandbox
    })().finally(() => creating.delete(name))
    creating.set(name, pending)
    return json(await full(await pending))
  }

  /** Ends the session: its jail goes, its record says stopped. */
  const stop = async (s: EmulatedSandbox) => {
    if (s.status === "running") {
      await observe(s)
      s.status = "stopped"
      s.stoppedAt = Date.now()
    }
    options.onStopped(s)
    await run(runtime.destroy(s.runtimeId))
    save()
  }

  const remove = async (s: EmulatedSandbox) => {
    await stop(s)
    delete state.sandboxes[s.name]
    for (const [key, c] of books.commands.entries()) if (c.sessionId === s.sessionId) books.commands.delete(key)
    save()
    return json({ sandbox: sandboxWire(s) })
  }

  /** Sessions past their timeout are stopped. */
  const sweeper = sweepEvery(SWEEP_MS, (now) => {
    const due = Object.values(state.sandboxes).filter((s) => s.status === "running" && s.startedAt + s.timeout <= now)
    return Promise.all(due.map((s) => stop(s).catch(() => undefined)))
  })

  const extend = async (request: Request, s: EmulatedSandbox) => {
    const { duration } = await readBody(request, ExtendTimeout)
    if (s.status !== "running") throw new HttpFailure(410, "sandbox_stopped", `Session ${s.sessionId} is ${s.status}`)
    if (s.timeout + duration > MAX_TIMEOUT_MS) throw new HttpFailure(400, "bad_request", `a session lasts at most ${MAX_TIMEOUT_MS} ms`)
    s.timeout += duration
    save()
    return json({ session: sessionWire(s) })
  }

  return {
    create,
    get: async (url: URL, name: string) => {
      projectOf(url)
      return json(await full(sandboxOr404(name)))
    },
    remove: async (url: URL, name: string) => {
      projectOf(url)
      return remove(sandboxOr404(name))
    },
    getSession: async (sessionId: string) => {
      const s = sessionOr404(sessionId)
      await observe(s)
      return json({ session: sessionWire(s), routes: [] })
    },
    stopSession: async (sessionId: string) => {
      const s = sessionOr404(sessionId)
      await stop(s)
      return json({ session: sessionWire(s), sandbox: sandboxWire(s) })
    },
    extend: (request: Request, sessionId: string) => extend(request, sessionOr404(sessionId)),
    /** The running session's sandbox; a stopped one answers 410 `sandbox_stopped`. */
    runningSession: (sessionId: string) => {
      const s = sessionOr404(sessionId)
      if (s.status !== "running") throw new HttpFailure(410, "sandbox_stopped", `Session ${sessionId} is ${s.status}`)
      return s
    },
    stop: () => sweeper.stop()
  }
}
