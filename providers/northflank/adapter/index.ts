/**
 * Northflank adapter (reference/providers.md §3.2 "northflank", issue 12 item 5): one deployment service per
 * sandbox, over Northflank's REST API (`Authorization: Bearer <token>`, answers in `{data}`), in the project
 * NORTHFLANK_PROJECT_ID (under `/teams/{team}` when NORTHFLANK_TEAM_ID is set).
 *
 * - create: `POST {project}/services/deployment {name, description, tags, billing: {deploymentPlan},
 *   infrastructure: {architecture}, deployment: {instances: 1, external: {imagePath}, docker: {configType:
 *   "customCommand", customCommand}, storage: {ephemeralStorage: {storageSize}}}, runtimeEnvironment, expiryTime?}`.
 *   The name (so the id) is derived from our sandbox id only: a 409 "already exists", a lost answer or a retry finds
 *   the same service (`GET {project}/services/{id}`, our id in its description), never a second one. Then the
 *   service is polled (2 s) until its deployment is `COMPLETED` (`FAILED`: the create fails).
 * - image: the OCI source's image, else NORTHFLANK_DEFAULT_IMAGE (`ubuntu:22.04`) for environments; the command is
 *   `sleep infinity` (an OCI source's own command, when it names one). arm64 requests run on `arm` infrastructure.
 * - plan: `provider_options.northflank.deployment_plan`, else NORTHFLANK_DEPLOYMENT_PLAN (`nf-compute-200`) when it
 *   covers the request, else the first known plan that does (`PLANS`); the resolved size is the plan's
 *   (`provider_size` = the plan). Ephemeral storage: the option, else NORTHFLANK_EPHEMERAL_STORAGE_MB (2048).
 * - expiry: when the runtime timeout destroys, `expiryTime` = that timeout plus 5 minutes (300..604,800 s), so
 *   Northflank removes a service the gateway forgot; a later deadline beyond it is refused (`extendLifetime`).
 * - pause = `POST …/pause` (instances to 0); resume = `POST …/resume {instances: 1}`, each waited on; destroy =
 *   `DELETE …?delete_child_objects=true` (404 is success).
 * - cost: hourly billing (`GET /billing/usage?projectId&serviceId&startTime&endTime&interval=hour` →
 *   `{data: {usage: [{startTime, endTime, price: {total}}]}}`, cents), summed from the window's first hour; later
 *   hours are asked for too (Northflank records usage late), and the cost is measured through the last hour reported.
 *   Northflank's public client (0.9.5) lists neither this route nor `expiryTime`: both follow the reference's notes.
 * - No runtime (see `NORTHFLANK_CAPABILITIES`): every command, file or endpoint call fails `unsupported`.
 */
import { HttpClientRequest } from "@effect/platform"
import { Duration, Effect, Option } from "effect"
import { lifecycleOnly } from "../../core/lifecycleOnly.ts"
import { pollUntil } from "../../core/poll.ts"
import { makeProvider, type ProviderCalls } from "../../core/makeProvider.ts"
import { type CreateInput, type InspectState, type ProviderError, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import {
  describe,
  EXPIRY_BOUNDS,
  IDLE_COMMAND,
  makeContext,
  NAME,
  type NorthflankContext,
  type NorthflankProviderConfig,
  planSize,
  PLANS,
  RUNTIME_UNSUPPORTED_REASON,
  serviceName,
  WireCreated,
  WireService,
  WireUsage
} from "./wire.ts"

export {
  DEFAULT_API_URL,
  DEFAULT_IMAGE,
  DEFAULT_PLAN,
  NORTHFLANK_CAPABILITIES,
  type NorthflankProviderConfig,
  planCentsPerHour,
  PLANS,
  serviceName
} from "./wire.ts"

const EXPIRY_MARGIN_SECONDS = 300
const HOUR_MS = 3_600_000

/** The plan for a request: the option; else the default when it covers the request; else the first known plan that does. */
export const planFor = (input: Pick<CreateInput, "resources" | "providerOptions">, fallback: string): string | undefined => {
  const option = input.providerOptions["deployment_plan"]
  if (typeof option === "string" && option !== "") return option
  const covers = (p: { readonly vcpu: number; readonly memoryMb: number }) => p.vcpu >= input.resources.vcpu && p.memoryMb >= input.resources.memoryMb
  const known = planSize(fallback)
  if (known === undefined || covers(known)) return fallback
  return PLANS.find(covers)?.plan
}

/** A shell line for an OCI source's command (argv), quoted. */
const shellLine = (argv: ReadonlyArray<string>) => argv.map((s) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`)).join(" ")

export const inspectStateOf = (service: WireService["data"]): InspectState => {
  if (service.servicePaused === true) return "paused"
  const status = service.status?.deployment?.status
  return status === "COMPLETED" ? "running" : status === "FAILED" ? "failed" : "starting"
}

const northflankCalls = (ctx: NorthflankContext, config: NorthflankProviderConfig): ProviderCalls => {
  const { api, call, decode, fail, send, service } = ctx
  const interval = Duration.millis(ctx.pollMs)
  const timeout = Duration.millis(ctx.lifecycleTimeoutMs)

  /** The service, or null when Northflank has none. */
  const getService = (id: string) =>
    send(api("GET", service(id)), "get service").pipe(
      Effect.flatMap(decode(WireService, "get service")),
      Effect.map((s) => s.data),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
    )

  const waitFor = (id: string, done: (s: WireService["data"]) => boolean, what: string) => {
    let last = "unknown"
    const check = Effect.flatMap(getService(id), (s): Effect.Effect<Option.Option<WireService["data"]>, ProviderError> => {
      if (s === null) return Effect.fail(fail("not_found", `northflank service ${id} disappeared while ${what}`))
      last = s.servicePaused === true ? "paused" : s.status?.deployment?.status ?? "unknown"
      if (done(s)) return Effect.succeed(Option.some(s))
      if (s.status?.deployment?.status === "FAILED" && s.servicePaused !== true) {
        return Effect.fail(fail("unavailable", `northflank service ${id} failed to deploy while ${what}`))
      }
      return Effect.succeed(Option.none())
    })
    return pollUntil(check, { interval, timeout, onTimeout: () => fail("unavailable", `northflank service ${id} is still ${last} after ${ctx.lifecycleTimeoutMs} ms ${what}`) })
  }
  const isRunning = (s: WireService["data"]) => s.servicePaused !== true && s.status?.deployment?.status === "COMPLETED"

  const toSandbox = (id: string, plan: string, input: Pick<CreateInput, "resources"> | null, storageMb: number, expiresAt: string | null): ProviderSandbox => {
    const size = planSize(plan)
    const arch = input?.resources.architecture === "arm64" ? "arm64" : "x86_64"
    return {
      resourceId: id,
      resolvedResources: {
        vcpu: size?.vcpu ?? input?.resources.vcpu ?? 0,
        memoryMb: size?.memoryMb ?? input?.resources.memoryMb ?? 0,
        diskMb: storageMb,
        architecture: arch,
        providerSize: plan
      },
      metadata: { plan, ...(expiresAt === null ? {} : { expiresAt }) }
    }
  }

  /** Ours: the service of the derived name whose description carries our id. */
  const findOurs = (sandboxId: string) =>
    Effect.map(getService(serviceName(sandboxId)), (s) => (s !== null && (s.description == null || s.description === describe(sandboxId)) ? s : null))

  const create: SandboxProvider["create"] = (input) =>
    Effect.gen(function*() {
      if (input.source.kind === "provider_template") return yield* fail("unsupported", "northflank takes no provider templates")
      if (!ctx.capabilities.architectures.includes(input.resources.architecture === "arm64" ? "arm64" : "x86_64")) {
        return yield* fail("unsupported", `northflank here has no ${input.resources.architecture} machines`)
      }
      const plan = planFor(input, ctx.plan)
      if (plan === undefined) return yield* fail("unsupported", "northflank has no known plan that covers the requested resources")
      const storageOption = input.providerOptions["ephemeral_storage_mb"]
      const storageMb = typeof storageOption === "number" && storageOption > 0 ? storageOption : ctx.storageMb
      const name = serviceName(input.sandboxId)
      const image = input.source.kind === "oci_image" ? input.source.image : ctx.image
      const command = input.source.kind === "oci_image" && input.source.command !== undefined && input.source.command.length > 0 ? shellLine(input.source.command) : IDLE_COMMAND
      const expirySeconds = input.lifecycle.onRuntimeTimeout === "destroy"
        ? Math.min(EXPIRY_BOUNDS.max, Math.max(EXPIRY_BOUNDS.min, Math.ceil(input.lifecycle.runtimeTimeoutSeconds) + EXPIRY_MARGIN_SECONDS))
        : null
      const sentAt = Date.now()
      // Looked for only when an earlier create may have made it; a first create's 409 finds it all the same.
      const existing = input.firstCreate === true ? null : yield* findOurs(input.sandboxId)
      if (existing === null) {
        const body = {
          name,
          description: describe(input.sandboxId),
          tags: ["metal-sandbox"],
          billing: { deploymentPlan: plan },
          infrastructure: { architecture: input.resources.architecture === "arm64" ? "arm" : "x86" },
          deployment: {
            instances: 1,
            external: { imagePath: image },
            docker: { configType: "customCommand", customCommand: command },
            storage: { ephemeralStorage: { storageSize: storageMb } }
          },
          runtimeEnvironment: { ...input.environment },
          ...(expirySeconds === null ? {} : { expiryTime: expirySeconds })
        }
        yield* call(api("POST", `${ctx.project}/services/deployment`).pipe(HttpClientRequest.bodyUnsafeJson(body)), WireCreated, "create service", { ambiguous: true }).pipe(
          // Already there (409), or perhaps created (a lost answer): the service of that name is ours.
          Effect.catchIf((e) => e.status === 409 || e.kind === "unknown_outcome", (e) =>
            Effect.flatMap(findOurs(input.sandboxId), (found) => (found === null ? Effect.fail(e) : Effect.succeed(found))))
        )
      }
      yield* waitFor(name, isRunning, "deploying")
      return toSandbox(name, plan, input, storageMb, expirySeconds === null ? null : new Date(sentAt + expirySeconds * 1000).toISOString())
    })

  const reconcileCreate: SandboxProvider["reconcileCreate"] = (sandboxId) =>
    Effect.map(findOurs(sandboxId), (s) => (s === null ? null : toSandbox(s.id, s.billing?.deploymentPlan ?? ctx.plan, null, ctx.storageMb, null)))

  const existingOrFail = (id: string) =>
    Effect.flatMap(getService(id), (s) => (s === null ? Effect.fail(fail("not_found", `northflank service ${id} does not exist`)) : Effect.succeed(s)))

  const pause: SandboxProvider["pause"] = (sandbox) =>
    Effect.gen(function*() {
      const s = yield* existingOrFail(sandbox.resourceId)
      if (s.servicePaused === true) return
      yield* send(api("POST", service(sandbox.resourceId, "/pause")), "pause service")
      yield* waitFor(sandbox.resourceId, (now) => now.servicePaused === true, "pausing")
    })

  const resume: SandboxProvider["resume"] = (sandbox) =>
    Effect.gen(function*() {
      const s = yield* existingOrFail(sandbox.resourceId)
      if (isRunning(s)) return
      if (s.servicePaused === true) yield* send(api("POST", service(sandbox.resourceId, "/resume")).pipe(HttpClientRequest.bodyUnsafeJson({ instances: 1 })), "resume service")
      yield* waitFor(sandbox.resourceId, isRunning, "resuming")
    })

  const getCost: SandboxProvider["getCost"] = (sandbox, window) =>
    Effect.gen(function*() {
      const start = Math.floor(Date.parse(window.from) / HOUR_MS) * HOUR_MS
      // Usage lands in Northflank's books late: two hours past the window are asked for as well.
      const end = Math.ceil(Date.parse(window.to) / HOUR_MS) * HOUR_MS + 2 * HOUR_MS
      const params = {
        projectId: config.projectId,
        serviceId: sandbox.resourceId,
        startTime: new Date(start).toISOString(),
        endTime: new Date(end).toISOString(),
        interval: "hour"
      }
      const usage = yield* call(api("GET", "/billing/usage").pipe(HttpClientRequest.setUrlParams(params)), WireUsage, "billing usage")
      const cents = usage.data.usage.reduce((sum, u) => sum + u.price.total, 0)
      const through = usage.data.usage.reduce((last, u) => Math.max(last, Date.parse(u.endTime)), start)
      return {
        amountMicrousd: BigInt(Math.round(cents * 10_000)),
        measuredThrough: new Date(Math.min(through, Math.max(start, Date.parse(window.to)))).toISOString(),
        provenance: "provider_reported" as const,
        confidence: "high" as const,
        rateCardVersion: null
      }
    })

  const extendLifetime = (sandbox: ProviderSandbox, seconds: number) =>
    Effect.gen(function*() {
      const ends = sandbox.metadata["expiresAt"]
      if (typeof ends !== "string") return
      if (Date.now() + seconds * 1000 > Date.parse(ends)) {
        return yield* unsupported(NAME, `keeping a service past the expiry set at its create (${ends}; asked for ${seconds} s from now)`)
      }
    })

  return {
    capabilities: ctx.capabilities,
    create,
    reconcileCreate,
    inspect: (sandbox) => Effect.map(getService(sandbox.resourceId), (s) => (s === null ? "absent" as const : inspectStateOf(s))),
    destroy: (sandbox) =>
      send(api("DELETE", service(sandbox.resourceId)).pipe(HttpClientRequest.setUrlParam("delete_child_objects", "true")), "delete service").pipe(
        Effect.asVoid,
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.void)
      ),
    pause,
    resume,
    getCost,
    extendLifetime,
    ...lifecycleOnly(NAME, RUNTIME_UNSUPPORTED_REASON)
  }
}

export const makeNorthflankProvider = makeProvider(NAME, {
  context: makeContext,
  calls: northflankCalls,
  // BYOK: the organization's token and project (and team).
  byok: (config) => (credentials) => ({ ...config, apiToken: credentials["api_token"] ?? "", projectId: credentials["project_id"] ?? "", teamId: credentials["team_id"] })
})
