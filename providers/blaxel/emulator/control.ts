/**
 * The Blaxel emulator's control API (`/v0`): `POST /sandboxes[?createIfNotExist=true]` (as Blaxel's SDK sends it: a
 * name made up when none is given, `spec.runtime.generation`, ports and other fields it does not act on ignored;
 * volumes, lifecycle policies and network settings refused with a 400 naming them), `GET /sandboxes` (pages of
 * `{data, meta}`), `GET|DELETE /sandboxes/{name}`, previews (`POST /sandboxes/{name}/previews`, `GET|DELETE …/previews/{preview}`),
 * `GET /workspaces/{workspace}` and `GET /accounts/{account}/metrics` (cost per sandbox, from the emulator's rate
 * card). A sandbox past its `ttl` is deleted; one whose jail died reads as `FAILED`. Blaxel's own images
 * (`blaxel/…`) are the runtime's base system; any other image is pulled and run as built (a process without a
 * `workingDir` starts in its WorkingDir).
 */
import { Option, Schema } from "effect"
import * as crypto from "node:crypto"
import { defaultInternetOf, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { bodyTextAndJson, makeRouter, route, runOrThrow as run, unhonouredField } from "../../core/emulator/server.ts"
import { jailLabels } from "../../../src/providers/jailLabels.ts"
import { LABEL_SANDBOX_ID } from "../adapter/wire.ts"
import type { Books, EmulatedSandbox } from "./books.ts"
import { controlError, Duration, durationSeconds, HttpFailure, json, readBody, StringMap } from "./http.ts"
import type { Previews } from "./preview.ts"
import { sweepEvery } from "../../core/emulator/state.ts"

/** The emulator's price of a deployed sandbox: per GB-second of memory (Blaxel bills memory time). */
export const EMULATED_USD_PER_GB_SECOND = 0.0000115
/** Blaxel states no disk size; the emulator gives the runtime's common 3 GiB (the size its warm jails have). */
const DISK_MB = 3072
const SWEEP_MS = 1000

const Name = Schema.String.pipe(Schema.pattern(/^[a-z0-9]([a-z0-9-]{0,47}[a-z0-9])?$/))
const CreateSandbox = Schema.Struct({
  // The SDK sends none unless asked: Blaxel names the sandbox then.
  metadata: Schema.optional(Schema.Struct({ name: Schema.optional(Name), labels: Schema.optional(StringMap), displayName: Schema.optional(Schema.String) })),
  spec: Schema.optional(Schema.Struct({
    region: Schema.optional(Schema.String),
    enabled: Schema.optional(Schema.Boolean),
    runtime: Schema.optional(Schema.Struct({
      image: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
      memory: Schema.optional(Schema.Int.pipe(Schema.between(512, 65_536))),
      ttl: Schema.optional(Duration),
      // An instant the sandbox is deleted at (the SDK's `expires`): the emulator turns it into a ttl.
      expires: Schema.optional(Schema.Date),
      envs: Schema.optional(Schema.Array(Schema.Struct({ name: Schema.String.pipe(Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]*$/)), value: Schema.String })))
    }))
  }))
})
/** Parts of a create the emulator cannot honour: refused with a 400 naming them, never ignored. */
const UNHONOURED_SPEC = {
  volumes: "volumes are not emulated",
  lifecycle: "lifecycle policies are not emulated (a ttl or expires is)",
  network: "network settings are not emulated (a Blaxel sandbox reaches the internet)"
}
const CreatePreview = Schema.Struct({
  metadata: Schema.Struct({ name: Name }),
  spec: Schema.Struct({ port: Schema.Int.pipe(Schema.between(1, 65_535)), public: Schema.optional(Schema.Boolean), ttl: Schema.optional(Duration) })
})

export interface ControlOptions {
  readonly baseUrl: () => string
  readonly previews: Previews
  /** A sandbox was deleted (its runtime id): what other planes keep for it goes. */
  readonly onDeleted: (runtimeId: string) => void
}

export const makeControl = (books: Books, runtime: LocalRuntimeShape, options: ControlOptions) => {
  const { state, save } = books
  const creating = new Map<string, Promise<EmulatedSandbox>>()

  const wire = (s: EmulatedSandbox, status = "DEPLOYED") => ({
    metadata: { name: s.name, workspace: books.workspace, labels: s.labels, createdAt: s.createdAt, url: `${options.baseUrl()}/run/${s.name}` },
    spec: { region: s.region, runtime: { image: s.image, memory: s.memory, ...(s.ttlSeconds === null ? {} : { ttl: `${s.ttlSeconds}s` }), envs: s.envs } },
    status,
    state: "RUNNING"
  })
  /** As Blaxel reports a sandbox whose machine died: FAILED. */
  const observed = async (s: EmulatedSandbox) => {
    const jail = await run(runtime.get(s.runtimeId)).catch(() => Option.none())
    return wire(s, Option.isSome(jail) && jail.value.state !== "stopped" ? "DEPLOYED" : "FAILED")
  }
  const sandboxOr404 = (name: string) => {
    const s = state.sandboxes[name]
    if (s === undefined) throw new HttpFailure(404, `Sandbox ${name} not found`)
    return s
  }

  const create = async (request: Request, url: URL) => {
    const { text, raw } = await bodyTextAndJson(request)
    const refused = unhonouredField((raw as { spec?: unknown } | null | undefined)?.spec, UNHONOURED_SPEC)
    if (refused !== undefined) throw new HttpFailure(400, `spec.${refused}`)
    const body = await readBody(new Request(request.url, { method: "POST", body: text }), CreateSandbox)
    const name = body.metadata?.name ?? `sandbox-${crypto.randomBytes(5).toString("hex")}`
    const existing = state.sandboxes[name] ?? (await creating.get(name))
    if (existing !== undefined) {
      if (url.searchParams.get("createIfNotExist") === "true") return json(await observed(existing))
      throw new HttpFailure(409, `Sandbox ${name} already exists`, "SANDBOX_ALREADY_EXISTS")
    }
    const spec = body.spec?.runtime
    const pending = (async () => {
      const sandbox: EmulatedSandbox = {
        name,
        runtimeId: crypto.randomUUID(),
        labels: { ...body.metadata?.labels },
        image: spec?.image ?? "blaxel/base-image:latest",
        memory: spec?.memory ?? 2048,
        region: body.spec?.region ?? "local",
        envs: [...(spec?.envs ?? [])],
        createdAt: new Date().toISOString(),
        ttlSeconds: spec?.ttl !== undefined
          ? durationSeconds(spec.ttl)
          : spec?.expires !== undefined
          ? Math.max(1, Math.ceil((spec.expires.getTime() - Date.now()) / 1000))
          : null
      }
      const created = await run(runtime.create({
        id: sandbox.runtimeId,
        vcpu: Math.max(0.25, sandbox.memory / 2048),
        memoryMb: sandbox.memory,
        diskMb: DISK_MB,
        // Blaxel sandboxes reach the internet; there is no switch to keep one off it.
        internet: defaultInternetOf(runtime),
        env: Object.fromEntries(sandbox.envs.map((e) => [e.name, e.value])),
        // A sandbox's id at Blaxel is its name; ours is one of its labels.
        labels: jailLabels("blaxel", name, sandbox.labels[LABEL_SANDBOX_ID]),
        // Blaxel's own base images are the local runtime's base system; any other image is pulled and run.
        ...(sandbox.image.startsWith("blaxel/") ? {} : { image: { reference: sandbox.image } })
      }))
      if (created.image !== undefined) sandbox.workingDir = created.image.workingDir
      state.sandboxes[name] = sandbox
      state.usage[books.usageKey(sandbox)] = { memory: sandbox.memory, createdAt: sandbox.createdAt, endedAt: null }
      save()
      return sandbox
    })().finally(() => creating.delete(name))
    creating.set(name, pending)
    return json(wire(await pending))
  }

  const remove = async (s: EmulatedSandbox) => {
    options.previews.closeSandbox(s.name)
    for (const [token, p] of Object.entries(state.previews)) if (p.sandbox === s.name) options.previews.drop(token)
    await run(runtime.destroy(s.runtimeId))
    delete state.sandboxes[s.name]
    const usage = state.usage[books.usageKey(s)]
    if (usage !== undefined) usage.endedAt = new Date().toISOString()
    for (const [key, p] of books.processes.entries()) if (p.runtimeId === s.runtimeId) books.processes.delete(key)
    options.onDeleted(s.runtimeId)
    save()
    return wire(s, "DELETING")
  }

  /** Sandboxes past their ttl are deleted. */
  const sweeper = sweepEvery(SWEEP_MS, (now) => {
    const due = Object.values(state.sandboxes).filter((s) => s.ttlSeconds !== null && Date.parse(s.createdAt) + s.ttlSeconds * 1000 <= now)
    return Promise.all(due.map((s) => remove(s).catch(() => undefined)))
  })

  const previewWire = (token: string) => {
    const p = state.previews[token]!
    return {
      metadata: { name: p.name, resourceName: p.sandbox, resourceType: "sandbox", workspace: books.workspace, createdAt: p.createdAt },
      spec: { port: p.port, public: true, ...(p.ttl === null ? {} : { ttl: p.ttl }), url: `${options.baseUrl()}/preview/${token}` },
      status: "DEPLOYED"
    }
  }
  const previewOr404 = (sandbox: string, name: string) => {
    const found = Object.entries(state.previews).find(([, p]) => p.sandbox === sandbox && p.name === name)
    if (found === undefined) throw new HttpFailure(404, `Preview ${name} not found`)
    return found[0]
  }

  const createPreview = async (request: Request, name: string) => {
    const s = sandboxOr404(name)
    const body = await readBody(request, CreatePreview)
    // Private previews need preview tokens, which the emulator does not serve.
    if (body.spec.public !== true) throw new HttpFailure(400, "only public previews are emulated")
    if (Object.values(state.previews).some((p) => p.sandbox === s.name && p.name === body.metadata.name)) {
      throw new HttpFailure(409, `Preview ${body.metadata.name} already exists`)
    }
    const ttl = body.spec.ttl ?? null
    const token = crypto.randomBytes(18).toString("base64url")
    state.previews[token] = {
      sandbox: s.name,
      name: body.metadata.name,
      port: body.spec.port,
      ttl,
      createdAt: new Date().toISOString(),
      // Without a ttl a preview lives as long as its sandbox.
      expiresAt: ttl === null ? Number.MAX_SAFE_INTEGER : Date.now() + durationSeconds(ttl) * 1000
    }
    save()
    options.previews.arm(token)
    return json(previewWire(token))
  }

  /** The cost of the account's sandbox `resourceName` between two instants, at the emulator's rate. */
  const metrics = (url: URL, account: string) => {
    if (account !== books.accountId) throw new HttpFailure(403, `no access to account ${account}`)
    const from = Date.parse(url.searchParams.get("startTime") ?? "")
    const to = Date.parse(url.searchParams.get("endTime") ?? "")
    if (Number.isNaN(from) || Number.isNaN(to) || to < from) throw new HttpFailure(400, "startTime and endTime must be ISO 8601 instants, in order")
    const resolution = url.searchParams.get("resolution") ?? "hourly"
    if (resolution !== "hourly" && resolution !== "daily") throw new HttpFailure(400, "resolution must be hourly or daily")
    const name = url.searchParams.get("resourceName")
    const data: Array<{ resourceType: string; resourceName: string; startTime: string; endTime: string; cost: number }> = []
    for (const [key, u] of Object.entries(state.usage)) {
      const resourceName = key.slice(0, key.lastIndexOf("@"))
      if (name !== null && resourceName !== name) continue
      const start = Math.max(from, Date.parse(u.createdAt))
      const end = Math.min(to, u.endedAt === null ? Date.now() : Date.parse(u.endedAt))
      if (end <= start) continue
      const cost = ((end - start) / 1000) * (u.memory / 1024) * EMULATED_USD_PER_GB_SECOND
      data.push({ resourceType: "sandbox", resourceName, startTime: new Date(start).toISOString(), endTime: new Date(end).toISOString(), cost })
    }
    return json({ summary: { totalCost: data.reduce((sum, d) => sum + d.cost, 0), currency: "USD" }, data })
  }

  /**
   * `GET /sandboxes?limit=&cursor=&sort=&q=&status=`: a page of the workspace's sandboxes, `{data, meta: {hasMore,
   * nextCursor}}` as Blaxel's SDK pages them.
   */
  const list = async (url: URL) => {
    const limitRaw = url.searchParams.get("limit")
    const limit = limitRaw === null ? 20 : Number(limitRaw)
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new HttpFailure(400, "limit must be between 1 and 100")
    const sort = url.searchParams.get("sort") ?? "createdAt:desc"
    const [field, order] = sort.split(":")
    if ((field !== "createdAt" && field !== "name") || (order !== "asc" && order !== "desc")) throw new HttpFailure(400, `unknown sort ${sort}`)
    const q = url.searchParams.get("q") ?? ""
    const status = url.searchParams.get("status")
    const key = (s: EmulatedSandbox) => (field === "name" ? s.name : `${s.createdAt}${s.name}`)
    const all = await Promise.all(
      Object.values(state.sandboxes)
        .filter((s) => s.name.includes(q))
        .sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0) * (order === "asc" ? 1 : -1))
        .map(observed)
    )
    const matching = status === null ? all : all.filter((s) => s.status === status)
    const cursor = url.searchParams.get("cursor")
    const from = cursor === null ? 0 : Number(Buffer.from(cursor, "base64url").toString())
    if (!Number.isInteger(from) || from < 0) throw new HttpFailure(400, "unknown cursor")
    const page = matching.slice(from, from + limit)
    const more = from + limit < matching.length
    return json({ data: page, meta: { hasMore: more, ...(more ? { nextCursor: Buffer.from(String(from + limit)).toString("base64url") } : {}) } })
  }

  const router = makeRouter<{ readonly request: Request; readonly url: URL }>([
    route("POST", "/v0/sandboxes", ({ request, url }) => create(request, url)),
    route("GET", "/v0/sandboxes", ({ url }) => list(url)),
    route("GET", "/v0/sandboxes/:name", async (_, { name }) => json(await observed(sandboxOr404(name!)))),
    route("DELETE", "/v0/sandboxes/:name", async (_, { name }) => json(await remove(sandboxOr404(name!)))),
    route("POST", "/v0/sandboxes/:name/previews", ({ request }, { name }) => createPreview(request, name!)),
    route("GET", "/v0/sandboxes/:name/previews/:preview", (_, { name, preview }) => json(previewWire(previewOr404(sandboxOr404(name!).name, preview!)))),
    route("DELETE", "/v0/sandboxes/:name/previews/:preview", (_, { name, preview }) => {
      const token = previewOr404(sandboxOr404(name!).name, preview!)
      const body = { ...previewWire(token), status: "DELETING" }
      options.previews.drop(token)
      return json(body)
    }),
    route("GET", "/v0/workspaces/:workspace", (_, { workspace }) => {
      if (workspace !== books.workspace) throw new HttpFailure(404, `Workspace ${workspace} not found`)
      return json({ name: books.workspace, displayName: books.workspace, accountId: books.accountId, region: "local" })
    }),
    route("GET", "/v0/accounts/:account/metrics", ({ url }, { account }) => metrics(url, account!))
  ])

  const control = async (request: Request, url: URL): Promise<Response> => {
    const auth = request.headers.get("authorization") ?? request.headers.get("x-blaxel-authorization")
    if (auth !== `Bearer ${books.apiKey}`) return controlError(401, "Invalid API key")
    if (request.headers.get("x-blaxel-workspace") !== books.workspace) return controlError(403, "No access to that workspace")
    books.prune()
    const found = router.match(request.method, url.pathname)
    return found._tag === "Found" ? found.handle({ request, url }) : controlError(found._tag === "MethodNotAllowed" ? 405 : 404, "Not found")
  }

  return { control, stop: () => sweeper.stop(), sandboxOf: (name: string) => state.sandboxes[name] }
}
