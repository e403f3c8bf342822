/**
 * E2B sandboxes through the control API (`X-API-Key`), on the routes E2B's SDK uses (the v1 create, list, resume
 * and connect are deprecated): `POST /v2/sandboxes` (with our ids in its metadata), `GET /sandboxes/{id}`,
 * `GET /v2/sandboxes?metadata=…` to reconcile after an unknown outcome, `DELETE /sandboxes/{id}`,
 * `POST /sandboxes/{id}/pause`, `POST /v2/sandboxes/{id}/connect` (resumes a paused sandbox and returns a fresh
 * envd token), `POST /sandboxes/{id}/timeout`. E2B's own timeout is a safety net behind the gateway's timers.
 * Cost: E2B's rate card.
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import { rateCardCost } from "../../core/cost.ts"
import { type CreateInput, type InspectState, type ProviderMetrics, type ProviderSandbox, type ResolvedResources, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import type { E2BContext } from "./context.ts"
import { DESKTOP_TEMPLATE, E2B_RATE_CARD, METADATA_SANDBOX_ID, NAME, WireListed, WireMetrics, WireSandbox, type WireSandboxDetail } from "./wire.ts"

/** E2B's `ALL_TRAFFIC`: in `denyOut`, everything not in `allowOut` is denied. */
const ALL_TRAFFIC = "0.0.0.0/0"

/** E2B's longest sandbox lifetime (Pro tier); longer runtime timeouts are capped to it. */
const MAX_SANDBOX_TIMEOUT_SECONDS = 86_400
/** E2B's own timer is a safety net behind the gateway's lifecycle timers, so it fires a little later. */
const TIMEOUT_MARGIN_SECONDS = 300

/** `forget`: what other parts keep per sandbox, dropped when it is destroyed. */
export const makeSandboxes = (ctx: E2BContext, forget: (sandboxId: string) => void) => {
  const { api, decode, getDetail, remember, send } = ctx

  const resolved = (s: WireSandboxDetail): ResolvedResources => ({
    vcpu: s.cpuCount,
    memoryMb: s.memoryMB,
    diskMb: s.diskSizeMB ?? null,
    architecture: "x86_64",
    providerSize: s.templateID
  })
  const toProviderSandbox = (s: { readonly sandboxID: string; readonly templateID: string; readonly envdVersion?: string | undefined }, resources: ResolvedResources, timeoutSeconds: number): ProviderSandbox => ({
    resourceId: s.sandboxID,
    resolvedResources: resources,
    metadata: { templateID: s.templateID, envdVersion: s.envdVersion ?? null, timeoutSeconds }
  })
  const lifetimeOf = (s: WireSandboxDetail) =>
    s.startedAt !== undefined && s.endAt !== undefined ? Math.max(60, Math.round((Date.parse(s.endAt) - Date.parse(s.startedAt)) / 1000)) : 3600

  const connectSandbox = (sandboxId: string, timeoutSeconds: number) =>
    send(api("POST", `/v2/sandboxes/${encodeURIComponent(sandboxId)}/connect`, { timeout: timeoutSeconds }), "connect sandbox", { mutating: true }).pipe(
      Effect.flatMap(decode(WireSandbox, "connect sandbox")),
      Effect.tap(remember)
    )

  const reconcileCreate = (sandboxId: string) =>
    Effect.gen(function*() {
      const request = api("GET", "/v2/sandboxes").pipe(
        HttpClientRequest.setUrlParam("metadata", `${encodeURIComponent(METADATA_SANDBOX_ID)}=${encodeURIComponent(sandboxId)}`),
        HttpClientRequest.setUrlParam("state", "running,paused")
      )
      const listed = yield* send(request, "list sandboxes").pipe(Effect.flatMap(decode(WireListed, "list sandboxes")))
      const found = listed[0]
      if (found === undefined) return null
      const detail = yield* getDetail(found.sandboxID).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))
      if (detail === null) return null
      remember(detail)
      return toProviderSandbox(detail, resolved(detail), lifetimeOf(detail))
    })

  const templateOf = (input: CreateInput) => {
    const option = input.providerOptions["template_id"]
    if (typeof option === "string" && option !== "") return option
    if (input.source.kind === "provider_template") return input.source.template
    // A desktop is E2B's `desktop` template (the Desktop SDK's default).
    if (input.computerUse === true) return DESKTOP_TEMPLATE
    return ctx.config.defaultTemplate ?? "base"
  }

  const create: SandboxProvider["create"] = (input) =>
    Effect.gen(function*() {
      if (input.source.kind === "oci_image") return yield* unsupported(NAME, "OCI images (E2B sandboxes start from templates)")
      if (input.resources.architecture === "arm64") return yield* unsupported(NAME, "arm64")
      if (input.internetAccess && input.domainPolicy?.mode === "deny") return yield* unsupported(NAME, "a domain deny list (E2B's denyOut takes only IPs and CIDRs)")
      // Looked for only when an earlier create may have made it (its answer lost).
      const existing = input.firstCreate === true ? null : yield* reconcileCreate(input.sandboxId)
      if (existing !== null) {
        // create resolves with a running sandbox: one found paused is resumed.
        const state = yield* inspect(existing)
        if (state === "paused") yield* resume(existing)
        return existing
      }
      const timeoutSeconds = Math.min(input.lifecycle.runtimeTimeoutSeconds + TIMEOUT_MARGIN_SECONDS, MAX_SANDBOX_TIMEOUT_SECONDS)
      const created = yield* send(
        // v2 sandboxes are always secured (envd wants the access token the answer carries).
        api("POST", "/v2/sandboxes", {
          templateID: templateOf(input),
          timeout: timeoutSeconds,
          autoPause: false,
          // Unsaid: left out, E2B's default (internet on).
          ...(input.internetAccess === undefined ? {} : { allow_internet_access: input.internetAccess }),
          // Only these names, all other traffic denied (E2B's documented allow list: network.allowOut + denyOut all).
          ...(input.internetAccess && input.domainPolicy?.mode === "allow"
            ? { network: { allowOut: [...input.domainPolicy.domains], denyOut: [ALL_TRAFFIC] } }
            : {}),
          metadata: { ...input.metadata, [METADATA_SANDBOX_ID]: input.sandboxId, "metal.project_id": input.projectId, "metal.organization_id": input.organizationId },
          envVars: input.environment
        }),
        "create sandbox",
        { mutating: true, ambiguous: true }
      ).pipe(Effect.flatMap(decode(WireSandbox, "create sandbox")))
      remember(created)
      // The create answer has no resources; the detail has the template's. Failing to read it must not lose the sandbox.
      const detail = yield* Effect.option(getDetail(created.sandboxID))
      const resources: ResolvedResources = detail._tag === "Some"
        ? resolved(detail.value)
        : { vcpu: input.resources.vcpu, memoryMb: input.resources.memoryMb, diskMb: null, architecture: "x86_64", providerSize: created.templateID }
      return toProviderSandbox(created, resources, timeoutSeconds)
    })

  const inspect: SandboxProvider["inspect"] = (sandbox) =>
    getDetail(sandbox.resourceId).pipe(
      Effect.map((s): InspectState => (s.state === "running" ? "running" : s.state === "paused" ? "paused" : "unknown")),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed<InspectState>("absent"))
    )

  const destroy: SandboxProvider["destroy"] = (sandbox) =>
    send(api("DELETE", `/sandboxes/${encodeURIComponent(sandbox.resourceId)}`), "kill sandbox", { mutating: true }).pipe(
      Effect.asVoid,
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.void),
      Effect.tap(() =>
        Effect.sync(() => {
          ctx.forgetAccess(sandbox.resourceId)
          forget(sandbox.resourceId)
        })
      )
    )

  const pause: SandboxProvider["pause"] = (sandbox) =>
    send(api("POST", `/sandboxes/${encodeURIComponent(sandbox.resourceId)}/pause`, { memory: true }), "pause sandbox", { mutating: true }).pipe(
      Effect.asVoid,
      // 409: already paused (fine) or busy (say so).
      Effect.catchIf((e) => e.status === 409, (e) =>
        Effect.flatMap(inspect(sandbox), (state) => (state === "paused" ? Effect.void : Effect.fail(e))))
    )

  const resume: SandboxProvider["resume"] = (sandbox) => {
    const timeout = Number(sandbox.metadata["timeoutSeconds"] ?? 3600)
    // `/v2/…/connect` resumes a paused sandbox (the legacy `/resume` is deprecated) and only ever extends its TTL.
    return connectSandbox(sandbox.resourceId, Number.isFinite(timeout) && timeout > 0 ? timeout : 3600).pipe(Effect.asVoid)
  }

  /** E2B's own timer, moved with the gateway's deadline (a margin later, and at most E2B's longest lifetime). */
  const extendLifetime = (sandbox: ProviderSandbox, seconds: number) =>
    send(api("POST", `/sandboxes/${encodeURIComponent(sandbox.resourceId)}/timeout`, { timeout: Math.min(seconds + TIMEOUT_MARGIN_SECONDS, MAX_SANDBOX_TIMEOUT_SECONDS) }), "set timeout", { mutating: true }).pipe(Effect.asVoid)

  const getCost: SandboxProvider["getCost"] = (sandbox, window) => Effect.sync(() => rateCardCost(E2B_RATE_CARD, sandbox.resolvedResources, window))

  /** E2B's latest sample (CPU as a share of the sandbox's CPUs, memory and disk in bytes); nulls before the first. */
  const metrics = (sandbox: ProviderSandbox) =>
    send(api("GET", `/sandboxes/${encodeURIComponent(sandbox.resourceId)}/metrics`), "sandbox metrics").pipe(
      Effect.flatMap(decode(WireMetrics, "sandbox metrics")),
      Effect.map((samples): ProviderMetrics => {
        const last = samples.at(-1)
        return {
          source: "provider",
          collectedAt: last === undefined || Number.isNaN(Date.parse(last.timestamp)) ? new Date().toISOString() : new Date(last.timestamp).toISOString(),
          cpuSeconds: null,
          cpuUsedPercent: last?.cpuUsedPct ?? null,
          memoryBytes: last?.memUsed ?? null,
          memoryPeakBytes: null,
          memoryLimitBytes: last?.memTotal ?? null,
          diskBytes: last?.diskUsed ?? null,
          diskLimitBytes: last?.diskTotal ?? null,
          networkRxBytes: null,
          networkTxBytes: null,
          processCount: null
        }
      })
    )

  return { create, reconcileCreate, inspect, destroy, pause, resume, getCost, extendLifetime, ...(ctx.config.mode === "remote" ? { metrics } : {}) }
}
