/**
 * The sandbox request and resources (spec §2.3–2.4, §8; reference §2 "Sandboxes" incl. its cross-field rules).
 * Every bound, pattern, enum and default of the spec is encoded here, so the OpenAPI document and the property
 * tests derive from the same place as the validation.
 */
import { Schema } from "effect"
import { strict, Timestamp } from "./Accounts.ts"
import { ProjectId, SandboxId } from "./Ids.ts"
import { Operation } from "./Operation.ts"

// Operations live in Operation.ts; re-exported for the modules that read them next to sandboxes.
export { Operation, OperationState, OperationType } from "./Operation.ts"

export const PROVIDERS = [
  "blaxel", "cloudflare", "codesandbox", "daytona", "e2b", "freestyle", "modal", "northflank", "prime", "runloop", "vercel"
] as const
export const Provider = Schema.Literal(...PROVIDERS).annotations({ identifier: "Provider" })
export type Provider = typeof Provider.Type

const MAX_SAFE = Number.MAX_SAFE_INTEGER
const str = (min: number, max: number) => Schema.String.pipe(Schema.minLength(min), Schema.maxLength(max))
const int = (min: number, max: number) => Schema.Int.pipe(Schema.between(min, max))

/** An optional field with a default, also shown as `default` in the OpenAPI document (optionalWith alone omits it). */
export const withDefault = <A, I>(schema: Schema.Schema<A, I>, value: A) =>
  Schema.optionalWith(schema, { default: () => value }).annotations({ default: value })

export const EnvironmentSource = Schema.Struct({
  kind: Schema.Literal("environment"),
  environment: str(1, 200),
  version: withDefault(str(1, 100), "latest")
}).annotations({ identifier: "EnvironmentSource", ...strict })

export const OciImageSource = Schema.Struct({
  kind: Schema.Literal("oci_image"),
  image: str(1, 500),
  command: Schema.optional(Schema.Array(Schema.String))
}).annotations({ identifier: "OciImageSource", ...strict })

export const ProviderTemplateSource = Schema.Struct({
  kind: Schema.Literal("provider_template"),
  provider: Provider,
  template: str(1, 500)
}).annotations({ identifier: "ProviderTemplateSource", ...strict })

export const Source = Schema.Union(EnvironmentSource, OciImageSource, ProviderTemplateSource).annotations({ identifier: "Source" })

export const Architecture = Schema.Literal("x86_64", "arm64", "any")

export const Resources = Schema.Struct({
  vcpu: Schema.Number.pipe(Schema.positive(), Schema.finite()),
  memory_mb: int(128, MAX_SAFE),
  disk_mb: Schema.optional(int(0, MAX_SAFE)),
  architecture: withDefault(Architecture, "any")
}).annotations({ identifier: "Resources", ...strict })

export const TimeoutAction = Schema.Literal("destroy", "pause")

export const Lifecycle = Schema.Struct({
  runtime_timeout_seconds: int(1, 172_800),
  idle_timeout_seconds: Schema.optional(int(1, MAX_SAFE)),
  on_runtime_timeout: withDefault(TimeoutAction, "destroy"),
  on_idle_timeout: withDefault(TimeoutAction, "destroy")
}).annotations({ identifier: "Lifecycle", ...strict })

export const WriteMode = Schema.Literal("create", "overwrite", "append")

export const Features = Schema.Struct({
  isolation: Schema.optional(Schema.Array(Schema.Literal("microvm", "vm", "container")).pipe(Schema.minItems(1))),
  pty: Schema.optional(Schema.Boolean),
  pause_resume: Schema.optional(Schema.Boolean),
  public_ports: Schema.optional(Schema.Array(int(1, 65_535)).pipe(Schema.maxItems(64))),
  computer_use: Schema.optional(Schema.Boolean),
  recording: Schema.optional(Schema.Struct({ format: withDefault(Schema.Literal("mp4"), "mp4") }).annotations(strict)),
  process: Schema.optional(Schema.Struct({
    execute: Schema.optional(Schema.Boolean),
    ordered_output: Schema.optional(Schema.Boolean),
    cancel: Schema.optional(Schema.Boolean)
  }).annotations(strict)),
  filesystem: Schema.optional(Schema.Struct({
    read: Schema.optional(Schema.Boolean),
    write: Schema.optional(Schema.Boolean),
    write_modes: Schema.optional(Schema.Array(WriteMode)),
    create_parents: Schema.optional(Schema.Boolean),
    list: Schema.optional(Schema.Boolean),
    delete: Schema.optional(Schema.Boolean)
  }).annotations(strict))
}).annotations({ identifier: "Features", ...strict })

const Domains = Schema.Array(str(1, 253)).pipe(Schema.maxItems(256))
export const Network = Schema.Struct({
  internet_access: Schema.optional(Schema.Boolean),
  allow_domains: Schema.optional(Domains),
  deny_domains: Schema.optional(Domains)
}).pipe(
  Schema.filter((n) => !(n.allow_domains !== undefined && n.deny_domains !== undefined) || {
    path: ["deny_domains"],
    message: "give allow_domains or deny_domains, not both"
  })
).annotations({ identifier: "Network", ...strict })

export const Fallback = Schema.Struct({
  providers: Schema.Array(Provider).pipe(Schema.maxItems(9)),
  max_attempts: Schema.optional(int(1, 10))
}).annotations({ identifier: "Fallback", ...strict })

const FreeForm = Schema.Record({ key: Schema.String.pipe(Schema.filter((k) => k !== "__proto__" || "__proto__ is not allowed as a key")), value: Schema.Unknown })
export const ProviderOptions = Schema.Struct({
  blaxel: Schema.optional(FreeForm),
  cloudflare: Schema.optional(FreeForm),
  codesandbox: Schema.optional(Schema.Struct({
    template_id: Schema.optional(Schema.String),
    vm_tier: Schema.optional(Schema.Literal("Pico", "Nano", "Micro", "Small", "Medium", "Large", "XLarge"))
  }).annotations(strict)),
  daytona: Schema.optional(FreeForm),
  e2b: Schema.optional(Schema.Struct({ template_id: Schema.optional(Schema.String) }).annotations(strict)),
  freestyle: Schema.optional(Schema.Struct({ snapshot_id: Schema.optional(Schema.String) }).annotations(strict)),
  modal: Schema.optional(FreeForm),
  northflank: Schema.optional(Schema.Struct({
    deployment_plan: Schema.optional(Schema.String),
    ephemeral_storage_mb: Schema.optional(int(1, MAX_SAFE))
  }).annotations(strict)),
  prime: Schema.optional(Schema.Struct({ team_id: Schema.optional(Schema.String.pipe(Schema.minLength(1))) }).annotations(strict)),
  runloop: Schema.optional(Schema.Struct({
    resource_size: Schema.optional(Schema.Literal("X_SMALL", "SMALL", "MEDIUM", "LARGE", "X_LARGE", "XX_LARGE")),
    blueprint_id: Schema.optional(Schema.String)
  }).annotations(strict)),
  vercel: Schema.optional(FreeForm)
}).annotations({ identifier: "ProviderOptions", ...strict })

/** Map keys: 1–256 characters; `__proto__` is refused rather than silently dropped by JSON objects. */
export const MapKey = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(256),
  Schema.filter((k) => k !== "__proto__" || "__proto__ is not allowed as a key")
)
const StringMap = (maxValue: number) => Schema.Record({ key: MapKey, value: Schema.String.pipe(Schema.maxLength(maxValue)) })

const SandboxRequestFields = Schema.Struct({
  provider: Schema.optional(Schema.Union(Provider, Schema.Literal("auto"))),
  source: Source,
  resources: Resources,
  lifecycle: Lifecycle,
  regions: Schema.optional(Schema.Array(str(1, 100)).pipe(Schema.maxItems(32))),
  features: Schema.optional(Features),
  network: Schema.optional(Network),
  fallback: Schema.optional(Fallback),
  provider_options: Schema.optional(ProviderOptions),
  environment: Schema.optional(StringMap(16_384)),
  secret_refs: Schema.optional(Schema.Record({ key: MapKey, value: Schema.String })),
  metadata: Schema.optional(StringMap(500))
}).annotations(strict)

type Fields = typeof SandboxRequestFields.Type

/** The cross-field rules of reference §2, each with the path it concerns. */
export const crossFieldIssue = (r: Fields): { path: Array<string>; message: string } | undefined => {
  const explicit = r.provider !== undefined && r.provider !== "auto" ? r.provider : undefined
  const fallbacks = r.fallback?.providers ?? []
  const candidates = explicit === undefined ? fallbacks : [explicit, ...fallbacks]
  if (new Set(candidates).size !== candidates.length) {
    return { path: ["fallback", "providers"], message: "the primary provider and the fallback providers must all be different" }
  }
  if (r.source.kind === "provider_template") {
    if (explicit === undefined) return { path: ["provider"], message: "a provider_template source needs an explicit provider" }
    if (r.source.provider !== explicit) return { path: ["source", "provider"], message: "a provider_template source must target the primary provider" }
    if (fallbacks.length > 0) return { path: ["fallback"], message: "a provider_template source cannot have fallback providers" }
  }
  if (explicit !== undefined && r.provider_options !== undefined) {
    for (const key of Object.keys(r.provider_options)) {
      if ((r.provider_options as Record<string, unknown>)[key] !== undefined && !candidates.includes(key as Provider)) {
        return { path: ["provider_options", key], message: `options for ${key}, which is not among the candidate providers` }
      }
    }
  }
  return undefined
}

export const SandboxRequest = SandboxRequestFields.pipe(
  Schema.filter((r) => {
    const issue = crossFieldIssue(r)
    return issue === undefined ? true : { path: issue.path, message: issue.message }
  })
).annotations({ identifier: "SandboxRequest", description: "The body of Create Sandbox; echoed as `requested` with defaults filled in." })
export type SandboxRequest = typeof SandboxRequest.Type

export const SandboxState = Schema.Literal(
  "requested", "routing", "provisioning", "provision_unknown", "ready", "pausing", "paused", "resuming",
  "runtime_unknown", "stopping", "stopped", "failed", "cleanup_pending", "cleanup_failed"
).annotations({ identifier: "SandboxState" })

export const ResolvedResources = Schema.Struct({
  vcpu: Schema.Number,
  memory_mb: Schema.Int,
  disk_mb: Schema.NullOr(Schema.Int),
  architecture: Schema.String,
  provider_size: Schema.NullOr(Schema.String)
}).annotations({ identifier: "ResolvedResources" })

export const ResolvedNetwork = Schema.Struct({
  internet_access: Schema.Boolean.annotations({ description: "Whether the sandbox reaches the internet" }),
  source: Schema.Literal("requested", "provider_default").annotations({
    description: "`requested`: as the request's `network` said; `provider_default`: the request left it unsaid and the provider's default applies"
  }),
  allow_domains: Schema.NullOr(Schema.Array(Schema.String)).annotations({ description: "The only names the sandbox may reach, enforced by its provider; null: no allow list applies" }),
  deny_domains: Schema.NullOr(Schema.Array(Schema.String)).annotations({ description: "Names the sandbox may not reach, enforced by its provider; null: no deny list applies" })
}).annotations({ identifier: "ResolvedNetwork", description: "What the sandbox got of the network; null until it is placed" })

export const Sandbox = Schema.Struct({
  id: SandboxId,
  type: Schema.Literal("sandbox"),
  project_id: ProjectId,
  state: SandboxState,
  state_reason: Schema.NullOr(Schema.String),
  requested: Schema.encodedSchema(SandboxRequestFields),
  provider: Schema.NullOr(Provider),
  billing_mode: Schema.Literal("managed", "byok", "emulated"),
  resolved_resources: Schema.NullOr(ResolvedResources),
  resolved_network: Schema.NullOr(ResolvedNetwork),
  cost_microusd: Schema.NullOr(Schema.String),
  cost_updated_at: Schema.NullOr(Timestamp),
  created_at: Timestamp,
  updated_at: Timestamp,
  ready_at: Schema.NullOr(Timestamp),
  paused_at: Schema.NullOr(Timestamp),
  stopped_at: Schema.NullOr(Timestamp),
  expires_at: Schema.NullOr(Timestamp).annotations({
    description: "When the runtime timeout fires (moved by `actions/extend`); null while none runs (before ready, paused, ended)"
  }),
  metadata: Schema.Record({ key: Schema.String, value: Schema.String })
}).annotations({ identifier: "Sandbox" })

/** `POST /v1/sandboxes/{id}/actions/extend`: the runtime deadline becomes now + this many seconds. */
export const ExtendSandbox = Schema.Struct({
  runtime_timeout_seconds: Schema.Int.pipe(Schema.between(1, 172_800)).annotations({ description: "Seconds from now, 1–172800 (48 h)" })
}).annotations({ identifier: "ExtendSandbox", ...strict })

export const SandboxMutation = Schema.Struct({ sandbox: Sandbox, operation: Operation }).annotations({ identifier: "SandboxMutation" })
export const SandboxList = Schema.Struct({ sandboxes: Schema.Array(Sandbox), next_cursor: Schema.NullOr(Schema.String) }).annotations({ identifier: "SandboxList" })
