/**
 * Blaxel sandboxes through the control API: create (`POST /sandboxes?createIfNotExist=true`, named
 * `metal-<sandbox id>` and labelled with our ids, polled until `DEPLOYED`), reconcile by name and label, inspect,
 * destroy, and the provider-reported cost (the account's metrics for the sandbox). No pause: Blaxel puts an idle
 * sandbox on standby itself and has no call for it.
 */
import { HttpClientRequest } from "@effect/platform"
import { Duration, Effect, Option } from "effect"
import { pollUntil } from "../../core/poll.ts"
import { type CreateInput, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import {
  type BlaxelContext,
  DEFAULT_IMAGE,
  GONE,
  inspectStateOf,
  LABEL_SANDBOX_ID,
  MB_PER_VCPU,
  NAME,
  sandboxName,
  WireMetrics,
  WireSandbox,
  WireWorkspace
} from "./wire.ts"

/** Blaxel's own deadline (`ttl`) is a safety net behind the gateway's timers, so it fires a little later. */
const TTL_MARGIN_SECONDS = 300
/** Blaxel labels follow Kubernetes' rules: request metadata that does not fit them is not sent. */
const LABEL = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/

export const makeSandboxes = (ctx: BlaxelContext) => {
  const { api, decode, fail, send } = ctx
  let accountId = ctx.config.accountId

  const toProviderSandbox = (s: WireSandbox): ProviderSandbox => {
    const memory = s.spec?.runtime?.memory ?? ctx.config.defaultMemoryMb ?? MB_PER_VCPU
    return {
      resourceId: s.metadata.name,
      resolvedResources: { vcpu: memory / MB_PER_VCPU, memoryMb: memory, diskMb: null, architecture: "x86_64", providerSize: null },
      metadata: {
        name: s.metadata.name,
        ...(s.metadata.url === undefined ? {} : { url: s.metadata.url }),
        createdAt: s.metadata.createdAt ?? new Date().toISOString(),
        ...(s.spec?.runtime?.image === undefined ? {} : { image: s.spec.runtime.image })
      }
    }
  }

  const getSandbox = (name: string) =>
    send(api("GET", `/sandboxes/${encodeURIComponent(name)}`), "get sandbox").pipe(Effect.flatMap(decode(WireSandbox, "get sandbox")))
  const findSandbox = (name: string) => getSandbox(name).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))

  /** Polls until the sandbox is deployed; a failed or vanished one, or the deadline, is an error. */
  const waitDeployed = (name: string) => {
    let last: string | undefined
    const check = Effect.flatMap(findSandbox(name), (s) => {
      last = s?.status
      if (s === null || GONE.has(s.status ?? "")) return Effect.fail(fail("unavailable", `blaxel sandbox ${name} disappeared while deploying`))
      if (s.status === "DEPLOYED") return Effect.succeed(Option.some(s))
      if (s.status === "FAILED") return Effect.fail(fail("unavailable", `blaxel sandbox ${name} failed to deploy`))
      return Effect.succeed(Option.none<WireSandbox>())
    })
    return pollUntil(check, {
      interval: Duration.millis(ctx.pollMs),
      timeout: Duration.millis(ctx.deployTimeoutMs),
      onTimeout: () => fail("unavailable", `blaxel sandbox ${name} still ${last ?? "unknown"} after ${ctx.deployTimeoutMs} ms`)
    })
  }

  /** Ours when it carries our id; settled to DEPLOYED; null when absent or going. */
  const ours = (s: WireSandbox | null, sandboxId: string) =>
    s !== null && s.metadata.labels?.[LABEL_SANDBOX_ID] === sandboxId && !GONE.has(s.status ?? "") && s.status !== "FAILED" ? s : null

  const reconcileCreate: SandboxProvider["reconcileCreate"] = (sandboxId) =>
    Effect.gen(function*() {
      const found = ours(yield* findSandbox(sandboxName(sandboxId)), sandboxId)
      if (found === null) return null
      return toProviderSandbox(found.status === "DEPLOYED" ? found : yield* waitDeployed(found.metadata.name))
    })

  /** `provider_options.blaxel`: `region` and `image` (environment sources) are honoured; `size` is only reported. */
  const options = (input: CreateInput) =>
    Effect.gen(function*() {
      const o = input.providerOptions
      for (const key of ["region", "image"] as const) {
        if (o[key] !== undefined && (typeof o[key] !== "string" || o[key] === "")) return yield* fail("invalid_request", `provider_options.blaxel.${key} must be a non-empty string`)
      }
      return { region: (o["region"] as string | undefined) ?? ctx.config.region, image: o["image"] as string | undefined }
    })

  const createBody = (input: CreateInput, name: string, region: string | undefined, image: string, memory: number) => ({
    metadata: {
      name,
      labels: {
        ...Object.fromEntries(Object.entries(input.metadata).filter(([k, v]) => LABEL.test(k) && (v === "" || LABEL.test(v)))),
        [LABEL_SANDBOX_ID]: input.sandboxId,
        "metal.project_id": input.projectId,
        "metal.organization_id": input.organizationId
      }
    },
    spec: {
      ...(region === undefined ? {} : { region }),
      runtime: {
        image,
        memory,
        ttl: `${Math.ceil((input.lifecycle.runtimeTimeoutSeconds + TTL_MARGIN_SECONDS) / 60)}m`,
        envs: Object.entries(input.environment).map(([k, v]) => ({ name: k, value: v }))
      }
    }
  })

  const create: SandboxProvider["create"] = (input) =>
    Effect.gen(function*() {
      if (input.source.kind === "provider_template") return yield* unsupported(NAME, "provider templates")
      if (input.resources.architecture === "arm64") return yield* unsupported(NAME, "arm64")
      const { image: optionImage, region } = yield* options(input)
      const image = input.source.kind === "oci_image" ? input.source.image : optionImage ?? ctx.config.defaultImage ?? DEFAULT_IMAGE
      // Memory buys vCPUs (2048 MB each): enough of it for both, and never below the workspace's default size.
      const memory = Math.max(ctx.config.defaultMemoryMb ?? MB_PER_VCPU, input.resources.memoryMb, Math.ceil(input.resources.vcpu * MB_PER_VCPU))
      const name = sandboxName(input.sandboxId)
      const request = api("POST", "/sandboxes").pipe(
        HttpClientRequest.setUrlParam("createIfNotExist", "true"),
        HttpClientRequest.bodyUnsafeJson(createBody(input, name, region, image, memory))
      )
      // createIfNotExist answers the existing sandbox for a retry; a lost answer is looked up by name.
      const created = yield* send(request, "create sandbox", { ambiguous: true }).pipe(
        Effect.flatMap(decode(WireSandbox, "create sandbox")),
        Effect.catchIf((e) => e.kind === "unknown_outcome", (e) =>
          Effect.flatMap(findSandbox(name), (s) => (s === null ? Effect.fail(e) : Effect.succeed(s))))
      )
      if (ours(created, input.sandboxId) === null) {
        return yield* fail("customer", `blaxel sandbox ${name} exists but is not this sandbox's (or is ${created.status ?? "going"})`)
      }
      return toProviderSandbox(created.status === "DEPLOYED" ? created : yield* waitDeployed(name))
    })

  const destroy: SandboxProvider["destroy"] = (sandbox) =>
    send(api("DELETE", `/sandboxes/${encodeURIComponent(sandbox.resourceId)}`), "delete sandbox").pipe(
      Effect.asVoid,
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.void)
    )

  /** The account of the workspace (BLAXEL_ACCOUNT_ID, else the workspace's), asked once. */
  const account = Effect.suspend(() =>
    accountId !== undefined
      ? Effect.succeed(accountId)
      : send(api("GET", `/workspaces/${encodeURIComponent(ctx.config.workspace)}`), "get workspace").pipe(
        Effect.flatMap(decode(WireWorkspace, "get workspace")),
        Effect.map((w) => (accountId = w.accountId))
      )
  )

  /** Provider-reported: the account's billed cost for this sandbox over the window (none yet: null). */
  const getCost: SandboxProvider["getCost"] = (sandbox, window) =>
    Effect.gen(function*() {
      const id = yield* account
      const metrics = yield* send(
        api("GET", `/accounts/${encodeURIComponent(id)}/metrics`).pipe(HttpClientRequest.setUrlParams({
          startTime: window.from,
          endTime: window.to,
          resolution: "hourly",
          resourceType: "sandbox",
          resourceName: sandbox.resourceId
        })),
        "account metrics"
      ).pipe(Effect.flatMap(decode(WireMetrics, "account metrics")))
      if (metrics.data.length === 0) return null
      return {
        amountMicrousd: BigInt(Math.round(metrics.summary.totalCost * 1_000_000)),
        measuredThrough: window.to,
        provenance: "provider_reported" as const,
        confidence: "high" as const,
        rateCardVersion: null
      }
    })

  return {
    create,
    reconcileCreate,
    inspect: (sandbox: ProviderSandbox) => findSandbox(sandbox.resourceId).pipe(Effect.map((s) => (s === null ? "absent" as const : inspectStateOf(s.status)))),
    destroy,
    pause: () => Effect.fail(unsupported(NAME, "pause (Blaxel puts idle sandboxes on standby itself)")),
    resume: () => Effect.fail(unsupported(NAME, "resume")),
    getCost
  } satisfies Partial<SandboxProvider>
}
