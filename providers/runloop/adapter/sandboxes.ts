/**
 * Runloop devboxes: create (named `metal-<sandbox id>`, our ids in its metadata, sized by a resource preset,
 * waited on with `wait_for_status` until `running`), reconcile by listing the live devboxes and matching our id
 * in their metadata, inspect, shutdown as destroy, suspend/resume as pause/resume, and the cost of the devbox's
 * active seconds at its preset's price.
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import { type CreateInput, type ProviderCost, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { RUNLOOP_PRESETS } from "../../../src/providers/resources.ts"
import {
  ENDED,
  devboxName,
  inspectStateOf,
  KEEP_ALIVE_MARGIN_SECONDS,
  LIVE_STATUSES,
  MAX_KEEP_ALIVE_SECONDS,
  METADATA_SANDBOX_ID,
  NAME,
  PRESET_HOURLY_MICROUSD,
  PRESET_RATE_CARD_VERSION,
  presetOf,
  type RunloopContext,
  STARTING,
  SUSPENDED,
  type WireDevbox,
  WireDevbox as WireDevboxSchema,
  WireDevboxList,
  WireUsage
} from "./wire.ts"

/** Devboxes asked for per list page, and pages read per status at most (the reference reads up to 5,000). */
const PAGE_SIZE = 100
const MAX_PAGES = 50

type Preset = (typeof RUNLOOP_PRESETS)[number]
/** What create asked for, read back when Runloop's answer leaves it out. */
interface Sent {
  readonly preset: Preset
  readonly keepAliveSeconds: number
}

export const makeSandboxes = (ctx: RunloopContext) => {
  const { api, decode, devboxPath, fail, send, waitForStatus } = ctx

  const toProviderSandbox = (d: WireDevbox, sent?: Sent): ProviderSandbox => {
    const preset = presetOf(d.launch_parameters?.resource_size_request ?? "") ?? sent?.preset ?? presetOf("SMALL")!
    const keepAlive = d.launch_parameters?.keep_alive_time_seconds ?? sent?.keepAliveSeconds
    return {
      resourceId: d.id,
      resolvedResources: { vcpu: preset.vcpu, memoryMb: preset.memoryMb, diskMb: preset.diskMb, architecture: "x86_64", providerSize: preset.size },
      metadata: { name: d.name ?? null, resourceSize: preset.size, ...(typeof keepAlive === "number" ? { keepAliveSeconds: keepAlive } : {}) }
    }
  }

  const getDevbox = (id: string) => send(api("GET", devboxPath(id)), "get devbox").pipe(Effect.flatMap(decode(WireDevboxSchema, "get devbox")))
  const findDevbox = (id: string) => getDevbox(id).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))

  /** The live devbox carrying our sandbox id: each live status listed in turn (Runloop filters by one status). */
  const findOurs = (sandboxId: string) =>
    Effect.gen(function*() {
      for (const status of LIVE_STATUSES) {
        let after: string | undefined
        for (let page = 0; page < MAX_PAGES; page++) {
          const list = yield* send(
            api("GET", "/v1/devboxes").pipe(HttpClientRequest.setUrlParams({ status, limit: String(PAGE_SIZE), ...(after === undefined ? {} : { starting_after: after }) })),
            "list devboxes"
          ).pipe(Effect.flatMap(decode(WireDevboxList, "list devboxes")))
          // The filter is Runloop's: check the status too.
          const hit = list.devboxes.find((d) => d.metadata?.[METADATA_SANDBOX_ID] === sandboxId && !ENDED.has(d.status))
          if (hit !== undefined) return hit
          if (!list.has_more || list.devboxes.length === 0) break
          after = list.devboxes.at(-1)!.id
        }
      }
      return null
    })

  /** A found or created devbox, ready: a starting one is waited for; a suspended one exists (it is paused). */
  const settle = (d: WireDevbox, sent?: Sent) =>
    Effect.gen(function*() {
      if (ENDED.has(d.status)) return yield* fail("unavailable", `runloop devbox ${d.id} is ${d.status}${d.failure_reason ? ` (${d.failure_reason})` : ""}`)
      const ready = STARTING.has(d.status) ? yield* waitForStatus(d.id, ["running"], "starting") : d
      return toProviderSandbox(ready, sent)
    })

  /**
   * The preset: `provider_options.runloop.resource_size` when given (not checked against the request, as
   * upstream), else the first preset covering the request, no smaller than the account's floor.
   */
  const presetFor = (input: CreateInput) =>
    Effect.gen(function*() {
      const option = input.providerOptions["resource_size"]
      if (option !== undefined) {
        const chosen = typeof option === "string" ? presetOf(option) : undefined
        if (chosen === undefined) return yield* fail("invalid_request", `provider_options.runloop.resource_size must be one of ${RUNLOOP_PRESETS.map((p) => p.size).join(", ")}`)
        return chosen
      }
      const floor = Math.max(0, RUNLOOP_PRESETS.findIndex((p) => p.size === ctx.config.resourceSize))
      const r = input.resources
      const covering = RUNLOOP_PRESETS.find((p, i) => i >= floor && p.vcpu >= r.vcpu && p.memoryMb >= r.memoryMb && p.diskMb >= (r.diskMb ?? 0))
      if (covering === undefined) return yield* unsupported(NAME, `${r.vcpu} vCPU, ${r.memoryMb} MB of memory and ${r.diskMb ?? 0} MB of disk (its largest preset is XX_LARGE)`)
      return covering
    })

  const keepAliveOf = (input: CreateInput) => Math.min(MAX_KEEP_ALIVE_SECONDS, input.lifecycle.runtimeTimeoutSeconds + KEEP_ALIVE_MARGIN_SECONDS)

  const createBody = (input: CreateInput, preset: Preset) => {
    const blueprintOption = input.providerOptions["blueprint_id"]
    const blueprint = input.source.kind === "provider_template"
      // A template names a blueprint (its latest successful build), as the reference sends it.
      ? { blueprint_name: input.source.template }
      : typeof blueprintOption === "string" && blueprintOption !== ""
      ? { blueprint_id: blueprintOption }
      : ctx.config.blueprintId === undefined
      ? {}
      : { blueprint_id: ctx.config.blueprintId }
    return {
      name: devboxName(input.sandboxId),
      ...blueprint,
      metadata: {
        ...input.metadata,
        [METADATA_SANDBOX_ID]: input.sandboxId,
        metal_project_id: input.projectId,
        metal_organization_id: input.organizationId
      },
      environment_variables: input.environment,
      launch_parameters: {
        resource_size_request: preset.size,
        architecture: "x86_64",
        keep_alive_time_seconds: keepAliveOf(input)
      }
    }
  }

  const create: SandboxProvider["create"] = (input) =>
    Effect.gen(function*() {
      if (!ctx.capabilities.sources.includes(input.source.kind)) return yield* unsupported(NAME, `${input.source.kind} sources`)
      if (input.resources.architecture === "arm64") return yield* unsupported(NAME, "arm64")
      const preset = yield* presetFor(input)
      const sent: Sent = { preset, keepAliveSeconds: keepAliveOf(input) }
      // Runloop has no create-if-absent: a devbox already made for this sandbox id is found first (unless this is
      // the first create, which nothing can have preceded).
      const existing = input.firstCreate === true ? null : yield* findOurs(input.sandboxId)
      if (existing !== null) return yield* settle(existing, sent)
      const created = yield* send(api("POST", "/v1/devboxes").pipe(HttpClientRequest.bodyUnsafeJson(createBody(input, preset))), "create devbox", { ambiguous: true }).pipe(
        Effect.flatMap(decode(WireDevboxSchema, "create devbox")),
        // A lost answer: the devbox may exist; found by our id, or the outcome stays unknown.
        Effect.catchIf((e) => e.kind === "unknown_outcome", (e) => Effect.flatMap(findOurs(input.sandboxId), (d) => (d === null ? Effect.fail(e) : Effect.succeed(d))))
      )
      return yield* settle(created, sent)
    })

  const reconcileCreate: SandboxProvider["reconcileCreate"] = (sandboxId) =>
    Effect.gen(function*() {
      const found = yield* findOurs(sandboxId)
      // One that fails while starting is an error now, and not found next time (failed devboxes are not live).
      return found === null ? null : yield* settle(found)
    })

  const existingOrFail = (sandbox: ProviderSandbox) =>
    Effect.flatMap(findDevbox(sandbox.resourceId), (d) =>
      d === null || ENDED.has(d.status) ? Effect.fail(fail("not_found", `runloop devbox ${sandbox.resourceId} is ${d?.status ?? "gone"}`)) : Effect.succeed(d))

  const pause = (sandbox: ProviderSandbox) =>
    Effect.gen(function*() {
      const id = sandbox.resourceId
      const d = yield* existingOrFail(sandbox)
      if (d.status === "suspended") return
      if (STARTING.has(d.status)) yield* waitForStatus(id, ["running"], "starting")
      if (d.status !== "suspending") yield* send(api("POST", devboxPath(id, "/suspend")), "suspend devbox")
      yield* waitForStatus(id, ["suspended"], "suspending")
    })

  const resume = (sandbox: ProviderSandbox) =>
    Effect.gen(function*() {
      const id = sandbox.resourceId
      const d = yield* existingOrFail(sandbox)
      if (d.status === "running") return
      if (SUSPENDED.has(d.status)) {
        if (d.status === "suspending") yield* waitForStatus(id, ["suspended"], "suspending")
        yield* send(api("POST", devboxPath(id, "/resume")), "resume devbox")
      }
      yield* waitForStatus(id, ["running"], "resuming")
    })

  /** `shutdown?force=true` (also while a snapshot is in progress); a devbox already shut down or gone is success. */
  const destroy: SandboxProvider["destroy"] = (sandbox) =>
    send(api("POST", devboxPath(sandbox.resourceId, "/shutdown")).pipe(HttpClientRequest.setUrlParam("force", "true")), "shutdown devbox").pipe(
      Effect.asVoid,
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.void),
      Effect.catchIf((e) => e.kind === "invalid_request" || e.kind === "customer", (e) =>
        Effect.flatMap(findDevbox(sandbox.resourceId), (d) => (d === null || d.status === "shutdown" ? Effect.void : Effect.fail(e))))
    )

  /**
   * Runloop bills a devbox's active time (suspended time excluded) at its preset's hourly price: `GET
   * /v1/devboxes/{id}/usage` gives the active seconds, cumulative since creation. An OEM account's per-component
   * prices apply to the vCPU-, GB-memory- and GB-disk-seconds it reports instead.
   */
  const getCost: SandboxProvider["getCost"] = (sandbox, window) =>
    Effect.gen(function*() {
      const usage = yield* send(api("GET", devboxPath(sandbox.resourceId, "/usage")), "devbox usage").pipe(
        Effect.flatMap(decode(WireUsage, "devbox usage")),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
      )
      if (usage === null) return null
      const oem = ctx.config.oemRates
      if (oem !== undefined) {
        const usd = ((usage.vcpu_seconds ?? 0) * oem.vcpuHourUsd + (usage.memory_gb_seconds ?? 0) * oem.memoryGbHourUsd +
          (usage.disk_gb_seconds ?? 0) * oem.diskGbHourUsd) / 3600
        return cost(Math.round(usd * 1_000_000), window.to, "runloop-oem", "high")
      }
      const size = typeof sandbox.metadata["resourceSize"] === "string" ? sandbox.metadata["resourceSize"] : sandbox.resolvedResources.providerSize ?? ""
      const hourly = PRESET_HOURLY_MICROUSD[size]
      if (hourly === undefined) return null
      return cost(Math.round((usage.total_active_seconds * hourly) / 3600), window.to, PRESET_RATE_CARD_VERSION, "medium")
    })

  /**
   * The gateway's deadline moved: `POST …/keep_alive` restarts the devbox's keep-alive timer, so it lives at least
   * its keep-alive (set at create: the runtime timeout plus a margin) from now. A deadline further out than that
   * cannot be followed (Runloop cannot change a devbox's keep-alive): the signal is still sent, and the failure
   * says how far it reaches.
   */
  const extendLifetime = (sandbox: ProviderSandbox, seconds: number) =>
    Effect.gen(function*() {
      yield* send(api("POST", devboxPath(sandbox.resourceId, "/keep_alive")), "keep devbox alive")
      const keepAlive = sandbox.metadata["keepAliveSeconds"]
      if (typeof keepAlive === "number" && seconds > keepAlive) {
        return yield* unsupported(NAME, `keeping a devbox longer than its keep-alive of ${keepAlive} s set at create (asked ${seconds} s)`)
      }
    })

  return {
    create,
    reconcileCreate,
    extendLifetime,
    inspect: (sandbox: ProviderSandbox) => findDevbox(sandbox.resourceId).pipe(Effect.map((d) => (d === null ? "absent" as const : inspectStateOf(d.status)))),
    destroy,
    pause: (sandbox: ProviderSandbox) => (ctx.capabilities.pause ? pause(sandbox) : Effect.fail(unsupported(NAME, "pause"))),
    resume: (sandbox: ProviderSandbox) => (ctx.capabilities.resume ? resume(sandbox) : Effect.fail(unsupported(NAME, "resume"))),
    getCost
  } satisfies Partial<SandboxProvider>
}

/** Runloop measures the active time; the price is a rate card's: provider-metered. */
const cost = (amount: number, through: string, version: string, confidence: ProviderCost["confidence"]): ProviderCost => ({
  amountMicrousd: BigInt(Math.max(0, amount)),
  measuredThrough: through,
  provenance: "provider_metered",
  confidence,
  rateCardVersion: version
})
