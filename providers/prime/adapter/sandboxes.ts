/**
 * Prime sandboxes: create (`POST /api/v1/sandbox` with `vm: true`, our label and an idempotency key made from our
 * sandbox id, sized by `src/providers/resources.ts`, polled until RUNNING), reconcile by listing the sandboxes carrying our
 * label, inspect, DELETE as destroy, and the cost estimated from Prime's rate card. What Prime cannot do is refused
 * here before any request: arm64, pause-on-timeout, sizes beyond Prime's, images outside Docker Hub, templates
 * that are not `prime/…`; pause and resume are unsupported.
 */
import { HttpClientRequest } from "@effect/platform"
import { Duration, Effect, Option } from "effect"
import { rateCardCost } from "../../core/cost.ts"
import { pollUntil } from "../../core/poll.ts"
import { type CreateInput, type ProviderSandbox, type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { primeSize } from "../../../src/providers/resources.ts"
import {
  ENDED_STATUSES,
  ENVIRONMENT_IMAGES,
  idempotencyKey,
  inspectStateOf,
  NAME,
  type PrimeContext,
  RATE_CARD,
  sandboxLabel,
  sandboxName,
  TIMEOUT_MARGIN_MINUTES,
  WireSandbox,
  WireSandboxList
} from "./wire.ts"

/** Sandboxes asked for per list page, and pages read at most (a label matches one sandbox, or a few ended ones). */
const PAGE_SIZE = 100
const MAX_PAGES = 10

/** A Docker Hub reference: no registry host, or one of Docker Hub's own names. */
export const isDockerHub = (image: string) => {
  const first = image.split("/")[0] ?? ""
  const hasHost = image.includes("/") && (first.includes(".") || first.includes(":") || first === "localhost")
  return !hasHost || ["docker.io", "index.docker.io", "registry-1.docker.io"].includes(first)
}

export const makeSandboxes = (ctx: PrimeContext) => {
  const { api, decode, fail, sandboxPath, send } = ctx

  const toProviderSandbox = (s: WireSandbox): ProviderSandbox => ({
    resourceId: s.id,
    resolvedResources: {
      vcpu: s.cpuCores,
      memoryMb: Math.round(s.memoryGB * 1024),
      diskMb: Math.round(s.diskSizeGB * 1024),
      architecture: "x86_64",
      providerSize: null
    },
    metadata: { name: s.name, teamId: s.teamId ?? null }
  })

  const getSandbox = (id: string) => send(api("GET", sandboxPath(id)), "get sandbox").pipe(Effect.flatMap(decode(WireSandbox, "get sandbox")))
  const findSandbox = (id: string) => getSandbox(id).pipe(Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null)))

  const teamOf = (input?: CreateInput) => {
    const option = input?.providerOptions["team_id"]
    return typeof option === "string" && option !== "" ? option : ctx.config.teamId
  }

  /** The live sandbox carrying our label (`GET /api/v1/sandbox?labels=…&is_active=true`, paged). */
  const findOurs = (sandboxId: string, teamId: string | undefined) =>
    Effect.gen(function*() {
      const label = sandboxLabel(sandboxId)
      for (let page = 1; page <= MAX_PAGES; page++) {
        const list = yield* send(
          api("GET", "/sandbox").pipe(HttpClientRequest.setUrlParams({
            labels: label,
            is_active: "true",
            page: String(page),
            per_page: String(PAGE_SIZE),
            ...(teamId === undefined ? {} : { team_id: teamId })
          })),
          "list sandboxes"
        ).pipe(Effect.flatMap(decode(WireSandboxList, "list sandboxes")))
        // The filter is Prime's: check the label and the status too.
        const hit = list.sandboxes.find((s) => s.labels.includes(label) && !ENDED_STATUSES.has(s.status))
        if (hit !== undefined) return hit
        if (!list.hasNext || list.sandboxes.length === 0) break
      }
      return null
    })

  /** Polls until the sandbox runs; one that ends meanwhile is an error (a failed image pull is the customer's). */
  const settle = (s: WireSandbox) =>
    Effect.gen(function*() {
      const ended = (w: WireSandbox) => {
        const reason = [w.errorType, w.errorMessage].filter((x) => typeof x === "string" && x !== "").join(": ")
        return fail(w.errorType === "IMAGE_PULL_FAILED" ? "customer" : "unavailable", `prime sandbox ${w.id} is ${w.status}${reason === "" ? "" : ` (${reason})`}`)
      }
      if (ENDED_STATUSES.has(s.status)) return yield* ended(s)
      if (s.status === "RUNNING") return toProviderSandbox(s)
      const running = yield* pollUntil(
        Effect.flatMap(getSandbox(s.id), (w) =>
          ENDED_STATUSES.has(w.status) ? Effect.fail(ended(w)) : Effect.succeed(w.status === "RUNNING" ? Option.some(w) : Option.none())),
        {
          interval: Duration.millis(ctx.pollMs),
          timeout: Duration.millis(ctx.startTimeoutMs),
          onTimeout: () => fail("unavailable", `prime sandbox ${s.id} is not RUNNING after ${ctx.startTimeoutMs} ms`)
        }
      )
      return toProviderSandbox(running)
    })

  /** The image to run, or the refusal: OCI only from Docker Hub, templates only Prime's own (`prime/…`). */
  const imageOf = (input: CreateInput) => {
    const source = input.source
    if (source.kind === "environment") return Effect.succeed(ENVIRONMENT_IMAGES[source.environment] ?? ENVIRONMENT_IMAGES["metal/base"]!)
    if (source.kind === "oci_image") {
      if (source.command !== undefined) return Effect.fail(unsupported(NAME, "an image command (Prime starts the image as it is)"))
      return isDockerHub(source.image) ? Effect.succeed(source.image) : Effect.fail(unsupported(NAME, `images outside Docker Hub (${source.image})`))
    }
    return source.template.startsWith("prime/") && source.template.length > "prime/".length
      ? Effect.succeed(source.template)
      : Effect.fail(unsupported(NAME, `the template ${source.template} (Prime templates are prime/…)`))
  }

  const create: SandboxProvider["create"] = (input) =>
    Effect.gen(function*() {
      // Refusals first: nothing is sent for a request Prime cannot take.
      if (!ctx.capabilities.sources.includes(input.source.kind)) return yield* unsupported(NAME, `${input.source.kind} sources`)
      if (input.resources.architecture === "arm64") return yield* unsupported(NAME, "arm64")
      if (input.lifecycle.onRuntimeTimeout === "pause" || (input.lifecycle.idleTimeoutSeconds !== undefined && input.lifecycle.onIdleTimeout === "pause")) {
        return yield* unsupported(NAME, "pausing at a timeout")
      }
      const size = primeSize(input.resources)
      if (size === undefined) {
        return yield* unsupported(NAME, `${input.resources.vcpu} vCPU, ${input.resources.memoryMb} MB of memory and ${input.resources.diskMb ?? 0} MB of disk (at most 16 vCPU, 64 GiB, 128 GiB)`)
      }
      const image = yield* imageOf(input)
      const teamId = teamOf(input)
      const body = {
        name: sandboxName(input.sandboxId),
        docker_image: image,
        cpu_cores: size.vcpu,
        memory_gb: size.memoryMb / 1024,
        disk_size_gb: size.diskGib,
        timeout_minutes: Math.ceil(input.lifecycle.runtimeTimeoutSeconds / 60) + TIMEOUT_MARGIN_MINUTES,
        environment_vars: input.environment,
        labels: [sandboxLabel(input.sandboxId)],
        idempotency_key: idempotencyKey(input.sandboxId),
        vm: true,
        ...(teamId === undefined ? {} : { team_id: teamId })
      }
      const created = yield* send(api("POST", "/sandbox").pipe(HttpClientRequest.bodyUnsafeJson(body)), "create sandbox", { ambiguous: true }).pipe(
        Effect.flatMap(decode(WireSandbox, "create sandbox")),
        // A lost answer: the sandbox may exist; found by our label, or the outcome stays unknown.
        Effect.catchIf((e) => e.kind === "unknown_outcome", (e) => Effect.flatMap(findOurs(input.sandboxId, teamId), (s) => (s === null ? Effect.fail(e) : Effect.succeed(s))))
      )
      return yield* settle(created)
    })

  const reconcileCreate: SandboxProvider["reconcileCreate"] = (sandboxId) =>
    Effect.flatMap(findOurs(sandboxId, teamOf()), (found) => (found === null ? Effect.succeed(null) : settle(found)))

  /** `DELETE /api/v1/sandbox/{id}`; a sandbox already gone is success. */
  const destroy: SandboxProvider["destroy"] = (sandbox) =>
    send(api("DELETE", sandboxPath(sandbox.resourceId)), "delete sandbox").pipe(
      Effect.asVoid,
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.void)
    )

  /**
   * Prime reports no cost: the estimate is the sandbox's size at Prime's rate card (vCPU, memory and disk per hour)
   * over the window asked for.
   */
  const getCost: SandboxProvider["getCost"] = (sandbox, window) => Effect.succeed(rateCardCost(RATE_CARD, sandbox.resolvedResources, window))

  return {
    create,
    reconcileCreate,
    inspect: (sandbox: ProviderSandbox) => findSandbox(sandbox.resourceId).pipe(Effect.map((s) => (s === null ? "absent" as const : inspectStateOf(s.status)))),
    destroy,
    pause: () => Effect.fail(unsupported(NAME, "pause")),
    resume: () => Effect.fail(unsupported(NAME, "resume")),
    getCost
  } satisfies Partial<SandboxProvider>
}
