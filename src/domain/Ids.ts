/**
 * Identifiers. Public ids are a prefix plus 32 lowercase alphanumerics from a CSPRNG (ARCHITECTURE.md §6); inputs are
 * validated with the spec's looser patterns (`^prj_[A-Za-z0-9]+$`) so ids minted elsewhere are still accepted.
 * Each kind is branded (`SandboxId` is a `string & Brand<"SandboxId">`): a project id passed where a sandbox id
 * belongs, or two positional ids swapped, does not compile. Brands are types only: the wire form and the OpenAPI
 * components are the plain patterned strings. A value gets its brand by being decoded (a path parameter, a
 * request, a row: src/db/Rows.ts `IdColumn`) or minted (`newId`), never by a cast.
 */
import { Schema } from "effect"

const ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"

/** 32 characters from a 36-letter alphabet, unbiased (rejection sampling over random bytes). */
export const randomSuffix = (length = 32): string => {
  let out = ""
  while (out.length < length) {
    const bytes = crypto.getRandomValues(new Uint8Array(length * 2))
    for (const b of bytes) {
      if (b < 252 && out.length < length) out += ALPHABET[b % 36]
    }
  }
  return out
}

/**
 * The schema of ids with `prefix`, branded and named `identifier` (the OpenAPI component). The brand comes before
 * the annotations: branding copies a schema's annotations but its identifier.
 */
const prefixed = <const P extends string, const B extends string>(prefix: P, identifier: B) =>
  Schema.String.pipe(
    Schema.pattern(new RegExp(`^${prefix}_[A-Za-z0-9]+$`)),
    Schema.maxLength(128),
    Schema.brand(identifier),
    Schema.annotations({ identifier, description: `Identifier with prefix "${prefix}_"`, examples: [`${prefix}_${"a".repeat(32)}` as never] })
  )

export const ProjectId = prefixed("prj", "ProjectId")
export type ProjectId = typeof ProjectId.Type
export const SandboxId = prefixed("sbx", "SandboxId")
export type SandboxId = typeof SandboxId.Type
export const OperationId = prefixed("op", "OperationId")
export type OperationId = typeof OperationId.Type
export const ProcessId = prefixed("proc", "ProcessId")
export type ProcessId = typeof ProcessId.Type
export const RuntimeOperationId = prefixed("rop", "RuntimeOperationId")
export type RuntimeOperationId = typeof RuntimeOperationId.Type
export const EndpointId = prefixed("ep", "EndpointId")
export type EndpointId = typeof EndpointId.Type
export const RecordingId = prefixed("rec", "RecordingId")
export type RecordingId = typeof RecordingId.Type

export const Uuid = Schema.UUID.annotations({ identifier: "Uuid" })

/**
 * Account ids are UUIDs, branded by what they name. Each keeps the identifier `Uuid`, so the OpenAPI document
 * still shows the one `Uuid` component (they are the same on the wire).
 */
const uuidOf = <const B extends string>(brand: B) => Schema.UUID.pipe(Schema.brand(brand), Schema.annotations({ identifier: "Uuid" }))

export const OrganizationId = uuidOf("OrganizationId")
export type OrganizationId = typeof OrganizationId.Type
export const UserId = uuidOf("UserId")
export type UserId = typeof UserId.Type
export const ApiKeyId = uuidOf("ApiKeyId")
export type ApiKeyId = typeof ApiKeyId.Type

/** The id kind each prefix mints. */
interface Minted {
  readonly prj: ProjectId
  readonly sbx: SandboxId
  readonly op: OperationId
  readonly proc: ProcessId
  readonly rop: RuntimeOperationId
  readonly ep: EndpointId
  readonly rec: RecordingId
}

/**
 * A new id of the kind `prefix` names. Minting (here and below) is the only place a string is cast to an id: it
 * has the kind's form by construction.
 */
export const newId = <P extends keyof Minted>(prefix: P): Minted[P] => `${prefix}_${randomSuffix()}` as Minted[P]
export const newUuid = () => crypto.randomUUID()
/** A new organization, user or API key id: a UUID, branded like `newId`'s. */
export const newOrganizationId = () => newUuid() as OrganizationId
export const newUserId = () => newUuid() as UserId
export const newApiKeyId = () => newUuid() as ApiKeyId
