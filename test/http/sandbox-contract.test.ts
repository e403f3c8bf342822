/**
 * The sandbox-plane contract on its own: a throwaway HttpApi of just these groups builds a valid OpenAPI 3.1
 * document whose paths, statuses, credentials, headers, declared errors, SSE media type and documented defaults
 * are those of reference §2 / spec §4.4–4.7. The capability manifest the providers produce fits its schema.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import { Validator } from "@seriousme/openapi-schema-validator"
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { capabilitiesToWire } from "../../src/providers/Capabilities.ts"
import { DECLARED } from "../../providers/core/declared.ts"
import { Capabilities } from "../../src/domain/Runtime.ts"
import { EndpointsApi } from "../../src/http/groups/EndpointsApi.ts"
import { FilesystemApi } from "../../src/http/groups/FilesystemApi.ts"
import { OperationsApi } from "../../src/http/groups/OperationsApi.ts"
import { ProcessesApi } from "../../src/http/groups/ProcessesApi.ts"
import { ProjectOperationsApi } from "../../src/http/groups/ProjectOperationsApi.ts"
import { ProjectEndpointsApi } from "../../src/http/groups/ProjectEndpointsApi.ts"
import { ProjectFilesystemApi } from "../../src/http/groups/ProjectFilesystemApi.ts"
import { ProjectProcessesApi } from "../../src/http/groups/ProjectProcessesApi.ts"
import { ProjectSandboxesApi } from "../../src/http/groups/ProjectSandboxesApi.ts"
import { SandboxesApi } from "../../src/http/groups/SandboxesApi.ts"
import { dropHttpApiDecodeError } from "../../src/http/OpenApiTransform.ts"

const ContractCheck = HttpApi.make("contract-check")
  .add(SandboxesApi)
  .add(ProjectSandboxesApi)
  .add(OperationsApi)
  .add(ProjectOperationsApi)
  .add(ProcessesApi)
  .add(FilesystemApi)
  .add(EndpointsApi)
  .add(ProjectProcessesApi)
  .add(ProjectFilesystemApi)
  .add(ProjectEndpointsApi)
  .annotateContext(OpenApi.annotations({ transform: dropHttpApiDecodeError }))

const doc = OpenApi.fromApi(ContractCheck) as any

type Auth = "projectKey" | "userToken"
interface Route {
  readonly method: "get" | "post" | "put" | "delete"
  readonly path: string
  readonly id: string
  readonly success: number
  /** A second success status (e.g. 201 for a process that ended within `wait_seconds`). */
  readonly alsoSuccess?: number
  readonly auth: Auth
  /** Statuses the route declares besides its success (401/403/422 come from the middleware and the Api). */
  readonly errors: ReadonlyArray<number>
  readonly body?: string
  readonly headers?: ReadonlyArray<string>
  readonly sse?: true
  /** Raw bytes (application/octet-stream) rather than JSON: the success body (GET) or the request body (PUT). */
  readonly bytes?: true
}

const K = "projectKey" as const
const P = "userToken" as const
const sbx = "/v1/sandboxes/{sandbox_id}"
const psbx = "/v1/projects/{project_id}/sandboxes"
const pone = `${psbx}/{sandbox_id}`

// Reference §2 "Sandboxes", "Operations and events", "Runtime"; every row is one route.
const ROUTES: ReadonlyArray<Route> = [
  { method: "post", path: "/v1/sandboxes", id: "sandboxes.create", success: 202, auth: K, errors: [402, 409], body: "SandboxRequest", headers: ["idempotency-key"] },
  { method: "get", path: "/v1/sandboxes", id: "sandboxes.list", success: 200, auth: K, errors: [] },
  { method: "get", path: sbx, id: "sandboxes.get", success: 200, auth: K, errors: [404] },
  { method: "delete", path: sbx, id: "sandboxes.delete", success: 202, auth: K, errors: [404] },
  { method: "post", path: `${sbx}/actions/pause`, id: "sandboxes.pause", success: 202, auth: K, errors: [404, 409] },
  { method: "post", path: `${sbx}/actions/extend`, id: "sandboxes.extend", success: 200, auth: K, errors: [404, 409], body: "ExtendSandbox" },
  { method: "post", path: `${sbx}/actions/resume`, id: "sandboxes.resume", success: 202, auth: K, errors: [404, 409] },
  { method: "get", path: `${sbx}/capabilities`, id: "sandboxes.capabilities", success: 200, auth: K, errors: [404, 409] },
  { method: "get", path: `${sbx}/metrics`, id: "sandboxes.metrics", success: 200, auth: K, errors: [404, 409, 503] },
  { method: "get", path: psbx, id: "projectSandboxes.list", success: 200, auth: P, errors: [403, 404] },
  { method: "get", path: `${psbx}/{sandbox_id}`, id: "projectSandboxes.get", success: 200, auth: P, errors: [403, 404] },
  { method: "post", path: `${psbx}/{sandbox_id}/pause`, id: "projectSandboxes.pause", success: 200, auth: P, errors: [403, 404, 409] },
  { method: "post", path: `${psbx}/{sandbox_id}/resume`, id: "projectSandboxes.resume", success: 200, auth: P, errors: [403, 404, 409] },
  { method: "delete", path: `${psbx}/{sandbox_id}`, id: "projectSandboxes.delete", success: 200, auth: P, errors: [403, 404] },
  { method: "get", path: "/v1/operations/{operation_id}", id: "operations.get", success: 200, auth: K, errors: [404] },
  { method: "get", path: "/v1/operations/{operation_id}/events", id: "operations.events", success: 200, auth: K, errors: [404], headers: ["last-event-id"], sse: true },
  { method: "get", path: "/v1/projects/{project_id}/operations/{operation_id}", id: "projectOperations.get", success: 200, auth: P, errors: [403, 404] },
  { method: "get", path: "/v1/projects/{project_id}/operations/{operation_id}/events", id: "projectOperations.events", success: 200, auth: P, errors: [403, 404], headers: ["last-event-id"], sse: true },
  { method: "post", path: `${sbx}/processes`, id: "processes.start", success: 202, alsoSuccess: 201, auth: K, errors: [404, 409], body: "StartProcess", headers: ["idempotency-key"] },
  { method: "get", path: `${sbx}/processes/{process_id}`, id: "processes.get", success: 200, auth: K, errors: [404] },
  { method: "get", path: `${sbx}/processes/{process_id}/events`, id: "processes.events", success: 200, auth: K, errors: [404], headers: ["last-event-id"], sse: true },
  { method: "post", path: `${sbx}/processes/{process_id}/actions/cancel`, id: "processes.cancel", success: 202, auth: K, errors: [404, 409], headers: ["idempotency-key"] },
  { method: "get", path: `${sbx}/files/content`, id: "filesystem.readContent", success: 200, auth: K, errors: [404, 409, 416, 503], headers: ["range", "if-none-match"], bytes: true },
  { method: "put", path: `${sbx}/files/content`, id: "filesystem.writeContent", success: 200, alsoSuccess: 201, auth: K, errors: [404, 409, 413, 503], bytes: true },
  { method: "post", path: `${sbx}/processes/{process_id}/stdin`, id: "processes.stdin", success: 202, auth: K, errors: [404, 409, 503], body: "WriteStdin" },
  { method: "get", path: `${sbx}/processes/{process_id}/attach`, id: "processes.attach", success: 101, auth: K, errors: [404, 409, 426] },
  { method: "post", path: `${sbx}/filesystem/read`, id: "filesystem.read", success: 202, auth: K, errors: [404, 409], body: "ReadFile" },
  { method: "post", path: `${sbx}/filesystem/write`, id: "filesystem.write", success: 202, auth: K, errors: [404, 409], body: "WriteFile", headers: ["idempotency-key"] },
  { method: "post", path: `${sbx}/filesystem/list`, id: "filesystem.list", success: 202, auth: K, errors: [404, 409], body: "ListFiles" },
  { method: "post", path: `${sbx}/filesystem/delete`, id: "filesystem.delete", success: 202, auth: K, errors: [404, 409], body: "DeleteFile", headers: ["idempotency-key"] },
  { method: "get", path: `${sbx}/runtime-operations/{runtime_operation_id}`, id: "filesystem.getRuntimeOperation", success: 200, auth: K, errors: [404] },
  { method: "post", path: `${sbx}/endpoints`, id: "endpoints.create", success: 202, auth: K, errors: [404, 409], body: "CreateEndpoint", headers: ["idempotency-key"] },
  { method: "get", path: `${sbx}/endpoints`, id: "endpoints.list", success: 200, auth: K, errors: [404] },
  { method: "delete", path: `${sbx}/endpoints/{endpoint_id}`, id: "endpoints.revoke", success: 202, auth: K, errors: [404] },
  // The dashboard's project path: the sandbox plane for members (a user's token or session), the key routes' answers.
  { method: "post", path: psbx, id: "projectSandboxes.create", success: 202, auth: P, errors: [402, 403, 404, 409], body: "SandboxRequest", headers: ["idempotency-key"] },
  { method: "post", path: `${pone}/extend`, id: "projectSandboxes.extend", success: 200, auth: P, errors: [403, 404, 409], body: "ExtendSandbox" },
  { method: "get", path: `${pone}/capabilities`, id: "projectSandboxes.capabilities", success: 200, auth: P, errors: [403, 404, 409] },
  { method: "get", path: `${pone}/metrics`, id: "projectSandboxes.metrics", success: 200, auth: P, errors: [403, 404, 409, 503] },
  { method: "post", path: `${pone}/processes`, id: "projectProcesses.start", success: 202, alsoSuccess: 201, auth: P, errors: [403, 404, 409], body: "StartProcess", headers: ["idempotency-key"] },
  { method: "get", path: `${pone}/processes`, id: "projectProcesses.list", success: 200, auth: P, errors: [403, 404] },
  { method: "get", path: `${pone}/processes/{process_id}`, id: "projectProcesses.get", success: 200, auth: P, errors: [403, 404] },
  { method: "get", path: `${pone}/processes/{process_id}/events`, id: "projectProcesses.events", success: 200, auth: P, errors: [403, 404], headers: ["last-event-id"], sse: true },
  { method: "post", path: `${pone}/processes/{process_id}/actions/cancel`, id: "projectProcesses.cancel", success: 202, auth: P, errors: [403, 404, 409], headers: ["idempotency-key"] },
  { method: "post", path: `${pone}/processes/{process_id}/stdin`, id: "projectProcesses.stdin", success: 202, auth: P, errors: [403, 404, 409, 503], body: "WriteStdin" },
  { method: "get", path: `${pone}/processes/{process_id}/attach`, id: "projectProcesses.attach", success: 101, auth: P, errors: [403, 404, 409, 426] },
  { method: "post", path: `${pone}/filesystem/read`, id: "projectFilesystem.read", success: 202, auth: P, errors: [403, 404, 409], body: "ReadFile" },
  { method: "post", path: `${pone}/filesystem/write`, id: "projectFilesystem.write", success: 202, auth: P, errors: [403, 404, 409], body: "WriteFile", headers: ["idempotency-key"] },
  { method: "post", path: `${pone}/filesystem/list`, id: "projectFilesystem.list", success: 202, auth: P, errors: [403, 404, 409], body: "ListFiles" },
  { method: "post", path: `${pone}/filesystem/delete`, id: "projectFilesystem.delete", success: 202, auth: P, errors: [403, 404, 409], body: "DeleteFile", headers: ["idempotency-key"] },
  { method: "get", path: `${pone}/runtime-operations/{runtime_operation_id}`, id: "projectFilesystem.getRuntimeOperation", success: 200, auth: P, errors: [403, 404] },
  { method: "get", path: `${pone}/files/content`, id: "projectFilesystem.readContent", success: 200, auth: P, errors: [403, 404, 409, 416, 503], headers: ["range", "if-none-match"], bytes: true },
  { method: "put", path: `${pone}/files/content`, id: "projectFilesystem.writeContent", success: 200, alsoSuccess: 201, auth: P, errors: [403, 404, 409, 413, 503], bytes: true },
  { method: "post", path: `${pone}/endpoints`, id: "projectEndpoints.create", success: 202, auth: P, errors: [403, 404, 409], body: "CreateEndpoint", headers: ["idempotency-key"] },
  { method: "get", path: `${pone}/endpoints`, id: "projectEndpoints.list", success: 200, auth: P, errors: [403, 404] },
  { method: "delete", path: `${pone}/endpoints/{endpoint_id}`, id: "projectEndpoints.revoke", success: 202, auth: P, errors: [403, 404] }
]

/** A property's JSON Schema with its refinement's `allOf` member folded in (bounds sit there). */
const flat = (node: any) => ({ ...(node.allOf?.[0] ?? {}), ...node })

const schemaOf = (ref: { $ref?: string }) => doc.components.schemas[String(ref.$ref).replace("#/components/schemas/", "")]

describe("sandbox-plane contract", () => {
  it("builds a valid OpenAPI 3.1 document", async () => {
    const result = await new Validator().validate(doc)
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
  })

  it("has exactly the routes of the table", () => {
    const served = Object.entries<any>(doc.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method} ${path}`)).sort()
    expect(served).toEqual(ROUTES.map((r) => `${r.method} ${r.path}`).sort())
  })

  for (const r of ROUTES) {
    it(`${r.method.toUpperCase()} ${r.path}: ${r.success}, ${r.auth}, errors ${r.errors.join(", ") || "(none)"}`, () => {
      const op = doc.paths[r.path][r.method]
      expect(op.operationId).toBe(r.id)
      // A user's routes take the access token or, tried next, the dashboard's session cookie.
      expect(op.security).toEqual(r.auth === P ? [{ userToken: [] }, { session: [] }] : [{ [r.auth]: [] }])
      const statuses = Object.keys(op.responses).map(Number)
      expect(statuses.filter((s) => s < 300)).toEqual([r.success, ...(r.alsoSuccess === undefined ? [] : [r.alsoSuccess])].sort())
      for (const status of [401, ...r.errors]) expect(statuses, `declares ${status}`).toContain(status)
      // A project key with a foreign X-Metal-Project-ID is 403; a malformed header 422 (reference §2 "K").
      if (r.auth === "projectKey") expect(statuses).toEqual(expect.arrayContaining([400, 403, 422]))
      const success = op.responses[String(r.success)].content
      // A WebSocket's 101 has no body.
      if (r.success === 101) expect(success).toBeUndefined()
      else expect(Object.keys(success)).toEqual([r.sse ? "text/event-stream" : r.bytes && r.method === "get" ? "application/octet-stream" : "application/json"])
      const body = op.requestBody?.content?.["application/json"]?.schema
      if (r.bytes && r.method === "put") expect(Object.keys(op.requestBody.content)).toEqual(["application/octet-stream"])
      else if (r.body === undefined) expect(op.requestBody).toBeUndefined()
      else expect(body).toEqual({ $ref: `#/components/schemas/${r.body}` })
      const headers = (op.parameters ?? []).filter((p: any) => p.in === "header")
      expect(headers.map((p: any) => p.name).sort()).toEqual([...(r.headers ?? [])].sort())
      for (const h of headers) expect(h.required).toBe(false) // the handler answers 400 `idempotency_key_required` itself
    })
  }

  it("headers, paging and path parameters carry their limits", () => {
    const create = doc.paths["/v1/sandboxes"].post
    expect(schemaOf(create.parameters[0].schema)).toMatchObject({ minLength: 1, maxLength: 512 })
    const events = doc.paths["/v1/operations/{operation_id}/events"].get
    expect(schemaOf(events.parameters.find((p: any) => p.name === "last-event-id").schema)).toMatchObject({ pattern: "^\\d{1,15}$" })
    const list = doc.paths["/v1/sandboxes"].get.parameters
    expect(list.map((p: any) => `${p.in}:${p.name}`).sort()).toEqual(["query:cursor", "query:limit", "query:provider", "query:state"])
    expect(schemaOf(list.find((p: any) => p.name === "cursor").schema)).toMatchObject({ minLength: 1, maxLength: 512 })
    expect(doc.components.schemas.SandboxId).toMatchObject({ pattern: "^sbx_[A-Za-z0-9]+$" })
    expect(doc.components.schemas.RuntimeOperationId).toMatchObject({ pattern: "^rop_[A-Za-z0-9]+$" })
    expect(doc.components.schemas.PortablePath).toMatchObject({ minLength: 1, maxLength: 4096 })
  })

  it("documents the defaults of spec §2/§4", () => {
    const s = doc.components.schemas
    expect(flat(s.EnvironmentSource.properties.version)).toMatchObject({ default: "latest", minLength: 1, maxLength: 100 })
    expect(flat(s.Resources.properties.architecture)).toMatchObject({ default: "any" })
    expect(flat(s.Lifecycle.properties.on_runtime_timeout)).toMatchObject({ default: "destroy" })
    expect(flat(s.Lifecycle.properties.on_idle_timeout)).toMatchObject({ default: "destroy" })
    expect(flat(s.StartProcess.properties.timeout_seconds)).toMatchObject({ default: 300, minimum: 1, maximum: 3600 })
    expect(flat(s.StartProcess.properties.max_output_bytes)).toMatchObject({ default: 10_485_760, maximum: 104_857_600 })
    expect(flat(s.ReadFile.properties.offset_bytes)).toMatchObject({ default: 0, minimum: 0 })
    expect(flat(s.ReadFile.properties.limit_bytes)).toMatchObject({ default: 1_048_576, minimum: 1, maximum: 10_485_760 })
    expect(flat(s.WriteFile.properties.mode)).toMatchObject({ default: "overwrite" })
    expect(flat(s.WriteFile.properties.create_parents)).toMatchObject({ default: false })
    expect(flat(s.ListFiles.properties.max_entries)).toMatchObject({ default: 1000, minimum: 1, maximum: 10_000 })
    expect(flat(s.DeleteFile.properties.recursive)).toMatchObject({ default: false })
    expect(flat(s.CreateEndpoint.properties.protocol)).toMatchObject({ default: "http" })
    expect(flat(s.CreateEndpoint.properties.lease_seconds)).toMatchObject({ default: 3600, minimum: 60, maximum: 86_400 })
  })

  it("request bodies refuse unknown keys in the document too", () => {
    for (const name of ["SandboxRequest", "Resources", "Lifecycle", "Features", "StartProcess", "ReadFile", "WriteFile", "ListFiles", "DeleteFile", "CreateEndpoint"]) {
      expect(doc.components.schemas[name].additionalProperties, name).toBe(false)
    }
  })

  it("the capability manifest of every provider fits the Capabilities schema", () => {
    for (const [provider, caps] of Object.entries(DECLARED)) {
      const wire = capabilitiesToWire(provider as keyof typeof DECLARED, caps)
      expect(Schema.decodeUnknownSync(Capabilities)(wire), provider).toEqual(wire)
    }
  })
})
