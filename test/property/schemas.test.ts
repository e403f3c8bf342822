/**
 * Property tests over every request schema of the contract (body, query, headers, path parameters):
 * generated valid values decode and round-trip; every single-rule violation of spec §2 / §8 is rejected with an
 * issue at the offending field; values exactly at each bound are accepted; defaults are applied. The schemas come
 * from the endpoints themselves (see contract.ts), and a coverage test fails when a request schema has no rows.
 */
import { Arbitrary, Either, FastCheck, ParseResult, Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as Accounts from "../../src/domain/Accounts.ts"
import * as Billing from "../../src/domain/Billing.ts"
import * as Operation from "../../src/domain/Operation.ts"
import { ProjectId } from "../../src/domain/Ids.ts"
import * as Credentials from "../../src/domain/ProviderCredentials.ts"
import * as Runtime from "../../src/domain/Runtime.ts"
import * as Sandbox from "../../src/domain/Sandbox.ts"
import * as Webhooks from "../../src/domain/Webhooks.ts"
import { IdempotencyHeaders } from "../../src/http/groups/Common.ts"
import { LastEventIdHeaders } from "../../src/http/groups/SandboxPlane.ts"
import { PageParams } from "../../src/http/Pagination.ts"
import { ENDPOINTS, fill, nameOf, pathParams, STAND_IN_IDS, targetOf } from "./contract.ts"
import { allViolations, pointsAt, type SchemaName, TARGETS, TEN_MIB_BASE64, VALID, validSandbox } from "./violations.ts"

/** The exported schemas the endpoints must declare (by identity), so a route cannot drift to another one. */
const NAMED: Partial<Record<SchemaName, Schema.Schema.Any>> = {
  CreateOrganization: Accounts.CreateOrganization,
  UpdateOrganization: Accounts.UpdateOrganization,
  DeleteOrganization: Accounts.DeleteOrganization,
  UpdateMember: Accounts.UpdateMember,
  CreateInvitation: Accounts.CreateInvitation,
  UpdateInvitation: Accounts.UpdateInvitation,
  CreateProject: Accounts.CreateProject,
  UpdateProject: Accounts.UpdateProject,
  CreateApiKey: Accounts.CreateApiKey,
  AutoTopupSettings: Billing.AutoTopupSettings,
  QuoteParams: Billing.QuoteParams,
  UsageParams: Billing.UsageParams,
  CreateWebhook: Webhooks.CreateWebhook,
  UpdateWebhook: Webhooks.UpdateWebhook,
  ProviderCredentialInput: Credentials.ProviderCredentialInput,
  SandboxRequest: Sandbox.SandboxRequest,
  PageParams,
  IdempotencyHeaders,
  LastEventIdHeaders,
  StartProcess: Runtime.StartProcess,
  ExtendSandbox: Sandbox.ExtendSandbox,
  ReadFile: Runtime.ReadFile,
  WriteFile: Runtime.WriteFile,
  ListFiles: Runtime.ListFiles,
  DeleteFile: Runtime.DeleteFile,
  CreateEndpoint: Runtime.CreateEndpoint,
  WriteStdin: Runtime.WriteStdin,
  RawFileParams: Runtime.RawFileParams,
  RawReadHeaders: Runtime.RawReadHeaders,
  RawWriteParams: Runtime.RawWriteParams
}

const NAMES = Object.keys(TARGETS) as Array<SchemaName>
const schemaOf = (name: SchemaName) => targetOf(name).schema as Schema.Schema<unknown, unknown>
const standIn = (value: unknown) => fill(value, STAND_IN_IDS)

/** As the server decodes (HttpApiBuilder: default options, so the schemas' own `parseOptions` apply). */
const issuePaths = (schema: Schema.Schema.Any, value: unknown): Array<string> | undefined => {
  const result = Schema.decodeUnknownEither(schema as Schema.Schema<unknown, unknown>)(value)
  if (Either.isRight(result)) return undefined
  return ParseResult.ArrayFormatter.formatErrorSync(result.left).map((i) => i.path.map(String).join("."))
}

/** Request schemas whose refinements cannot be generated from their predicate alone. */
const isoDate = FastCheck.date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2100-01-01T00:00:00Z"), noInvalidDate: true })
  .chain((d) => FastCheck.constantFrom(d.toISOString(), d.toISOString().slice(0, 10)))
const ARBITRARY_OVERRIDES: Partial<Record<SchemaName, FastCheck.Arbitrary<unknown>>> = {
  UsageParams: FastCheck.record({
    from: isoDate,
    through: isoDate,
    project_id: Arbitrary.make(ProjectId),
    billing_mode: FastCheck.constantFrom("all", "managed", "byok", "emulated"),
    limit: FastCheck.integer({ min: 1, max: 100 }).map(String)
  }, { requiredKeys: [] }).chain((encoded) => FastCheck.constant(Schema.decodeUnknownSync(Billing.UsageParams)(encoded)))
}

describe("the table matches the contract", () => {
  it("every name is sent to the part of the endpoint that declares that very schema", () => {
    for (const name of NAMES) {
      const { schema } = targetOf(name)
      const named = NAMED[name]
      if (named !== undefined) expect(schema === named, `${name} is not what ${TARGETS[name]} declares`).toBe(true)
    }
  })

  const isBytes = (schema: Schema.Schema.Any) => Either.isRight(Schema.decodeUnknownEither(schema as Schema.Schema.AnyNoContext)(new Uint8Array(1)))

  it("every body, query and header schema of every endpoint has violation rows", () => {
    const rowsFor = new Set(allViolations.map((v) => v.schema))
    const missing: Array<string> = []
    for (const endpoint of ENDPOINTS) {
      for (const part of ["payload", "urlParams", "headers"] as const) {
        const schema = endpoint.parts[part]
        if (schema === undefined) continue
        // A raw byte body (octet-stream) has no rule to break: its only bound is its size, a 413.
        if (part === "payload" && isBytes(schema)) continue
        const name = nameOf(schema)
        if (name === undefined || !rowsFor.has(name)) missing.push(`${endpoint.key}.${part}`)
      }
    }
    expect(missing).toEqual([])
  })

  it("every path parameter of every endpoint has a violation row", () => {
    const covered = new Set(allViolations.filter((v) => v.schema.startsWith("path.")).map((v) => v.field))
    const params = new Set(ENDPOINTS.flatMap((e) => pathParams(e.path)))
    expect([...params].filter((p) => !covered.has(p))).toEqual([])
  })

  it("the valid value of every schema decodes", () => {
    for (const name of NAMES) expect(issuePaths(schemaOf(name), standIn(VALID[name])), name).toBeUndefined()
  })
})

describe("generated valid values decode and round-trip", () => {
  const seen = new Set<unknown>()
  for (const endpoint of ENDPOINTS) {
    for (const [part, schema] of Object.entries(endpoint.parts)) {
      if (seen.has(schema)) continue
      seen.add(schema)
      const name = nameOf(schema)
      const s = schema as Schema.Schema<unknown, unknown>
      it(`${name ?? `${endpoint.key}.${part}`}: decode(encode(x)) = x`, () => {
        const arbitrary = (name !== undefined ? ARBITRARY_OVERRIDES[name] : undefined) ?? Arbitrary.make(s)
        const encode = Schema.encodeSync(s)
        const decode = Schema.decodeUnknownSync(s)
        FastCheck.assert(
          FastCheck.property(arbitrary, (value) => {
            expect(decode(encode(value))).toEqual(value)
          }),
          { numRuns: name === "SandboxRequest" ? 60 : 100 }
        )
      })
    }
  }
})

describe("single-rule violations are rejected at the offending field", () => {
  for (const v of allViolations) {
    it(`${v.schema}: ${v.why}`, () => {
      const paths = issuePaths(schemaOf(v.schema), standIn(v.value))
      expect(paths, "should have been rejected").toBeDefined()
      expect(pointsAt(paths!, v.field), `issues at ${JSON.stringify(paths)} do not point at ${v.field}`).toBe(true)
    })
  }
})

/** Values exactly at each bound: accepted, so the bounds are neither tighter nor looser than the spec. */
const sb = (patch: Record<string, unknown>) => ({ ...validSandbox, ...patch })
const AT_BOUNDS: ReadonlyArray<readonly [SchemaName, string, unknown]> = [
  ["SandboxRequest", "memory 128", sb({ resources: { vcpu: 0.25, memory_mb: 128 } })],
  ["SandboxRequest", "memory and disk 2^53-1", sb({ resources: { vcpu: 64, memory_mb: 2 ** 53 - 1, disk_mb: 2 ** 53 - 1 } })],
  ["SandboxRequest", "disk 0", sb({ resources: { vcpu: 1, memory_mb: 512, disk_mb: 0 } })],
  ["SandboxRequest", "runtime 1 s, idle 1 s", sb({ lifecycle: { runtime_timeout_seconds: 1, idle_timeout_seconds: 1 } })],
  ["SandboxRequest", "runtime 172800 s, idle 2^53-1", sb({ lifecycle: { runtime_timeout_seconds: 172_800, idle_timeout_seconds: 2 ** 53 - 1 } })],
  ["SandboxRequest", "environment 200, version 100", sb({ source: { kind: "environment", environment: "e".repeat(200), version: "v".repeat(100) } })],
  ["SandboxRequest", "image 500", sb({ source: { kind: "oci_image", image: "i".repeat(500), command: [] } })],
  ["SandboxRequest", "template 500", sb({ provider: "e2b", source: { kind: "provider_template", provider: "e2b", template: "t".repeat(500) } })],
  ["SandboxRequest", "32 regions of 100", sb({ regions: Array.from({ length: 32 }, (_, i) => `${i}`.padEnd(100, "r")) })],
  ["SandboxRequest", "64 ports 1..65535", sb({ features: { public_ports: [1, 65_535, ...Array.from({ length: 62 }, (_, i) => 8000 + i)] } })],
  ["SandboxRequest", "256 allowed domains", sb({ network: { internet_access: true, allow_domains: Array.from({ length: 256 }, (_, i) => `d${i}.com`) } })],
  ["SandboxRequest", "9 fallbacks, 10 attempts", sb({ fallback: { providers: ["blaxel", "cloudflare", "codesandbox", "daytona", "e2b", "freestyle", "modal", "northflank", "prime"], max_attempts: 10 } })],
  ["SandboxRequest", "options for primary and fallback", sb({ provider: "e2b", fallback: { providers: ["runloop"], max_attempts: 1 }, provider_options: { e2b: { template_id: "t" }, runloop: { resource_size: "XX_LARGE" } } })],
  ["SandboxRequest", "options for any provider under auto", sb({ provider: "auto", provider_options: { codesandbox: { vm_tier: "Pico" }, northflank: { ephemeral_storage_mb: 2 ** 53 - 1 }, prime: { team_id: "t" }, modal: { anything: [1] } } })],
  ["SandboxRequest", "env value 16384, metadata value 500, empty values", sb({ environment: { A: "x".repeat(16_384), B: "" }, metadata: { m: "x".repeat(500), n: "" }, secret_refs: { S: "vault://s" } })],
  ["SandboxRequest", "every feature", sb({ features: { isolation: ["microvm", "vm", "container"], pty: true, pause_resume: true, computer_use: false, recording: { format: "mp4" }, process: { execute: true, ordered_output: true, cancel: true }, filesystem: { read: true, write: true, write_modes: ["create", "overwrite", "append"], create_parents: true, list: true, delete: true } } })],
  ["StartProcess", "4096 args of 131072", { command: Array.from({ length: 4096 }, (_, i) => (i === 0 ? "x".repeat(131_072) : "a")) }],
  ["StartProcess", "timeout 1..3600, output 1..100 MiB", { command: ["ls"], timeout_seconds: 3600, max_output_bytes: 104_857_600, cwd: "/" }],
  ["StartProcess", "env name 256, value 16384", { command: ["ls"], timeout_seconds: 1, max_output_bytes: 1, environment: { ["N".repeat(256)]: "v".repeat(16_384) } }],
  ["ExtendSandbox", "1 second", { runtime_timeout_seconds: 1 }],
  ["ExtendSandbox", "48 hours", { runtime_timeout_seconds: 172_800 }],
  ["WriteStdin", "1 MiB and eof", { data_base64: Buffer.alloc(1024 * 1024).toString("base64"), eof: true }],
  ["ReadFile", "path 4096, offset 2^53-1, limit 10 MiB", { path: `/${"a".repeat(4095)}`, offset_bytes: 2 ** 53 - 1, limit_bytes: 10_485_760 }],
  ["ReadFile", "limit 1, dotted names", { path: "/.hidden/..x/x..", limit_bytes: 1 }],
  ["WriteFile", "exactly 10 MiB decoded", { path: "/big", data_base64: TEN_MIB_BASE64, mode: "append", create_parents: true }],
  ["ListFiles", "max entries 1 and 10000", { path: "/", recursive: true, max_entries: 10_000 }],
  ["CreateEndpoint", "port 1, lease 60", { port: 1, lease_seconds: 60 }],
  ["CreateEndpoint", "port 65535, lease 86400", { port: 65_535, protocol: "http", lease_seconds: 86_400 }],
  ["PageParams", "limit 1 and cursor 512", { limit: "1", cursor: "c".repeat(512) }],
  ["PageParams", "limit 100", { limit: "100" }],
  ["IdempotencyHeaders", "key of 1", { "idempotency-key": "k" }],
  ["IdempotencyHeaders", "key of 512", { "idempotency-key": "k".repeat(512) }],
  ["LastEventIdHeaders", "15 digits", { "last-event-id": "9".repeat(15) }]
]

describe("values exactly at a bound are accepted", () => {
  for (const [name, why, value] of AT_BOUNDS) {
    it(`${name}: ${why}`, () => expect(issuePaths(schemaOf(name), value)).toBeUndefined())
  }
})

describe("defaults", () => {
  const decode = <A, I>(schema: Schema.Schema<A, I>) => Schema.decodeUnknownSync(schema)

  it("sandbox request: version latest, architecture any, both timeout actions destroy, recording mp4", () => {
    const decoded = decode(Sandbox.SandboxRequest)(validSandbox)
    expect(decoded.source).toEqual({ kind: "environment", environment: "metal/base", version: "latest" })
    expect(decoded.resources.architecture).toBe("any")
    expect(decoded.lifecycle).toEqual({ runtime_timeout_seconds: 600, on_runtime_timeout: "destroy", on_idle_timeout: "destroy" })
    expect(decode(Sandbox.SandboxRequest)({ ...validSandbox, features: { recording: {} } }).features?.recording).toEqual({ format: "mp4" })
    // Echoed as `requested`: the encoded form keeps the defaults that were filled in.
    expect(Schema.encodeSync(Sandbox.SandboxRequest)(decoded)).toEqual({
      ...validSandbox,
      source: { kind: "environment", environment: "metal/base", version: "latest" },
      resources: { vcpu: 1, memory_mb: 512, architecture: "any" },
      lifecycle: { runtime_timeout_seconds: 600, on_runtime_timeout: "destroy", on_idle_timeout: "destroy" }
    })
  })

  it("a given value is kept, not replaced by the default", () => {
    const decoded = decode(Sandbox.SandboxRequest)({
      ...validSandbox,
      source: { kind: "environment", environment: "metal/node", version: "22" },
      resources: { vcpu: 2, memory_mb: 1024, architecture: "arm64" },
      lifecycle: { runtime_timeout_seconds: 60, on_runtime_timeout: "pause", on_idle_timeout: "pause" }
    })
    expect(decoded.source).toMatchObject({ version: "22" })
    expect(decoded.resources.architecture).toBe("arm64")
    expect(decoded.lifecycle).toMatchObject({ on_runtime_timeout: "pause", on_idle_timeout: "pause" })
  })

  it("runtime requests", () => {
    expect(decode(Runtime.StartProcess)({ command: ["ls"] })).toEqual({ command: ["ls"], timeout_seconds: 300, max_output_bytes: 10_485_760, stdin: false })
    expect(decode(Runtime.WriteStdin)({})).toEqual({ data_base64: "", eof: false })
    expect(decode(Runtime.ReadFile)({ path: "/a" })).toEqual({ path: "/a", offset_bytes: 0, limit_bytes: 1_048_576 })
    expect(decode(Runtime.WriteFile)({ path: "/a", data_base64: "" })).toEqual({ path: "/a", data_base64: "", mode: "overwrite", create_parents: false })
    expect(decode(Runtime.ListFiles)({ path: "/" })).toEqual({ path: "/", recursive: false, max_entries: 1000 })
    expect(decode(Runtime.DeleteFile)({ path: "/a" })).toEqual({ path: "/a", recursive: false })
    expect(decode(Runtime.CreateEndpoint)({ port: 8000 })).toEqual({ port: 8000, protocol: "http", lease_seconds: 3600 })
  })

  it("query parameters", () => {
    expect(decode(PageParams)({})).toEqual({ limit: 50 })
    expect(decode(Billing.UsageParams)({})).toEqual({ billing_mode: "all", limit: 100 })
  })

  it("account requests", () => {
    expect(decode(Accounts.CreateApiKey)({ name: "k" })).toEqual({ name: "k", expires_in: null })
    expect(decode(Accounts.CreateInvitation)({ email: "A@B.io" })).toEqual({ email: "a@b.io", role: "member" })
    expect(decode(Accounts.DeleteOrganization)({ confirm_name: "x" })).toEqual({ confirm_name: "x", confirm_forfeit_balance: false })
    expect(decode(Webhooks.CreateWebhook)({ name: "h", url: "https://e.com" })).toEqual({ name: "h", url: "https://e.com", event_types: [], enabled: true })
  })
})

describe("event frames", () => {
  it("operation frames: each type with its data; unknown types and bad sequences are refused", () => {
    const base = { sequence: 1, operation_id: `op_${"a".repeat(32)}`, occurred_at: "2026-01-01T00:00:00.000Z" }
    const ok = [
      { ...base, type: "queued", data: { state: "queued" } },
      { ...base, type: "state_changed", data: { state: "running" } },
      { ...base, type: "completed", data: { state: "failed", error: { code: "no_eligible_provider", message: "m", retryable: false } } },
      { ...base, type: "attempt_failed", data: { attempt_index: 0, provider: "e2b", code: "capacity", unmet_requirements: [{ requirement: "source", message: "m" }] } }
    ]
    for (const frame of ok) expect(decode(Operation.OperationEventFrame)(frame)).toEqual(frame)
    expect(issuePaths(Operation.OperationEventFrame, { ...base, type: "exploded", data: {} })).toBeDefined()
    expect(issuePaths(Operation.OperationEventFrame, { ...base, sequence: 0, type: "queued", data: { state: "queued" } })).toBeDefined()
    expect(issuePaths(Operation.OperationEventFrame, { ...base, type: "completed", data: { state: "running" } })).toBeDefined()
  })

  it("process frames: output chunks carry base64, length and stream offset", () => {
    const base = { sequence: 3, process_id: `proc_${"a".repeat(32)}`, occurred_at: "2026-01-01T00:00:00.000Z" }
    const ok = [
      { ...base, type: "stdout", data: { data_base64: "aGk=", byte_length: 2, stream_offset_bytes: 0 } },
      { ...base, type: "exited", data: { exit_code: 3 } },
      { ...base, type: "timed_out", data: { timeout_seconds: 1, termination_signal: "SIGKILL" } },
      { ...base, type: "failed", data: { code: "process_exit_nonzero", message: "m", retryable: false, details: { exit_code: 3 } } }
    ]
    for (const frame of ok) expect(decode(Runtime.ProcessEventFrame)(frame)).toEqual(frame)
    expect(issuePaths(Runtime.ProcessEventFrame, { ...base, type: "stdout", data: { data_base64: "aGk=", byte_length: -1, stream_offset_bytes: 0 } })).toBeDefined()
    expect(issuePaths(Runtime.ProcessEventFrame, { ...base, type: "stdin", data: {} })).toBeDefined()
  })

  function decode<A, I>(schema: Schema.Schema<A, I>) {
    return Schema.decodeUnknownSync(schema)
  }
})
