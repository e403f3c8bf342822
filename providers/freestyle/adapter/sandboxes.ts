/**
 * Freestyle VMs: create (named with the deterministic slug of our sandbox id, from a snapshot; a retry, a 409 or an
 * unresolved answer finds it by that name), readiness polled until `running`, then resized upward when the request
 * needs more than the VM's base size (a VM whose setup fails is deleted); reconcile by name (and our id, when
 * Freestyle reports the metadata); inspect; state-aware pause (`/pause`) and resume (`/start`); delete as destroy;
 * the cost as an estimate at the rate card.
 *
 * The 202 rule (reference §3.2): a 202 answer means the outcome is not known yet. It is never taken as success or
 * failure, and never answered by sending the call again: a create is looked up by its name until it shows; a pause,
 * start or delete is followed by polling the VM's state; a resize by polling its reported size.
 */
import { HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Duration, Effect, Option } from "effect"
import { rateCardCost } from "../../core/cost.ts"
import { pollUntil } from "../../core/poll.ts"
import { type CreateInput, type ProviderError, type ProviderSandbox, type SandboxProvider, unsupported } from "../../core/Provider.ts"
import { FREESTYLE_SIZING, freestyleSize } from "../../core/resources.ts"
import {
  DEFAULT_SNAPSHOT_ID,
  type FreestyleContext,
  inspectStateOf,
  METADATA_SANDBOX_ID,
  NAME,
  PAUSED,
  RATE_CARD,
  STARTING,
  type VmState,
  vmSlug,
  WireCreated,
  WireVm,
  WireVmList
} from "./wire.ts"

/** Freestyle's own lifetime is a safety net behind the gateway's timers, so it ends a little later. */
const TTL_MARGIN_SECONDS = 300
/** The environment is kept in the VM's metadata (for a reconcile) while it is this small. */
const MAX_ENV_METADATA = 4096
const GIB = 1024

interface Size {
  readonly vcpu: number
  readonly memoryMb: number
  readonly diskMb: number
}

/** The VM's size as it reports it, the base size for what it leaves out. */
const sizeOf = (vm: WireVm): Size => ({
  vcpu: vm.vcpuCount ?? FREESTYLE_SIZING.base.vcpu,
  memoryMb: vm.memSizeGb == null ? FREESTYLE_SIZING.base.memoryMb : vm.memSizeGb * GIB,
  diskMb: vm.rootfsSizeGb == null ? FREESTYLE_SIZING.base.diskMb : vm.rootfsSizeGb * GIB
})
const covers = (have: Size, want: Size) => have.vcpu >= want.vcpu && have.memoryMb >= want.memoryMb && have.diskMb >= want.diskMb

const envOf = (vm: WireVm): Record<string, string> => {
  const raw = vm.metadata?.["metal_env"]
  if (raw === undefined) return {}
  try {
    const parsed: unknown = JSON.parse(raw)
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return {}
    return Object.fromEntries(Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === "string"))
  } catch {
    return {}
  }
}

export const makeSandboxes = (ctx: FreestyleContext) => {
  const { api, decode, fail, send, vmPath } = ctx
  const interval = Duration.millis(ctx.pollMs)
  const timeout = Duration.millis(ctx.lifecycleTimeoutMs)

  /** The VM, or null when Freestyle has none (404, or a deleted record). */
  const getVm = (id: string) =>
    send(api("GET", vmPath(id)), "get vm").pipe(
      Effect.flatMap(decode(WireVm, "get vm")),
      Effect.map((vm) => (vm.deleted === true ? null : vm)),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
    )

  /** The live VM named for our sandbox id (and carrying our id, when Freestyle reports metadata); null when none. */
  const findOurs = (sandboxId: string) =>
    Effect.gen(function*() {
      const slug = vmSlug(sandboxId)
      const list = yield* send(api("GET", "/vms").pipe(HttpClientRequest.setUrlParams({ search: slug })), "list vms").pipe(
        Effect.flatMap(decode(WireVmList, "list vms"))
      )
      // The search is Freestyle's (a substring match): the name is checked here.
      return list.vms.find((vm) =>
        vm.name === slug && vm.deleted !== true && vm.state !== "lost" &&
        (vm.metadata?.[METADATA_SANDBOX_ID] === undefined || vm.metadata[METADATA_SANDBOX_ID] === sandboxId)
      ) ?? null
    })

  /** Polls until the VM is in one of `want`; a lost or vanished VM, or the deadline, is an error. */
  const waitState = (id: string, want: ReadonlyArray<VmState>, what: string) => {
    let last: string | undefined
    const check = Effect.flatMap(getVm(id), (vm): Effect.Effect<Option.Option<WireVm>, ProviderError> => {
      last = vm?.state
      if (vm === null) return Effect.fail(fail("not_found", `freestyle vm ${id} disappeared while ${what}`))
      if (want.includes(vm.state)) return Effect.succeed(Option.some(vm))
      if (vm.state === "lost") return Effect.fail(fail("unavailable", `freestyle vm ${id} was lost while ${what}`))
      return Effect.succeed(Option.none())
    })
    return pollUntil(check, {
      interval,
      timeout,
      onTimeout: () => fail("unavailable", `freestyle vm ${id} is still ${last ?? "unknown"} after ${ctx.lifecycleTimeoutMs} ms ${what}`)
    })
  }

  /** Polls until the VM is gone (404 or deleted). */
  const waitGone = (id: string) =>
    pollUntil(Effect.map(getVm(id), (vm) => (vm === null ? Option.some(true) : Option.none())), {
      interval,
      timeout,
      onTimeout: () => fail("unknown_outcome", `freestyle vm ${id} still exists ${ctx.lifecycleTimeoutMs} ms after its delete was accepted`)
    })

  const toProviderSandbox = (
    vm: WireVm,
    size: Size,
    snapshotId: string | null,
    environment: Readonly<Record<string, string>>,
    ttl?: { readonly seconds: number; readonly from: number }
  ): ProviderSandbox => ({
    resourceId: vm.id,
    resolvedResources: { vcpu: size.vcpu, memoryMb: size.memoryMb, diskMb: size.diskMb, architecture: "x86_64", providerSize: snapshotId },
    metadata: {
      name: vm.name ?? null,
      snapshotId,
      environment: { ...environment },
      ...(ttl === undefined ? {} : { ttlEndsAt: new Date(ttl.from + ttl.seconds * 1000).toISOString() })
    }
  })

  /**
   * Grows the VM to `want` (never shrinks it: Freestyle resizes upward only). A 202 is followed until the VM
   * reports the size (or, when it reports none, is running again).
   */
  const growTo = (vm: WireVm, want: Size) =>
    Effect.gen(function*() {
      const have = sizeOf(vm)
      if (covers(have, want)) return have
      const target: Size = { vcpu: Math.max(have.vcpu, want.vcpu), memoryMb: Math.max(have.memoryMb, want.memoryMb), diskMb: Math.max(have.diskMb, want.diskMb) }
      const body = { vcpuCount: target.vcpu, memSizeGb: target.memoryMb / GIB, rootfsSizeGb: target.diskMb / GIB }
      const response = yield* send(api("POST", vmPath(vm.id, "/resize")).pipe(HttpClientRequest.bodyUnsafeJson(body)), "resize vm")
      if (response.status === 202) {
        const reports = vm.vcpuCount != null || vm.memSizeGb != null || vm.rootfsSizeGb != null
        yield* pollUntil(
          Effect.map(getVm(vm.id), (now) =>
            now !== null && now.state === "running" && (!reports || covers(sizeOf(now), target)) ? Option.some(now) : Option.none()),
          { interval, timeout, onTimeout: () => fail("unknown_outcome", `freestyle resize of vm ${vm.id} was accepted but not seen done`) }
        )
      }
      return target
    })

  /** A found or created VM, ready: a starting one is waited for; a paused one exists (it is paused). */
  const settle = (vm: WireVm) => (STARTING.has(vm.state) ? waitState(vm.id, ["running"], "starting") : Effect.succeed(vm))

  const snapshotFor = (input: CreateInput) => {
    if (input.source.kind === "provider_template") return input.source.template
    const option = input.providerOptions["snapshot_id"]
    if (typeof option === "string" && option !== "") return option
    return ctx.config.snapshotId ?? DEFAULT_SNAPSHOT_ID
  }

  const createBody = (input: CreateInput, slug: string, snapshotId: string) => {
    const env = JSON.stringify(input.environment)
    const lifecycle = input.lifecycle
    return {
      name: slug,
      snapshotId,
      // No public port: nothing is exposed unless asked (the gateway has no Freestyle endpoints).
      ports: [],
      waitForReadySignal: true,
      // Freestyle's own timers back the gateway's up: deletion after the runtime timeout (plus a margin), or a
      // pause at it, and a pause when idle, as the request's actions say.
      ...(lifecycle.onRuntimeTimeout === "pause"
        ? { maxRunSeconds: lifecycle.runtimeTimeoutSeconds }
        : { ttlSeconds: lifecycle.runtimeTimeoutSeconds + TTL_MARGIN_SECONDS }),
      ...(lifecycle.onIdleTimeout === "pause" && lifecycle.idleTimeoutSeconds !== undefined ? { idleTimeoutSeconds: lifecycle.idleTimeoutSeconds } : {}),
      metadata: {
        ...input.metadata,
        [METADATA_SANDBOX_ID]: input.sandboxId,
        metal_project_id: input.projectId,
        metal_organization_id: input.organizationId,
        ...(env.length <= MAX_ENV_METADATA && env !== "{}" ? { metal_env: env } : {})
      }
    }
  }

  /** Deletes a VM whose setup failed (best effort), then fails with what went wrong. */
  const abandon = (vmId: string, e: ProviderError) =>
    send(api("DELETE", vmPath(vmId)), "delete vm").pipe(Effect.ignore, Effect.zipRight(Effect.fail(e)))

  const create: SandboxProvider["create"] = (input) =>
    Effect.gen(function*() {
      if (!ctx.capabilities.sources.includes(input.source.kind)) return yield* unsupported(NAME, `${input.source.kind} sources`)
      if (input.source.kind === "provider_template" && input.source.provider !== NAME) return yield* unsupported(NAME, `templates of ${input.source.provider}`)
      if (input.resources.architecture === "arm64") return yield* unsupported(NAME, "arm64")
      const want = freestyleSize(input.resources)
      if (want === undefined) {
        const { max } = FREESTYLE_SIZING
        return yield* unsupported(NAME, `${input.resources.vcpu} vCPU / ${input.resources.memoryMb} MB / ${input.resources.diskMb ?? 0} MB of disk (at most ${max.vcpu} vCPU, ${max.memoryMb / GIB} GiB, ${max.diskMb / GIB} GiB)`)
      }
      const snapshotId = snapshotFor(input)
      const slug = vmSlug(input.sandboxId)
      const sentAt = Date.now()
      // A retry finds the VM by its name instead of creating a second one.
      let vm = yield* findOurs(input.sandboxId)
      if (vm === null) {
        const lookUp = (e: ProviderError) => Effect.flatMap(findOurs(input.sandboxId), (found) => (found === null ? Effect.fail(e) : Effect.succeed(found)))
        const unresolved = fail("unknown_outcome", `freestyle create of vm ${slug} was accepted (202) but the vm has not shown up`)
        vm = yield* send(api("POST", "/vms").pipe(HttpClientRequest.bodyUnsafeJson(createBody(input, slug, snapshotId))), "create vm", { ambiguous: true }).pipe(
          Effect.flatMap((response: HttpClientResponse.HttpClientResponse) =>
            response.status === 202
              // Unresolved: the VM is looked for by name until it shows, never created again.
              ? pollUntil(Effect.map(findOurs(input.sandboxId), Option.fromNullable), { interval, timeout, onTimeout: () => unresolved })
              : Effect.flatMap(decode(WireCreated, "create vm")(response), (created) =>
                Effect.flatMap(getVm(created.id), (got) => (got === null ? Effect.fail(fail("unavailable", `freestyle vm ${created.id} vanished after its create`)) : Effect.succeed(got))))
          ),
          // A lost answer, or a concurrent create of the same name (409), is looked up by name.
          Effect.catchIf((e) => e.kind === "unknown_outcome" || e.status === 409, lookUp)
        )
      }
      const ready = yield* settle(vm)
      const size = ready.state === "running"
        ? yield* growTo(ready, want).pipe(Effect.catchIf((e) => e.kind !== "unknown_outcome", (e) => abandon(ready.id, e)))
        : sizeOf(ready)
      const ttl = input.lifecycle.onRuntimeTimeout === "pause" ? undefined : { seconds: input.lifecycle.runtimeTimeoutSeconds + TTL_MARGIN_SECONDS, from: sentAt }
      return toProviderSandbox(ready, size, ready.snapshotId ?? snapshotId, input.environment, ttl)
    })

  const reconcileCreate: SandboxProvider["reconcileCreate"] = (sandboxId) =>
    Effect.gen(function*() {
      const found = yield* findOurs(sandboxId)
      if (found === null) return null
      const ready = yield* settle(found)
      return toProviderSandbox(ready, sizeOf(ready), ready.snapshotId ?? null, envOf(ready))
    })

  const existingOrFail = (sandbox: ProviderSandbox) =>
    Effect.flatMap(getVm(sandbox.resourceId), (vm) =>
      vm === null ? Effect.fail(fail("not_found", `freestyle vm ${sandbox.resourceId} does not exist`)) : Effect.succeed(vm))

  /** Sends a lifecycle call; whatever its answer (200 or an unresolved 202), the state is then polled. */
  const lifecycleCall = (id: string, action: "pause" | "start") => send(api("POST", vmPath(id, `/${action}`)), `${action} vm`)

  const pause = (sandbox: ProviderSandbox) =>
    Effect.gen(function*() {
      const id = sandbox.resourceId
      const vm = yield* existingOrFail(sandbox)
      if (vm.state === "suspended") return
      if (vm.state === "stopped" || vm.state === "lost") return yield* fail("customer", `freestyle vm ${id} is ${vm.state}, it cannot be paused`)
      if (STARTING.has(vm.state)) yield* waitState(id, ["running"], "starting")
      if (vm.state !== "suspending") yield* lifecycleCall(id, "pause")
      yield* waitState(id, ["suspended"], "pausing")
    })

  const resume = (sandbox: ProviderSandbox) =>
    Effect.gen(function*() {
      const id = sandbox.resourceId
      const vm = yield* existingOrFail(sandbox)
      if (vm.state === "running") return
      if (vm.state === "lost") return yield* fail("unavailable", `freestyle vm ${id} was lost`)
      if (vm.state === "suspending") yield* waitState(id, ["suspended"], "pausing")
      if (PAUSED.has(vm.state) || vm.state === "stopped") yield* lifecycleCall(id, "start")
      yield* waitState(id, ["running"], "starting")
    })

  /** `DELETE /v5/vms/{id}`; a VM already gone is success, and a 202 is followed until it is. */
  const destroy: SandboxProvider["destroy"] = (sandbox) =>
    send(api("DELETE", vmPath(sandbox.resourceId)), "delete vm").pipe(
      Effect.flatMap((response) => (response.status === 202 ? Effect.asVoid(waitGone(sandbox.resourceId)) : Effect.void)),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.void)
    )

  /**
   * An estimate at Freestyle's published rate card (vCPU, memory and storage hours of the VM's size over the
   * window). Low confidence: a paused VM is billed its storage only, which this does not tell apart.
   */
  const getCost: SandboxProvider["getCost"] = (sandbox, window) => Effect.succeed(rateCardCost(RATE_CARD, sandbox.resolvedResources, window))

  /**
   * The gateway's deadline moved. Freestyle deletes a VM at the `ttlSeconds` set at create and offers no call to
   * move it: a deadline within it needs nothing, one beyond it cannot be followed and says so (rather than the VM
   * being deleted by Freestyle unannounced).
   */
  const extendLifetime = (sandbox: ProviderSandbox, seconds: number) =>
    Effect.gen(function*() {
      const ends = sandbox.metadata["ttlEndsAt"]
      if (typeof ends !== "string") return
      if (Date.now() + seconds * 1000 > Date.parse(ends)) {
        return yield* unsupported(NAME, `keeping a VM past the TTL set at its create (${ends}; asked for ${seconds} s from now)`)
      }
    })

  return {
    create,
    reconcileCreate,
    extendLifetime,
    inspect: (sandbox: ProviderSandbox) => getVm(sandbox.resourceId).pipe(Effect.map((vm) => (vm === null ? "absent" as const : inspectStateOf(vm)))),
    destroy,
    pause: (sandbox: ProviderSandbox) => (ctx.capabilities.pause ? pause(sandbox) : Effect.fail(unsupported(NAME, "pause"))),
    resume: (sandbox: ProviderSandbox) => (ctx.capabilities.resume ? resume(sandbox) : Effect.fail(unsupported(NAME, "resume"))),
    getCost
  } satisfies Partial<SandboxProvider>
}
