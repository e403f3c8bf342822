/**
 * A loopback emulator of Northflank's REST API as its official client (`@northflank/js-client` 0.9.5, lifecycle)
 * and the adapter use it, backed by the local runtime (a deployment service with one instance is a jail
 * `nf-<service id>`; a paused service is that jail frozen). Successes are 200 with `{data}` (the client takes any
 * other status as an error), errors `{error: {status, message}}`; requests need the emulator's token as a Bearer and
 * its one project (`/v1/projects/{project}/…`, or under `/v1/teams/{any}/…`).
 *
 * - `POST …/services/deployment`: a name in use is 409 "already exists". The external image runs for real: the
 *   default image (`ubuntu:22.04`) is the runtime's own base system, any other is pulled (a failed pull is a 400
 *   saying `image pull failed: …`), on the host's architecture only. The service is answered once its instance
 *   runs (status `COMPLETED`). A `customCommand` is started as `sh -c <command>` after the image's Entrypoint, but
 *   `sleep infinity` (the adapter's idle command) starts nothing; without one the image's Entrypoint and Cmd run.
 * - `GET …/services[?per_page=&cursor=]` (`{services}` with `pagination: {hasNextPage, cursor, count}`);
 *   `GET …/services/{id}`; `POST …/pause`; `POST …/resume {instances}`; `POST …/scale {instances: 0 | 1}` (0 pauses,
 *   1 resumes); `DELETE …/services/{id}` (with or without `delete_child_objects`: there are no volumes here).
 * - `GET /v1/billing/usage?serviceId&startTime&endTime&interval=hour`: per started hour, the plan's price (cents)
 *   for the time an instance ran in it; kept a week after the service is deleted.
 * - A service is deleted once its `expiryTime` (seconds) has passed.
 *
 * Not reproduced: builds, ports and domains, volumes, exec (websocket), GPUs, regions, plan availability.
 */
import { Effect, Option, Schema, type Scope } from "effect"
import * as crypto from "node:crypto"
import { AppConfig } from "../../../src/Config.ts"
import { defaultInternetOf, LocalRuntime, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { answering, failureAnswer, HttpFailure } from "../../core/emulator/failure.ts"
import { decodeJsonBody, emulatorServeOptions, makeRouter, route, runOrThrow as run, scopedEmulator, servePersistent } from "../../core/emulator/server.ts"
import { emulatorHome, emulatorKey, persistentState } from "../../core/emulator/state.ts"
import { jailLabels } from "../../../src/providers/jailLabels.ts"
import { DEFAULT_IMAGE, IDLE_COMMAND, planCentsPerHour, planSize, sandboxIdOfDescription } from "../adapter/wire.ts"

export const EMULATED_PROJECT = "metal-emulated"
const HOUR_MS = 3_600_000
const KEPT_MS = 7 * 24 * HOUR_MS
const SWEEP_MS = 1000

const Service = Schema.mutable(Schema.Struct({
  id: Schema.String,
  description: Schema.NullOr(Schema.String),
  tags: Schema.mutable(Schema.Array(Schema.String)),
  plan: Schema.String,
  imagePath: Schema.String,
  architecture: Schema.Literal("x86", "arm"),
  createdAtMs: Schema.Number,
  expiryTime: Schema.NullOr(Schema.Number),
  paused: Schema.Boolean,
  /** When an instance ran: [from, to] (to null while it runs). */
  runs: Schema.mutable(Schema.Array(Schema.mutable(Schema.Tuple(Schema.Number, Schema.NullOr(Schema.Number))))),
  deletedAtMs: Schema.NullOr(Schema.Number)
}))
type Service = typeof Service.Type
const State = Schema.mutable(Schema.Struct({ services: Schema.mutable(Schema.Record({ key: Schema.String, value: Service })) }))

const CreateService = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[a-z0-9]([a-z0-9-]{0,37}[a-z0-9])?$/)),
  description: Schema.optional(Schema.String),
  tags: Schema.optional(Schema.Array(Schema.String)),
  billing: Schema.Struct({ deploymentPlan: Schema.String }),
  infrastructure: Schema.optional(Schema.Struct({ architecture: Schema.optional(Schema.Literal("x86", "arm")) })),
  deployment: Schema.Struct({
    instances: Schema.Int.pipe(Schema.between(0, 1)),
    external: Schema.Struct({ imagePath: Schema.String.pipe(Schema.minLength(1)), credentials: Schema.optional(Schema.String) }),
    docker: Schema.optional(Schema.Struct({ configType: Schema.Literal("default", "customCommand"), customCommand: Schema.optional(Schema.String) })),
    storage: Schema.optional(Schema.Struct({ ephemeralStorage: Schema.optional(Schema.Struct({ storageSize: Schema.optional(Schema.Int.pipe(Schema.positive())) })) }))
  }),
  runtimeEnvironment: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  expiryTime: Schema.optional(Schema.Int.pipe(Schema.between(300, 604_800)))
})
const Resume = Schema.Struct({ instances: Schema.optional(Schema.Int.pipe(Schema.between(1, 1))) })
const Scale = Schema.Struct({ instances: Schema.Int.pipe(Schema.between(0, 1)) })

const data = (body: unknown, status = 200) => Response.json({ data: body }, { status })
const failure = (status: number, message: string) => Response.json({ error: { status, message, id: crypto.randomUUID() } }, { status })
const answerFailure = failureAnswer("northflank", (f) => failure(f.status, f.message))

const readBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const body = await decodeJsonBody(request, schema, { emptyIsObject: true })
  if (!body.ok) throw new HttpFailure(400, body.message)
  return body.value
}

export interface NorthflankEmulatorInfo {
  /** The API base (ends with `/v1`). */
  readonly apiUrl: string
  readonly apiToken: string
  readonly projectId: string
  /** The local-runtime jail behind a service id (undefined: none). */
  readonly runtimeIdOf: (id: string) => string | undefined
}
export interface NorthflankEmulatorHandle extends NorthflankEmulatorInfo {
  readonly stop: () => void
}

const jailOf = (id: string) => `nf-${id}`
const HOST_ARCH = process.arch === "arm64" ? "arm" : "x86"

export const startNorthflankEmulator = (dataDir: string, runtime: LocalRuntimeShape): NorthflankEmulatorHandle => {
  const dir = emulatorHome(dataDir, "northflank")
  const apiToken = emulatorKey(dir, () => `nf-${crypto.randomBytes(24).toString("base64url")}`)
  const { state, save } = persistentState(dir, State, (): typeof State.Type => ({ services: {} }))
  const creating = new Set<string>()

  const live = (id: string) => {
    const s = state.services[id]
    return s === undefined || s.deletedAtMs !== null ? undefined : s
  }
  const serviceOr404 = (id: string) => {
    const s = live(id)
    if (s === undefined) throw new HttpFailure(404, `Service ${id} not found`)
    return s
  }

  const view = async (s: Service) => {
    const jail = await run(runtime.get(jailOf(s.id))).catch(() => Option.none())
    const up = Option.isSome(jail) && jail.value.state !== "stopped"
    return {
      id: s.id,
      appId: `/emulator/${EMULATED_PROJECT}/${s.id}`,
      name: s.id,
      description: s.description,
      tags: s.tags,
      projectId: EMULATED_PROJECT,
      serviceType: "deployment",
      disabledCI: true,
      disabledCD: false,
      createdAt: new Date(s.createdAtMs).toISOString(),
      servicePaused: s.paused,
      billing: { deploymentPlan: s.plan },
      deployment: { instances: s.paused ? 0 : 1, external: { imagePath: s.imagePath } },
      status: { deployment: { status: s.paused || up ? "COMPLETED" : "FAILED", reason: "DEPLOYING" } }
    }
  }

  const create = async (request: Request) => {
    const body = await readBody(request, CreateService)
    const id = body.name
    if (live(id) !== undefined || creating.has(id)) throw new HttpFailure(409, `A service with the name ${id} already exists`)
    const architecture = body.infrastructure?.architecture ?? "x86"
    if (architecture !== HOST_ARCH) throw new HttpFailure(400, `no ${architecture} nodes are available in this project's cluster`)
    const size = planSize(body.billing.deploymentPlan)
    if (size === undefined) throw new HttpFailure(400, `unknown deployment plan ${body.billing.deploymentPlan}`)
    const command = body.deployment.docker?.configType === "customCommand" ? body.deployment.docker.customCommand : undefined
    creating.add(id)
    try {
      await run(runtime.destroy(jailOf(id)))
      await run(runtime.create({
        id: jailOf(id),
        vcpu: size.vcpu,
        memoryMb: size.memoryMb,
        diskMb: Math.max(32, body.deployment.storage?.ephemeralStorage?.storageSize ?? 1024),
        // Northflank containers reach the internet; there is no switch to keep one off it.
        internet: defaultInternetOf(runtime),
        env: { ...body.runtimeEnvironment },
        labels: jailLabels("northflank", id, sandboxIdOfDescription(body.description)),
        // The default image is the runtime's base system; any other is pulled and run.
        ...(body.deployment.external.imagePath === DEFAULT_IMAGE
          ? {}
          // The adapter's idle command keeps the container up instead of the image's Cmd: here, nothing is started.
          : { image: { reference: body.deployment.external.imagePath, ...(command === undefined ? {} : command === IDLE_COMMAND ? { idle: true } : { command: ["sh", "-c", command] }) } })
      }))
      if (body.deployment.instances === 0) await run(runtime.pause(jailOf(id)))
      const now = Date.now()
      const s: Service = {
        id,
        description: body.description ?? null,
        tags: [...(body.tags ?? [])],
        plan: body.billing.deploymentPlan,
        imagePath: body.deployment.external.imagePath,
        architecture,
        createdAtMs: now,
        expiryTime: body.expiryTime ?? null,
        paused: body.deployment.instances === 0,
        runs: body.deployment.instances === 0 ? [] : [[now, null]],
        deletedAtMs: null
      }
      state.services[id] = s
      save()
      return data(await view(s))
    } finally {
      creating.delete(id)
    }
  }

  const pause = async (id: string) => {
    const s = serviceOr404(id)
    if (!s.paused) {
      await run(runtime.pause(jailOf(id)))
      s.paused = true
      const open = s.runs.at(-1)
      if (open !== undefined && open[1] === null) open[1] = Date.now()
      save()
    }
    return data({})
  }

  const unpause = async (id: string) => {
    const s = serviceOr404(id)
    if (s.paused) {
      await run(runtime.resume(jailOf(id)))
      s.paused = false
      s.runs.push([Date.now(), null])
      save()
    }
    return data({})
  }

  const resume = async (request: Request, id: string) => {
    await readBody(request, Resume)
    return unpause(id)
  }

  /** A service's instances set to 0 (paused) or 1 (running). */
  const scale = async (request: Request, id: string) => {
    const { instances } = await readBody(request, Scale)
    return instances === 0 ? pause(id) : unpause(id)
  }

  /** A page of the project's live services, newest first, and where the next starts. */
  const list = async (url: URL) => {
    const perPage = Number(url.searchParams.get("per_page") ?? "50")
    if (!Number.isInteger(perPage) || perPage < 1 || perPage > 100) throw new HttpFailure(400, "per_page must be between 1 and 100")
    const cursor = url.searchParams.get("cursor")
    const page = Number(url.searchParams.get("page") ?? "1")
    const from = cursor !== null ? Number(Buffer.from(cursor, "base64url").toString()) : (page - 1) * perPage
    if (!Number.isInteger(from) || from < 0) throw new HttpFailure(400, "unknown cursor or page")
    const all = Object.values(state.services).filter((s) => s.deletedAtMs === null).sort((a, b) => b.createdAtMs - a.createdAtMs || (a.id < b.id ? -1 : 1))
    const slice = all.slice(from, from + perPage)
    const more = from + perPage < all.length
    return Response.json({
      data: { services: await Promise.all(slice.map(view)) },
      pagination: { hasNextPage: more, ...(more ? { cursor: Buffer.from(String(from + perPage)).toString("base64url") } : {}), count: slice.length }
    })
  }

  const remove = async (id: string) => {
    const s = serviceOr404(id)
    await run(runtime.destroy(jailOf(id)))
    const now = Date.now()
    const open = s.runs.at(-1)
    if (open !== undefined && open[1] === null) open[1] = now
    s.deletedAtMs = now
    save()
    return data({})
  }

  /** Per started hour of the range: the plan's price for the time an instance ran in it. */
  const usage = (url: URL) => {
    const id = url.searchParams.get("serviceId") ?? ""
    const start = Date.parse(url.searchParams.get("startTime") ?? "")
    const end = Date.parse(url.searchParams.get("endTime") ?? "")
    if (Number.isNaN(start) || Number.isNaN(end) || end < start) throw new HttpFailure(400, "startTime and endTime must be ISO times, in order")
    if ((url.searchParams.get("interval") ?? "hour") !== "hour") throw new HttpFailure(400, "only hourly intervals are kept")
    const s = state.services[id]
    const now = Date.now()
    const entries: Array<{ startTime: string; endTime: string; price: { total: number } }> = []
    if (s !== undefined) {
      const cents = planCentsPerHour(planSize(s.plan) ?? { vcpu: 0, memoryMb: 0 })
      for (let h = Math.floor(start / HOUR_MS) * HOUR_MS; h < end && h <= now; h += HOUR_MS) {
        const ran = s.runs.reduce((ms, [from, to]) => ms + Math.max(0, Math.min(to ?? now, h + HOUR_MS) - Math.max(from, h)), 0)
        if (ran > 0) entries.push({ startTime: new Date(h).toISOString(), endTime: new Date(h + HOUR_MS).toISOString(), price: { total: (cents * ran) / HOUR_MS } })
      }
    }
    return data({ usage: entries })
  }

  const routes = (prefix: string) => [
    route<Ctx>("POST", `${prefix}/services/deployment`, ({ request }) => create(request)),
    route<Ctx>("GET", `${prefix}/services`, ({ url }) => list(url)),
    route<Ctx>("POST", `${prefix}/services/:id/scale`, ({ request }, { id }) => scale(request, id!)),
    route<Ctx>("GET", `${prefix}/services/:id`, async (_, { id }) => data(await view(serviceOr404(id!)))),
    route<Ctx>("POST", `${prefix}/services/:id/pause`, (_, { id }) => pause(id!)),
    route<Ctx>("POST", `${prefix}/services/:id/resume`, ({ request }, { id }) => resume(request, id!)),
    route<Ctx>("DELETE", `${prefix}/services/:id`, (_, { id }) => remove(id!))
  ]
  type Ctx = { readonly request: Request; readonly url: URL }
  const router = makeRouter<Ctx>([
    route<Ctx>("GET", "/v1/billing/usage", ({ url }) => usage(url)),
    ...routes("/v1/projects/:project"),
    ...routes("/v1/teams/:team/projects/:project")
  ])

  const handle = async (request: Request): Promise<Response> => {
    if (request.headers.get("authorization") !== `Bearer ${apiToken}`) return failure(401, "Unauthorized")
    const url = new URL(request.url)
    const found = router.match(request.method, url.pathname)
    if (found._tag !== "Found") return failure(found._tag === "MethodNotAllowed" ? 405 : 404, "Not found")
    const parts = url.pathname.split("/")
    const project = parts[2] === "projects" ? parts[3] : parts[2] === "teams" ? parts[5] : EMULATED_PROJECT
    if (project !== EMULATED_PROJECT) return failure(404, `Project ${project ?? ""} not found`)
    return answering(answerFailure, () => found.handle({ request, url }))
  }

  // Services past their expiry are deleted; deleted ones are forgotten after a week.
  const sweeper = setInterval(() => {
    const now = Date.now()
    for (const s of Object.values(state.services)) {
      if (s.deletedAtMs === null && s.expiryTime !== null && now - s.createdAtMs >= s.expiryTime * 1000) void remove(s.id).catch(() => undefined)
      if (s.deletedAtMs !== null && now - s.deletedAtMs > KEPT_MS) {
        delete state.services[s.id]
        save()
      }
    }
  }, SWEEP_MS)
  sweeper.unref()

  const server = servePersistent(dir, (port) => Bun.serve({ ...emulatorServeOptions("northflank"), hostname: "127.0.0.1", port, idleTimeout: 240, fetch: handle }))
  return {
    apiUrl: `http://127.0.0.1:${server.port}/v1`,
    apiToken,
    projectId: EMULATED_PROJECT,
    runtimeIdOf: (id) => (live(id) === undefined ? undefined : jailOf(id)),
    stop: () => {
      clearInterval(sweeper)
      server.stop(true)
    }
  }
}

/** The emulator for the running gateway: started in the caller's scope, stopped when it closes. */
export const northflankEmulator: Effect.Effect<NorthflankEmulatorInfo, never, AppConfig | LocalRuntime | Scope.Scope> = scopedEmulator(startNorthflankEmulator, (h) => ({ apiUrl: h.apiUrl, apiToken: h.apiToken, projectId: h.projectId, runtimeIdOf: h.runtimeIdOf }))

/** The architectures the emulator serves: the host's. */
export const EMULATED_ARCHITECTURES: ReadonlyArray<"x86_64" | "arm64"> = [HOST_ARCH === "arm" ? "arm64" : "x86_64"]
