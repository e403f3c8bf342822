/**
 * The Prime emulator's sandboxes, under `/api/v1`: `POST /sandbox` (answered at once, `PROVISIONING`; the jail
 * starts behind it and the sandbox turns `RUNNING`; a repeated `idempotency_key` answers the sandbox it made),
 * `GET /sandbox[?labels=&status=&is_active=&page=&per_page=&team_id=]` (newest first), `GET /sandbox/{id}`,
 * `DELETE /sandbox/{id}` (the jail is destroyed; the record stays, `TERMINATED`, as Prime keeps it) and
 * `POST /sandbox/{id}/auth` (a gateway token for a running sandbox, `gateway.ts`).
 *
 * Prime's limits are enforced (422): 1–16 whole vCPUs, memory up to 64 GB in 0.125 GB steps, disk 2–128 GB.
 * A sandbox past its `timeout_minutes` of running ends as `TIMEOUT`. Every sandbox runs the runtime's one base
 * system whatever `docker_image` says, and reaches the internet (Prime's default); checkpoints, start commands,
 * GPUs, egress lists, secrets, regions and arm64 are refused as not emulated.
 */
import { Schema } from "effect"
import { defaultInternetOf, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import { jailLabels } from "../../../src/providers/jailLabels.ts"
import { keyedSerial } from "../../../src/domain/KeyedSerial.ts"
import { sandboxIdOfName } from "../adapter/wire.ts"
import { type Books, newId, type Sandbox } from "./books.ts"
import { HttpFailure, json, readBody } from "./http.ts"
import { sweepEvery } from "../../core/emulator/state.ts"

const SWEEP_MS = 1000
const ENDED: ReadonlySet<string> = new Set(["ERROR", "TERMINATED", "TIMEOUT"])
const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })

const CreateSandbox = Schema.Struct({
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  docker_image: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1)))),
  checkpoint_id: Schema.optional(Schema.NullOr(Schema.String)),
  restore_memory: Schema.optional(Schema.NullOr(Schema.Boolean)),
  start_command: Schema.optional(Schema.NullOr(Schema.Unknown)),
  cpu_cores: Schema.optionalWith(Schema.Number, { default: () => 1 }),
  memory_gb: Schema.optionalWith(Schema.Number, { default: () => 1 }),
  disk_size_gb: Schema.optional(Schema.NullOr(Schema.Number)),
  gpu_count: Schema.optional(Schema.Number),
  gpu_type: Schema.optional(Schema.NullOr(Schema.String)),
  network_allowlist: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  network_denylist: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  timeout_minutes: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 60 * 24 * 7)), { default: () => 60 }),
  idle_timeout_minutes: Schema.optional(Schema.NullOr(Schema.Int)),
  environment_vars: Schema.optional(Schema.NullOr(StringMap)),
  secrets: Schema.optional(Schema.NullOr(StringMap)),
  labels: Schema.optional(Schema.Array(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)))),
  team_id: Schema.optional(Schema.NullOr(Schema.String)),
  region: Schema.optional(Schema.NullOr(Schema.String)),
  advanced_configs: Schema.optional(Schema.NullOr(Schema.Unknown)),
  idempotency_key: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)))),
  vm: Schema.optional(Schema.NullOr(Schema.Boolean)),
  arch: Schema.optional(Schema.Literal("amd64", "arm64"))
})

export interface ControlOptions {
  /** The sandbox ended: what the gateway keeps for it goes. */
  readonly onEnd: (sandbox: Sandbox) => void
}

export const makeControl = (books: Books, runtime: LocalRuntimeShape, options: ControlOptions) => {
  const { state, save } = books

  /** One state change of a sandbox at a time, in order. */
  const serial = keyedSerial().run

  const setStatus = (s: Sandbox, status: string) => {
    const now = new Date().toISOString()
    s.status = status
    s.updatedAt = now
    if (status === "RUNNING" && s.startedAt === null) s.startedAt = now
    if (ENDED.has(status) && s.terminatedAt === null) s.terminatedAt = now
    save()
  }

  const view = (s: Sandbox) => ({
    id: s.id,
    name: s.name,
    dockerImage: s.dockerImage,
    startCommand: null,
    cpuCores: s.cpuCores,
    memoryGB: s.memoryGB,
    diskSizeGB: s.diskSizeGB,
    diskMountPath: "/",
    gpuCount: 0,
    gpuType: null,
    vm: s.vm,
    networkAllowlist: null,
    networkDenylist: null,
    status: s.status,
    timeoutMinutes: s.timeoutMinutes,
    idleTimeoutMinutes: null,
    terminationReason: s.terminationReason,
    environmentVars: s.environmentVars,
    secrets: null,
    advancedConfigs: null,
    labels: s.labels,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    startedAt: s.startedAt,
    terminatedAt: s.terminatedAt,
    exitCode: null,
    errorType: s.errorType,
    errorMessage: s.errorMessage,
    userId: null,
    teamId: s.teamId,
    region: null
  })

  const sandboxOr404 = (id: string) => {
    const s = state.sandboxes[id]
    if (s === undefined) throw new HttpFailure(404, "Sandbox not found")
    return s
  }

  /** The jail behind a sandbox; the sandbox runs once it is up (or is an ERROR). */
  const start = (s: Sandbox) =>
    serial(s.id, async () => {
      if (s.status !== "PENDING" && s.status !== "PROVISIONING") return
      try {
        await run(runtime.create({
          id: s.id,
          vcpu: s.cpuCores,
          memoryMb: Math.round(s.memoryGB * 1024),
          diskMb: Math.round(s.diskSizeGB * 1024),
          // Prime sandboxes reach the internet (egress lists are not emulated).
          internet: defaultInternetOf(runtime),
          env: s.environmentVars,
          labels: jailLabels("prime", s.id, sandboxIdOfName(s.name))
        }))
        setStatus(s, "RUNNING")
      } catch (e) {
        s.errorType = "PROVISIONING_FAILED"
        s.errorMessage = e instanceof Error ? e.message : String(e)
        setStatus(s, "ERROR")
      }
    })

  const create = async (request: Request) => {
    const body = await readBody(request, CreateSandbox)
    const refuse = (what: string) => {
      throw new HttpFailure(422, `${what} is not emulated`)
    }
    if (body.checkpoint_id != null) refuse("restoring a checkpoint")
    if (body.start_command != null) refuse("a start command")
    if ((body.gpu_count ?? 0) > 0 || body.gpu_type != null) refuse("a GPU")
    if (body.network_allowlist != null || body.network_denylist != null) refuse("an egress policy")
    if (body.secrets != null && Object.keys(body.secrets).length > 0) refuse("secrets")
    if (body.region != null) refuse("a region")
    if (body.arch === "arm64") refuse("arm64")
    if (body.docker_image == null) throw new HttpFailure(422, "docker_image is required unless checkpoint_id is set")
    if (!Number.isInteger(body.cpu_cores) || body.cpu_cores < 1 || body.cpu_cores > 16) throw new HttpFailure(422, "cpu_cores must be a whole number from 1 to 16")
    if (!(body.memory_gb > 0 && body.memory_gb <= 64 && Number.isInteger(body.memory_gb * 8))) throw new HttpFailure(422, "memory_gb must be a multiple of 0.125 up to 64")
    const disk = body.disk_size_gb ?? 5
    if (!(Number.isInteger(disk) && disk >= 2 && disk <= 128)) throw new HttpFailure(422, "disk_size_gb must be a whole number from 2 to 128")
    const teamId = body.team_id ?? null
    if (body.idempotency_key != null) {
      const existing = Object.values(state.sandboxes).find((s) => s.idempotencyKey === body.idempotency_key && s.teamId === teamId)
      if (existing !== undefined) return json(view(existing), 201)
    }
    const now = new Date().toISOString()
    const s: Sandbox = {
      id: newId(),
      name: body.name,
      status: "PROVISIONING",
      dockerImage: body.docker_image,
      cpuCores: body.cpu_cores,
      memoryGB: body.memory_gb,
      diskSizeGB: disk,
      timeoutMinutes: body.timeout_minutes,
      environmentVars: { ...body.environment_vars },
      labels: [...(body.labels ?? [])],
      teamId,
      idempotencyKey: body.idempotency_key ?? null,
      vm: body.vm ?? true,
      createdAt: now,
      updatedAt: now,
      startedAt: null,
      terminatedAt: null,
      terminationReason: null,
      errorType: null,
      errorMessage: null
    }
    state.sandboxes[s.id] = s
    save()
    books.prune()
    void start(s)
    return json(view(s), 201)
  }

  const list = (url: URL) => {
    const labels = url.searchParams.getAll("labels")
    const status = url.searchParams.get("status")
    const active = url.searchParams.get("is_active")
    const team = url.searchParams.get("team_id")
    const page = Number(url.searchParams.get("page") ?? "1")
    const perPage = Number(url.searchParams.get("per_page") ?? "50")
    if (!Number.isInteger(page) || page < 1) throw new HttpFailure(422, "page must be at least 1")
    if (!Number.isInteger(perPage) || perPage < 1 || perPage > 100) throw new HttpFailure(422, "per_page must be from 1 to 100")
    const all = Object.values(state.sandboxes)
      .filter((s) => labels.every((l) => s.labels.includes(l)))
      .filter((s) => status === null || s.status === status)
      .filter((s) => active !== "true" || !ENDED.has(s.status))
      .filter((s) => team === null || s.teamId === team)
      .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : a.id < b.id ? 1 : -1))
    const from = (page - 1) * perPage
    return json({ sandboxes: all.slice(from, from + perPage).map(view), total: all.length, page, perPage, hasNext: from + perPage < all.length })
  }

  const end = (s: Sandbox, status: "TERMINATED" | "TIMEOUT", reason: string) =>
    serial(s.id, async () => {
      if (ENDED.has(s.status)) return
      await run(runtime.destroy(s.id))
      s.terminationReason = reason
      setStatus(s, status)
      options.onEnd(s)
    })

  const remove = async (id: string) => {
    const s = sandboxOr404(id)
    await end(s, "TERMINATED", "deleted")
    return json({ success: true, message: `Sandbox ${id} deleted` })
  }

  // After a restart: sandboxes caught starting carry on.
  for (const s of Object.values(state.sandboxes)) if (s.status === "PENDING" || s.status === "PROVISIONING") void start(s)

  /** Sandboxes past their timeout (counted from when they started running) end as TIMEOUT. */
  const sweeper = sweepEvery(SWEEP_MS, (now) => {
    const due = Object.values(state.sandboxes).filter((s) => s.status === "RUNNING" && s.startedAt !== null && now - Date.parse(s.startedAt) >= s.timeoutMinutes * 60_000)
    return Promise.all(due.map((s) => end(s, "TIMEOUT", "timeout").catch(() => undefined)))
  })

  return {
    create,
    list,
    get: (id: string) => json(view(sandboxOr404(id))),
    remove,
    sandboxOr404,
    stop: () => sweeper.stop()
  }
}

export type Control = ReturnType<typeof makeControl>
