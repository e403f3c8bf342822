/**
 * A loopback emulator of CodeSandbox's REST API as its official SDK (`@codesandbox/sdk` 2.4.2, lifecycle) and the
 * adapter use it, backed by the local runtime (a running VM is a jail `csb-<sandbox id>`; a hibernated VM is that
 * jail frozen). Every answer is `{success, data, errors}`; requests need the emulator's key as a Bearer.
 *
 * - `GET /vm/running` → `{concurrent_vm_count, concurrent_vm_limit, vms: [{id, credit_basis, specs}]}`;
 * - `GET /sandbox?tags=a,b&page=&page_size=&order_by=inserted_at|updated_at&direction=asc|desc&status=running`
 *   (sandboxes carrying every tag, a page of them with `{current_page, next_page, total_records}`) and `GET
 *   /sandbox/{id}`;
 * - `POST /sandbox/{id}/fork {title?, tags?, privacy?, description?, path?, private_preview?}`: forks a template
 *   (`pcz35m`, the only one it knows) or any of its sandboxes; an unknown id is 404. The fork does not start.
 * - `POST /vm/{id}/start {tier?, hibernation_timeout_seconds?, automatic_wakeup_config?}`: answers once the VM runs,
 *   with how it booted (`FORK` the first time, `RESUME` from hibernation, `CLEAN` after a shutdown, `RUNNING` when
 *   it ran); above the concurrent-VM limit it is 429. A running VM keeps its tier.
 * - `POST /vm/{id}/hibernate` (of a VM not running: nothing to do), `POST /vm/{id}/shutdown` (the VM stops; the next
 *   start is a clean boot) and `DELETE /vm/{id}` (the sandbox and its VM; then 404).
 *
 * A running VM hibernates on its own once its hibernation timeout has passed since it was started (the gateway
 * never uses it in between: there is no runtime). What it does not reproduce: the pitcher websocket (commands,
 * files, ports), templates other than the default, workspaces and their tiers' availability, automatic wake-up.
 */
import { Effect, Option, Schema, type Scope } from "effect"
import * as crypto from "node:crypto"
import { AppConfig } from "../../../src/Config.ts"
import { defaultInternetOf, LocalRuntime, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { answering, failureAnswer, HttpFailure } from "../../core/emulator/failure.ts"
import { decodeJsonBody, emulatorServeOptions, makeRouter, route, runOrThrow as run, scopedEmulator, servePersistent } from "../../core/emulator/server.ts"
import { emulatorHome, emulatorKey, persistentState } from "../../core/emulator/state.ts"
import { CODESANDBOX_TIERS } from "../../../src/providers/resources.ts"
import { jailLabels } from "../../../src/providers/jailLabels.ts"
import { keyedSerial } from "../../../src/domain/KeyedSerial.ts"
import { DEFAULT_TEMPLATE_ID, sandboxIdOfTags } from "../adapter/wire.ts"

const TierName = Schema.Literal("Pico", "Nano", "Micro", "Small", "Medium", "Large", "XLarge")

const Sandbox = Schema.mutable(Schema.Struct({
  id: Schema.String,
  title: Schema.NullOr(Schema.String),
  description: Schema.NullOr(Schema.String),
  tags: Schema.mutable(Schema.Array(Schema.String)),
  privacy: Schema.Number,
  forkedFrom: Schema.String,
  createdAt: Schema.String,
  updatedAt: Schema.String,
  vm: Schema.Literal("off", "running", "hibernated"),
  /** Whether it ever ran: the first start of a fork is its `FORK` boot, later ones from off are `CLEAN`. */
  booted: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  tier: TierName,
  hibernationTimeoutSeconds: Schema.Number,
  startedAtMs: Schema.NullOr(Schema.Number)
}))
type Sandbox = typeof Sandbox.Type
const State = Schema.mutable(Schema.Struct({ sandboxes: Schema.mutable(Schema.Record({ key: Schema.String, value: Sandbox })) }))

const Fork = Schema.Struct({
  title: Schema.optional(Schema.String.pipe(Schema.maxLength(255))),
  description: Schema.optional(Schema.String),
  tags: Schema.optional(Schema.Array(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(255)))),
  privacy: Schema.optional(Schema.Int.pipe(Schema.between(0, 2))),
  path: Schema.optional(Schema.String)
})
const Start = Schema.Struct({
  tier: Schema.optional(TierName),
  hibernation_timeout_seconds: Schema.optional(Schema.Int.pipe(Schema.between(1, 86_400))),
  ipcountry: Schema.optional(Schema.String),
  automatic_wakeup_config: Schema.optional(Schema.Struct({ http: Schema.optional(Schema.Boolean), websocket: Schema.optional(Schema.Boolean) }))
})

const ok = (data: unknown, status = 200) => Response.json({ success: true, data, errors: null }, { status })
const failure = (status: number, message: string) => Response.json({ success: false, data: null, errors: [message] }, { status })
const answerFailure = failureAnswer("codesandbox", (f) => failure(f.status, f.message))

const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const body = await decodeJsonBody(request, schema, { emptyIsObject: true })
  if (!body.ok) throw body.problem === "json" ? new HttpFailure(400, body.message) : new HttpFailure(422, body.message)
  return body.value
}

export interface CodeSandboxEmulatorInfo {
  readonly apiUrl: string
  readonly apiKey: string
  /** The local-runtime jail behind a sandbox id (undefined: none). */
  readonly runtimeIdOf: (id: string) => string | undefined
}
export interface CodeSandboxEmulatorHandle extends CodeSandboxEmulatorInfo {
  readonly stop: () => void
}

const SWEEP_MS = 1000
const jailOf = (id: string) => `csb-${id}`

export const startCodeSandboxEmulator = (dataDir: string, runtime: LocalRuntimeShape, options: { readonly concurrentVmLimit?: number } = {}): CodeSandboxEmulatorHandle => {
  const dir = emulatorHome(dataDir, "codesandbox")
  const apiKey = emulatorKey(dir, () => `csb_v1_${crypto.randomBytes(24).toString("base64url")}`)
  const { state, save } = persistentState(dir, State, (): typeof State.Type => ({ sandboxes: {} }))
  const limit = options.concurrentVmLimit ?? 20
  /** One state change of a sandbox at a time, in order. */
  const serial = keyedSerial().run

  const view = (s: Sandbox) => ({
    id: s.id,
    title: s.title,
    description: s.description,
    tags: s.tags,
    privacy: s.privacy,
    is_frozen: false,
    settings: { use_pint: false },
    created_at: s.createdAt,
    updated_at: s.updatedAt
  })
  const sandboxOr404 = (id: string) => {
    const s = state.sandboxes[id]
    if (s === undefined) throw new HttpFailure(404, `Sandbox ${id} not found`)
    return s
  }
  const sizeOf = (s: Sandbox) => CODESANDBOX_TIERS.find((t) => t.size === s.tier)!

  /** A VM counts as running while its jail does (one that died is off). */
  const runningVms = async () => {
    const out: Array<Sandbox> = []
    for (const s of Object.values(state.sandboxes)) {
      if (s.vm !== "running") continue
      const jail = await run(runtime.get(jailOf(s.id))).catch(() => Option.none())
      if (Option.isSome(jail) && jail.value.state === "running") out.push(s)
    }
    return out
  }

  const fork = async (request: Request, id: string) => {
    const body = await readBody(request, Fork)
    const source = state.sandboxes[id]
    if (source === undefined && id !== DEFAULT_TEMPLATE_ID) throw new HttpFailure(404, `Sandbox ${id} not found`)
    const now = new Date().toISOString()
    const s: Sandbox = {
      id: crypto.randomBytes(3).toString("hex"),
      title: body.title ?? `${source?.title ?? id} (forked)`,
      description: body.description ?? null,
      tags: [...(body.tags ?? [])],
      privacy: body.privacy ?? 0,
      forkedFrom: id,
      createdAt: now,
      updatedAt: now,
      vm: "off",
      booted: false,
      tier: "Nano",
      hibernationTimeoutSeconds: 300,
      startedAtMs: null
    }
    state.sandboxes[s.id] = s
    save()
    return ok({ id: s.id, alias: s.id, title: s.title, start_response: null }, 201)
  }

  const start = async (request: Request, id: string) => {
    const body = await readBody(request, Start)
    const s = sandboxOr404(id)
    return serial(id, async () => {
      if (state.sandboxes[id] === undefined) throw new HttpFailure(404, `Sandbox ${id} not found`)
      if (s.vm !== "running" && (await runningVms()).length >= limit) throw new HttpFailure(429, `concurrent VM limit of ${limit} reached`)
      if (body.hibernation_timeout_seconds !== undefined) s.hibernationTimeoutSeconds = body.hibernation_timeout_seconds
      const bootupType = s.vm === "running" ? "RUNNING" : s.vm === "hibernated" ? "RESUME" : s.booted ? "CLEAN" : "FORK"
      if (s.vm === "off") {
        if (body.tier !== undefined) s.tier = body.tier
        const size = sizeOf(s)
        await run(runtime.create({
          id: jailOf(id),
          vcpu: size.vcpu,
          memoryMb: size.memoryMb,
          // CodeSandbox VMs reach the internet; there is no switch to keep one off it.
          internet: defaultInternetOf(runtime),
          env: {},
          labels: jailLabels("codesandbox", id, sandboxIdOfTags(s.tags))
        }))
      } else if (s.vm === "hibernated") {
        await run(runtime.resume(jailOf(id)))
      }
      s.vm = "running"
      s.booted = true
      s.startedAtMs = Date.now()
      s.updatedAt = new Date().toISOString()
      save()
      return ok({
        id,
        bootup_type: bootupType,
        cluster: "local",
        latest_pitcher_version: "0",
        pitcher_manager_version: "0",
        pitcher_token: "",
        pitcher_url: "",
        pitcher_version: "0",
        reconnect_token: "",
        use_pint: false,
        user_workspace_path: "/workspace",
        workspace_path: "/workspace"
      })
    })
  }

  const hibernate = (id: string) => {
    const s = sandboxOr404(id)
    return serial(id, async () => {
      if (s.vm === "running") {
        await run(runtime.pause(jailOf(id)))
        s.vm = "hibernated"
        s.startedAtMs = null
        save()
      }
      return ok({})
    })
  }

  /** The VM stops (its jail goes); the sandbox stays, and its next start boots clean. */
  const shutdown = (id: string) => {
    const s = sandboxOr404(id)
    return serial(id, async () => {
      if (s.vm !== "off") {
        await run(runtime.destroy(jailOf(id)))
        s.vm = "off"
        s.startedAtMs = null
        s.updatedAt = new Date().toISOString()
        save()
      }
      return ok({})
    })
  }

  const remove = (id: string) => {
    sandboxOr404(id)
    return serial(id, async () => {
      if (state.sandboxes[id] === undefined) throw new HttpFailure(404, `Sandbox ${id} not found`)
      await run(runtime.destroy(jailOf(id)))
      delete state.sandboxes[id]
      save()
      return ok({})
    })
  }

  const list = async (url: URL) => {
    const wanted = (url.searchParams.get("tags") ?? "").split(",").map((t) => t.trim()).filter((t) => t !== "")
    const page = Number(url.searchParams.get("page") ?? "1")
    const pageSize = Number(url.searchParams.get("page_size") ?? "20")
    if (!Number.isInteger(page) || page < 1 || !Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100) throw new HttpFailure(422, "page must be at least 1 and page_size 1-100")
    const orderBy = url.searchParams.get("order_by") ?? "inserted_at"
    const direction = url.searchParams.get("direction") ?? "desc"
    if (orderBy !== "inserted_at" && orderBy !== "updated_at") throw new HttpFailure(422, "order_by must be inserted_at or updated_at")
    if (direction !== "asc" && direction !== "desc") throw new HttpFailure(422, "direction must be asc or desc")
    const status = url.searchParams.get("status")
    if (status !== null && status !== "running") throw new HttpFailure(422, "status must be running")
    const running = status === null ? undefined : new Set((await runningVms()).map((s) => s.id))
    const key = (s: Sandbox) => (orderBy === "inserted_at" ? s.createdAt : s.updatedAt) + s.id
    const sandboxes = Object.values(state.sandboxes)
      .filter((s) => wanted.every((t) => s.tags.includes(t)) && (running === undefined || running.has(s.id)))
      .sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0) * (direction === "asc" ? 1 : -1))
    const from = (page - 1) * pageSize
    const more = from + pageSize < sandboxes.length
    return ok({ sandboxes: sandboxes.slice(from, from + pageSize).map(view), pagination: { current_page: page, next_page: more ? page + 1 : null, total_records: sandboxes.length } })
  }

  const router = makeRouter<{ readonly request: Request; readonly url: URL }>([
    route("GET", "/vm/running", async () => {
      const vms = await runningVms()
      return ok({
        concurrent_vm_count: vms.length,
        concurrent_vm_limit: limit,
        vms: vms.map((s) => {
          const size = sizeOf(s)
          return { id: s.id, credit_basis: s.tier, session_started_at: new Date(s.startedAtMs ?? Date.now()).toISOString(), specs: { cpu: size.vcpu, memory: size.memoryMb, storage: 20_480 } }
        })
      })
    }),
    route("GET", "/sandbox", ({ url }) => list(url)),
    route("GET", "/sandbox/:id", (_, { id }) => ok(view(sandboxOr404(id!)))),
    route("POST", "/sandbox/:id/fork", ({ request }, { id }) => fork(request, id!)),
    route("POST", "/vm/:id/start", ({ request }, { id }) => start(request, id!)),
    route("POST", "/vm/:id/hibernate", (_, { id }) => hibernate(id!)),
    route("POST", "/vm/:id/shutdown", (_, { id }) => shutdown(id!)),
    route("DELETE", "/vm/:id", (_, { id }) => remove(id!))
  ])

  const handle = async (request: Request): Promise<Response> => {
    if (request.headers.get("authorization") !== `Bearer ${apiKey}`) return failure(401, "Unauthorized: invalid API token")
    const url = new URL(request.url)
    const found = router.match(request.method, url.pathname)
    if (found._tag !== "Found") return failure(found._tag === "MethodNotAllowed" ? 405 : 404, "Not found")
    return answering(answerFailure, () => found.handle({ request, url }))
  }

  // Running VMs past their hibernation timeout hibernate.
  const sweeper = setInterval(() => {
    const now = Date.now()
    for (const s of Object.values(state.sandboxes)) {
      if (s.vm === "running" && s.startedAtMs !== null && now - s.startedAtMs >= s.hibernationTimeoutSeconds * 1000) void hibernate(s.id).catch(() => undefined)
    }
  }, SWEEP_MS)
  sweeper.unref()

  const server = servePersistent(dir, (port) => Bun.serve({ ...emulatorServeOptions("codesandbox"), hostname: "127.0.0.1", port, idleTimeout: 120, fetch: handle }))
  return {
    apiUrl: `http://127.0.0.1:${server.port}`,
    apiKey,
    runtimeIdOf: (id) => (state.sandboxes[id] === undefined ? undefined : jailOf(id)),
    stop: () => {
      clearInterval(sweeper)
      server.stop(true)
    }
  }
}

/** The emulator for the running gateway: started in the caller's scope, stopped when it closes. */
export const codesandboxEmulator: Effect.Effect<CodeSandboxEmulatorInfo, never, AppConfig | LocalRuntime | Scope.Scope> = scopedEmulator(startCodeSandboxEmulator, (h) => ({ apiUrl: h.apiUrl, apiKey: h.apiKey, runtimeIdOf: h.runtimeIdOf }))
