import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { Invitation } from "../../domain/Accounts.ts"
import { conflict, forbidden, notFound, validationError } from "../../domain/Errors.ts"
import { newUuid } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import {
  acceptInvitationsFor,
  getPendingInvitation,
  invitationExpiry,
  type InvitationRow,
  invitationToWire,
  membersOf,
  pendingInvitationsOf
} from "../../db/repos/Organizations.ts"
import { requireOrgRole } from "../../services/Access.ts"
import { MANAGERS } from "../../domain/Principals.ts"
import { Api } from "../Api.ts"
import { CurrentUser } from "../../domain/Principals.ts"

export const MembersLive = HttpApiBuilder.group(Api, "members", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const provide = Effect.provideService(SqlClient.SqlClient, sql)
    const inTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      sql.withTransaction(effect).pipe(Effect.catchTag("SqlError", Effect.die), provide)

    const memberOf = (organizationId: string, userId: string) =>
      Effect.map(membersOf(organizationId), (members) => members.find((m) => m.user_id === userId))

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          yield* acceptInvitationsFor(user.userId, user.email)
          const access = yield* requireOrgRole(path.organization_id)
          const now = yield* nowIso
          return {
            viewer: { user_id: access.userId, role: access.role },
            members: yield* membersOf(path.organization_id),
            invitations: (yield* pendingInvitationsOf(path.organization_id)).map((i) => invitationToWire(i, now))
          }
        }).pipe(provide))
      .handle("update", ({ path, payload }) =>
        inTransaction(Effect.gen(function*() {
          const access = yield* requireOrgRole(path.organization_id, MANAGERS)
          if (path.user_id === access.userId) {
            return yield* validationError("You cannot change your own role", [{ path: "user_id", message: "is you" }])
          }
          const target = yield* memberOf(path.organization_id, path.user_id)
          if (target === undefined) return yield* notFound("Member")
          if (target.role === "owner") return yield* forbidden("An owner's role cannot be changed")
          yield* sql`UPDATE memberships SET role = ${payload.role} WHERE organization_id = ${path.organization_id} AND user_id = ${path.user_id}`
          return { ...target, role: payload.role }
        })))
      .handle("remove", ({ path }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const members = yield* membersOf(path.organization_id)
          const target = members.find((m) => m.user_id === path.user_id)
          if (target === undefined) return yield* notFound("Member")
          if (target.role === "owner" && members.filter((m) => m.role === "owner").length < 2) {
            return yield* conflict("conflict", "Cannot remove the last owner")
          }
          yield* sql`DELETE FROM memberships WHERE organization_id = ${path.organization_id} AND user_id = ${path.user_id}`
          return { user_id: path.user_id, deleted: true as const }
        })))
      .handle("invite", ({ path, payload }) =>
        inTransaction(Effect.gen(function*() {
          const access = yield* requireOrgRole(path.organization_id, MANAGERS)
          const user = yield* CurrentUser
          if (payload.email === user.email) {
            return yield* validationError("You cannot invite yourself", [{ path: "email", message: "is your own email" }])
          }
          const members = yield* membersOf(path.organization_id)
          if (members.some((m) => m.email === payload.email)) return yield* conflict("conflict", "That person is already a member")
          const now = yield* nowIso
          const existing = (yield* sql<InvitationRow>`SELECT * FROM invitations WHERE organization_id = ${path.organization_id}
            AND email = ${payload.email} AND status = 'pending'`)[0]
          const respond = (row: InvitationRow, status: 200 | 201) =>
            HttpServerResponse.schemaJson(Invitation)(invitationToWire(row, now), { status }).pipe(Effect.orDie)
          if (existing !== undefined && existing.expires_at > now) return yield* respond(existing, 200)
          if (existing !== undefined) {
            // An expired invitation is refreshed in place.
            yield* sql`UPDATE invitations SET role = ${payload.role}, invited_by = ${access.userId}, created_at = ${now},
              expires_at = ${invitationExpiry(now)} WHERE id = ${existing.id}`
            return yield* respond({ ...existing, role: payload.role, invited_by: access.userId, created_at: now, expires_at: invitationExpiry(now) }, 201)
          }
          const row: InvitationRow = {
            id: newUuid(),
            organization_id: path.organization_id,
            email: payload.email,
            role: payload.role,
            invited_by: access.userId,
            created_at: now,
            expires_at: invitationExpiry(now),
            status: "pending"
          }
          yield* sql`INSERT INTO invitations ${sql.insert({ ...row })}`
          return yield* respond(row, 201)
        })))
      .handle("updateInvitation", ({ path, payload }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* getPendingInvitation(path.organization_id, path.invitation_id)
          if (row === undefined) return yield* notFound("Invitation")
          yield* sql`UPDATE invitations SET role = ${payload.role} WHERE id = ${row.id}`
          return invitationToWire({ ...row, role: payload.role }, yield* nowIso)
        })))
      .handle("revokeInvitation", ({ path }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* getPendingInvitation(path.organization_id, path.invitation_id)
          if (row === undefined) return yield* notFound("Invitation")
          yield* sql`UPDATE invitations SET status = 'revoked', revoked_at = ${yield* nowIso} WHERE id = ${row.id}`
          return { id: row.id, revoked: true as const }
        })))
      .handle("resendInvitation", ({ path }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* getPendingInvitation(path.organization_id, path.invitation_id)
          if (row === undefined) return yield* notFound("Invitation")
          const now = yield* nowIso
          yield* sql`UPDATE invitations SET expires_at = ${invitationExpiry(now)} WHERE id = ${row.id}`
          return invitationToWire({ ...row, expires_at: invitationExpiry(now) }, now)
        })))
  }))

export type InvitationWire = Schema.Schema.Type<typeof Invitation>
