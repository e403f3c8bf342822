/**
 * Vercel sandboxes: create (`GET /v2/sandboxes/{name}?resume=false` first on a retry, else `POST /v3/sandboxes` named
 * `metal-<sandbox id>` and tagged with our ids, polled until its session runs), reconcile by name and tag,
 * inspect, destroy (stop the session, then `DELETE /v2/sandboxes/{name}`), the lifetime extension
 * (`POST /v2/sandboxes/sessions/{id}/extend-timeout`) and the cost of the metered usage at Vercel's rate card.
 * No pause: a non-persistent Vercel sandbox ends with its session.
 */
import { HttpClientRequest } from "@effect/platform"
import { Duration, Effect, Option } from "effect"
import { pollUntil } from "../../core/poll.ts"
import { type CreateInput, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import {
  DEFAULT_RUNTIME,
  ENDED,
  inspectStateOf,
  MAX_TIMEOUT_MS,
  MB_PER_VCPU,
  NAME,
  PYTHON_RUNTIME,
  RATE_CARD,
  sandboxName,
  TAG_SANDBOX_ID,
  usageCostMicrousd,
  vcpusFor,
  type VercelContext,
  WireSandboxAndSession,
  WireSessionOnly
} from "./wire.ts"

/** Vercel's own timeout is a safety net behind the gateway's timers, so it fires a little later. */
const TIMEOUT_MARGIN_MS = 5 * 60 * 1000
/** Tags are short strings: request metadata that does not fit is not sent. */
const TAG = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,62}$/

export const makeSandboxes = (ctx: VercelContext) => {
  const { api, decode, fail, send, sessionPath } = ctx
  const project = { projectId: ctx.config.projectId }

  const toProviderSandbox = (found: WireSandboxAndSession): ProviderSandbox => {
    const vcpus = found.session.vcpus
    return {
      resourceId: found.sandbox.name,
      resolvedResources: { vcpu: vcpus, memoryMb: found.session.memory, diskMb: null, architecture: "x86_64", providerSize: `${vcpus} vCPU` },
      metadata: { name: found.sandbox.name, sessionId: found.session.id, createdAt: new Date(found.sandbox.createdAt).toISOString() }
    }
  }

  /** The named sandbox, without resuming it; null when there is none. */
  const findSandbox = (name: string) =>
    send(api("GET", `/v2/sandboxes/${encodeURIComponent(name)}`).pipe(HttpClientRequest.setUrlParams({ ...project, resume: "false" })), "get sandbox").pipe(
      Effect.flatMap(decode(WireSandboxAndSession, "get sandbox")),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
    )

  /** Polls until the sandbox's session runs; an ended or vanished one, or the deadline, is an error. */
  const waitRunning = (name: string) => {
    let last: string | undefined
    const check = Effect.flatMap(findSandbox(name), (s) => {
      last = s?.session.status
      if (s === null) return Effect.fail(fail("unavailable", `vercel sandbox ${name} disappeared while starting`))
      if (s.session.status === "running") return Effect.succeed(Option.some(s))
      if (ENDED.has(s.session.status)) return Effect.fail(fail("unavailable", `vercel sandbox ${name} ${s.session.status} while starting`))
      return Effect.succeed(Option.none<WireSandboxAndSession>())
    })
    return pollUntil(check, {
      interval: Duration.millis(ctx.pollMs),
      timeout: Duration.millis(ctx.startTimeoutMs),
      onTimeout: () => fail("unavailable", `vercel sandbox ${name} still ${last ?? "unknown"} after ${ctx.startTimeoutMs} ms`)
    })
  }

  /** Ours when it carries our id and its session has not ended; null otherwise. */
  const ours = (s: WireSandboxAndSession | null, sandboxId: string) =>
    s !== null && s.sandbox.tags?.[TAG_SANDBOX_ID] === sandboxId && !ENDED.has(s.session.status) ? s : null

  const settled = (s: WireSandboxAndSession) => (s.session.status === "running" ? Effect.succeed(s) : waitRunning(s.sandbox.name))

  const reconcileCreate: SandboxProvider["reconcileCreate"] = (sandboxId) =>
    Effect.gen(function*() {
      const found = ours(yield* findSandbox(sandboxName(sandboxId)), sandboxId)
      return found === null ? null : toProviderSandbox(yield* settled(found))
    })

  /** `environment` sources get Vercel's runtimes (Python for `metal/python`); `oci_image` sources their image. */
  const sourceOf = (input: CreateInput) => {
    if (input.source.kind === "oci_image") return { image: input.source.image }
    return { runtime: input.source.kind === "environment" && input.source.environment === "metal/python" ? PYTHON_RUNTIME : DEFAULT_RUNTIME }
  }

  const createBody = (input: CreateInput, name: string, vcpus: number) => ({
    name,
    projectId: ctx.config.projectId,
    persistent: false,
    ...sourceOf(input),
    resources: { vcpus },
    timeout: Math.min(MAX_TIMEOUT_MS, input.lifecycle.runtimeTimeoutSeconds * 1000 + TIMEOUT_MARGIN_MS),
    // Unsaid: no policy, Vercel's default (allow-all).
    ...(input.internetAccess === false
      ? { networkPolicy: { mode: "deny-all" } }
      : input.domainPolicy?.mode === "allow"
      ? { networkPolicy: { allow: [...input.domainPolicy.domains] } }
      : input.internetAccess === true
      ? { networkPolicy: { mode: "allow-all" } }
      : {}),
    ...(Object.keys(input.environment).length === 0 ? {} : { env: input.environment }),
    tags: {
      ...Object.fromEntries(Object.entries(input.metadata).filter(([k, v]) => TAG.test(k) && v.length <= 256)),
      [TAG_SANDBOX_ID]: input.sandboxId,
      "metal.project_id": input.projectId,
      "metal.organization_id": input.organizationId
    }
  })

  const create: SandboxProvider["create"] = (input) =>
    Effect.gen(function*() {
      if (input.source.kind === "provider_template") return yield* unsupported(NAME, "provider templates")
      if (input.source.kind === "oci_image" && !ctx.capabilities.sources.includes("oci_image")) return yield* unsupported(NAME, "oci_image sources here")
      if (input.resources.architecture === "arm64") return yield* unsupported(NAME, "arm64")
      if (input.internetAccess && input.domainPolicy?.mode === "deny") return yield* unsupported(NAME, "a domain deny list (Vercel's network policy allows names, never denies them)")
      const vcpus = vcpusFor(input.resources)
      if (vcpus === undefined) return yield* unsupported(NAME, `${input.resources.vcpu} vCPU / ${input.resources.memoryMb} MB (at most 8 vCPU with 2048 MB each)`)
      const name = sandboxName(input.sandboxId)
      // A retry finds the sandbox by name (not resumed), instead of creating a second one; a first create has none.
      const existing = input.firstCreate === true ? null : yield* findSandbox(name)
      if (existing !== null) {
        if (ours(existing, input.sandboxId) === null) {
          return yield* fail("customer", `vercel sandbox ${name} exists but is not this sandbox's (or is ${existing.session.status})`)
        }
        return toProviderSandbox(yield* settled(existing))
      }
      const request = api("POST", "/v3/sandboxes").pipe(HttpClientRequest.bodyUnsafeJson(createBody(input, name, vcpus)))
      // A lost answer, or a concurrent create of the same name (409), is looked up by name.
      const created = yield* send(request, "create sandbox", { ambiguous: true }).pipe(
        Effect.flatMap(decode(WireSandboxAndSession, "create sandbox")),
        Effect.catchIf((e) => e.kind === "unknown_outcome" || e.status === 409, (e) =>
          Effect.flatMap(findSandbox(name), (s) => (s === null ? Effect.fail(e) : Effect.succeed(s))))
      )
      if (ours(created, input.sandboxId) === null) {
        return yield* fail("customer", `vercel sandbox ${name} exists but is not this sandbox's (or is ${created.session.status})`)
      }
      return toProviderSandbox(yield* settled(created))
    })

  /** The session of a sandbox: kept at create, else the sandbox's current one. */
  const sessionOf = (sandbox: ProviderSandbox) => {
    const id = sandbox.metadata["sessionId"]
    if (typeof id === "string" && id !== "") return Effect.succeed(id)
    return Effect.flatMap(findSandbox(sandbox.resourceId), (s) =>
      s === null ? Effect.fail(fail("not_found", `vercel sandbox ${sandbox.resourceId} does not exist`)) : Effect.succeed(s.session.id))
  }

  const destroy: SandboxProvider["destroy"] = (sandbox) =>
    Effect.gen(function*() {
      const found = yield* findSandbox(sandbox.resourceId)
      if (found === null) return
      if (!ENDED.has(found.session.status)) {
        yield* send(api("POST", `${sessionPath(found.session.id)}/stop`), "stop session").pipe(
          Effect.catchIf((e) => e.kind === "not_found" || e.status === 409, () => Effect.void)
        )
      }
      yield* send(api("DELETE", `/v2/sandboxes/${encodeURIComponent(sandbox.resourceId)}`).pipe(HttpClientRequest.setUrlParams(project)), "delete sandbox").pipe(
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.void)
      )
    })

  /** Vercel ends a session at its timeout: it is moved out to at least `seconds` from now (within Vercel's 5 h). */
  const extendLifetime: NonNullable<SandboxProvider["extendLifetime"]> = (sandbox, seconds) =>
    Effect.gen(function*() {
      const sessionId = yield* sessionOf(sandbox)
      const { session } = yield* send(api("GET", sessionPath(sessionId)), "get session").pipe(Effect.flatMap(decode(WireSessionOnly, "get session")))
      if (ENDED.has(session.status)) return yield* fail("not_found", `vercel session ${sessionId} has ${session.status}`)
      const start = session.startedAt ?? session.requestedAt ?? Date.now()
      const wanted = Math.min(Date.now() + seconds * 1000 + TIMEOUT_MARGIN_MS, start + MAX_TIMEOUT_MS)
      const duration = Math.ceil(wanted - (start + session.timeout))
      if (duration <= 0) return
      yield* send(api("POST", `${sessionPath(sessionId)}/extend-timeout`).pipe(HttpClientRequest.bodyUnsafeJson({ duration })), "extend timeout")
    })

  /**
   * Vercel meters a sandbox's active CPU, memory time and egress (the sandbox's totals, its current session's while
   * they are not in yet); the cost is that usage at the published rate card. None once the sandbox is gone.
   */
  const getCost: SandboxProvider["getCost"] = (sandbox, window) =>
    Effect.gen(function*() {
      const found = yield* findSandbox(sandbox.resourceId)
      if (found === null) return null
      const { sandbox: s, session } = found
      const running = session.startedAt === undefined ? 0 : (session.stoppedAt ?? Date.now()) - session.startedAt
      const usage = {
        activeCpuMs: s.totalActiveCpuDurationMs ?? session.activeCpuDurationMs ?? 0,
        memoryMb: s.memory ?? session.memory ?? MB_PER_VCPU,
        durationMs: s.totalDurationMs ?? session.duration ?? running,
        egressBytes: s.totalEgressBytes ?? session.networkTransfer?.egress ?? 0
      }
      return {
        amountMicrousd: BigInt(Math.round(usageCostMicrousd(usage))),
        measuredThrough: window.to,
        provenance: "provider_metered" as const,
        confidence: "medium" as const,
        rateCardVersion: RATE_CARD.version
      }
    })

  return {
    create,
    reconcileCreate,
    inspect: (sandbox: ProviderSandbox) => findSandbox(sandbox.resourceId).pipe(Effect.map((s) => (s === null ? "absent" as const : inspectStateOf(s.session.status)))),
    destroy,
    extendLifetime,
    pause: () => Effect.fail(unsupported(NAME, "pause (a Vercel sandbox that stops ends its session)")),
    resume: () => Effect.fail(unsupported(NAME, "resume")),
    getCost,
    sessionOf
  }
}
