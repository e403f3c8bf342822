/**
 * Routing and fallback (reference/providers.md §2.5): the candidate list, and the provisioning walk over it.
 *
 * Candidates: an explicit provider → `[primary, ...fallback.providers]`; `auto` → `fallback.providers`, then every
 * other configured provider, those on the organization's own account (BYOK) first, each group broadest API first
 * (placement.ts; ties in the canonical order). Duplicates are dropped. `max_attempts` (default 9) counts real `create` calls only: unconfigured and
 * ineligible candidates are free.
 *
 * Per candidate: not configured → a failed attempt (`provider_auth_error`), next; unmet requirements →
 * `ineligible`, next; otherwise `create`. Success → `created` — unless the provider reports less than the request
 * on any dimension (never less than asked): the resource is destroyed, the attempt is `ineligible` (resources),
 * next. A fallback-safe failure (capacity, unavailable,
 * timeout_absent, unsupported: nothing was created) → `failed`, next. `unknown_outcome` → `reconcileCreate`
 * by our sandbox id: found → `found` (success); null → `absent`, next; an error → `unknown` and the walk stops
 * with `ProvisionUnknown` (the caller retries the reconciliation later — never a blind re-create). Any other
 * failure → `failed` and the walk stops. When the candidates run out: `NoEligibleProvider`, with every attempt.
 */
import { Effect } from "effect"
import type { SandboxRequest } from "../domain/Sandbox.ts"
import { type Unmet, unmetRequirements } from "./eligibility.ts"
import { attemptCode } from "./errors.ts"
import { autoOrder } from "./placement.ts"
import { coversRequest } from "./resources.ts"
import {
  type CreateInput,
  FALLBACK_SAFE,
  type ProviderError,
  type ProviderName,
  type ProviderSandbox,
  type SandboxProvider
} from "./Provider.ts"

export type { Unmet } from "./eligibility.ts"

export const DEFAULT_MAX_ATTEMPTS = 9

/** A size in words: "1 vCPU, 1024 MB of memory, 3072 MB of disk". */
export const sizeText = (size: { readonly vcpu: number; readonly memoryMb: number; readonly diskMb: number | null }) =>
  [`${size.vcpu} vCPU`, `${size.memoryMb} MB of memory`, ...(size.diskMb === null ? [] : [`${size.diskMb} MB of disk`])].join(", ")

type RoutingRequest = Pick<SandboxRequest, "provider" | "fallback">

export const isAutoRouting = (req: RoutingRequest) => req.provider === undefined || req.provider === "auto"

/** Candidates in order (see the module comment); `configured` is the registry's providers, BYOK first. */
export const candidateOrder = (req: RoutingRequest, configured: ReadonlyArray<ProviderName>): Array<ProviderName> => {
  const fallbacks = req.fallback?.providers ?? []
  const order = isAutoRouting(req) ? [...fallbacks, ...configured] : [req.provider as ProviderName, ...fallbacks]
  return [...new Set(order)]
}

export type AttemptOutcome = "created" | "found" | "absent" | "unknown" | "ineligible" | "failed"

export interface Attempt {
  readonly attempt_index: number
  readonly provider: ProviderName
  readonly outcome: AttemptOutcome
  readonly code: string | null
  readonly message: string | null
  readonly unmet_requirements: ReadonlyArray<Unmet>
}

export type ProvisionOutcome =
  | { readonly _tag: "Provisioned"; readonly provider: SandboxProvider; readonly sandbox: ProviderSandbox; readonly attempts: ReadonlyArray<Attempt> }
  | { readonly _tag: "NoEligibleProvider"; readonly attempts: ReadonlyArray<Attempt> }
  /** A failure that is not fallback-safe stopped the walk. */
  | { readonly _tag: "Failed"; readonly error: ProviderError; readonly attempts: ReadonlyArray<Attempt> }
  /** An unknown create outcome could not be reconciled: the resource may exist at `provider`. */
  | { readonly _tag: "ProvisionUnknown"; readonly provider: SandboxProvider; readonly error: ProviderError; readonly attempts: ReadonlyArray<Attempt> }

export interface ProvisionOptions {
  readonly request: SandboxRequest
  /** The configured providers, BYOK first, then registry order. */
  readonly providers: ReadonlyArray<SandboxProvider>
  /** The create input for one provider (its slice of `provider_options`, ...); same sandbox id for every one. */
  readonly input: (provider: SandboxProvider) => CreateInput
  /** Called as each attempt is decided (for example to store it), in order. */
  readonly onAttempt?: ((attempt: Attempt) => Effect.Effect<void>) | undefined
  /** Called before each create is sent (for example to pull the image the emulator will run, with progress). */
  readonly beforeCreate?: ((provider: SandboxProvider, input: CreateInput) => Effect.Effect<void>) | undefined
  /** Whether this sandbox would be billed from the provider's cost. Default: `remote` providers are. */
  readonly managedBilling?: ((provider: SandboxProvider) => boolean) | undefined
  /** Providers on the organization's own account (BYOK): tried first under `auto`. */
  readonly ownAccount?: ((provider: SandboxProvider) => boolean) | undefined
}

export const provisionWithFallback = (options: ProvisionOptions): Effect.Effect<ProvisionOutcome> =>
  Effect.gen(function*() {
    const byName = new Map(options.providers.map((p) => [p.name, p]))
    const auto = isAutoRouting(options.request)
    const order = candidateOrder(options.request, (auto ? autoOrder(options.providers, options.ownAccount) : options.providers).map((p) => p.name))
    const maxCalls = options.request.fallback?.max_attempts ?? DEFAULT_MAX_ATTEMPTS
    const managed = options.managedBilling ?? ((p: SandboxProvider) => p.mode === "remote")
    const attempts: Array<Attempt> = []
    let calls = 0
    const record = (attempt: Omit<Attempt, "attempt_index">) =>
      Effect.suspend(() => {
        const full: Attempt = { ...attempt, attempt_index: attempts.length }
        attempts.push(full)
        return options.onAttempt ? options.onAttempt(full) : Effect.void
      })
    const failed = (provider: ProviderName, error: ProviderError, outcome: AttemptOutcome = "failed") =>
      record({
        provider,
        outcome,
        // On an organization's own account (BYOK) an auth failure is its stored credentials'.
        code: error.kind === "auth" && error.account === "organization" ? "provider_credentials_rejected" : attemptCode(error.kind, error),
        message: error.message,
        unmet_requirements: []
      })

    for (const name of order) {
      const provider = byName.get(name)
      if (provider === undefined) {
        yield* record({ provider: name, outcome: "failed", code: "provider_auth_error", message: `${name} is not configured`, unmet_requirements: [] })
        continue
      }
      const unmet = unmetRequirements(provider, options.request, { auto, managedBilling: managed(provider) })
      if (unmet.length > 0) {
        yield* record({ provider: name, outcome: "ineligible", code: "capability_unsupported", message: unmet.map((u) => u.message).join("; "), unmet_requirements: unmet })
        continue
      }
      if (calls >= maxCalls) break
      calls++
      const input = options.input(provider)
      if (options.beforeCreate !== undefined) yield* options.beforeCreate(provider, input)
      const created = yield* Effect.either(provider.create(input))
      if (created._tag === "Right") {
        const given = created.right.resolvedResources
        if (!coversRequest(given, options.request.resources)) {
          // Never less than asked: what the provider made is removed, and the next candidate is tried.
          const removed = yield* Effect.either(provider.destroy(created.right))
          const unmet: Unmet = {
            requirement: "resources",
            message: `${name} gave ${sizeText(given)}, less than the requested ${sizeText({ vcpu: options.request.resources.vcpu, memoryMb: options.request.resources.memory_mb, diskMb: options.request.resources.disk_mb ?? null })}`
          }
          if (removed._tag === "Left") {
            yield* failed(name, removed.left)
            return { _tag: "Failed", error: removed.left, attempts }
          }
          yield* record({ provider: name, outcome: "ineligible", code: "capability_unsupported", message: unmet.message, unmet_requirements: [unmet] })
          continue
        }
        yield* record({ provider: name, outcome: "created", code: null, message: null, unmet_requirements: [] })
        return { _tag: "Provisioned", provider, sandbox: created.right, attempts }
      }
      const error = created.left
      if (error.kind === "unknown_outcome") {
        const found = yield* Effect.either(provider.reconcileCreate(input.sandboxId))
        if (found._tag === "Left") {
          yield* failed(name, error, "unknown")
          return { _tag: "ProvisionUnknown", provider, error, attempts }
        }
        if (found.right !== null) {
          yield* record({ provider: name, outcome: "found", code: null, message: "found by reconciliation after an unknown outcome", unmet_requirements: [] })
          return { _tag: "Provisioned", provider, sandbox: found.right, attempts }
        }
        yield* failed(name, error, "absent")
        continue
      }
      yield* failed(name, error)
      if (!FALLBACK_SAFE.has(error.kind)) return { _tag: "Failed", error, attempts }
    }
    return { _tag: "NoEligibleProvider", attempts }
  })
