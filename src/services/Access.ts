/**
 * Organization roles and scoping (reference/openmetal-api.md §6). A non-member gets 403 on organization-scoped
 * routes and 404 on project-scoped routes; members may read, owner/admin may write, only owners delete orgs.
 */
import { Effect } from "effect"
import { OrganizationsRepo } from "../db/repos/Organizations.ts"
import { type Coded, type Forbidden, forbidden, type NotFound, notFound } from "../domain/Errors.ts"
import { ANY_ROLE, CurrentUser, type Role } from "../domain/Principals.ts"
import type { OrganizationId, ProjectId, UserId } from "../domain/Ids.ts"

export interface OrgAccess {
  readonly organizationId: OrganizationId
  readonly userId: UserId
  readonly role: Role
}

export interface ProjectAccess extends OrgAccess {
  readonly projectId: ProjectId
}

/** Org-scoped routes: unknown org → 404, not a member or wrong role → 403. */
export const requireOrgRole = (
  organizationId: OrganizationId,
  roles: ReadonlyArray<Role> = ANY_ROLE
): Effect.Effect<OrgAccess, Coded<Forbidden, "forbidden"> | Coded<NotFound, "not_found">, CurrentUser | OrganizationsRepo> =>
  Effect.gen(function*() {
    const user = yield* CurrentUser
    if (!(yield* OrganizationsRepo.exists(organizationId))) return yield* notFound("Organization")
    const role = yield* OrganizationsRepo.roleOf(organizationId, user.userId)
    if (role === undefined) return yield* forbidden("You are not a member of this organization")
    if (!roles.includes(role)) return yield* forbidden(`This needs one of the roles: ${roles.join(", ")}`)
    return { organizationId, userId: user.userId, role }
  })

/** Project-scoped routes: unknown project or not a member → 404; a member without the role → 403. */
export const requireProjectRole = (
  projectId: ProjectId,
  roles: ReadonlyArray<Role> = ANY_ROLE
): Effect.Effect<ProjectAccess, Coded<Forbidden, "forbidden"> | Coded<NotFound, "not_found">, CurrentUser | OrganizationsRepo> =>
  Effect.gen(function*() {
    const user = yield* CurrentUser
    const row = yield* OrganizationsRepo.projectAccess(projectId, user.userId)
    if (row === undefined || row.role === null) return yield* notFound("Project")
    if (!roles.includes(row.role)) return yield* forbidden(`This needs one of the roles: ${roles.join(", ")}`)
    return { organizationId: row.organization_id, projectId, userId: user.userId, role: row.role }
  })
