/**
 * The Vercel emulator's sandboxes: `POST /v3/sandboxes` (what Vercel's SDK creates with; `POST /v2/sandboxes` when
 * it names a `runtime`; a 409 for a name in use, a name made up when none is given), `GET /v2/sandboxes?project=`
 * (pages by cursor, filtered by name prefix and one tag), `GET|DELETE /v2/sandboxes/{name}?projectId=`, and the session's `GET /v2/sandboxes/sessions/{id}`, `POST …/stop` and `POST
 * …/extend-timeout`. A session ends at its timeout (its jail goes; the record stays until deleted); one whose
 * jail died reads as `failed`. Usage (active CPU from the jail's cgroup, egress from its network namespace) is
 * reported on the session and the sandbox, as Vercel meters it. Every runtime runs on the local runtime's one base
 * system; an `image` is pulled and run by the local runtime as built (a pull that fails is a 400 saying so; the
 * session's cwd is its WorkingDir); `ports` are refused (no routes are served).
 */
import { Option, Schema } from "effect"
import * as crypto from "node:crypto"
import { defaultInternetOf, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { bodyTextAndJson, runOrThrow as run, unhonouredField } from "../../core/emulator/server.ts"
import { jailLabels } from "../../../src/providers/jailLabels.ts"
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
const Domains = Schema.Array(Schema.String).pipe(Schema.maxItems(256))
const CreateSandbox = Schema.Struct({
  // The SDK sends none unless asked: Vercel names the sandbox then.
  name: Schema.optional(Name),
  projectId: Schema.String,
  persistent: Schema.optional(Schema.Boolean),
  runtime: Schema.optional(Schema.Literal("node22", "node24", "node26", "python3.13")),
  image: Schema.optional(Schema.String),
  resources: Schema.optional(Schema.Struct({ vcpus: Schema.Int.pipe(Schema.between(1, 8)) })),
  timeout: Schema.optional(Schema.Int.pipe(Schema.between(1000, MAX_TIMEOUT_MS))),
  ports: Schema.optional(Schema.Array(Schema.Int)),
  networkPolicy: Schema.optional(Schema.Union(
    // The older form, as Vercel still shows a policy: only domain names are enforced here.
    Schema.Struct({ mode: Schema.Literal("custom"), allowedDomains: Domains }),
    Schema.Struct({ mode: Schema.Literal("allow-all", "deny-all") }),
    // The SDK's form: domains to allow (rules per domain and subnets are refused, below, rather than ignored).
    Schema.Struct({ allow: Schema.optional(Domains) })
  )),
  env: Schema.optional(StringMap),
  tags: Schema.optional(StringMap)
})
/** Fields of the create that would change what a sandbox is, and that the emulator cannot do: refused, never ignored. */
const UNHONOURED_CREATE = {
  source: "sources (git, tarball, snapshot) are not emulated: every sandbox starts from its runtime or image",
  mounts: "drives are not emulated",
  networkId: "private networks are not emulated"
}
/** The same for a network policy: what it would let through or change cannot be enforced here. */
const UNHONOURED_POLICY = {
  subnets: "subnet rules are not emulated (only domain names are enforced)",
  allowedCIDRs: "CIDR rules are not emulated (only domain names are enforced)",
  deniedCIDRs: "CIDR rules are not emulated (only domain names are enforced)",
  injectionRules: "header injection is not emulated",
  forwardRules: "forwarding is not emulated"
}
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
    if (projectId !== books.projectId) throw new HttpFailure(404, `Project ${projectId ?? "(none)"} not found`, "not_found")
  }
  const sandboxOr404 = (name: string) => {
    const s = state.sandboxes[name]
    if (s === undefined) throw new HttpFailure(404, `Sandbox ${name} not found`, "not_found")
    return s
  }
  const sessionOr404 = (sessionId: string) => {
    const s = books.bySession(sessionId)
    if (s === undefined) throw new HttpFailure(404, `Session ${sessionId} not found`, "not_found")
    return s
  }

  /** The domains a policy allows (undefined: every domain). */
  const allowedDomainsOf = (policy: (typeof CreateSandbox.Type)["networkPolicy"]): ReadonlyArray<string> | undefined => {
    if (policy === undefined) return undefined
    if ("allowedDomains" in policy) return policy.allowedDomains
    if ("mode" in policy) return undefined
    return policy.allow ?? []
  }

  const create = async (request: Request) => {
    const { text, raw } = await bodyTextAndJson(request)
    const refused = unhonouredField(raw, UNHONOURED_CREATE)
    if (refused !== undefined) throw new HttpFailure(400, refused, "bad_request")
    const policy = (raw as { networkPolicy?: unknown } | null)?.networkPolicy
    const refusedPolicy = unhonouredField(policy, UNHONOURED_POLICY)
    if (refusedPolicy !== undefined) throw new HttpFailure(400, `networkPolicy.${refusedPolicy}`, "bad_request")
    const allow = (policy as { allow?: unknown } | null | undefined)?.allow
    if (allow !== undefined && allow !== null && !Array.isArray(allow)) throw new HttpFailure(400, "networkPolicy.allow: rules per domain are not emulated (give a list of domains)", "bad_request")
    const body = await readBody(new Request(request.url, { method: "POST", body: text }), CreateSandbox)
    if (body.projectId !== books.projectId) throw new HttpFailure(404, `Project ${body.projectId} not found`, "not_found")
    if ((body.ports ?? []).length > 0) throw new HttpFailure(400, "the emulator serves no routes", "bad_request")
    if (body.persistent === true) throw new HttpFailure(400, "persistent sandboxes are not emulated", "bad_request")
    if (body.runtime !== undefined && body.image !== undefined) throw new HttpFailure(400, "runtime and image cannot be used together", "bad_request")
    const allowedDomains = allowedDomainsOf(body.networkPolicy)
    const name = body.name ?? `sbx-${crypto.randomBytes(8).toString("hex")}`
    if (state.sandboxes[name] !== undefined || creating.has(name)) throw new HttpFailure(409, `Sandbox ${name} already exists`, "conflict")
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
        internet: body.networkPolicy === undefined ? defaultInternetOf(runtime) : !("mode" in body.networkPolicy && body.networkPolicy.mode === "deny-all"),
        ...(allowedDomains !== undefined ? { allowedDomains: [...allowedDomains] } : {}),
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
    if (s.status !== "running") throw new HttpFailure(410, `Session ${s.sessionId} is ${s.status}`, "sandbox_stopped")
    if (s.timeout + duration > MAX_TIMEOUT_MS) throw new HttpFailure(400, `a session lasts at most ${MAX_TIMEOUT_MS} ms`, "bad_request")
    s.timeout += duration
    save()
    return json({ session: sessionWire(s) })
  }

  /**
   * `GET /v2/sandboxes?project=&limit=&cursor=&namePrefix=&tags=key:value&sortBy=createdAt|name&sortOrder=asc|desc`:
   * a page of the project's sandboxes and the cursor of the next (null on the last).
   */
  const list = (url: URL) => {
    projectOf(url)
    const limitRaw = url.searchParams.get("limit")
    const limit = limitRaw === null ? 50 : Number(limitRaw)
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new HttpFailure(400, "limit must be between 1 and 100", "bad_request")
    const sortBy = url.searchParams.get("sortBy") ?? "createdAt"
    const sortOrder = url.searchParams.get("sortOrder") ?? "desc"
    if (sortBy !== "createdAt" && sortBy !== "name") throw new HttpFailure(400, "sortBy must be createdAt or name", "bad_request")
    if (sortOrder !== "asc" && sortOrder !== "desc") throw new HttpFailure(400, "sortOrder must be asc or desc", "bad_request")
    const prefix = url.searchParams.get("namePrefix") ?? ""
    const tags = url.searchParams.getAll("tags").map((t) => {
      const at = t.indexOf(":")
      if (at <= 0) throw new HttpFailure(400, `a tag filter is key:value, not ${t}`, "bad_request")
      return [t.slice(0, at), t.slice(at + 1)] as const
    })
    const key = (s: EmulatedSandbox) => (sortBy === "name" ? s.name : String(s.createdAt).padStart(16, "0") + s.name)
    const all = Object.values(state.sandboxes)
      .filter((s) => s.name.startsWith(prefix) && tags.every(([k, v]) => s.tags[k] === v))
      .sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0) * (sortOrder === "asc" ? 1 : -1))
    const cursor = url.searchParams.get("cursor")
    const from = cursor === null ? 0 : Number(Buffer.from(cursor, "base64url").toString())
    if (!Number.isInteger(from) || from < 0) throw new HttpFailure(400, "unknown cursor", "bad_request")
    const page = all.slice(from, from + limit)
    const next = from + limit < all.length ? Buffer.from(String(from + limit)).toString("base64url") : null
    return json({ sandboxes: page.map(sandboxWire), pagination: { count: all.length, next } })
  }

  return {
    create,
    list,
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
      if (s.status !== "running") throw new HttpFailure(410, `Session ${sessionId} is ${s.status}`, "sandbox_stopped")
      return s
    },
    stop: () => sweeper.stop()
  }
}
