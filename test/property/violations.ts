/**
 * One-constraint-at-a-time violations of every request schema (spec §2 / §8; reference §2). Each row starts from
 * the schema's valid value and breaks exactly one rule: (schema, field, bad value, why). `field` is the path the
 * 422's `details.issues` must point at.
 *
 * `TARGETS` says which part of which endpoint (`group.endpoint.part` in the contract) each schema is sent to, so
 * the schema-level test decodes with the very schema the endpoint declares and the HTTP test knows the route.
 * Adding a route = adding its schema to `TARGETS` and `VALID`, and its rows here.
 */

export type Part = "path" | "urlParams" | "payload" | "headers"

/** Schema name → `group.endpoint.part`. Names are the exported schemas; inline ones are named here. */
export const TARGETS = {
  // Account plane (user access token)
  CreateOrganization: "organizations.create.payload",
  UpdateOrganization: "organizations.update.payload",
  DeleteOrganization: "organizations.delete.payload",
  UpdateMember: "members.update.payload",
  CreateInvitation: "members.invite.payload",
  UpdateInvitation: "members.updateInvitation.payload",
  CreateProject: "projects.create.payload",
  UpdateProject: "projects.update.payload",
  CreateApiKey: "apiKeys.create.payload",
  AutoTopupSettings: "billing.autoTopup.payload",
  QuoteParams: "billing.quote.urlParams",
  UsageParams: "billing.usage.urlParams",
  EventsParams: "events.list.urlParams",
  EventStreamParams: "events.stream.urlParams",
  EventStreamHeaders: "events.stream.headers",
  CreateWebhook: "webhooks.create.payload",
  UpdateWebhook: "webhooks.update.payload",
  DeliveriesParams: "webhookDeliveries.list.urlParams",
  ProviderCredentialInput: "providerCredentials.put.payload",
  SignIn: "sessions.signIn.payload",
  // Sandbox plane (project key)
  SandboxRequest: "sandboxes.create.payload",
  PageParams: "endpoints.list.urlParams",
  SandboxListParams: "sandboxes.list.urlParams",
  IdempotencyHeaders: "sandboxes.create.headers",
  LastEventIdHeaders: "operations.events.headers",
  FollowParams: "operations.events.urlParams",
  StartProcess: "processes.start.payload",
  ExtendSandbox: "sandboxes.extend.payload",
  WriteStdin: "processes.stdin.payload",
  RawFileParams: "filesystem.readContent.urlParams",
  RawReadHeaders: "filesystem.readContent.headers",
  RawWriteParams: "filesystem.writeContent.urlParams",
  StartProcessParams: "processes.start.urlParams",
  AttachParams: "processes.attach.urlParams",
  ReadFile: "filesystem.read.payload",
  WriteFile: "filesystem.write.payload",
  ListFiles: "filesystem.list.payload",
  DeleteFile: "filesystem.delete.payload",
  CreateEndpoint: "endpoints.create.payload",
  // Path parameters (spec §2.1 formats), each on one route that takes it
  "path.organization_id": "organizations.get.path",
  "path.user_id": "members.update.path",
  "path.invitation_id": "members.updateInvitation.path",
  "path.project_id": "projects.get.path",
  "path.api_key_id": "apiKeys.revoke.path",
  "path.webhook_id": "webhooks.get.path",
  "path.delivery_id": "webhookDeliveries.redeliver.path",
  "path.provider": "providerCredentials.delete.path",
  "path.sandbox_id": "sandboxes.get.path",
  "path.alias_project_id": "projectSandboxes.get.path",
  "path.operation_id": "operations.get.path",
  "path.process_id": "processes.get.path",
  "path.runtime_operation_id": "filesystem.getRuntimeOperation.path",
  "path.endpoint_id": "endpoints.revoke.path"
} as const satisfies Record<string, `${string}.${string}.${Part}`>

export type SchemaName = keyof typeof TARGETS

/** Stand-ins replaced by the HTTP test with the bootstrapped organization and project (real rows). */
export const ORG = "{org}"
export const PROJECT = "{project}"

const UUID = "00000000-0000-4000-8000-000000000001"
const SBX = `sbx_${"a".repeat(32)}`
const env = { kind: "environment", environment: "metal/base" }

export const validSandbox = {
  source: env,
  resources: { vcpu: 1, memory_mb: 512 },
  lifecycle: { runtime_timeout_seconds: 600 }
}

const file = "/workspace/a.txt"

/** A valid value of every schema: the base each row breaks, and what other parts of a request are sent as. */
export const VALID: Record<SchemaName, unknown> = {
  CreateOrganization: { name: "Acme", slug: "acme-violations" },
  UpdateOrganization: { name: "Acme", slug: "acme" },
  DeleteOrganization: { confirm_name: "Acme" },
  UpdateMember: { role: "admin" },
  CreateInvitation: { email: "someone@example.com" },
  UpdateInvitation: { role: "member" },
  CreateProject: { name: "P", slug: "p-violations" },
  UpdateProject: { name: "P", slug: "p" },
  CreateApiKey: { name: "k" },
  AutoTopupSettings: { enabled: false, threshold_usd: "10", refill_usd: "50", monthly_cap_usd: "500" },
  QuoteParams: { amount_usd: "25" },
  UsageParams: {},
  EventsParams: { project_id: PROJECT },
  EventStreamParams: { project_id: PROJECT },
  EventStreamHeaders: {},
  CreateWebhook: { name: "h", url: "https://example.com/hook" },
  UpdateWebhook: { enabled: false },
  DeliveriesParams: {},
  ProviderCredentialInput: { provider: "e2b", api_key: "e2b_key" },
  SignIn: { user_token: "metal_ut_not-a-live-token-but-well-formed" },
  SandboxRequest: validSandbox,
  PageParams: {},
  SandboxListParams: { state: "ready", provider: "e2b" },
  IdempotencyHeaders: { "idempotency-key": "k-1" },
  LastEventIdHeaders: { "last-event-id": "0" },
  FollowParams: { follow: "false" },
  StartProcess: { command: ["ls"] },
  ExtendSandbox: { runtime_timeout_seconds: 600 },
  WriteStdin: { data_base64: "aGk=" },
  RawFileParams: { path: file },
  RawReadHeaders: { range: "bytes=0-1" },
  RawWriteParams: { path: file, mode: "overwrite", create_parents: "false" },
  StartProcessParams: { wait_seconds: "5" },
  AttachParams: { after: "12" },
  ReadFile: { path: file },
  WriteFile: { path: file, data_base64: "aGk=" },
  ListFiles: { path: "/workspace" },
  DeleteFile: { path: file },
  CreateEndpoint: { port: 8000 },
  "path.organization_id": { organization_id: ORG },
  "path.user_id": { organization_id: ORG, user_id: UUID },
  "path.invitation_id": { organization_id: ORG, invitation_id: UUID },
  "path.project_id": { project_id: PROJECT },
  "path.api_key_id": { project_id: PROJECT, api_key_id: UUID },
  "path.webhook_id": { organization_id: ORG, webhook_id: UUID },
  "path.delivery_id": { organization_id: ORG, webhook_id: UUID, delivery_id: UUID },
  "path.provider": { organization_id: ORG, provider: "e2b" },
  "path.sandbox_id": { sandbox_id: SBX },
  "path.alias_project_id": { project_id: PROJECT, sandbox_id: SBX },
  "path.operation_id": { operation_id: `op_${"a".repeat(32)}` },
  "path.process_id": { sandbox_id: SBX, process_id: `proc_${"a".repeat(32)}` },
  "path.runtime_operation_id": { sandbox_id: SBX, runtime_operation_id: `rop_${"a".repeat(32)}` },
  "path.endpoint_id": { sandbox_id: SBX, endpoint_id: `ep_${"a".repeat(32)}` }
}

export interface Violation {
  readonly schema: SchemaName
  readonly field: string
  readonly why: string
  /** The whole part (body, query, headers or path parameters) with one rule broken. */
  readonly value: unknown
  /** Same as `value`; the name the end-to-end tests read for bodies. */
  readonly body: unknown
}

type Obj = Record<string, unknown>
/** `patch` over the schema's valid value; a key set to `undefined` is removed. */
const over = (schema: SchemaName, patch: Obj): Obj => {
  const out: Obj = { ...(VALID[schema] as Obj), ...patch }
  for (const [k, v] of Object.entries(out)) if (v === undefined) delete out[k]
  return out
}
const row = (schema: SchemaName, field: string, why: string, value: unknown): Violation => ({ schema, field, why, value, body: value })
/** A row whose value is the valid one with `patch` applied. */
const v = (schema: SchemaName, field: string, why: string, patch: Obj) => row(schema, field, why, over(schema, patch))
/** An object whose only key is `__proto__` (an object literal would set the prototype instead). */
const protoKey = (value: unknown): Obj => JSON.parse(`{"__proto__":${JSON.stringify(value)}}`)

// Sandbox request (spec §2.3, §8; reference §2 CreateSandboxRequest and its cross-field rules) ------------------

const s = (field: string, why: string, patch: Obj) => v("SandboxRequest", field, why, patch)
const res = (patch: Obj) => ({ resources: { vcpu: 1, memory_mb: 512, ...patch } })
const life = (patch: Obj) => ({ lifecycle: { runtime_timeout_seconds: 60, ...patch } })
const src = (source: Obj) => ({ source })
const ALL_BUT_ONE = ["blaxel", "cloudflare", "codesandbox", "daytona", "e2b", "freestyle", "modal", "northflank", "prime", "runloop"]

export const sandboxViolations: ReadonlyArray<Violation> = [
  s("provider", "unknown provider", { provider: "aws" }),
  s("provider", "provider in the wrong case", { provider: "E2B" }),
  s("source", "missing source", { source: undefined }),
  s("source.kind", "unknown source kind", src({ kind: "vm", environment: "x" })),
  s("source.environment", "environment missing", src({ kind: "environment" })),
  s("source.environment", "empty environment", src({ kind: "environment", environment: "" })),
  s("source.environment", "environment over 200", src({ kind: "environment", environment: "e".repeat(201) })),
  s("source.version", "empty version", src({ ...env, version: "" })),
  s("source.version", "version over 100", src({ ...env, version: "v".repeat(101) })),
  s("source.tag", "unknown key in the source", src({ ...env, tag: "x" })),
  s("source.image", "image missing", src({ kind: "oci_image" })),
  s("source.image", "empty image", src({ kind: "oci_image", image: "" })),
  s("source.image", "image over 500", src({ kind: "oci_image", image: "i".repeat(501) })),
  s("source.command", "command not strings", src({ kind: "oci_image", image: "alpine", command: [1] })),
  s("source.template", "empty template", { provider: "e2b", source: { kind: "provider_template", provider: "e2b", template: "" } }),
  s("source.template", "template over 500", { provider: "e2b", source: { kind: "provider_template", provider: "e2b", template: "t".repeat(501) } }),
  s("source.provider", "template for an unknown provider", src({ kind: "provider_template", provider: "aws", template: "t" })),
  s("resources", "missing resources", { resources: undefined }),
  s("resources.vcpu", "vcpu missing", { resources: { memory_mb: 512 } }),
  s("resources.vcpu", "vcpu zero", res({ vcpu: 0 })),
  s("resources.vcpu", "vcpu negative", res({ vcpu: -1 })),
  s("resources.vcpu", "vcpu not a number", res({ vcpu: "2" })),
  s("resources.memory_mb", "memory missing", { resources: { vcpu: 1 } }),
  s("resources.memory_mb", "memory below 128", res({ memory_mb: 127 })),
  s("resources.memory_mb", "memory not an integer", res({ memory_mb: 512.5 })),
  s("resources.memory_mb", "memory above 2^53-1", res({ memory_mb: 2 ** 53 })),
  s("resources.disk_mb", "disk negative", res({ disk_mb: -1 })),
  s("resources.disk_mb", "disk not an integer", res({ disk_mb: 1.5 })),
  s("resources.disk_mb", "disk above 2^53-1", res({ disk_mb: 2 ** 53 })),
  s("resources.architecture", "unknown architecture", res({ architecture: "riscv" })),
  s("resources.gpu", "unknown key in resources", res({ gpu: 1 })),
  s("lifecycle", "missing lifecycle", { lifecycle: undefined }),
  s("lifecycle.runtime_timeout_seconds", "runtime timeout missing", { lifecycle: {} }),
  s("lifecycle.runtime_timeout_seconds", "runtime timeout zero", life({ runtime_timeout_seconds: 0 })),
  s("lifecycle.runtime_timeout_seconds", "runtime timeout over 172800", life({ runtime_timeout_seconds: 172_801 })),
  s("lifecycle.runtime_timeout_seconds", "runtime timeout not an integer", life({ runtime_timeout_seconds: 60.5 })),
  s("lifecycle.idle_timeout_seconds", "idle timeout zero", life({ idle_timeout_seconds: 0 })),
  s("lifecycle.idle_timeout_seconds", "idle timeout not an integer", life({ idle_timeout_seconds: 1.5 })),
  s("lifecycle.idle_timeout_seconds", "idle timeout above 2^53-1", life({ idle_timeout_seconds: 2 ** 53 })),
  s("lifecycle.on_runtime_timeout", "unknown timeout action", life({ on_runtime_timeout: "hibernate" })),
  s("lifecycle.on_idle_timeout", "unknown idle action", life({ on_idle_timeout: "stop" })),
  s("lifecycle.max_age", "unknown key in lifecycle", life({ max_age: 1 })),
  s("regions", "regions not an array", { regions: "eu" }),
  s("regions", "more than 32 regions", { regions: Array.from({ length: 33 }, (_, i) => `r${i}`) }),
  s("regions.0", "region over 100", { regions: ["r".repeat(101)] }),
  s("regions.0", "empty region", { regions: [""] }),
  s("features.isolation", "empty isolation list", { features: { isolation: [] } }),
  s("features.isolation", "unknown isolation", { features: { isolation: ["chroot"] } }),
  s("features.pty", "pty not a boolean", { features: { pty: "yes" } }),
  s("features.pause_resume", "pause_resume not a boolean", { features: { pause_resume: 1 } }),
  s("features.computer_use", "computer_use not a boolean", { features: { computer_use: null } }),
  s("features.public_ports", "port 0", { features: { public_ports: [0] } }),
  s("features.public_ports", "port 65536", { features: { public_ports: [65_536] } }),
  s("features.public_ports", "port not an integer", { features: { public_ports: [80.5] } }),
  s("features.public_ports", "more than 64 ports", { features: { public_ports: Array.from({ length: 65 }, (_, i) => i + 1) } }),
  s("features.recording.format", "recording not mp4", { features: { recording: { format: "webm" } } }),
  s("features.recording.fps", "unknown key in recording", { features: { recording: { fps: 30 } } }),
  s("features.process.execute", "process flag not a boolean", { features: { process: { execute: "yes" } } }),
  s("features.process.pty", "unknown key in process", { features: { process: { pty: true } } }),
  s("features.filesystem.write_modes", "unknown write mode", { features: { filesystem: { write_modes: ["truncate"] } } }),
  s("features.filesystem.read", "filesystem flag not a boolean", { features: { filesystem: { read: "yes" } } }),
  s("features.filesystem.chmod", "unknown key in filesystem", { features: { filesystem: { chmod: true } } }),
  s("features.gpu", "unknown feature key", { features: { gpu: true } }),
  s("network.internet_access", "internet_access not a boolean", { network: { internet_access: "yes" } }),
  s("network.deny_domains", "both allow and deny lists", { network: { allow_domains: ["a.com"], deny_domains: ["b.com"] } }),
  s("network.allow_domains", "more than 256 allowed domains", { network: { allow_domains: Array.from({ length: 257 }, (_, i) => `d${i}.com`) } }),
  s("network.deny_domains", "more than 256 denied domains", { network: { deny_domains: Array.from({ length: 257 }, (_, i) => `d${i}.com`) } }),
  s("network.proxy", "unknown key in network", { network: { proxy: "x" } }),
  s("fallback.providers", "fallback without providers", { fallback: { max_attempts: 2 } }),
  s("fallback.providers", "unknown fallback provider", { fallback: { providers: ["aws"] } }),
  s("fallback.providers", "more than 9 fallbacks", { fallback: { providers: ALL_BUT_ONE } }),
  s("fallback.max_attempts", "max_attempts zero", { fallback: { providers: ["e2b"], max_attempts: 0 } }),
  s("fallback.max_attempts", "max_attempts over 10", { fallback: { providers: ["e2b"], max_attempts: 11 } }),
  s("fallback.max_attempts", "max_attempts not an integer", { fallback: { providers: ["e2b"], max_attempts: 1.5 } }),
  s("fallback.providers", "primary repeated in fallbacks", { provider: "e2b", fallback: { providers: ["e2b"] } }),
  s("fallback.providers", "duplicate fallbacks", { fallback: { providers: ["e2b", "e2b"] } }),
  s("provider", "template without an explicit provider", src({ kind: "provider_template", provider: "e2b", template: "base" })),
  s("provider", "template with provider auto", { provider: "auto", source: { kind: "provider_template", provider: "e2b", template: "base" } }),
  s("source.provider", "template for another provider", { provider: "daytona", source: { kind: "provider_template", provider: "e2b", template: "base" } }),
  s("fallback", "template with fallbacks", { provider: "e2b", source: { kind: "provider_template", provider: "e2b", template: "base" }, fallback: { providers: ["daytona"] } }),
  s("provider_options.modal", "options for a non-candidate", { provider: "e2b", provider_options: { modal: {} } }),
  s("provider_options.e2b", "options for a provider outside primary + fallbacks", { provider: "daytona", fallback: { providers: ["modal"] }, provider_options: { e2b: {} } }),
  s("provider_options.codesandbox.vm_tier", "unknown vm tier", { provider_options: { codesandbox: { vm_tier: "Huge" } } }),
  s("provider_options.codesandbox.template_id", "template id not a string", { provider_options: { codesandbox: { template_id: 1 } } }),
  s("provider_options.e2b.region", "unknown e2b option", { provider_options: { e2b: { region: "x" } } }),
  s("provider_options.freestyle.snapshot_id", "snapshot id not a string", { provider_options: { freestyle: { snapshot_id: 1 } } }),
  s("provider_options.northflank.ephemeral_storage_mb", "storage zero", { provider_options: { northflank: { ephemeral_storage_mb: 0 } } }),
  s("provider_options.northflank.ephemeral_storage_mb", "storage not an integer", { provider_options: { northflank: { ephemeral_storage_mb: 1.5 } } }),
  s("provider_options.northflank.ephemeral_storage_mb", "storage above 2^53-1", { provider_options: { northflank: { ephemeral_storage_mb: 2 ** 53 } } }),
  s("provider_options.prime.team_id", "empty team id", { provider_options: { prime: { team_id: "" } } }),
  s("provider_options.runloop.resource_size", "unknown size", { provider_options: { runloop: { resource_size: "HUGE" } } }),
  s("provider_options.daytona", "free-form options not an object", { provider_options: { daytona: "x" } }),
  s("provider_options.aws", "unknown provider key", { provider_options: { aws: {} } }),
  s("environment.BIG", "env value over 16384", { environment: { BIG: "x".repeat(16_385) } }),
  s("environment.N", "env value not a string", { environment: { N: 1 } }),
  s("environment", "empty env name", { environment: { "": "x" } }),
  s("secret_refs.TOKEN", "secret ref not a string", { secret_refs: { TOKEN: 1 } }),
  s("metadata.note", "metadata value over 500", { metadata: { note: "x".repeat(501) } }),
  s("metadata.n", "metadata value not a string", { metadata: { n: 1 } }),
  s("metadata", "empty metadata key", { metadata: { "": "x" } }),
  s("metadata", "__proto__ as a metadata key", { metadata: protoKey("x") }),
  s("extra", "unknown top-level key", { extra: 1 })
]

// Runtime requests (spec §2.6–2.9, §4.5–4.7, §8; reference §2 "Runtime") -----------------------------------------

const MiB = 1024 * 1024
/** Base64 of `n` zero bytes, built without allocating the bytes. */
const zeros64 = (n: number) => "A".repeat(Math.floor(n / 3) * 4) + (n % 3 === 1 ? "AA==" : n % 3 === 2 ? "AAA=" : "")
export const TEN_MIB_BASE64 = zeros64(10 * MiB)

export const runtimeViolations: ReadonlyArray<Violation> = [
  v("StartProcess", "command", "command missing", { command: undefined }),
  v("StartProcess", "command", "empty command", { command: [] }),
  v("StartProcess", "command", "over 4096 args", { command: Array.from({ length: 4097 }, () => "a") }),
  v("StartProcess", "command.0", "arg over 131072", { command: ["x".repeat(131_073)] }),
  v("StartProcess", "command.0", "arg not a string", { command: [1] }),
  v("StartProcess", "cwd", "relative cwd", { cwd: "tmp" }),
  v("StartProcess", "cwd", "empty cwd", { cwd: "" }),
  v("StartProcess", "cwd", "cwd with ..", { cwd: "/tmp/../etc" }),
  v("StartProcess", "cwd", "cwd with NUL", { cwd: "/tmp/\u0000" }),
  v("StartProcess", "cwd", "cwd over 4096", { cwd: `/${"a".repeat(4096)}` }),
  v("StartProcess", "environment", "env name with =", { environment: { "A=B": "x" } }),
  v("StartProcess", "environment", "empty env name", { environment: { "": "x" } }),
  v("StartProcess", "environment", "env name over 256", { environment: { ["N".repeat(257)]: "x" } }),
  v("StartProcess", "environment", "__proto__ as an env name", { environment: protoKey("x") }),
  v("StartProcess", "environment.A", "env value over 16384", { environment: { A: "x".repeat(16_385) } }),
  v("StartProcess", "environment.A", "env value not a string", { environment: { A: 1 } }),
  v("StartProcess", "timeout_seconds", "timeout zero", { timeout_seconds: 0 }),
  v("StartProcess", "timeout_seconds", "timeout over 3600", { timeout_seconds: 3601 }),
  v("StartProcess", "timeout_seconds", "timeout not an integer", { timeout_seconds: 1.5 }),
  v("StartProcess", "max_output_bytes", "output zero", { max_output_bytes: 0 }),
  v("StartProcess", "max_output_bytes", "output over 100 MiB", { max_output_bytes: 104_857_601 }),
  v("StartProcess", "stdin", "unknown key", { stdin: "x" }),
  v("ReadFile", "path", "path missing", { path: undefined }),
  v("ReadFile", "path", "relative path", { path: "a.txt" }),
  v("ReadFile", "path", "empty path", { path: "" }),
  v("ReadFile", "path", "path with NUL", { path: "/a\u0000b" }),
  v("ReadFile", "path", "path with empty segment", { path: "/a//b" }),
  v("ReadFile", "path", "path with trailing slash", { path: "/a/" }),
  v("ReadFile", "path", "path with . segment", { path: "/a/./b" }),
  v("ReadFile", "path", "path with .. segment", { path: "/a/../b" }),
  v("ReadFile", "path", "path over 4096", { path: `/${"a".repeat(4096)}` }),
  v("ReadFile", "offset_bytes", "negative offset", { offset_bytes: -1 }),
  v("ReadFile", "offset_bytes", "offset not an integer", { offset_bytes: 0.5 }),
  v("ReadFile", "offset_bytes", "offset above 2^53-1", { offset_bytes: 2 ** 53 }),
  v("ReadFile", "limit_bytes", "limit zero", { limit_bytes: 0 }),
  v("ReadFile", "limit_bytes", "limit over 10 MiB", { limit_bytes: 10_485_761 }),
  v("ReadFile", "encoding", "unknown key", { encoding: "utf8" }),
  v("WriteFile", "data_base64", "data missing", { data_base64: undefined }),
  v("WriteFile", "data_base64", "not base64", { data_base64: "@@@@" }),
  v("WriteFile", "data_base64", "base64 of a bad length", { data_base64: "aGk" }),
  v("WriteFile", "data_base64", "padding inside the text", { data_base64: "aG=k" }),
  v("WriteFile", "data_base64", "three padding characters", { data_base64: "a===" }),
  v("WriteFile", "data_base64", "padding first", { data_base64: "=aGk" }),
  v("WriteFile", "data_base64", "a line break", { data_base64: "aG\nk" }),
  v("WriteFile", "data_base64", "over 10 MiB decoded", { data_base64: zeros64(10 * MiB + 1) }),
  v("WriteFile", "path", "path missing", { path: undefined }),
  v("WriteFile", "path", "relative path", { path: "a.txt" }),
  v("WriteFile", "mode", "unknown mode", { mode: "truncate" }),
  v("WriteFile", "create_parents", "create_parents not a boolean", { create_parents: "yes" }),
  v("WriteFile", "chmod", "unknown key", { chmod: 644 }),
  v("ListFiles", "path", "path missing", { path: undefined }),
  v("ListFiles", "recursive", "recursive not a boolean", { recursive: 1 }),
  v("ListFiles", "max_entries", "max entries zero", { max_entries: 0 }),
  v("ListFiles", "max_entries", "max entries over 10000", { max_entries: 10_001 }),
  v("ListFiles", "max_entries", "max entries not an integer", { max_entries: 10.5 }),
  v("ListFiles", "glob", "unknown key", { glob: "*" }),
  v("DeleteFile", "path", "path missing", { path: undefined }),
  v("DeleteFile", "path", "path with ..", { path: "/.." }),
  v("DeleteFile", "recursive", "recursive not a boolean", { recursive: "yes" }),
  v("DeleteFile", "force", "unknown key", { force: true }),
  v("CreateEndpoint", "port", "port missing", { port: undefined }),
  v("CreateEndpoint", "port", "port zero", { port: 0 }),
  v("CreateEndpoint", "port", "port 65536", { port: 65_536 }),
  v("CreateEndpoint", "port", "port not an integer", { port: 80.5 }),
  v("CreateEndpoint", "protocol", "protocol not http", { protocol: "tcp" }),
  v("CreateEndpoint", "lease_seconds", "lease under 60", { lease_seconds: 59 }),
  v("CreateEndpoint", "lease_seconds", "lease over 86400", { lease_seconds: 86_401 }),
  v("CreateEndpoint", "lease_seconds", "lease not an integer", { lease_seconds: 600.5 }),
  v("CreateEndpoint", "host", "unknown key", { host: "x" })
]

// Query parameters, headers and path parameters -----------------------------------------------------------------

export const paramViolations: ReadonlyArray<Violation> = [
  v("PageParams", "limit", "limit zero", { limit: "0" }),
  v("PageParams", "limit", "limit over 100", { limit: "101" }),
  v("PageParams", "limit", "limit not a number", { limit: "ten" }),
  v("PageParams", "limit", "limit not an integer", { limit: "1.5" }),
  v("PageParams", "cursor", "empty cursor", { cursor: "" }),
  v("PageParams", "cursor", "cursor over 512", { cursor: "c".repeat(513) }),
  v("SandboxListParams", "limit", "sandbox list limit over 100", { limit: "101" }),
  v("SandboxListParams", "state", "state not a sandbox state", { state: "running" }),
  v("SandboxListParams", "provider", "provider not one of the eleven", { provider: "aws" }),
  v("SandboxListParams", "provider", "provider auto is not a filter", { provider: "auto" }),
  v("IdempotencyHeaders", "idempotency-key", "key over 512", { "idempotency-key": "k".repeat(513) }),
  v("LastEventIdHeaders", "last-event-id", "not digits", { "last-event-id": "abc" }),
  v("LastEventIdHeaders", "last-event-id", "negative", { "last-event-id": "-1" }),
  v("LastEventIdHeaders", "last-event-id", "over 15 digits", { "last-event-id": "1".repeat(16) }),
  v("FollowParams", "follow", "follow not a boolean", { follow: "yes" }),
  v("StartProcessParams", "wait_seconds", "wait zero", { wait_seconds: "0" }),
  v("ExtendSandbox", "runtime_timeout_seconds", "extend zero", { runtime_timeout_seconds: 0 }),
  v("ExtendSandbox", "runtime_timeout_seconds", "extend over 48 h", { runtime_timeout_seconds: 172_801 }),
  v("ExtendSandbox", "runtime_timeout_seconds", "extend fractional", { runtime_timeout_seconds: 1.5 }),
  v("ExtendSandbox", "runtime_timeout_seconds", "extend as a string", { runtime_timeout_seconds: "600" }),
  v("ExtendSandbox", "runtime_timeout_seconds", "extend missing", { runtime_timeout_seconds: undefined }),
  v("WriteStdin", "data_base64", "stdin over 1 MiB", { data_base64: Buffer.alloc(1024 * 1024 + 3).toString("base64") }),
  v("WriteStdin", "data_base64", "stdin not base64", { data_base64: "%%%%" }),
  v("WriteStdin", "eof", "eof as a string", { eof: "true" }),
  v("RawFileParams", "path", "raw path relative", { path: "workspace/a" }),
  v("RawFileParams", "path", "raw path with ..", { path: "/workspace/../etc" }),
  v("RawFileParams", "path", "raw path missing", { path: undefined }),
  v("RawReadHeaders", "range", "range over 200 characters", { range: `bytes=${"1".repeat(200)}-` }),
  v("RawWriteParams", "mode", "raw write mode unknown", { mode: "sideways" }),
  v("RawWriteParams", "create_parents", "create_parents not a boolean", { create_parents: "maybe" }),
  v("RawWriteParams", "path", "raw write path missing", { path: undefined }),
  v("StartProcessParams", "wait_seconds", "wait over 300", { wait_seconds: "301" }),
  v("StartProcessParams", "wait_seconds", "wait not an integer", { wait_seconds: "1.5" }),
  v("AttachParams", "after", "after negative", { after: "-1" }),
  v("AttachParams", "after", "after not an integer", { after: "1.5" }),
  v("AttachParams", "after", "after not a number", { after: "end" }),
  v("FollowParams", "follow", "follow empty", { follow: "" }),
  v("QuoteParams", "amount_usd", "amount missing", { amount_usd: undefined }),
  v("QuoteParams", "amount_usd", "three decimals", { amount_usd: "1.234" }),
  v("UsageParams", "from", "not a date", { from: "yesterday" }),
  v("UsageParams", "through", "impossible date", { through: "2026-13-45" }),
  v("UsageParams", "project_id", "malformed project id", { project_id: "project-1" }),
  v("UsageParams", "sandbox_id", "malformed sandbox id", { sandbox_id: "sbx-1" }),
  v("UsageParams", "provider", "provider over 40", { provider: "p".repeat(41) }),
  v("UsageParams", "billing_mode", "unknown billing mode", { billing_mode: "free" }),
  v("UsageParams", "limit", "limit zero", { limit: "0" }),
  v("UsageParams", "limit", "limit over 100", { limit: "101" }),
  v("EventsParams", "project_id", "project id missing", { project_id: undefined }),
  v("EventsParams", "project_id", "malformed project id", { project_id: "prj-1" }),
  v("EventsParams", "after", "empty cursor", { after: "" }),
  v("EventsParams", "limit", "limit over 100", { limit: "101" }),
  v("EventStreamParams", "project_id", "project id missing", { project_id: undefined }),
  v("EventStreamParams", "project_id", "malformed project id", { project_id: "prj-1" }),
  v("EventStreamParams", "after", "cursor over 512", { after: "c".repeat(513) }),
  v("EventStreamHeaders", "last-event-id", "cursor over 512", { "last-event-id": "c".repeat(513) }),
  v("DeliveriesParams", "limit", "limit not an integer", { limit: "2.5" }),
  v("path.organization_id", "organization_id", "organization id not a UUID", { organization_id: "acme" }),
  v("path.user_id", "user_id", "user id not a UUID", { user_id: "u1" }),
  v("path.invitation_id", "invitation_id", "invitation id not a UUID", { invitation_id: "i1" }),
  v("path.project_id", "project_id", "project id without prefix", { project_id: "abc" }),
  v("path.project_id", "project_id", "project id with a bad character", { project_id: "prj_a-b" }),
  v("path.api_key_id", "api_key_id", "API key id not a UUID", { api_key_id: "metal_sk_x" }),
  v("path.webhook_id", "webhook_id", "webhook id not a UUID", { webhook_id: "w1" }),
  v("path.delivery_id", "delivery_id", "delivery id not a UUID", { delivery_id: "d1" }),
  v("path.provider", "provider", "unknown provider", { provider: "aws" }),
  v("path.sandbox_id", "sandbox_id", "sandbox id with another prefix", { sandbox_id: `prj_${"a".repeat(8)}` }),
  v("path.sandbox_id", "sandbox_id", "sandbox id with a bad character", { sandbox_id: "sbx_a.b" }),
  v("path.alias_project_id", "project_id", "alias project id malformed", { project_id: "p1" }),
  v("path.operation_id", "operation_id", "operation id malformed", { operation_id: "op-1" }),
  v("path.process_id", "process_id", "process id malformed", { process_id: "proc_" }),
  v("path.runtime_operation_id", "runtime_operation_id", "runtime operation id malformed", { runtime_operation_id: "op_abc" }),
  v("path.endpoint_id", "endpoint_id", "endpoint id malformed", { endpoint_id: "ep_a_b" })
]

// Account plane (spec §4.2–4.3, §4.8–4.9, §8; reference §2) -------------------------------------------------------

export const accountViolations: ReadonlyArray<Violation> = [
  v("CreateOrganization", "name", "empty name", { name: "" }),
  v("CreateOrganization", "name", "name over 120", { name: "n".repeat(121) }),
  v("CreateOrganization", "name", "blank name", { name: "   " }),
  v("CreateOrganization", "name", "name missing", { name: undefined }),
  v("CreateOrganization", "slug", "slug uppercase", { slug: "Bad" }),
  v("CreateOrganization", "slug", "slug double hyphen", { slug: "a--b" }),
  v("CreateOrganization", "slug", "slug leading hyphen", { slug: "-a" }),
  v("CreateOrganization", "slug", "slug trailing hyphen", { slug: "a-" }),
  v("CreateOrganization", "slug", "slug over 63", { slug: "s".repeat(64) }),
  v("CreateOrganization", "slug", "slug missing", { slug: undefined }),
  v("CreateOrganization", "extra", "unknown key", { extra: true }),
  v("UpdateOrganization", "name", "name missing", { name: undefined }),
  v("UpdateOrganization", "slug", "slug with underscore", { slug: "a_b" }),
  v("UpdateOrganization", "owner", "unknown key", { owner: "x" }),
  v("DeleteOrganization", "confirm_name", "confirmation missing", { confirm_name: undefined }),
  v("DeleteOrganization", "confirm_name", "confirmation over 120", { confirm_name: "n".repeat(121) }),
  v("DeleteOrganization", "confirm_forfeit_balance", "forfeit flag not a boolean", { confirm_forfeit_balance: "yes" }),
  v("DeleteOrganization", "force", "unknown key", { force: true }),
  v("UpdateMember", "role", "owner role", { role: "owner" }),
  v("UpdateMember", "role", "role missing", { role: undefined }),
  v("UpdateMember", "email", "unknown key", { email: "x@example.com" }),
  v("CreateInvitation", "email", "not an email", { email: "nobody" }),
  v("CreateInvitation", "email", "email over 320", { email: `${"e".repeat(320)}@x.io` }),
  v("CreateInvitation", "email", "email missing", { email: undefined }),
  v("CreateInvitation", "role", "owner role", { role: "owner" }),
  v("CreateInvitation", "message", "unknown key", { message: "hi" }),
  v("UpdateInvitation", "role", "unknown role", { role: "guest" }),
  v("UpdateInvitation", "email", "unknown key", { email: "x@example.com" }),
  v("CreateProject", "name", "empty name", { name: "" }),
  v("CreateProject", "slug", "slug with space", { slug: "a b" }),
  v("CreateProject", "slug", "empty slug", { slug: "" }),
  v("CreateProject", "region", "unknown key", { region: "eu" }),
  v("UpdateProject", "name", "blank name", { name: " " }),
  v("UpdateProject", "slug", "slug over 63", { slug: "s".repeat(64) }),
  v("UpdateProject", "slug", "slug missing", { slug: undefined }),
  v("CreateApiKey", "name", "name over 120", { name: "k".repeat(121) }),
  v("CreateApiKey", "name", "blank name", { name: "  " }),
  v("CreateApiKey", "name", "name missing", { name: undefined }),
  v("CreateApiKey", "expires_in", "unknown expiry", { expires_in: "2y" }),
  v("CreateApiKey", "expires_in", "expiry in seconds", { expires_in: 3600 }),
  v("CreateApiKey", "scopes", "unknown key", { scopes: [] }),
  v("CreateWebhook", "url", "url over 2048", { url: `https://e.com/${"a".repeat(2048)}` }),
  v("CreateWebhook", "url", "not http(s)", { url: "mailto:a@b.c" }),
  v("CreateWebhook", "url", "not a URL", { url: "example.com/hook" }),
  v("CreateWebhook", "url", "credentials in the URL", { url: "https://user:pw@example.com/hook" }),
  v("CreateWebhook", "url", "url missing", { url: undefined }),
  v("CreateWebhook", "event_types.0", "unknown event type", { event_types: ["nope"] }),
  v("CreateWebhook", "event_types", "repeated event type", { event_types: ["sandbox.ready", "sandbox.ready"] }),
  v("CreateWebhook", "name", "name over 120", { name: "h".repeat(121) }),
  v("CreateWebhook", "enabled", "enabled not a boolean", { enabled: "yes" }),
  v("CreateWebhook", "secret", "unknown key", { secret: "whsec_x" }),
  row("UpdateWebhook", "", "no field given", {}),
  v("UpdateWebhook", "name", "empty name", { name: "" }),
  v("UpdateWebhook", "url", "not http(s)", { url: "ftp://example.com" }),
  v("UpdateWebhook", "event_types.0", "unknown event type", { event_types: ["sandbox.exploded"] }),
  v("UpdateWebhook", "secret", "unknown key", { secret: "x" }),
  v("AutoTopupSettings", "threshold_usd", "three decimals", { threshold_usd: "1.001" }),
  v("AutoTopupSettings", "refill_usd", "negative", { refill_usd: "-50" }),
  v("AutoTopupSettings", "refill_usd", "letters", { refill_usd: "fifty" }),
  v("AutoTopupSettings", "monthly_cap_usd", "not a string", { monthly_cap_usd: 500 }),
  v("AutoTopupSettings", "enabled", "enabled missing", { enabled: undefined }),
  v("AutoTopupSettings", "currency", "unknown key", { currency: "EUR" }),
  row("ProviderCredentialInput", "api_key", "secret over 16384", { provider: "e2b", api_key: "k".repeat(16_385) }),
  row("ProviderCredentialInput", "api_key", "empty secret", { provider: "e2b", api_key: "" }),
  row("ProviderCredentialInput", "target", "value over 500", { provider: "daytona", target: "t".repeat(501) }),
  row("ProviderCredentialInput", "provider", "unknown provider", { provider: "aws", api_key: "k" }),
  row("ProviderCredentialInput", "workspace", "field of another provider", { provider: "e2b", api_key: "k", workspace: "w" }),
  // Signing in to the dashboard: a token or a one-time link's code, one of them.
  row("SignIn", "user_token", "empty token", { user_token: "" }),
  row("SignIn", "user_token", "token over 200", { user_token: "t".repeat(201) }),
  row("SignIn", "login_code", "code not a string", { login_code: 5 }),
  row("SignIn", "user_token", "neither a token nor a code", {}),
  row("SignIn", "login_code", "both a token and a code", { user_token: "metal_ut_x", login_code: "metal_ll_x" })
]

export const allViolations: ReadonlyArray<Violation> = [...sandboxViolations, ...runtimeViolations, ...paramViolations, ...accountViolations]

/** Some issue is at `field` itself or inside it (a union member can report one level deeper). */
export const pointsAt = (paths: ReadonlyArray<string>, field: string) =>
  paths.some((p) => p === field || p.startsWith(`${field}.`))
