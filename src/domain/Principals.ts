/**
 * Who is calling (ARCHITECTURE.md §6): a user with an access token on account routes, or a project API key on sandbox
 * routes — never interchangeable. The HTTP middlewares (src/http/Security.ts) provide these tags; services read
 * them. Roles of organization members (reference/openmetal-api.md §6).
 */
import { Context } from "effect"
import type { ApiKeyId, OrganizationId, ProjectId, UserId } from "./Ids.ts"

export interface UserPrincipal {
  readonly userId: UserId
  readonly email: string
  readonly tokenId: string
}
export class CurrentUser extends Context.Tag("app/CurrentUser")<CurrentUser, UserPrincipal>() {}

export interface KeyPrincipal {
  readonly keyId: ApiKeyId
  readonly projectId: ProjectId
  readonly organizationId: OrganizationId
}
export class CurrentProjectKey extends Context.Tag("app/CurrentProjectKey")<CurrentProjectKey, KeyPrincipal>() {}

export type Role = "owner" | "admin" | "member"
export const MANAGERS: ReadonlyArray<Role> = ["owner", "admin"]
export const ANY_ROLE: ReadonlyArray<Role> = ["owner", "admin", "member"]
