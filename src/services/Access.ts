/**
 * Organization roles and scoping (reference/openmetal-api.md §6). A non-member gets 403 on organization-scoped
 * routes and 404 on project-scoped routes; members may read, owner/admin may write, only owners delete orgs.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { type Forbidden, type NotFound, forbidden, notFound } from "../domain/Errors.ts"
import { ANY_ROLE, CurrentUser, type Role } from "../domain/Principals.ts"

export interface OrgAccess {
  readonly organizationId: string
  readonly userId: string
  readonly role: Role
}

export interface ProjectAccess extends OrgAccess {
  readonly projectId: string
}

const roleOf = (organizationId: string, userId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ role: Role }>`
      SELECT m.role FROM memberships m JOIN organizations o ON o.id = m.organization_id
      WHERE m.organization_id = ${organizationId} AND m.user_id = ${userId} AND o.deleted_at IS NULL`
    return rows[0]?.role
  }).pipe(Effect.orDie)

/** Org-scoped routes: unknown org → 404, not a member or wrong role → 403. */
export const requireOrgRole = (
  organizationId: string,
  roles: ReadonlyArray<Role> = ANY_ROLE
): Effect.Effect<OrgAccess, Forbidden | NotFound, CurrentUser | SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const user = yield* CurrentUser
    const sql = yield* SqlClient.SqlClient
    const org = yield* sql<{ id: string }>`SELECT id FROM organizations WHERE id = ${organizationId} AND deleted_at IS NULL`.pipe(Effect.orDie)
    if (org.length === 0) return yield* notFound("Organization")
    const role = yield* roleOf(organizationId, user.userId)
    if (role === undefined) return yield* forbidden("You are not a member of this organization")
    if (!roles.includes(role)) return yield* forbidden(`This needs one of the roles: ${roles.join(", ")}`)
    return { organizationId, userId: user.userId, role }
  })

/** Project-scoped routes: unknown project or not a member → 404; a member without the role → 403. */
export const requireProjectRole = (
  projectId: string,
  roles: ReadonlyArray<Role> = ANY_ROLE
): Effect.Effect<ProjectAccess, Forbidden | NotFound, CurrentUser | SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const user = yield* CurrentUser
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ organization_id: string; role: Role | null }>`
      SELECT p.organization_id, m.role FROM projects p
      JOIN organizations o ON o.id = p.organization_id AND o.deleted_at IS NULL
      LEFT JOIN memberships m ON m.organization_id = p.organization_id AND m.user_id = ${user.userId}
      WHERE p.id = ${projectId} AND p.deleted_at IS NULL`.pipe(Effect.orDie)
    const row = rows[0]
    if (row === undefined || row.role === null) return yield* notFound("Project")
    if (!roles.includes(row.role)) return yield* forbidden(`This needs one of the roles: ${roles.join(", ")}`)
    return { organizationId: row.organization_id, projectId, userId: user.userId, role: row.role }
  })
