/**
 * The Daytona emulator's control API: `POST /sandbox` (create), `GET /sandbox` (a page `{items, nextCursor}`, filtered
 * by `labels`, as the current API lists), `GET|DELETE /sandbox/{id or name}` (the delete answers the sandbox,
 * destroyed), `GET …/toolbox-proxy-url`, `POST …/stop|start` (stop freezes the jail: its processes stay, frozen, and
 * the filesystem stays; Daytona's stop ends the processes), signed previews per port and their expiry. A sandbox
 * whose jail died reads as state `error`, as Daytona reports a sandbox whose machine is gone.
 */
import { Option, Schema } from "effect"
import { checkPolicy } from "../../../src/runtime/DomainPolicy.ts"
import * as crypto from "node:crypto"
import { defaultInternetOf, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { decodeJsonBody, emulatorMessage, makeRouter, route, runOrThrow as run } from "../../core/emulator/server.ts"
import { jailLabels } from "../../../src/providers/jailLabels.ts"
import { LABEL_SANDBOX_ID } from "../adapter/wire.ts"
import type { Books, EmulatedSandbox } from "./books.ts"
import type { Previews } from "./preview.ts"
import { error, json, HttpFailure, toWire } from "./wire.ts"

const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })
/** The fields of a create the emulator reads (others are accepted and ignored, as Daytona ignores unknown ones). */
const CreateBody = Schema.Struct({
  name: Schema.optional(Schema.String),
  labels: Schema.optional(StringMap),
  cpu: Schema.optional(Schema.Number),
  memory: Schema.optional(Schema.Number),
  disk: Schema.optional(Schema.Number),
  env: Schema.optional(StringMap),
  networkBlockAll: Schema.optional(Schema.Boolean),
  domainAllowList: Schema.optional(Schema.String),
  buildInfo: Schema.optional(Schema.Struct({ dockerfileContent: Schema.optional(Schema.String) })),
  autoStopInterval: Schema.optional(Schema.NullOr(Schema.Number)),
  autoPauseInterval: Schema.optional(Schema.NullOr(Schema.Number)),
  autoArchiveInterval: Schema.optional(Schema.NullOr(Schema.Number)),
  autoDeleteInterval: Schema.optional(Schema.NullOr(Schema.Number)),
  ttlMinutes: Schema.optional(Schema.NullOr(Schema.Number))
})
/** Fields of Daytona's create that would change what a sandbox is, which the emulator cannot do: refused, not ignored. */
const UNHONOURED: Readonly<Record<string, string>> = {
  volumes: "the emulator mounts no volumes",
  secrets: "the emulator has no secrets vault",
  gpu: "the emulator has no GPUs",
  gpuType: "the emulator has no GPUs",
  linkedSandbox: "the emulator does not co-locate sandboxes",
  kvm: "the emulator exposes no /dev/kvm",
  networkAllowList: "the emulator enforces domain allow lists (domainAllowList), not CIDR ones",
  outboundProxyUrl: "the emulator routes no traffic through a proxy"
}
/** Lifecycle timers, honoured when they say "never" (the emulator's sandboxes run until stopped or deleted). */
const LIFECYCLE: ReadonlyArray<readonly ["autoStopInterval" | "autoPauseInterval" | "autoArchiveInterval" | "autoDeleteInterval" | "ttlMinutes", (v: number | null) => boolean]> = [
  ["autoStopInterval", (v) => v === 0],
  ["autoPauseInterval", (v) => v === 0],
  ["autoArchiveInterval", (v) => v === 0],
  ["autoDeleteInterval", (v) => v !== null && v < 0],
  ["ttlMinutes", (v) => v === 0]
]

interface Call {
  readonly request: Request
  readonly url: URL
  readonly sandbox: () => EmulatedSandbox
}

export interface ControlOptions {
  readonly baseUrl: () => string
  readonly previews: Previews
  /** A deleted sandbox's sessions go with it. */
  readonly forgetSandbox: (sandboxId: string) => void
}

/** The `labels` filter of a list: a JSON object of label → value. */
const decodeLabels = Schema.decodeUnknownOption(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.String })))

export const makeControl = (books: Books, runtime: LocalRuntimeShape, options: ControlOptions) => {
  const { state, save } = books
  const wire = (s: EmulatedSandbox) => toWire(s, options.baseUrl())

  /** As Daytona reports a sandbox whose machine died: state `error`, with a reason. */
  const observed = async (s: EmulatedSandbox) => {
    if (s.state === "build_failed") return wire(s)
    const jail = await run(runtime.get(s.id)).catch(() => Option.none())
    const alive = Option.isSome(jail) && jail.value.state !== "stopped"
    return alive ? wire(s) : { ...wire(s), state: "error", errorReason: "The sandbox's machine is gone" }
  }

  const create = async ({ request }: Call) => {
    const decoded = await decodeJsonBody(request, CreateBody, { unhonoured: UNHONOURED })
    if (!decoded.ok) return error(400, decoded.message)
    const body = decoded.value
    const lifecycle = LIFECYCLE.find(([field, honoured]) => body[field] !== undefined && body[field] !== null && !honoured(body[field]))
    if (lifecycle !== undefined) return error(400, `${lifecycle[0]}: the emulator never stops, archives or deletes a sandbox on its own (0, or -1 for autoDeleteInterval, is what it does)`)
    // A declarative build: the emulator runs its base image (FROM); other instructions are not emulated.
    const dockerfile = body.buildInfo?.dockerfileContent
    const image = dockerfile === undefined ? undefined : /^\s*FROM\s+(\S+)/im.exec(dockerfile)?.[1]
    if (dockerfile !== undefined && (image === undefined || dockerfile.trim().split("\n").length > 1)) {
      return error(400, "the emulator builds only `FROM <image>` Dockerfiles")
    }
    if (body.name !== undefined && books.findSandbox(body.name) !== undefined) return error(409, `Sandbox with name ${body.name} already exists`)
    // Daytona's domain allow list: names and `*.` wildcards, enforced by the runtime (its resolver and address sets).
    const allowed = body.domainAllowList === undefined ? undefined : body.domainAllowList.split(",").map((d) => d.trim()).filter((d) => d !== "")
    const domains = allowed === undefined ? undefined : { mode: "allow" as const, domains: allowed }
    if (domains !== undefined) {
      const problem = checkPolicy(domains)
      if (problem !== null) return error(400, `domainAllowList: ${problem}`)
    }
    // networkBlockAll left out: Daytona's default (not blocked), as the local runtime gives it.
    const internet = body.networkBlockAll === undefined ? defaultInternetOf(runtime) : !body.networkBlockAll
    const id = crypto.randomUUID()
    const sandbox: EmulatedSandbox = {
      id,
      name: body.name ?? id,
      labels: body.labels ?? {},
      state: "started",
      cpu: body.cpu ?? 1,
      memory: body.memory ?? 1,
      disk: body.disk ?? 3,
      env: body.env ?? {},
      createdAt: new Date().toISOString(),
      ...(image !== undefined ? { image } : {})
    }
    try {
      await run(runtime.create({
        id,
        vcpu: sandbox.cpu,
        memoryMb: Math.round(sandbox.memory * 1024),
        diskMb: sandbox.disk * 1024,
        internet,
        ...(domains !== undefined && internet ? { domains } : {}),
        env: sandbox.env,
        labels: jailLabels("daytona", id, sandbox.labels[LABEL_SANDBOX_ID]),
        ...(image !== undefined ? { image: { reference: image } } : {})
      }))
    } catch (e) {
      // As Daytona reports a build that failed: the sandbox exists in state build_failed, with the reason.
      if ((e as { kind?: unknown }).kind !== "image_pull_failed") throw e
      const failed: EmulatedSandbox = { ...sandbox, state: "build_failed", errorReason: emulatorMessage(e, "daytona") }
      state.sandboxes[id] = failed
      save()
      return json(wire(failed))
    }
    state.sandboxes[id] = sandbox
    save()
    return json(wire(sandbox))
  }

  /** One page holds every match: `nextCursor` is null (the emulator's lists are short). */
  const list = async ({ url }: Call) => {
    const filter = url.searchParams.get("labels")
    const decoded = filter === null ? Option.some({}) : decodeLabels(filter)
    if (Option.isNone(decoded)) return error(400, "labels must be a JSON object")
    const wanted = decoded.value
    const matching = Object.values(state.sandboxes).filter((s) => Object.entries(wanted).every(([k, v]) => s.labels[k] === v))
    return json({ items: await Promise.all(matching.map(observed)), nextCursor: null })
  }

  const remove = async ({ sandbox }: Call) => {
    const s = sandbox()
    await run(runtime.destroy(s.id))
    delete state.sandboxes[s.id]
    options.forgetSandbox(s.id)
    for (const [token, preview] of Object.entries(state.previews)) if (preview.sandboxId === s.id) options.previews.drop(token)
    options.previews.closeSandbox(s.id)
    save()
    return json({ ...wire(s), state: "destroyed" })
  }

  const transition = (to: "stopped" | "started") => async ({ sandbox }: Call) => {
    const s = sandbox()
    if (s.state === "build_failed") return error(409, "The sandbox's build failed: it cannot be started or stopped")
    // Nothing reaches a stopped sandbox: its bridges close (and their connections with them) before it freezes.
    if (to === "stopped") options.previews.closeSandbox(s.id)
    await run(to === "stopped" ? runtime.pause(s.id) : runtime.resume(s.id))
    s.state = to
    save()
    return json(wire(s))
  }

  const signedPreview = ({ url, sandbox }: Call, port: number) => {
    const s = sandbox()
    const expires = Number(url.searchParams.get("expiresInSeconds") ?? "60")
    const token = crypto.randomBytes(18).toString("base64url")
    state.previews[token] = { sandboxId: s.id, port, expiresAt: Date.now() + expires * 1000 }
    save()
    options.previews.arm(token)
    return json({ sandboxId: s.id, port, token, url: `${options.baseUrl()}/preview/${token}` })
  }

  const expirePreview = (token: string) => {
    if (state.previews[token] === undefined) return error(404, "Preview not found")
    options.previews.drop(token)
    return json({})
  }

  const router = makeRouter<Call>([
    route("POST", "/sandbox", create),
    route("GET", "/sandbox", list),
    route("GET", "/sandbox/:id", async ({ sandbox }) => json(await observed(sandbox()))),
    route("DELETE", "/sandbox/:id", remove),
    route("GET", "/sandbox/:id/toolbox-proxy-url", ({ sandbox }) => (sandbox(), json({ url: `${options.baseUrl()}/toolbox` }))),
    route("POST", "/sandbox/:id/stop", transition("stopped")),
    route("POST", "/sandbox/:id/start", transition("started")),
    route("GET", "/sandbox/:id/ports/:port/signed-preview-url", (call, { port }) => signedPreview(call, Number(port))),
    route("POST", "/sandbox/:id/ports/:port/signed-preview-url/:token/expire", ({ sandbox }, { token }) => (sandbox(), expirePreview(token!)))
  ])

  return async (request: Request, url: URL): Promise<Response> => {
    const found = router.match(request.method, url.pathname)
    if (found._tag !== "Found") return error(404, "Not found")
    const id = decodeURIComponent(url.pathname.split("/")[2] ?? "")
    const sandbox = () => {
      const s = books.findSandbox(id)
      if (s === undefined) throw new HttpFailure(404, "Sandbox not found")
      return s
    }
    return found.handle({ request, url, sandbox })
  }
}
