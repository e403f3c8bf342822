/**
 * Organizations with their members and invitations: `organizations`, `memberships`, `invitations`. Slugs are
 * unique among live organizations (409 `conflict`); deleting an organization is one unit (`deleteCascade`).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { conflict } from "../../domain/Errors.ts"
import { newOrganizationId, type OrganizationId, type ProjectId, type UserId } from "../../domain/Ids.ts"
import type { Role } from "../../domain/Principals.ts"
import { nowIso } from "../../domain/Time.ts"
import { Dialect } from "../Dialect.ts"
import { IdColumn, rowsOf, run } from "../Rows.ts"

const RoleSchema = Schema.Literal("owner", "admin", "member")

export const OrganizationRow = Schema.Struct({
  id: IdColumn.organization,
  name: Schema.String,
  slug: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String,
  deleted_at: Schema.NullOr(Schema.String)
})
export type OrganizationRow = typeof OrganizationRow.Type

export const MemberRow = Schema.Struct({ user_id: IdColumn.user, email: Schema.String, role: RoleSchema, created_at: Schema.String })
export type MemberRow = typeof MemberRow.Type

export const InvitationRow = Schema.Struct({
  id: Schema.String,
  organization_id: IdColumn.organization,
  email: Schema.String,
  role: Schema.Literal("admin", "member"),
  invited_by: IdColumn.user,
  created_at: Schema.String,
  expires_at: Schema.String,
  status: Schema.Literal("pending", "accepted", "revoked")
})
export type InvitationRow = typeof InvitationRow.Type

/** A project's organization and the user's role there (null: not a member). */
const ProjectAccessRow = Schema.Struct({ organization_id: IdColumn.organization, role: Schema.NullOr(RoleSchema) })

/** A member of a live project's organization. */
const ProjectMemberRow = Schema.Struct({ project_id: IdColumn.project, user_id: IdColumn.user })
export type ProjectMemberRow = typeof ProjectMemberRow.Type

export class OrganizationsRepo extends Effect.Service<OrganizationsRepo>()("app/db/OrganizationsRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    const organizations = rowsOf("organizations", OrganizationRow)
    const members = rowsOf("memberships", MemberRow)
    const invitations = rowsOf("invitations", InvitationRow)
    const roles = rowsOf("memberships", Schema.Struct({ role: RoleSchema }))
    const projectAccess = rowsOf("projects", ProjectAccessRow)
    const projectMembers = rowsOf("memberships", ProjectMemberRow)
    const ids = rowsOf("organizations", Schema.Struct({ id: IdColumn.organization }))

    const slugTaken = (slug: string) => (e: unknown) =>
      dialect.isUniqueViolation(e) ? conflict("conflict", `The slug "${slug}" is already taken`, { field: "slug" }) : Effect.die(e)

    const get = (id: OrganizationId) => organizations.first(sql`SELECT * FROM organizations WHERE id = ${id} AND deleted_at IS NULL`)

    return {
      get,
      /** Inserts an organization with its creator as owner; 409 when the slug is taken. */
      insert: (input: { readonly name: string; readonly slug: string; readonly ownerId: UserId }) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const row: OrganizationRow = { id: newOrganizationId(), name: input.name, slug: input.slug, created_at: now, updated_at: now, deleted_at: null }
          yield* sql`INSERT INTO organizations ${sql.insert({ ...row })}`.pipe(Effect.catchTag("SqlError", slugTaken(input.slug)))
          yield* run(sql`INSERT INTO memberships ${sql.insert({ organization_id: row.id, user_id: input.ownerId, role: "owner", created_at: now })}`)
          return row
        }),
      update: (id: OrganizationId, input: { readonly name: string; readonly slug: string }) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          yield* sql`UPDATE organizations SET name = ${input.name}, slug = ${input.slug}, updated_at = ${now} WHERE id = ${id} AND deleted_at IS NULL`.pipe(
            Effect.catchTag("SqlError", slugTaken(input.slug))
          )
          return (yield* get(id))!
        }),
      ofUser: (userId: UserId) =>
        organizations.all(sql`SELECT o.* FROM organizations o JOIN memberships m ON m.organization_id = o.id
          WHERE m.user_id = ${userId} AND o.deleted_at IS NULL ORDER BY o.created_at, o.id`),
      /** The first live organization this user owns (the CLI's bootstrap reuses it). */
      firstOwnedBy: (userId: UserId) =>
        Effect.map(ids.first(sql`SELECT o.id FROM organizations o JOIN memberships m ON m.organization_id = o.id
          WHERE m.user_id = ${userId} AND m.role = 'owner' AND o.deleted_at IS NULL ORDER BY o.created_at LIMIT 1`), (row) => row?.id),
      exists: (id: OrganizationId) => Effect.map(ids.first(sql`SELECT id FROM organizations WHERE id = ${id} AND deleted_at IS NULL`), (row) => row !== undefined),
      /** The user's role in a live organization, if a member. */
      roleOf: (organizationId: OrganizationId, userId: UserId) =>
        Effect.map(roles.first(sql`SELECT m.role FROM memberships m JOIN organizations o ON o.id = m.organization_id
          WHERE m.organization_id = ${organizationId} AND m.user_id = ${userId} AND o.deleted_at IS NULL`), (row): Role | undefined => row?.role),
      /** A live project of a live organization, with the user's role there (null when not a member). */
      projectAccess: (projectId: ProjectId, userId: UserId) =>
        projectAccess.first(sql`SELECT p.organization_id, m.role FROM projects p
          JOIN organizations o ON o.id = p.organization_id AND o.deleted_at IS NULL
          LEFT JOIN memberships m ON m.organization_id = p.organization_id AND m.user_id = ${userId}
          WHERE p.id = ${projectId} AND p.deleted_at IS NULL`),

      /**
       * Which of these users are members of which of these projects' organizations, in one read (as
       * `projectAccess` sees them: a deleted project or organization has no members).
       */
      projectMembers: (projectIds: ReadonlyArray<string>, userIds: ReadonlyArray<string>) =>
        projectIds.length === 0 || userIds.length === 0
          ? Effect.succeed<ReadonlyArray<ProjectMemberRow>>([])
          : projectMembers.all(sql`SELECT p.id AS project_id, m.user_id FROM projects p
            JOIN organizations o ON o.id = p.organization_id AND o.deleted_at IS NULL
            JOIN memberships m ON m.organization_id = p.organization_id
            WHERE p.id IN ${sql.in(projectIds)} AND m.user_id IN ${sql.in(userIds)} AND p.deleted_at IS NULL`),

      members: (organizationId: OrganizationId) =>
        members.all(sql`SELECT m.user_id, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id
          WHERE m.organization_id = ${organizationId} ORDER BY m.created_at, u.email`),
      setMemberRole: (organizationId: OrganizationId, userId: UserId, role: Role) =>
        run(sql`UPDATE memberships SET role = ${role} WHERE organization_id = ${organizationId} AND user_id = ${userId}`),
      removeMember: (organizationId: OrganizationId, userId: UserId) =>
        run(sql`DELETE FROM memberships WHERE organization_id = ${organizationId} AND user_id = ${userId}`),

      pendingInvitations: (organizationId: OrganizationId) =>
        invitations.all(sql`SELECT * FROM invitations WHERE organization_id = ${organizationId} AND status = 'pending' ORDER BY created_at`),
      pendingInvitation: (organizationId: OrganizationId, id: string) =>
        invitations.first(sql`SELECT * FROM invitations WHERE id = ${id} AND organization_id = ${organizationId} AND status = 'pending'`),
      pendingInvitationFor: (organizationId: OrganizationId, email: string) =>
        invitations.first(sql`SELECT * FROM invitations WHERE organization_id = ${organizationId} AND email = ${email} AND status = 'pending'`),
      insertInvitation: (row: InvitationRow) => run(sql`INSERT INTO invitations ${sql.insert({ ...row })}`),
      /** An expired invitation is refreshed in place. */
      refreshInvitation: (id: string, fields: { readonly role: "admin" | "member"; readonly invitedBy: string; readonly createdAt: string; readonly expiresAt: string }) =>
        run(sql`UPDATE invitations SET role = ${fields.role}, invited_by = ${fields.invitedBy}, created_at = ${fields.createdAt},
          expires_at = ${fields.expiresAt} WHERE id = ${id}`),
      setInvitationRole: (id: string, role: "admin" | "member") => run(sql`UPDATE invitations SET role = ${role} WHERE id = ${id}`),
      revokeInvitation: (id: string, now: string) => run(sql`UPDATE invitations SET status = 'revoked', revoked_at = ${now} WHERE id = ${id}`),
      extendInvitation: (id: string, expiresAt: string) => run(sql`UPDATE invitations SET expires_at = ${expiresAt} WHERE id = ${id}`),
      /**
       * Accepts every unexpired pending invitation addressed to this email, in one transaction: the user becomes a
       * member with the invited role. This is how invitees join (reference §6).
       */
      acceptInvitationsFor: (userId: UserId, email: string) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const pending = yield* invitations.all(sql`SELECT i.* FROM invitations i JOIN organizations o ON o.id = i.organization_id
            WHERE i.email = ${email} AND i.status = 'pending' AND i.expires_at > ${now} AND o.deleted_at IS NULL`)
          for (const invitation of pending) {
            yield* run(sql`INSERT INTO memberships (organization_id, user_id, role, created_at)
              VALUES (${invitation.organization_id}, ${userId}, ${invitation.role}, ${now}) ON CONFLICT DO NOTHING`)
            yield* run(sql`UPDATE invitations SET status = 'accepted', accepted_at = ${now} WHERE id = ${invitation.id}`)
          }
          return pending.length
        }).pipe(sql.withTransaction, Effect.orDie),
      /**
       * Deletes an organization, in one transaction: its projects are soft-deleted (their keys stop working), its
       * pending invitations revoked, its members removed, its webhooks deleted, and the row renamed so the slug is
       * free again.
       */
      deleteCascade: (id: OrganizationId) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          yield* sql`UPDATE projects SET deleted_at = ${now} WHERE organization_id = ${id} AND deleted_at IS NULL`
          yield* sql`UPDATE invitations SET status = 'revoked', revoked_at = ${now} WHERE organization_id = ${id} AND status = 'pending'`
          yield* sql`DELETE FROM memberships WHERE organization_id = ${id}`
          yield* sql`UPDATE webhooks SET deleted_at = ${now}, disabled_at = COALESCE(disabled_at, ${now}) WHERE organization_id = ${id} AND deleted_at IS NULL`
          yield* sql`UPDATE organizations SET name = 'Deleted organization', slug = ${`deleted-${id}`}, deleted_at = ${now}, updated_at = ${now} WHERE id = ${id}`
        }).pipe(sql.withTransaction, Effect.orDie)
    }
  })
}) {}
