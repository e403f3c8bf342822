/**
 * The Runloop emulator's devboxes: `POST /v1/devboxes` (answered at once, `provisioning`; the jail starts behind
 * it and the devbox turns `running`), `POST /v1/devboxes/create_and_await_running` (the same, answered once it runs
 * or the long-poll window passes — the SDK's `devbox.create` then waits with `wait_for_status`), `GET /v1/devboxes[?status=&limit=&starting_after=]` (newest first, cursor by
 * id), `GET /v1/devboxes/{id}`, `POST …/wait_for_status {statuses}` (held until one is reached, else 408 when
 * the window passes), `POST …/suspend` (running executions end, as Runloop's suspend keeps the disk and not the
 * processes; the jail is frozen), `POST …/resume`, `POST …/shutdown` (the jail is destroyed; the record stays,
 * `shutdown`, as Runloop lists it), `POST …/keep_alive` and `GET …/usage` (active seconds: suspended time
 * excluded).
 *
 * A devbox is shut down (`keep_alive_timeout`) once it has been running for its `keep_alive_time_seconds` since
 * it was made or last sent a keep-alive signal. One
 * whose jail died reads as `failure`. Blueprints are recorded, and every devbox runs on the runtime's one base
 * system; snapshots, entrypoints, custom sizes and arm64 are refused.
 */
import { Option, Schema } from "effect"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { emulatorMessage, runOrThrow as run } from "../../core/emulator/server.ts"
import { jailLabels } from "../../../src/providers/jailLabels.ts"
import { keyedSerial } from "../../../src/domain/KeyedSerial.ts"
import { RUNLOOP_PRESETS } from "../../../src/providers/resources.ts"
import { METADATA_SANDBOX_ID } from "../adapter/wire.ts"
import { type Books, type Devbox, newId } from "./books.ts"
import { HttpFailure, json, longPollTimeout, readBody, StringMap } from "./http.ts"
import { sweepEvery } from "../../core/emulator/state.ts"

const SWEEP_MS = 1000
const DEFAULT_KEEP_ALIVE_SECONDS = 3600
const STATUSES = ["scheduled", "queued", "provisioning", "initializing", "running", "suspending", "suspended", "resuming", "failure", "shutdown"] as const
const Status = Schema.Literal(...STATUSES)
const ENDED: ReadonlySet<string> = new Set(["failure", "shutdown"])

const CreateDevbox = Schema.Struct({
  name: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(256)))),
  blueprint_id: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1)))),
  blueprint_name: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1)))),
  snapshot_id: Schema.optional(Schema.NullOr(Schema.String)),
  entrypoint: Schema.optional(Schema.NullOr(Schema.String)),
  metadata: Schema.optional(Schema.NullOr(StringMap)),
  environment_variables: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String.pipe(Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]*$/)), value: Schema.String }))),
  launch_parameters: Schema.optional(Schema.NullOr(Schema.Struct({
    resource_size_request: Schema.optional(Schema.NullOr(Schema.Literal(...RUNLOOP_PRESETS.map((p) => p.size), "CUSTOM_SIZE"))),
    architecture: Schema.optional(Schema.NullOr(Schema.Literal("x86_64", "arm64"))),
    keep_alive_time_seconds: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.between(1, 172_800))))
  })))
})
const WaitForStatus = Schema.Struct({ statuses: Schema.Array(Status).pipe(Schema.minItems(1)), timeout_seconds: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.between(1, 30)))) })

export interface ControlOptions {
  /** How long `wait_for_status` holds a request (Runloop: 30 s). */
  readonly longPollMs: number
  /** The devbox is suspending: its running executions end. */
  readonly endExecutions: (devbox: Devbox) => Promise<void>
  /** The devbox was shut down: what other planes keep for it goes. */
  readonly onShutdown: (devbox: Devbox) => void
}

export const makeControl = (books: Books, runtime: LocalRuntimeShape, options: ControlOptions) => {
  const { state, save } = books
  const waiters = new Map<string, Set<() => void>>()

  /** One state change of a devbox at a time, in order. */
  const serial = keyedSerial().run

  const setStatus = (d: Devbox, status: (typeof STATUSES)[number]) => {
    const now = Date.now()
    if (d.activeSinceMs !== null && status !== "running") {
      d.activeMs += now - d.activeSinceMs
      d.activeSinceMs = null
    }
    if (status === "running" && d.activeSinceMs === null) d.activeSinceMs = now
    d.status = status
    if (ENDED.has(status) && d.endTimeMs === null) d.endTimeMs = now
    save()
    for (const wake of waiters.get(d.id) ?? []) wake()
  }

  const view = (d: Devbox, status = d.status) => ({
    id: d.id,
    name: d.name,
    status,
    create_time_ms: d.createTimeMs,
    end_time_ms: d.endTimeMs,
    metadata: d.metadata,
    blueprint_id: d.blueprintId,
    blueprint_name: d.blueprintName,
    launch_parameters: { resource_size_request: d.resourceSize, architecture: d.architecture, keep_alive_time_seconds: d.keepAliveSeconds },
    failure_reason: status === "failure" ? d.failureReason ?? "execution_failed" : null,
    shutdown_reason: d.shutdownReason,
    initiator_type: "api",
    capabilities: []
  })
  /** As Runloop reports a devbox whose machine died: `failure`. */
  const observed = async (d: Devbox) => {
    if (d.status !== "running" && d.status !== "suspended") return view(d)
    const jail = await run(runtime.get(d.id)).catch(() => Option.none())
    return Option.isSome(jail) && jail.value.state !== "stopped" ? view(d) : view(d, "failure")
  }

  const devboxOr404 = (id: string) => {
    const d = state.devboxes[id]
    if (d === undefined) throw new HttpFailure(404, `Devbox ${id} not found`)
    return d
  }

  /** The jail behind a devbox; the devbox runs once it is up (or has failed). */
  const start = (d: Devbox) =>
    serial(d.id, async () => {
      if (d.status !== "provisioning" && d.status !== "initializing") return
      const preset = RUNLOOP_PRESETS.find((p) => p.size === d.resourceSize)!
      try {
        await run(runtime.create({
          id: d.id,
          vcpu: preset.vcpu,
          memoryMb: preset.memoryMb,
          diskMb: preset.diskMb,
          // Runloop devboxes reach the internet unless a network policy says otherwise (none is emulated).
          internet: true,
          env: d.environment,
          labels: jailLabels("runloop", d.id, d.metadata[METADATA_SANDBOX_ID])
        }))
        setStatus(d, "running")
      } catch (e) {
        // Runloop's failure reason is one of a few words; the runtime's own message goes to the operator.
        console.error(`runloop emulator: devbox ${d.id} could not start: ${emulatorMessage(e, "runloop")}`)
        d.failureReason = "execution_failed"
        setStatus(d, "failure")
      }
    })

  const create = async (request: Request) => {
    const body = await readBody(request, CreateDevbox)
    const launch = body.launch_parameters ?? {}
    if (body.snapshot_id != null) throw new HttpFailure(400, "snapshots are not emulated")
    if (body.entrypoint != null) throw new HttpFailure(400, "entrypoints are not emulated")
    if (launch.resource_size_request === "CUSTOM_SIZE") throw new HttpFailure(400, "custom sizes are not emulated")
    if (launch.architecture === "arm64") throw new HttpFailure(400, "arm64 devboxes are not emulated")
    if (body.blueprint_id != null && body.blueprint_name != null) throw new HttpFailure(400, "only one of blueprint_id and blueprint_name may be given")
    const d: Devbox = {
      id: newId("dbx"),
      name: body.name ?? null,
      status: "provisioning",
      metadata: { ...body.metadata },
      environment: { ...body.environment_variables },
      resourceSize: launch.resource_size_request ?? "SMALL",
      architecture: "x86_64",
      keepAliveSeconds: launch.keep_alive_time_seconds ?? DEFAULT_KEEP_ALIVE_SECONDS,
      blueprintId: body.blueprint_id ?? null,
      blueprintName: body.blueprint_name ?? null,
      createTimeMs: Date.now(),
      endTimeMs: null,
      activeMs: 0,
      activeSinceMs: null,
      keepAliveFromMs: 0,
      failureReason: null,
      shutdownReason: null
    }
    state.devboxes[d.id] = d
    save()
    books.prune()
    void start(d)
    return d
  }

  /**
   * Waits until the devbox is in one of `wanted`, at most `ms` (or until the caller goes away); true when it is.
   * Every status change wakes the waiters.
   */
  const waitUntil = async (d: Devbox, wanted: ReadonlySet<string>, ms: number, signal: AbortSignal) => {
    const deadline = Date.now() + ms
    while (!wanted.has(d.status) && Date.now() < deadline && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const set = waiters.get(d.id) ?? new Set()
        waiters.set(d.id, set)
        const wake = () => {
          clearTimeout(timer)
          set.delete(wake)
          if (set.size === 0) waiters.delete(d.id)
          signal.removeEventListener("abort", wake)
          resolve()
        }
        const timer = setTimeout(wake, Math.max(0, deadline - Date.now()))
        set.add(wake)
        signal.addEventListener("abort", wake, { once: true })
      })
    }
    return wanted.has(d.status)
  }

  /** `POST /v1/devboxes/create_and_await_running`: the create, answered once the devbox runs (or failed), or when the window passes. */
  const createAndAwaitRunning = async (request: Request) => {
    const d = await create(request)
    await waitUntil(d, new Set(["running", "failure", "shutdown"]), options.longPollMs, request.signal)
    return json(await observed(d))
  }

  const list = (url: URL) => {
    const status = url.searchParams.get("status")
    if (status !== null && !(STATUSES as ReadonlyArray<string>).includes(status)) throw new HttpFailure(400, `unknown status ${status}`)
    const limitParam = url.searchParams.get("limit")
    const limit = limitParam === null ? 20 : Number(limitParam)
    if (!Number.isInteger(limit) || limit < 1 || limit > 5000) throw new HttpFailure(400, "limit must be between 1 and 5000")
    const all = Object.values(state.devboxes)
      .filter((d) => status === null || d.status === status)
      .sort((a, b) => b.createTimeMs - a.createTimeMs || (a.id < b.id ? 1 : -1))
    const after = url.searchParams.get("starting_after")
    const from = after === null ? 0 : all.findIndex((d) => d.id === after) + 1
    if (after !== null && from === 0) throw new HttpFailure(400, `unknown cursor ${after}`)
    const page = all.slice(from, from + limit)
    return json({ devboxes: page.map((d) => view(d)), has_more: from + limit < all.length, total_count: all.length })
  }

  const waitForStatus = async (request: Request, id: string) => {
    const d = devboxOr404(id)
    const body = await readBody(request, WaitForStatus)
    const hold = Math.min(options.longPollMs, (body.timeout_seconds ?? 30) * 1000)
    if (!(await waitUntil(d, new Set(body.statuses), hold, request.signal))) return longPollTimeout(`devbox ${id} did not reach ${body.statuses.join(", ")} in time`)
    return json(await observed(d))
  }

  const suspend = (id: string) => {
    const d = devboxOr404(id)
    return serial(id, async () => {
      if (d.status !== "running") throw new HttpFailure(400, `Devbox ${id} is ${d.status}, not running`)
      setStatus(d, "suspending")
      await options.endExecutions(d)
      await run(runtime.pause(d.id))
      setStatus(d, "suspended")
      return json(view(d))
    })
  }

  const resume = (id: string) => {
    const d = devboxOr404(id)
    return serial(id, async () => {
      if (d.status !== "suspended") throw new HttpFailure(400, `Devbox ${id} is ${d.status}, not suspended`)
      setStatus(d, "resuming")
      await run(runtime.resume(d.id))
      setStatus(d, "running")
      return json(view(d))
    })
  }

  const shutdown = (d: Devbox, reason: string) =>
    serial(d.id, async () => {
      if (d.status === "shutdown") throw new HttpFailure(400, `Devbox ${d.id} is already shut down`)
      await run(runtime.destroy(d.id))
      d.shutdownReason = reason
      setStatus(d, "shutdown")
      options.onShutdown(d)
      return json(view(d))
    })

  /** Running time so far, in ms. */
  const activeMsOf = (d: Devbox, now = Date.now()) => d.activeMs + (d.activeSinceMs === null ? 0 : now - d.activeSinceMs)

  const keepAlive = (id: string) => {
    const d = devboxOr404(id)
    if (d.status !== "running") throw new HttpFailure(400, `Devbox ${id} is ${d.status}, not running`)
    d.keepAliveFromMs = activeMsOf(d)
    save()
    return json({})
  }

  const usage = (id: string) => {
    const d = devboxOr404(id)
    const now = Date.now()
    const active = activeMsOf(d, now) / 1000
    const elapsed = ((d.endTimeMs ?? now) - d.createTimeMs) / 1000
    const preset = RUNLOOP_PRESETS.find((p) => p.size === d.resourceSize)!
    return json({
      id: d.id,
      status: d.status,
      start_time_ms: d.createTimeMs,
      end_time_ms: d.endTimeMs,
      total_active_seconds: active,
      total_elapsed_seconds: elapsed,
      vcpu_seconds: active * preset.vcpu,
      memory_gb_seconds: (active * preset.memoryMb) / 1024,
      disk_gb_seconds: (elapsed * preset.diskMb) / 1024
    })
  }

  // After a restart: devboxes caught starting, suspending or resuming carry on.
  for (const d of Object.values(state.devboxes)) {
    if (d.status === "provisioning" || d.status === "initializing") void start(d)
    else if (d.status === "suspending") void serial(d.id, async () => (await run(runtime.pause(d.id)).catch(() => undefined), setStatus(d, "suspended")))
    else if (d.status === "resuming") void serial(d.id, async () => (await run(runtime.resume(d.id)).catch(() => undefined), setStatus(d, "running")))
  }

  /** Devboxes past their keep-alive (running time) are shut down. */
  const sweeper = sweepEvery(SWEEP_MS, (now) => {
    const due = Object.values(state.devboxes).filter((d) => d.status === "running" && activeMsOf(d, now) - d.keepAliveFromMs >= d.keepAliveSeconds * 1000)
    return Promise.all(due.map((d) => shutdown(d, "keep_alive_timeout").catch(() => undefined)))
  })

  return {
    create: async (request: Request) => json(view(await create(request))),
    createAndAwaitRunning,
    list,
    get: async (id: string) => json(await observed(devboxOr404(id))),
    waitForStatus,
    suspend,
    resume,
    shutdown: (id: string) => shutdown(devboxOr404(id), "api_shutdown"),
    usage,
    keepAlive,
    devboxOr404,
    stop: () => {
      sweeper.stop()
      for (const set of waiters.values()) for (const wake of set) wake()
    }
  }
}

export type Control = ReturnType<typeof makeControl>
