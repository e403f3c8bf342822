/**
 * Ids are branded (src/domain/Ids.ts, ARCHITECTURE.md §6): a project id where a sandbox id belongs, two ids
 * swapped, or a string nothing decoded does not compile. The `@ts-expect-error` lines below are the proof: the
 * type check (test/architecture/types.test.ts, `bun check`) fails on each one the day a brand is removed, since
 * the line then compiles. At run time, brands are nothing: the values and the OpenAPI document are plain strings.
 */
import { OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import type * as SandboxesRepo from "../../src/db/repos/Sandboxes.ts"
import { ApiKeyId, newId, OrganizationId, ProjectId, SandboxId, UserId } from "../../src/domain/Ids.ts"
import type { OperationId, ProcessId } from "../../src/domain/Ids.ts"
import type { KeyPrincipal } from "../../src/domain/Principals.ts"
import { Api } from "../../src/http/Api.ts"
import type * as Access from "../../src/services/Access.ts"
import type * as ProcessCommands from "../../src/services/sandboxes/ProcessCommands.ts"
import type * as SandboxAccess from "../../src/services/sandboxes/SandboxAccess.ts"

/** Type-checked, never run: what the compiler refuses. */
export const refusedMixUps = (
  ids: {
    readonly project: ProjectId
    readonly sandbox: SandboxId
    readonly operation: OperationId
    readonly process: ProcessId
    readonly organization: OrganizationId
    readonly user: UserId
  },
  caller: SandboxAccess.Caller,
  api: {
    readonly sandboxOf: typeof SandboxAccess.sandboxOf
    readonly processOf: typeof ProcessCommands.processOf
    readonly requireOrgRole: typeof Access.requireOrgRole
    readonly getSandbox: SandboxesRepo.SandboxesRepo["get"]
  }
) => {
  // The right kinds compile, and an id is still a string wherever a string will do.
  api.sandboxOf(caller, ids.sandbox)
  api.processOf(caller, ids.sandbox, ids.process)
  api.requireOrgRole(ids.organization)
  api.getSandbox(ids.sandbox)
  const asText: string = ids.sandbox

  // @ts-expect-error a project id where a sandbox id belongs
  api.sandboxOf(caller, ids.project)
  // @ts-expect-error a string nothing decoded (an id comes from a decode, a row or newId)
  api.sandboxOf(caller, "sbx_0")
  // @ts-expect-error two positional ids swapped
  api.processOf(caller, ids.process, ids.sandbox)
  // @ts-expect-error a user id where an organization id belongs (both are UUIDs on the wire)
  api.requireOrgRole(ids.user)
  // @ts-expect-error an operation id handed to the sandboxes' repository
  api.getSandbox(ids.operation)
  // @ts-expect-error a caller whose project is a sandbox id
  const wrongCaller: SandboxAccess.Caller = { projectId: ids.sandbox, organizationId: ids.organization, keyId: null }
  // @ts-expect-error a key's principal with its project and organization swapped
  const swapped: KeyPrincipal = { keyId: "k", projectId: ids.organization, organizationId: ids.project }
  // @ts-expect-error a user id where the caller's API key id belongs
  const keyedByUser: SandboxAccess.Caller = { projectId: ids.project, organizationId: ids.organization, keyId: ids.user }
  // @ts-expect-error newId mints the kind its prefix names
  const minted: SandboxId = newId("prj")
  return [asText, wrongCaller, swapped, keyedByUser, minted]
}

describe("branded ids", () => {
  it("are the plain strings at run time: decoded, encoded and minted unchanged, each kind by its own form", () => {
    const sandbox = newId("sbx")
    expect(sandbox).toMatch(/^sbx_[a-z0-9]{32}$/)
    expect(Schema.decodeUnknownSync(SandboxId)(sandbox)).toBe(sandbox)
    expect(Schema.encodeSync(SandboxId)(sandbox)).toBe(sandbox)
    expect(Schema.is(SandboxId)(sandbox)).toBe(true)
    expect(Schema.is(ProjectId)(sandbox)).toBe(false)
    expect(Schema.is(SandboxId)(newId("prj"))).toBe(false)
    const uuid = crypto.randomUUID()
    expect(Schema.decodeUnknownSync(OrganizationId)(uuid)).toBe(uuid)
    expect(Schema.is(ApiKeyId)("not-a-uuid")).toBe(false)
  })

  it("leave the OpenAPI document as it was: one component per id kind, organization, user and API key ids the one Uuid", () => {
    const doc = OpenApi.fromApi(Api)
    const schemas = doc.components.schemas as Record<string, unknown>
    expect(schemas["SandboxId"]).toMatchObject({ type: "string", pattern: "^sbx_[A-Za-z0-9]+$", maxLength: 128 })
    expect(schemas["ProjectId"]).toMatchObject({ type: "string", pattern: "^prj_[A-Za-z0-9]+$", maxLength: 128 })
    expect(schemas["Uuid"]).toMatchObject({ type: "string", format: "uuid" })
    expect(Object.keys(schemas).filter((name) => /^(OrganizationId|UserId|ApiKeyId)$/.test(name))).toEqual([])
    const parameterOf = (path: string, name: string) =>
      (doc.paths[path]?.get?.parameters ?? []).find((p) => "name" in p && p.name === name)
    expect(parameterOf("/v1/sandboxes/{sandbox_id}", "sandbox_id")).toMatchObject({ schema: { $ref: "#/components/schemas/SandboxId" } })
    expect(parameterOf("/v1/organizations/{organization_id}", "organization_id")).toMatchObject({ schema: { $ref: "#/components/schemas/Uuid" } })
  })
})
