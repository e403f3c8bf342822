/**
 * CodeSandbox adapter (reference/providers.md §3.2 "codesandbox", issue 12 item 4): the REST lifecycle of
 * CodeSandbox VMs with `Authorization: Bearer <key>`, every answer wrapped in `{success, data, errors}`.
 *
 * - create: `GET /vm/running` first (a workspace at its concurrent-VM limit is `capacity`, nothing created); then
 *   the sandbox tagged `metal-sandbox-<our id>` (`GET /sandbox?tags=`) or a fork of the template
 *   (`POST /sandbox/{template}/fork {title, tags}`); then `POST /vm/{id}/start {tier, hibernation_timeout_seconds,
 *   automatic_wakeup_config: {http: false, websocket: false}}`, which answers once the VM runs. A fork made by this
 *   call whose start fails is deleted. A lost or ambiguous fork answer is looked up by the tag, never forked again.
 * - template: a `provider_template` source, else `provider_options.codesandbox.template_id`, else
 *   CODESANDBOX_TEMPLATE_ID (`pcz35m`).
 * - tier: `provider_options.codesandbox.vm_tier`, else the first tier covering the request but never below
 *   CODESANDBOX_VM_TIER (Nano); always x86_64. The hibernation timeout is the idle timeout (else the runtime timeout)
 *   clamped to 60..86,400 s.
 * - pause = `POST /vm/{id}/hibernate`; resume = start again with the sandbox's tier; destroy = `DELETE /vm/{id}`
 *   (404 is success); inspect: `GET /sandbox/{id}` (404: absent), then running when `/vm/running` lists it, else
 *   paused (hibernated). CodeSandbox says that list may lag by about 30 s.
 * - cost: an estimate, the tier's credits per hour × the credit rate (CODESANDBOX_CREDIT_RATE_USD, default $0.01486),
 *   in whole minutes.
 * - No runtime: commands and files need the SDK's websocket (see `CODESANDBOX_CAPABILITIES`); every such call fails
 *   `unsupported`.
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import { lifecycleOnly } from "../../core/lifecycleOnly.ts"
import { makeProvider, type ProviderCalls } from "../../core/makeProvider.ts"
import type { CreateInput, ProviderSandbox, SandboxProvider } from "../../../src/providers/Provider.ts"
import { CODESANDBOX_TIERS } from "../../../src/providers/resources.ts"
import {
  type CodeSandboxContext,
  type CodeSandboxProviderConfig,
  HIBERNATION_BOUNDS,
  isTier,
  makeContext,
  NAME,
  RUNTIME_UNSUPPORTED_REASON,
  sandboxTag,
  type Tier,
  tierCost,
  tierSize,
  tierTag,
  TIERS,
  WireAny,
  WireFork,
  WireRunning,
  WireSandboxGet,
  WireSandboxList,
  WireStart
} from "./wire.ts"

export {
  CODESANDBOX_CAPABILITIES,
  type CodeSandboxProviderConfig,
  DEFAULT_API_URL,
  DEFAULT_CREDIT_RATE_MICROUSD,
  DEFAULT_TEMPLATE_ID,
  isTier,
  sandboxTag,
  TIER_CREDITS_PER_HOUR,
  tierCost
} from "./wire.ts"

/** The tier for a request: the option, else the first covering the request, never below `floor`. */
export const tierFor = (input: Pick<CreateInput, "resources" | "providerOptions">, floor: Tier): Tier | undefined => {
  const option = input.providerOptions["vm_tier"]
  if (isTier(option)) return option
  const fits = CODESANDBOX_TIERS.find((t) => t.vcpu >= input.resources.vcpu && t.memoryMb >= input.resources.memoryMb)
  if (fits === undefined) return undefined
  const at = Math.max(TIERS.indexOf(fits.size as Tier), TIERS.indexOf(floor))
  return TIERS[at]
}

export const hibernationTimeout = (lifecycle: CreateInput["lifecycle"]) =>
  Math.min(HIBERNATION_BOUNDS.max, Math.max(HIBERNATION_BOUNDS.min, Math.ceil(lifecycle.idleTimeoutSeconds ?? lifecycle.runtimeTimeoutSeconds)))

const codeSandboxCalls = (ctx: CodeSandboxContext, config: CodeSandboxProviderConfig): ProviderCalls => {
  const { api, call, fail, send } = ctx
  const path = (id: string, rest = "") => `/vm/${encodeURIComponent(id)}${rest}`

  const running = call(api("GET", "/vm/running"), WireRunning, "list running vms")

  const findTagged = (sandboxId: string) =>
    call(api("GET", "/sandbox").pipe(HttpClientRequest.setUrlParams({ tags: sandboxTag(sandboxId) })), WireSandboxList, "list sandboxes").pipe(
      // The filter is CodeSandbox's: the tag is checked here.
      Effect.map((list) => list.data.sandboxes.find((s) => s.tags.includes(sandboxTag(sandboxId))) ?? null)
    )

  const start = (id: string, tier: Tier, timeoutSeconds: number) =>
    call(
      api("POST", path(id, "/start")).pipe(HttpClientRequest.bodyUnsafeJson({
        tier,
        hibernation_timeout_seconds: timeoutSeconds,
        automatic_wakeup_config: { http: false, websocket: false }
      })),
      WireStart,
      "start vm"
    )

  const toSandbox = (id: string, tier: Tier, hibernationSeconds: number, templateId: string | null): ProviderSandbox => {
    const size = tierSize(tier)
    return {
      resourceId: id,
      resolvedResources: { vcpu: size.vcpu, memoryMb: size.memoryMb, diskMb: null, architecture: "x86_64", providerSize: tier },
      metadata: { tier, hibernationTimeoutSeconds: hibernationSeconds, templateId, ...(config.workspaceId === undefined ? {} : { workspaceId: config.workspaceId }) }
    }
  }

  const templateFor = (input: CreateInput) => {
    if (input.source.kind === "provider_template") return input.source.template
    const option = input.providerOptions["template_id"]
    return typeof option === "string" && option !== "" ? option : ctx.templateId
  }

  const create: SandboxProvider["create"] = (input) =>
    Effect.gen(function*() {
      if (input.source.kind === "oci_image") return yield* fail("unsupported", "codesandbox does not run OCI images")
      if (input.resources.architecture === "arm64") return yield* fail("unsupported", "codesandbox has no arm64 machines")
      const tier = tierFor(input, ctx.vmTier)
      if (tier === undefined) return yield* fail("unsupported", "codesandbox has no tier that covers the requested resources")
      const templateId = templateFor(input)
      const timeoutSeconds = hibernationTimeout(input.lifecycle)

      const preflight = yield* running
      const existing = yield* findTagged(input.sandboxId)
      if (existing === null && preflight.data.concurrent_vm_count >= preflight.data.concurrent_vm_limit) {
        return yield* fail("capacity", `codesandbox workspace runs ${preflight.data.concurrent_vm_count} of its ${preflight.data.concurrent_vm_limit} concurrent VMs`)
      }
      let id: string
      let forkedNow = false
      if (existing !== null) {
        id = existing.id
      } else {
        const body = { title: `metal ${input.sandboxId}`, tags: [sandboxTag(input.sandboxId), tierTag(tier)], privacy: 2 }
        const forked = yield* call(api("POST", `/sandbox/${encodeURIComponent(templateId)}/fork`).pipe(HttpClientRequest.bodyUnsafeJson(body)), WireFork, "fork template", { ambiguous: true }).pipe(
          Effect.map((f) => f.data.id),
          // The fork may have happened: it is found by its tag, never forked twice.
          Effect.catchIf((e) => e.kind === "unknown_outcome", (e) =>
            Effect.flatMap(findTagged(input.sandboxId), (found) => (found === null ? Effect.fail(e) : Effect.succeed(found.id))))
        )
        id = forked
        forkedNow = true
      }
      yield* start(id, tier, timeoutSeconds).pipe(
        Effect.tapError(() => (forkedNow ? Effect.ignore(send(api("DELETE", path(id)), "delete vm")) : Effect.void))
      )
      return toSandbox(id, tier, timeoutSeconds, templateId)
    })

  const reconcileCreate: SandboxProvider["reconcileCreate"] = (sandboxId) =>
    Effect.map(findTagged(sandboxId), (found) => {
      if (found === null) return null
      const tier = TIERS.find((t) => found.tags.includes(tierTag(t))) ?? ctx.vmTier
      return toSandbox(found.id, tier, HIBERNATION_BOUNDS.max, null)
    })

  const exists = (id: string) =>
    call(api("GET", `/sandbox/${encodeURIComponent(id)}`), WireSandboxGet, "get sandbox").pipe(
      Effect.as(true),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(false))
    )

  const inspect: SandboxProvider["inspect"] = (sandbox) =>
    Effect.gen(function*() {
      if (!(yield* exists(sandbox.resourceId))) return "absent" as const
      const list = yield* running
      return list.data.vms.some((vm) => vm.id === sandbox.resourceId) ? "running" as const : "paused" as const
    })

  const tierOf = (sandbox: ProviderSandbox): Tier => {
    const t = sandbox.metadata["tier"]
    return isTier(t) ? t : ctx.vmTier
  }
  const timeoutOf = (sandbox: ProviderSandbox) => {
    const t = sandbox.metadata["hibernationTimeoutSeconds"]
    return typeof t === "number" ? t : HIBERNATION_BOUNDS.max
  }

  return {
    capabilities: ctx.capabilities,
    create,
    reconcileCreate,
    inspect,
    destroy: (sandbox) =>
      send(api("DELETE", path(sandbox.resourceId)), "delete vm").pipe(Effect.asVoid, Effect.catchIf((e) => e.kind === "not_found", () => Effect.void)),
    pause: (sandbox) => Effect.asVoid(call(api("POST", path(sandbox.resourceId, "/hibernate")).pipe(HttpClientRequest.bodyUnsafeJson({})), WireAny, "hibernate vm")),
    resume: (sandbox) => Effect.asVoid(start(sandbox.resourceId, tierOf(sandbox), timeoutOf(sandbox))),
    getCost: (sandbox, window) => Effect.succeed(tierCost(tierOf(sandbox), ctx.creditRateMicrousd, window)),
    ...lifecycleOnly(NAME, RUNTIME_UNSUPPORTED_REASON)
  }
}

export const makeCodeSandboxProvider = makeProvider(NAME, {
  context: makeContext,
  calls: codeSandboxCalls,
  // BYOK: the organization's key, and its own tier floor and credit rate when it stored them.
  byok: (config) => (credentials) => {
    const rate = Number(credentials["credit_rate_usd"])
    return {
      ...config,
      apiKey: credentials["api_key"] ?? "",
      workspaceId: credentials["workspace_id"] ?? config.workspaceId,
      vmTier: isTier(credentials["vm_tier"]) ? credentials["vm_tier"] : config.vmTier,
      creditRateMicrousd: Number.isFinite(rate) && rate > 0 ? Math.round(rate * 1_000_000) : config.creditRateMicrousd
    }
  }
})
