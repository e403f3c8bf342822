/** Organizations, memberships and invitations. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { conflict } from "../../domain/Errors.ts"
import { newUuid } from "../../domain/Ids.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import type { Role } from "../../domain/Principals.ts"
import { ensureBillingAccount } from "./Billing.ts"

export interface OrganizationRow {
  readonly id: string
  readonly name: string
  readonly slug: string
  readonly created_at: string
  readonly updated_at: string
  readonly deleted_at: string | null
}

export const organizationToWire = (row: OrganizationRow) => ({
  id: row.id,
  name: row.name,
  slug: row.slug,
  created_at: row.created_at,
  updated_at: row.updated_at
})

export const INVITATION_TTL_SECONDS = 7 * 86_400

const isUniqueViolation = (e: unknown) => String((e as { cause?: { code?: string } }).cause?.code ?? "").startsWith("SQLITE_CONSTRAINT")

export const getOrganization = (id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<OrganizationRow>`SELECT * FROM organizations WHERE id = ${id} AND deleted_at IS NULL`).pipe(
    Effect.map((rows) => rows[0]),
    Effect.orDie
  )

/** Inserts an organization with its creator as owner and a billing account; 409 when the slug is taken. */
export const insertOrganization = (input: { readonly name: string; readonly slug: string; readonly ownerId: string }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    const row: OrganizationRow = { id: newUuid(), name: input.name, slug: input.slug, created_at: now, updated_at: now, deleted_at: null }
    yield* sql`INSERT INTO organizations ${sql.insert({ ...row })}`.pipe(
      Effect.catchTag("SqlError", (e) => isUniqueViolation(e) ? conflict("conflict", `The slug "${input.slug}" is already taken`, { field: "slug" }) : Effect.die(e))
    )
    yield* sql`INSERT INTO memberships ${sql.insert({ organization_id: row.id, user_id: input.ownerId, role: "owner", created_at: now })}`.pipe(Effect.orDie)
    yield* ensureBillingAccount(row.id)
    return row
  })

export const updateOrganization = (id: string, input: { readonly name: string; readonly slug: string }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    yield* sql`UPDATE organizations SET name = ${input.name}, slug = ${input.slug}, updated_at = ${now} WHERE id = ${id} AND deleted_at IS NULL`.pipe(
      Effect.catchTag("SqlError", (e) => isUniqueViolation(e) ? conflict("conflict", `The slug "${input.slug}" is already taken`, { field: "slug" }) : Effect.die(e))
    )
    return (yield* getOrganization(id))!
  })

export const organizationsOfUser = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<OrganizationRow>`SELECT o.* FROM organizations o JOIN memberships m ON m.organization_id = o.id
      WHERE m.user_id = ${userId} AND o.deleted_at IS NULL ORDER BY o.created_at, o.id`).pipe(Effect.orDie)

export interface MemberRow {
  readonly user_id: string
  readonly email: string
  readonly role: Role
  readonly created_at: string
}

export const membersOf = (organizationId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<MemberRow>`SELECT m.user_id, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id
      WHERE m.organization_id = ${organizationId} ORDER BY m.created_at, u.email`).pipe(Effect.orDie)

export interface InvitationRow {
  readonly id: string
  readonly organization_id: string
  readonly email: string
  readonly role: "admin" | "member"
  readonly invited_by: string
  readonly created_at: string
  readonly expires_at: string
  readonly status: "pending" | "accepted" | "revoked"
}

export const invitationToWire = (row: InvitationRow, now: string) => ({
  id: row.id,
  organization_id: row.organization_id,
  email: row.email,
  role: row.role,
  invited_by: row.invited_by,
  created_at: row.created_at,
  expires_at: row.expires_at,
  status: row.expires_at <= now ? ("expired" as const) : ("pending" as const)
})

export const pendingInvitationsOf = (organizationId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<InvitationRow>`SELECT * FROM invitations WHERE organization_id = ${organizationId} AND status = 'pending' ORDER BY created_at`).pipe(Effect.orDie)

export const getPendingInvitation = (organizationId: string, id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<InvitationRow>`SELECT * FROM invitations WHERE id = ${id} AND organization_id = ${organizationId} AND status = 'pending'`).pipe(
      Effect.map((rows) => rows[0]),
      Effect.orDie
    )

/**
 * Accepts every unexpired pending invitation addressed to this email: the user becomes a member with the
 * invited role. This is how invitees join (reference §6: on listing or reading organizations and members).
 */
export const acceptInvitationsFor = (userId: string, email: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    const pending = yield* sql<InvitationRow>`SELECT i.* FROM invitations i JOIN organizations o ON o.id = i.organization_id
      WHERE i.email = ${email} AND i.status = 'pending' AND i.expires_at > ${now} AND o.deleted_at IS NULL`
    for (const invitation of pending) {
      yield* sql`INSERT INTO memberships (organization_id, user_id, role, created_at)
        VALUES (${invitation.organization_id}, ${userId}, ${invitation.role}, ${now}) ON CONFLICT DO NOTHING`
      yield* sql`UPDATE invitations SET status = 'accepted', accepted_at = ${now} WHERE id = ${invitation.id}`
    }
    return pending.length
  }).pipe(sql_tx, Effect.orDie)

function sql_tx<A, E, R>(effect: Effect.Effect<A, E, R>) {
  return Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(effect))
}

export const invitationExpiry = (now: string) => isoAfter(now, INVITATION_TTL_SECONDS)
