/**
 * Freestyle VMs: create (`POST /v5/vms` with the deterministic slug of our sandbox id, from a snapshot, with the
 * firewall the request's network needs — all outbound traffic to the public internet, or nothing; a retry, a 409 or
 * an unresolved answer finds it by that slug: `GET /v5/vms/{slug}`), readiness polled until `running`, then resized
 * upward (`…/resize {cpu, memory, storage}`, MiB) when the request needs more than the VM's base size (a VM whose
 * setup fails is deleted); reconcile by slug (and our id in its metadata); inspect; state-aware pause (`/pause`) and
 * resume (`/start`); delete as destroy; a later deadline moves the VM's `ttlSeconds` (`PATCH /v5/vms/{id}`); the
 * cost as an estimate at the rate card.
 *
 * The 202 rule (reference §3.2): a 202 answer means the outcome is not known yet. It is never taken as success or
 * failure, and never answered by sending the call again: a create is looked up by its name until it shows; a pause,
 * start or delete is followed by polling the VM's state; a resize by polling its reported size.
 */
import { HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Duration, Effect, Option } from "effect"
import { rateCardCost } from "../../core/cost.ts"
import { pollUntil } from "../../core/poll.ts"
import { type CreateInput, type ProviderError, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { FREESTYLE_SIZING, freestyleSize } from "../../../src/providers/resources.ts"
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
  WireVm
} from "./wire.ts"

/** Freestyle's own lifetime is a safety net behind the gateway's timers, so it ends a little later. */
const TTL_MARGIN_SECONDS = 300
/** Freestyle's metadata limits: 64 entries, keys and values of at most 63 characters. */
const MAX_METADATA_ENTRIES = 64
const MAX_METADATA_CHARS = 63
const GIB = 1024
/** All outbound traffic to the public internet (an endpoint with no identity is the VM being created). */
const OPEN_FIREWALL = { rules: [{ action: "allow", source: {}, destination: { public: true } }] }
const CLOSED_FIREWALL = { rules: [] }

interface Size {
  readonly vcpu: number
  readonly memoryMb: number
  readonly diskMb: number
}

/** The VM's size as it reports it, the base size for what it leaves out. */
const sizeOf = (vm: WireVm): Size => ({
  vcpu: vm.resources?.cpu ?? FREESTYLE_SIZING.base.vcpu,
  memoryMb: vm.resources?.memory ?? FREESTYLE_SIZING.base.memoryMb,
  diskMb: vm.resources?.storage ?? FREESTYLE_SIZING.base.diskMb
})
const covers = (have: Size, want: Size) => have.vcpu >= want.vcpu && have.memoryMb >= want.memoryMb && have.diskMb >= want.diskMb

/** The environment kept in the VM's metadata (for a reconcile), when it fitted Freestyle's 63 characters. */
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

  /** The VM (by id or slug), or null when Freestyle has none (404). */
  const getVm = (id: string) =>
    send(api("GET", vmPath(id)), "get vm").pipe(
      Effect.flatMap(decode(WireVm, "get vm")),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed<WireVm | null>(null))
    )

  /** The VM holding our sandbox id's slug (and carrying our id in its metadata, when it reports it); null when none. */
  const findOurs = (sandboxId: string) =>
    Effect.map(getVm(vmSlug(sandboxId)), (vm) =>
      vm !== null && (vm.metadata?.[METADATA_SANDBOX_ID] === undefined || vm.metadata[METADATA_SANDBOX_ID] === sandboxId) ? vm : null)

  /** Polls until the VM is in one of `want`; a lost or vanished VM, or the deadline, is an error. */
  const waitState = (id: string, want: ReadonlyArray<VmState>, what: string) => {
    let last: string | undefined
    const check = Effect.flatMap(getVm(id), (vm): Effect.Effect<Option.Option<WireVm>, ProviderError> => {
      last = vm?.state
      if (vm === null) return Effect.fail(fail("not_found", `freestyle vm ${id} disappeared while ${what}`))
      if (want.includes(vm.state)) return Effect.succeed(Option.some(vm))
      if (vm.state === "stopped") return Effect.fail(fail("unavailable", `freestyle vm ${id} stopped while ${what}`))
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
      name: vm.slug ?? null,
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
      const body = { cpu: target.vcpu, memory: target.memoryMb, storage: target.diskMb }
      const response = yield* send(api("POST", vmPath(vm.id, "/resize")).pipe(HttpClientRequest.bodyUnsafeJson(body)), "resize vm")
      if (response.status === 202) {
        const reports = vm.resources != null
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
    const ours = {
      [METADATA_SANDBOX_ID]: input.sandboxId,
      metal_project_id: input.projectId,
      metal_organization_id: input.organizationId,
      ...(env.length <= MAX_METADATA_CHARS && env !== "{}" ? { metal_env: env } : {})
    }
    // The caller's metadata where Freestyle's limits allow it; ours always.
    const theirs = Object.entries(input.metadata)
      .filter(([k, v]) => k.length <= MAX_METADATA_CHARS && v.length <= MAX_METADATA_CHARS && !(k in ours))
      .slice(0, MAX_METADATA_ENTRIES - Object.keys(ours).length)
    return {
      slug,
      snapshotId,
      // Nothing comes in (the gateway has no Freestyle endpoints); out, the public internet or nothing at all.
      // Unsaid, the default the adapter declares (Freestyle has none: the firewall is required).
      firewall: (input.internetAccess ?? ctx.capabilities.internetByDefault) ? OPEN_FIREWALL : CLOSED_FIREWALL,
      // Freestyle's own timers back the gateway's up: deletion after the runtime timeout (plus a margin), or a
      // pause at it, and a pause when idle, as the request's actions say.
      ...(lifecycle.onRuntimeTimeout === "pause"
        ? { maxRunSeconds: lifecycle.runtimeTimeoutSeconds }
        : { ttlSeconds: lifecycle.runtimeTimeoutSeconds + TTL_MARGIN_SECONDS }),
      ...(lifecycle.onIdleTimeout === "pause" && lifecycle.idleTimeoutSeconds !== undefined ? { idleTimeoutSeconds: lifecycle.idleTimeoutSeconds } : {}),
      metadata: { ...Object.fromEntries(theirs), ...ours }
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
      if (input.internetAccess && input.domainPolicy !== undefined) return yield* unsupported(NAME, "a domain allow or deny list (Freestyle's firewall names addresses, not domains)")
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
              // Unresolved: the VM is looked for by its slug until it shows, never created again.
              ? pollUntil(Effect.map(findOurs(input.sandboxId), Option.fromNullable), { interval, timeout, onTimeout: () => unresolved })
              : decode(WireVm, "create vm")(response)
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
      if (vm.state === "paused") return
      if (vm.state === "stopped") return yield* fail("customer", `freestyle vm ${id} is stopped, it cannot be paused`)
      if (STARTING.has(vm.state)) yield* waitState(id, ["running"], "starting")
      if (vm.state !== "pausing") yield* lifecycleCall(id, "pause")
      yield* waitState(id, ["paused"], "pausing")
    })

  const resume = (sandbox: ProviderSandbox) =>
    Effect.gen(function*() {
      const id = sandbox.resourceId
      const vm = yield* existingOrFail(sandbox)
      if (vm.state === "running") return
      if (vm.state === "pausing") yield* waitState(id, ["paused"], "pausing")
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
   * The gateway's deadline moved. Freestyle deletes a VM `ttlSeconds` after its creation; `PATCH /v5/vms/{id}
   * {ttlSeconds}` moves that (counted from the creation, not from now), so the deadline plus the margin is set there.
   * A VM created to pause at its timeout has no TTL and needs nothing.
   */
  const extendLifetime = (sandbox: ProviderSandbox, seconds: number) =>
    Effect.gen(function*() {
      if (typeof sandbox.metadata["ttlEndsAt"] !== "string") return
      const vm = yield* existingOrFail(sandbox)
      const created = Date.parse(vm.createdAt ?? "")
      if (!Number.isFinite(created)) return yield* fail("unavailable", `freestyle vm ${vm.id} reports no creation time`)
      const ttlSeconds = Math.ceil((Date.now() + seconds * 1000 - created) / 1000) + TTL_MARGIN_SECONDS
      if (vm.ttlSeconds != null && vm.ttlSeconds >= ttlSeconds) return
      yield* send(api("PATCH", vmPath(vm.id)).pipe(HttpClientRequest.bodyUnsafeJson({ ttlSeconds })), "update vm")
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
