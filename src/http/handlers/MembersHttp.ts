import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Db } from "../../db/Db.ts"
import { provideRepositories } from "../../db/Database.ts"
import { type InvitationRow, OrganizationsRepo } from "../../db/repos/Organizations.ts"
import { INVITATION_TTL_SECONDS, Invitation } from "../../domain/Accounts.ts"
import { conflict, forbidden, notFound, validationError } from "../../domain/Errors.ts"
import { newUuid } from "../../domain/Ids.ts"
import { CurrentUser, MANAGERS } from "../../domain/Principals.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import { requireOrgRole } from "../../services/Access.ts"
import { accessChanged } from "../../services/LiveStreams.ts"
import { Api } from "../Api.ts"
import { invitationToWire } from "../wire/Accounts.ts"

const invitationExpiry = (now: string) => isoAfter(now, INVITATION_TTL_SECONDS)

export const MembersLive = HttpApiBuilder.group(Api, "members", (handlers) =>
  Effect.gen(function*() {
    const db = yield* Db
    const orgs = yield* OrganizationsRepo
    const provide = yield* provideRepositories
    const inTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>) => db.transaction(effect).pipe(provide)

    const memberOf = (organizationId: string, userId: string) =>
      Effect.map(orgs.members(organizationId), (members) => members.find((m) => m.user_id === userId))

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          yield* orgs.acceptInvitationsFor(user.userId, user.email)
          const access = yield* requireOrgRole(path.organization_id)
          const now = yield* nowIso
          return {
            viewer: { user_id: access.userId, role: access.role },
            members: yield* orgs.members(path.organization_id),
            invitations: (yield* orgs.pendingInvitations(path.organization_id)).map((i) => invitationToWire(i, now))
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
          yield* orgs.setMemberRole(path.organization_id, path.user_id, payload.role)
          return { ...target, role: payload.role }
        })))
      .handle("remove", ({ path }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const members = yield* orgs.members(path.organization_id)
          const target = members.find((m) => m.user_id === path.user_id)
          if (target === undefined) return yield* notFound("Member")
          if (target.role === "owner" && members.filter((m) => m.role === "owner").length < 2) {
            return yield* conflict("conflict", "Cannot remove the last owner")
          }
          yield* orgs.removeMember(path.organization_id, path.user_id)
          return { user_id: path.user_id, deleted: true as const }
        })).pipe(Effect.tap(() => provide(accessChanged)))) // the streams they opened end too
      .handle("invite", ({ path, payload }) =>
        inTransaction(Effect.gen(function*() {
          const access = yield* requireOrgRole(path.organization_id, MANAGERS)
          const user = yield* CurrentUser
          if (payload.email === user.email) {
            return yield* validationError("You cannot invite yourself", [{ path: "email", message: "is your own email" }])
          }
          const members = yield* orgs.members(path.organization_id)
          if (members.some((m) => m.email === payload.email)) return yield* conflict("conflict", "That person is already a member")
          const now = yield* nowIso
          const existing = yield* orgs.pendingInvitationFor(path.organization_id, payload.email)
          const respond = (row: InvitationRow, status: 200 | 201) =>
            HttpServerResponse.schemaJson(Invitation)(invitationToWire(row, now), { status }).pipe(Effect.orDie)
          if (existing !== undefined && existing.expires_at > now) return yield* respond(existing, 200)
          if (existing !== undefined) {
            // An expired invitation is refreshed in place.
            const refreshed = { ...existing, role: payload.role, invited_by: access.userId, created_at: now, expires_at: invitationExpiry(now) }
            yield* orgs.refreshInvitation(existing.id, { role: refreshed.role, invitedBy: refreshed.invited_by, createdAt: now, expiresAt: refreshed.expires_at })
            return yield* respond(refreshed, 201)
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
          yield* orgs.insertInvitation(row)
          return yield* respond(row, 201)
        })))
      .handle("updateInvitation", ({ path, payload }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* orgs.pendingInvitation(path.organization_id, path.invitation_id)
          if (row === undefined) return yield* notFound("Invitation")
          yield* orgs.setInvitationRole(row.id, payload.role)
          return invitationToWire({ ...row, role: payload.role }, yield* nowIso)
        })))
      .handle("revokeInvitation", ({ path }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* orgs.pendingInvitation(path.organization_id, path.invitation_id)
          if (row === undefined) return yield* notFound("Invitation")
          yield* orgs.revokeInvitation(row.id, yield* nowIso)
          return { id: row.id, revoked: true as const }
        })))
      .handle("resendInvitation", ({ path }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* orgs.pendingInvitation(path.organization_id, path.invitation_id)
          if (row === undefined) return yield* notFound("Invitation")
          const now = yield* nowIso
          yield* orgs.extendInvitation(row.id, invitationExpiry(now))
          return invitationToWire({ ...row, expires_at: invitationExpiry(now) }, now)
        })))
  }))
