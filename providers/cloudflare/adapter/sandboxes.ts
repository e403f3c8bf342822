/**
 * Cloudflare sandboxes through the bridge: create (`POST /v1/sandbox`, no body, with our sandbox id as its
 * `Idempotency-Key`; then `GET …/running` every 500 ms until it runs), inspect (`…/running`: 404 absent),
 * destroy (`DELETE`, 404 is success) and cost. The bridge has no lookup by our id, so the sandboxes this instance
 * made are remembered in memory (as the reference does): a create retried in the same process finds its
 * sandbox there, and so does `reconcileCreate`; after a restart, reconcile finds nothing, and a bridge that
 * honours the idempotency key answers a repeated create with the same sandbox. No pause or resume: a Cloudflare
 * sandbox only sleeps on its own when idle.
 *
 * Sizing is fixed by the bridge's container instance type (set in its wrangler.toml): its size is reported
 * (`maxResources` of the declared row), and nothing about the request's resources is sent. The sandbox's environment is kept
 * in the sandbox's metadata and given to every command (`processes.ts`), as the bridge takes none.
 */
import { HttpClientRequest } from "@effect/platform"
import { Duration, Effect, Option } from "effect"
import { rateCardCost } from "../../core/cost.ts"
import { pollUntil } from "../../core/poll.ts"
import { type CreateInput, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import {
  AnalyticsAnswer,
  type CloudflareContext,
  costLabel,
  DEFAULT_ANALYTICS_URL,
  NAME,
  RATE_CARD,
  usageCostMicrousd,
  WireCreated,
  WireRunning
} from "./wire.ts"

/** The container usage (or, failing that, metrics) of one sandbox, by its label. */
const ANALYTICS_QUERY = `query ContainerUsage($accountTag: String, $datetimeStart: Time, $datetimeEnd: Time, $label: String) {
  viewer {
    accounts(filter: { accountTag: $accountTag }) {
      usage: containersUsageAdaptiveGroups(limit: 100, filter: { datetime_geq: $datetimeStart, datetime_leq: $datetimeEnd, labels_has: $label }) {
        dimensions { instanceId region }
        sum { cpuTimeSec allocatedMemory allocatedDisk txBytes }
      }
      metrics: containersMetricsAdaptiveGroups(limit: 100, filter: { datetime_geq: $datetimeStart, datetime_leq: $datetimeEnd, labels_has: $label }) {
        dimensions { instanceId region }
        sum { cpuTimeSec allocatedMemory allocatedDisk txBytes }
      }
    }
  }
}`

const hostOf = (url: string) => {
  try {
    return new URL(url).host
  } catch {
    return url
  }
}

/** The sandbox's environment as kept in its metadata. */
export const environmentOf = (sandbox: ProviderSandbox): Readonly<Record<string, string>> => {
  const env = sandbox.metadata["environment"]
  if (typeof env !== "object" || env === null) return {}
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => typeof e[1] === "string"))
}

export const makeSandboxes = (ctx: CloudflareContext) => {
  const { api, decode, fail, send, sandboxPath } = ctx
  /** Our sandbox id → what this instance made for it. */
  const made = new Map<string, ProviderSandbox>()

  /** The bridge's answer about a sandbox: null when it does not know it. */
  const running = (id: string) =>
    send(api("GET", sandboxPath(id, "/running")).pipe(HttpClientRequest.acceptJson), "check running").pipe(
      Effect.flatMap(decode(WireRunning, "check running")),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
    )

  const waitRunning = (id: string) =>
    pollUntil(
      Effect.flatMap(running(id), (r) =>
        r === null
          ? Effect.fail(fail("unavailable", `cloudflare sandbox ${id} disappeared while starting`))
          : Effect.succeed(r.running ? Option.some(r) : Option.none())),
      {
        interval: Duration.millis(ctx.pollMs),
        timeout: Duration.millis(ctx.startTimeoutMs),
        onTimeout: () => fail("unavailable", `cloudflare sandbox ${id} did not start within ${ctx.startTimeoutMs} ms`)
      }
    )

  const toProviderSandbox = (input: CreateInput, id: string, instanceId: string | undefined): ProviderSandbox => ({
    resourceId: id,
    // The bridge's one instance type, whatever was asked (eligibility placed only requests it covers).
    resolvedResources: {
      vcpu: ctx.capabilities.maxResources?.vcpu ?? input.resources.vcpu,
      memoryMb: ctx.capabilities.maxResources?.memoryMb ?? input.resources.memoryMb,
      diskMb: ctx.capabilities.maxResources?.diskMb ?? input.resources.diskMb ?? null,
      architecture: "x86_64",
      providerSize: typeof input.providerOptions["size"] === "string" && input.providerOptions["size"] !== "" ? input.providerOptions["size"] : null
    },
    metadata: {
      sandboxId: input.sandboxId,
      bridge: hostOf(ctx.config.apiUrl),
      ...(instanceId === undefined ? {} : { instanceId }),
      environment: { ...input.environment }
    }
  })

  const create: SandboxProvider["create"] = (input) =>
    Effect.gen(function*() {
      if (!ctx.capabilities.sources.includes(input.source.kind)) return yield* unsupported(NAME, `${input.source.kind} sources`)
      if (input.resources.architecture === "arm64") return yield* unsupported(NAME, "arm64")
      const known = made.get(input.sandboxId)
      if (known !== undefined && (yield* running(known.resourceId)) !== null) {
        yield* waitRunning(known.resourceId)
        return known
      }
      const { id } = yield* send(
        api("POST", "/v1/sandbox").pipe(HttpClientRequest.acceptJson, HttpClientRequest.setHeader("idempotency-key", input.sandboxId)),
        "create sandbox",
        { ambiguous: true }
      ).pipe(Effect.flatMap(decode(WireCreated, "create sandbox")))
      const state = yield* waitRunning(id)
      const sandbox = toProviderSandbox(input, id, state.instanceId)
      made.set(input.sandboxId, sandbox)
      return sandbox
    })

  const reconcileCreate: SandboxProvider["reconcileCreate"] = (sandboxId) =>
    Effect.gen(function*() {
      const known = made.get(sandboxId)
      if (known === undefined) return null
      const state = yield* running(known.resourceId)
      if (state === null) {
        made.delete(sandboxId)
        return null
      }
      if (!state.running) yield* waitRunning(known.resourceId)
      return known
    })

  const inspect: SandboxProvider["inspect"] = (sandbox) =>
    Effect.map(running(sandbox.resourceId), (r) => (r === null ? "absent" as const : r.running ? "running" as const : "starting" as const))

  const destroy: SandboxProvider["destroy"] = (sandbox) =>
    send(api("DELETE", sandboxPath(sandbox.resourceId)), "delete sandbox").pipe(
      Effect.asVoid,
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.void),
      Effect.tap(() =>
        Effect.sync(() => {
          for (const [key, s] of made) if (s.resourceId === sandbox.resourceId) made.delete(key)
        })
      )
    )

  /**
   * With an account id and an analytics token: the sandbox's container usage from Cloudflare's GraphQL analytics
   * (`containersUsageAdaptiveGroups`, else the metrics groups as an estimate), by the label `metal_sbx=<id>`, at the
   * rate card. Without them (the capability says no cost): none, except for an emulated sandbox, which is
   * estimated from its size and lifetime at the same prices.
   */
  const getCost: SandboxProvider["getCost"] = (sandbox, window) =>
    Effect.gen(function*() {
      if (!ctx.costEnabled) {
        if (!ctx.emulated) return null
        return rateCardCost({
          version: RATE_CARD.version,
          vcpuSecondMicrousd: RATE_CARD.cpuSecondMicrousd,
          gibSecondMicrousd: RATE_CARD.gibSecondMicrousd,
          diskGibSecondMicrousd: RATE_CARD.diskGbSecondMicrousd * 1.073741824,
          confidence: "low"
        }, sandbox.resolvedResources, window)
      }
      const request = HttpClientRequest.post(ctx.config.analyticsUrl ?? DEFAULT_ANALYTICS_URL).pipe(
        HttpClientRequest.bearerToken(ctx.config.analyticsToken ?? ""),
        HttpClientRequest.acceptJson,
        HttpClientRequest.bodyUnsafeJson({
          query: ANALYTICS_QUERY,
          variables: { accountTag: ctx.config.accountId, datetimeStart: window.from, datetimeEnd: window.to, label: costLabel(sandbox.resourceId) }
        })
      )
      // The analytics API is not the bridge: its own token, so the bridge's send (with the bridge token) is not used.
      const answer = yield* ctx.client.execute(request).pipe(
        Effect.mapError((e) => fail("unavailable", `cloudflare analytics failed: ${e.message}`)),
        Effect.flatMap((response) =>
          response.status >= 200 && response.status < 300
            ? decode(AnalyticsAnswer, "analytics")(response)
            : Effect.fail(fail(response.status === 401 || response.status === 403 ? "auth" : "unavailable", `cloudflare analytics answered ${response.status}`, response.status))
        ),
        Effect.timeoutFail({ duration: Duration.seconds(30), onTimeout: () => fail("unavailable", "cloudflare analytics timed out") })
      )
      const firstError = answer.errors?.[0]
      if (firstError !== undefined) return yield* fail("unavailable", `cloudflare analytics: ${firstError.message}`)
      const accounts = answer.data?.viewer.accounts ?? []
      const usage = accounts.flatMap((a) => a.usage)
      const rows = usage.length > 0 ? usage : accounts.flatMap((a) => a.metrics)
      if (rows.length === 0) return null
      const metered = usage.length > 0
      return {
        amountMicrousd: BigInt(Math.round(usageCostMicrousd(rows))),
        measuredThrough: window.to,
        provenance: metered ? "provider_metered" as const : "estimated_rate_card" as const,
        confidence: metered ? "medium" as const : "low" as const,
        rateCardVersion: RATE_CARD.version
      }
    })

  return {
    create,
    reconcileCreate,
    inspect,
    destroy,
    pause: () => Effect.fail(unsupported(NAME, "pause (a Cloudflare sandbox only sleeps on its own)")),
    resume: () => Effect.fail(unsupported(NAME, "resume")),
    getCost
  }
}
