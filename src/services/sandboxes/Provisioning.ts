/**
 * Provisioning: routes a sandbox request over the registry with fallback (src/providers/routing.ts), records
 * every attempt (provider_attempts and the operation's events), and says what happened.
 */
import { Effect, Fiber, Queue } from "effect"
import type { ImagePullProgress, LocalRuntimeShape } from "../../runtime/LocalRuntime.ts"
import { repositories } from "../../db/Database.ts"
import { requestOf, SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import type { ErrorObject } from "../../domain/Errors.ts"
import type { SandboxRequest } from "../../domain/Sandbox.ts"
import { capabilitiesToWire, type CapabilityManifest } from "../../providers/Capabilities.ts"
import type { CreateInput, ProviderName, ProviderSandbox, SandboxProvider } from "../../providers/Provider.ts"
import { imagePullReason } from "../../providers/errors.ts"
import { networkInput, type ResolvedNetwork, resolvedNetwork } from "../../providers/network.ts"
import { type Attempt, provisionWithFallback, sizeText } from "../../providers/routing.ts"
import type { Candidates } from "../ProviderAccounts.ts"
import { appendOperationEvent } from "./Operations.ts"
import { actionFailure, logProviderFailure, providerCode, publicAttempt } from "./ProviderErrors.ts"
import type { SandboxRow } from "./SandboxRows.ts"
import type { OperationId } from "../../domain/Ids.ts"

type BillingMode = "managed" | "byok" | "emulated"

export type Provisioned =
  | {
    readonly _tag: "Provisioned"
    readonly provider: ProviderName
    readonly sandbox: ProviderSandbox
    readonly capabilities: CapabilityManifest
    readonly billingMode: "managed" | "byok" | "emulated"
    /** What the sandbox got of the network (the request's, or the provider's default where it said nothing). */
    readonly network: ResolvedNetwork
  }
  | { readonly _tag: "NoEligibleProvider"; readonly error: ErrorObject }
  /** `placement`: the provider whose create failed and on whose account it was tried (the record says so). */
  | { readonly _tag: "Failed"; readonly error: ErrorObject; readonly placement: { readonly provider: ProviderName; readonly billingMode: BillingMode } }
  | { readonly _tag: "ProvisionUnknown" }

const createInput = (sandbox: SandboxRow, request: SandboxRequest, provider: ProviderName, firstCreate: boolean): CreateInput => ({
  sandboxId: sandbox.id,
  firstCreate,
  organizationId: sandbox.organization_id,
  projectId: sandbox.project_id,
  source: request.source,
  resources: {
    vcpu: request.resources.vcpu,
    memoryMb: request.resources.memory_mb,
    diskMb: request.resources.disk_mb,
    architecture: request.resources.architecture
  },
  lifecycle: {
    runtimeTimeoutSeconds: request.lifecycle.runtime_timeout_seconds,
    idleTimeoutSeconds: request.lifecycle.idle_timeout_seconds,
    onRuntimeTimeout: request.lifecycle.on_runtime_timeout,
    onIdleTimeout: request.lifecycle.on_idle_timeout
  },
  ...networkInput(request),
  computerUse: request.features?.computer_use === true,
  providerOptions: ((request.provider_options ?? {}) as Record<string, Record<string, unknown> | undefined>)[provider] ?? {},
  environment: request.environment ?? {},
  metadata: request.metadata ?? {}
})

/**
 * Before an emulated provider that runs images creates a sandbox from an OCI image, the image is pulled into the
 * local runtime's layer cache here, each step an `image_pull` event of the operation (resolved: its layers and
 * size; then each layer fetched or found cached), so a client watching the create sees the pull go. The
 * emulator's create then finds the layers cached. A pull that fails here is left to the create, which fails with
 * `image_pull_failed` saying why, as it would have anyway.
 */
const pullWithProgress = (runtime: LocalRuntimeShape, operationId: OperationId, reference: string) =>
  Effect.gen(function*() {
    const queue = yield* Queue.unbounded<ImagePullProgress>()
    const report = Effect.forever(Effect.flatMap(Queue.take(queue), (p) =>
      appendOperationEvent(operationId, "image_pull", p.phase === "resolved"
        ? { image: reference, phase: "resolved", digest: p.digest, layers: p.layers, bytes: p.bytes }
        : { image: reference, phase: "layer", digest: p.digest, cached: p.cached, bytes: p.bytes })))
    const reporter = yield* Effect.fork(report)
    const pulled = yield* Effect.either(runtime.pullImage(reference, undefined, (p) => Queue.unsafeOffer(queue, p)))
    // What was reported before the pull ended is written before the create goes on.
    while ((yield* Queue.size(queue)) > 0) yield* Effect.yieldNow()
    yield* Fiber.interrupt(reporter)
    if (pulled._tag === "Right") yield* appendOperationEvent(operationId, "image_pull", { image: reference, phase: "done", digest: pulled.right.digest })
  })

/**
 * No provider could take the request. When a provider was asked and failed only for now — no capacity, no answer, an
 * answer lost and no sandbox found after it — the request can be served, just not at this moment: `provider_capacity`
 * (every one of them out of capacity) or `provider_unavailable`, retryable. Otherwise `no_eligible_provider`, not
 * retryable; when sizes were what kept them all out, the message says `resources` and the largest each provider gives
 * (`details.largest_resources`; a dimension it states no ceiling for is null).
 */
const noEligibleProvider = (request: SandboxRequest, attempts: ReadonlyArray<Attempt>, providers: ReadonlyArray<SandboxProvider>): ErrorObject => {
  const base = { attempts: attempts.map((a) => ({ ...a })) }
  const forNow = attempts.filter((a) => a.outcome === "absent" || (a.outcome === "failed" && (a.code === "provider_capacity_unavailable" || a.code === "provider_unavailable")))
  if (forNow.length > 0) {
    const capacity = forNow.every((a) => a.code === "provider_capacity_unavailable")
    const which = [...new Set(forNow.map((a) => a.provider))].join(", ")
    return {
      code: capacity ? "provider_capacity" : "provider_unavailable",
      message: `No provider could create the sandbox now (${which}: ${capacity ? "no capacity" : "no answer, or a failure on its side"}); try again`,
      retryable: true,
      details: base
    }
  }
  const bySize = attempts.filter((a) => a.unmet_requirements.some((u) => u.requirement === "resources"))
  if (bySize.length === 0 || bySize.length < attempts.filter((a) => a.outcome === "ineligible").length) {
    return { code: "no_eligible_provider", message: "No configured provider can serve this request", retryable: false, details: base }
  }
  const largest = bySize.map((a) => {
    const max = providers.find((p) => p.name === a.provider)?.capabilities.maxResources
    return { provider: a.provider, vcpu: max?.vcpu ?? null, memory_mb: max?.memoryMb ?? null, disk_mb: max?.diskMb ?? null }
  })
  const stated = (pick: (l: (typeof largest)[number]) => number | null) => {
    const values = largest.map(pick)
    return values.some((v) => v === null) ? null : Math.max(...(values as Array<number>))
  }
  const r = request.resources
  const asked = sizeText({ vcpu: r.vcpu, memoryMb: r.memory_mb, diskMb: r.disk_mb ?? null })
  const most = [stated((l) => l.vcpu), stated((l) => l.memory_mb), stated((l) => l.disk_mb)]
  const mostText = [most[0] === null ? null : `${most[0]} vCPU`, most[1] === null ? null : `${most[1]} MB of memory`, most[2] === null ? null : `${most[2]} MB of disk`]
    .filter((t) => t !== null).join(", ")
  return {
    code: "no_eligible_provider",
    message: `No configured provider can serve this request: resources (${asked}) are more than any of them gives${mostText === "" ? "" : ` (the largest: ${mostText})`}`,
    retryable: false,
    details: { ...base, requirement: "resources", requested_resources: r, largest_resources: largest }
  }
}

/**
 * `candidates`: the organization's (ProviderAccounts `candidates`); `firstCreate`: the provision job's first attempt
 * (each provider is tried at most once in an attempt).
 */
export const provisionSandbox = (
  sandbox: SandboxRow,
  operationId: OperationId,
  { byok, providers }: Candidates,
  firstCreate: boolean,
  runtime?: LocalRuntimeShape
) =>
  Effect.gen(function*() {
    const context = yield* repositories
    const request = yield* requestOf(sandbox)
    // A provider's own words (its status lines, its daemon's errors) are logged, not recorded where clients read.
    const record = (raw: Attempt) =>
      Effect.gen(function*() {
        const attempt = publicAttempt(raw)
        if (attempt.message !== raw.message) yield* Effect.logWarning("provider failure: create", { provider: raw.provider, code: raw.code, message: raw.message })
        // Two rows of their own, written at once (on PostgreSQL two connections' round trips overlap).
        yield* Effect.all([
          SandboxesRepo.recordAttempt({
            sandboxId: sandbox.id,
            operationId,
            attemptIndex: attempt.attempt_index,
            provider: attempt.provider,
            outcome: attempt.outcome,
            code: attempt.code,
            message: attempt.message,
            unmetRequirements: attempt.unmet_requirements
          }),
          appendOperationEvent(operationId, attempt.outcome === "created" || attempt.outcome === "found" ? "attempt_started" : "attempt_failed", {
            attempt_index: attempt.attempt_index,
            provider: attempt.provider,
            code: attempt.code,
            unmet_requirements: attempt.unmet_requirements
          })
        ], { concurrency: "unbounded", discard: true })
      }).pipe(Effect.provide(context))
    const outcome = yield* provisionWithFallback({
      request,
      providers,
      // On the organization's own account nothing is charged to its balance.
      managedBilling: (provider) => provider.mode === "remote" && !byok.has(provider.name),
      ownAccount: (provider) => byok.has(provider.name),
      input: (provider) => createInput(sandbox, request, provider.name, firstCreate),
      onAttempt: record,
      beforeCreate: (provider, input) =>
        runtime !== undefined && provider.mode === "emulated" && input.source.kind === "oci_image" && provider.capabilities.sources.includes("oci_image")
          ? pullWithProgress(runtime, operationId, input.source.image).pipe(Effect.provide(context))
          : Effect.void
    })
    const details = (attempts: ReadonlyArray<Attempt>) => ({ attempts: attempts.map((a) => ({ ...a })) })
    // The billing mode follows the credential: the organization's stored one makes it byok, accepted or not.
    const billingModeOf = (name: ProviderName): BillingMode =>
      byok.has(name) ? "byok" : providers.find((p) => p.name === name)?.mode === "emulated" ? "emulated" : "managed"
    switch (outcome._tag) {
      case "Provisioned":
        return {
          _tag: "Provisioned",
          provider: outcome.provider.name,
          sandbox: outcome.sandbox,
          capabilities: capabilitiesToWire(outcome.provider.name, outcome.provider.capabilities),
          billingMode: billingModeOf(outcome.provider.name),
          network: resolvedNetwork(outcome.provider.capabilities, request)
        } satisfies Provisioned
      case "NoEligibleProvider":
        return { _tag: "NoEligibleProvider", error: noEligibleProvider(request, outcome.attempts, providers) } satisfies Provisioned
      case "Failed": {
        const pull = imagePullReason(outcome.error)
        // The image could not be pulled (unknown image or tag, unreachable registry, wrong platform, too large …):
        // said as such, with the reason, never as a provider failure.
        const error = pull !== undefined
          ? { code: "image_pull_failed", message: `The image could not be pulled: ${pull}`, retryable: false, details: { reason: "image_pull_failed", provider: outcome.error.provider } }
          : actionFailure(providerCode(outcome.error), "create the sandbox", outcome.error)
        yield* logProviderFailure("create", outcome.error)
        return {
          _tag: "Failed",
          error: { ...error, details: { ...error.details, ...details(outcome.attempts.map(publicAttempt)) } },
          placement: { provider: outcome.error.provider, billingMode: billingModeOf(outcome.error.provider) }
        } satisfies Provisioned
      }
      case "ProvisionUnknown":
        return { _tag: "ProvisionUnknown" } satisfies Provisioned
    }
  })
