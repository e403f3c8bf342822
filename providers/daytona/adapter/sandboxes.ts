/**
 * Daytona sandboxes: create (named `metal-<sandbox id>`, labelled with our ids, polled until `started`),
 * reconcile by label after an unknown outcome, inspect, destroy, stop/start as pause/resume, and the cost from
 * Daytona's rate card.
 */
import { HttpClientRequest } from "@effect/platform"
import { Duration, Effect, Option } from "effect"
import { rateCardCost } from "../../core/cost.ts"
import { pollUntil } from "../../core/poll.ts"
import { type CreateInput, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import {
  DAYTONA_RATE_CARD,
  type DaytonaContext,
  FAILED_STATES,
  GONE_STATES,
  IMAGE_METADATA,
  inspectStateOf,
  LABEL_SANDBOX_ID,
  NAME,
  sandboxName,
  STARTING_STATES,
  WireSandbox,
  WireSandboxList
} from "./wire.ts"

/** What was asked for an OCI build (whole vCPUs and GiB), which Daytona does not echo back reliably. */
interface Sent {
  readonly vcpu: number
  readonly memoryGib: number
  readonly diskGib: number | undefined
}

export const makeSandboxes = (ctx: DaytonaContext) => {
  const { api, decode, fail, send } = ctx

  const toProviderSandbox = (s: WireSandbox, sent?: Sent): ProviderSandbox => ({
    resourceId: s.id,
    resolvedResources: {
      vcpu: sent?.vcpu ?? s.cpu,
      memoryMb: Math.round((sent?.memoryGib ?? s.memory) * 1024),
      diskMb: Math.round((sent?.diskGib ?? s.disk) * 1024),
      architecture: "x86_64",
      providerSize: s.snapshot ?? null
    },
    metadata: {
      name: s.name,
      ...(s.toolboxProxyUrl === undefined ? {} : { toolboxProxyUrl: s.toolboxProxyUrl }),
      // Built from an image (ours: `FROM <image>`): its processes start in the image's WorkingDir.
      ...(sent !== undefined || (s.buildInfo !== undefined && s.buildInfo !== null) ? { [IMAGE_METADATA]: true } : {})
    }
  })

  const getSandbox = (idOrName: string) =>
    send(api("GET", `/sandbox/${encodeURIComponent(idOrName)}`), "get sandbox").pipe(Effect.flatMap(decode(WireSandbox, "get sandbox")))
  const findSandbox = (idOrName: string) =>
    getSandbox(idOrName).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))

  /** Polls until the sandbox reaches `want`; a failed or vanished sandbox, or the deadline, is an error. */
  const waitFor = (id: string, want: "started" | "stopped", what: string) => {
    let last: string | undefined
    const check = Effect.flatMap(findSandbox(id), (s) => {
      last = s?.state
      if (s === null || GONE_STATES.has(s.state ?? "")) return Effect.fail(fail("unavailable", `daytona sandbox ${id} disappeared while ${what}`))
      if (s.state === want) return Effect.succeed(Option.some(s))
      if (FAILED_STATES.has(s.state ?? "")) {
        return Effect.fail(fail(s.state === "build_failed" ? "customer" : "unavailable", `daytona sandbox ${id} is ${s.state} while ${what}: ${s.errorReason ?? "no reason given"}`))
      }
      return Effect.succeed(Option.none<WireSandbox>())
    })
    return pollUntil(check, {
      interval: Duration.millis(ctx.pollMs),
      timeout: Duration.millis(ctx.lifecycleTimeoutMs),
      onTimeout: () => fail("unavailable", `daytona sandbox ${id} still ${last ?? "unknown"} after ${ctx.lifecycleTimeoutMs} ms ${what}`)
    })
  }

  const byLabel = (sandboxId: string) =>
    send(
      api("GET", "/sandbox").pipe(HttpClientRequest.setUrlParams({ labels: JSON.stringify({ [LABEL_SANDBOX_ID]: sandboxId }), limit: "10" })),
      "list sandboxes"
    ).pipe(
      Effect.flatMap(decode(WireSandboxList, "list sandboxes")),
      Effect.map((list) => list.items),
      // The filter is the provider's; check it ourselves, and skip what is being destroyed.
      Effect.map((items) => items.find((s) => s.labels?.[LABEL_SANDBOX_ID] === sandboxId && !GONE_STATES.has(s.state ?? "")) ?? null)
    )

  const destroyQuietly = (id: string) => Effect.ignore(send(api("DELETE", `/sandbox/${encodeURIComponent(id)}`), "delete sandbox"))

  /** A found resource, ready: a failed one is removed (and reported absent), a starting one is waited for. */
  const settle = (s: WireSandbox, sent?: Sent) =>
    Effect.gen(function*() {
      if (FAILED_STATES.has(s.state ?? "")) {
        yield* destroyQuietly(s.id)
        return yield* fail(s.state === "build_failed" ? "customer" : "unavailable", `daytona sandbox ${s.id} is ${s.state}: ${s.errorReason ?? "no reason given"}`)
      }
      const ready = s.state === "started" ? s : yield* waitFor(s.id, "started", "starting").pipe(
        Effect.tapError((e) => (e.kind === "customer" ? destroyQuietly(s.id) : Effect.void))
      )
      return toProviderSandbox(ready, sent)
    })

  const createBody = (input: CreateInput, name: string, sent: Sent | undefined) => {
    const oci = input.source.kind === "oci_image" ? input.source.image : undefined
    return {
      name,
      labels: {
        ...input.metadata,
        [LABEL_SANDBOX_ID]: input.sandboxId,
        "metal.project_id": input.projectId,
        "metal.organization_id": input.organizationId
      },
      env: input.environment,
      public: false,
      // Unsaid: left out, Daytona's default (not blocked).
      ...(input.internetAccess === undefined ? {} : { networkBlockAll: !input.internetAccess }),
      ...(input.internetAccess && input.domainPolicy?.mode === "allow" ? { domainAllowList: input.domainPolicy.domains.join(",") } : {}),
      autoStopInterval: 0,
      autoDeleteInterval: -1,
      ...(ctx.config.target === undefined ? {} : { target: ctx.config.target }),
      ...(oci === undefined || sent === undefined
        ? ctx.config.snapshot === undefined ? {} : { snapshot: ctx.config.snapshot }
        : {
          buildInfo: { dockerfileContent: `FROM ${oci}\n` },
          cpu: sent.vcpu,
          memory: sent.memoryGib,
          ...(sent.diskGib === undefined ? {} : { disk: sent.diskGib })
        })
    }
  }

  const create: SandboxProvider["create"] = (input) =>
    Effect.gen(function*() {
      if (input.source.kind === "provider_template") return yield* unsupported(NAME, "provider templates")
      if (input.resources.architecture === "arm64") return yield* unsupported(NAME, "arm64")
      const name = sandboxName(input.sandboxId)
      // Looked for only when an earlier create may have made it (its answer lost); a taken name answers 409 anyway.
      const existing = input.firstCreate === true ? null : yield* findSandbox(name)
      if (existing !== null && !GONE_STATES.has(existing.state ?? "")) return yield* settle(existing)
      const sent: Sent | undefined = input.source.kind !== "oci_image"
        ? undefined
        : {
          vcpu: Math.max(1, Math.ceil(input.resources.vcpu)),
          memoryGib: Math.max(1, Math.ceil(input.resources.memoryMb / 1024)),
          diskGib: input.resources.diskMb === undefined ? undefined : Math.max(1, Math.ceil(input.resources.diskMb / 1024))
        }
      const created = yield* send(api("POST", "/sandbox").pipe(HttpClientRequest.bodyUnsafeJson(createBody(input, name, sent))), "create sandbox", { ambiguous: true }).pipe(
        Effect.flatMap(decode(WireSandbox, "create sandbox")),
        // The name is taken: a create of ours (a retry, or one whose answer was lost) got there first.
        Effect.catchIf((e) => e.status === 409, (e) =>
          Effect.flatMap(findSandbox(name), (s) => (s === null ? Effect.fail(fail("unknown_outcome", `${e.message}, yet ${name} is not found`)) : Effect.succeed(s))))
      )
      return yield* settle(created, sent)
    })

  const reconcileCreate: SandboxProvider["reconcileCreate"] = (sandboxId) =>
    Effect.gen(function*() {
      // A list item lacks the build info that says it runs an image: the sandbox itself is read.
      const listed = yield* byLabel(sandboxId)
      const found = yield* findSandbox(listed?.id ?? sandboxName(sandboxId))
      if (found === null || GONE_STATES.has(found.state ?? "")) return null
      return yield* settle(found).pipe(Effect.catchIf((e) => e.kind === "customer", () => Effect.succeed(null)))
    })

  const transition = (sandbox: ProviderSandbox, to: "stopped" | "started") =>
    Effect.gen(function*() {
      const s = yield* getSandbox(sandbox.resourceId).pipe(
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.fail(fail("not_found", `daytona sandbox ${sandbox.resourceId} does not exist`)))
      )
      if (s.state === to) return
      const settling = to === "stopped" ? s.state === "stopping" : s.state !== undefined && STARTING_STATES.has(s.state)
      if (!settling) yield* send(api("POST", `/sandbox/${encodeURIComponent(sandbox.resourceId)}/${to === "stopped" ? "stop" : "start"}`), to === "stopped" ? "stop sandbox" : "start sandbox")
      yield* waitFor(sandbox.resourceId, to, to === "stopped" ? "stopping" : "starting")
    })

  const destroy: SandboxProvider["destroy"] = (sandbox) =>
    send(api("DELETE", `/sandbox/${encodeURIComponent(sandbox.resourceId)}`), "delete sandbox").pipe(
      Effect.asVoid,
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.void),
      // A state change in progress: fine if it is the destroy itself.
      Effect.catchIf((e) => e.status === 409, (e) =>
        Effect.flatMap(findSandbox(sandbox.resourceId), (s) =>
          s === null || GONE_STATES.has(s.state ?? "") ? Effect.void : Effect.fail(fail("unavailable", e.message, 409))))
    )

  return {
    create,
    reconcileCreate,
    inspect: (sandbox: ProviderSandbox) => findSandbox(sandbox.resourceId).pipe(Effect.map((s) => (s === null ? "absent" as const : inspectStateOf(s.state)))),
    destroy,
    pause: (sandbox: ProviderSandbox) => (ctx.capabilities.pause ? transition(sandbox, "stopped") : Effect.fail(unsupported(NAME, "pause"))),
    resume: (sandbox: ProviderSandbox) => (ctx.capabilities.resume ? transition(sandbox, "started") : Effect.fail(unsupported(NAME, "resume"))),
    getCost: (sandbox: ProviderSandbox, window: { readonly from: string; readonly to: string }) =>
      Effect.sync(() => rateCardCost(DAYTONA_RATE_CARD, sandbox.resolvedResources, window))
  } satisfies Partial<SandboxProvider>
}
