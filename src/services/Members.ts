/**
 * An organization's members and invitations: listed by any member; roles changed, members removed and people
 * invited by its managers. Invitations are accepted when the invited email signs in (acceptInvitationsFor).
 */
import { Effect } from "effect"
import { inTransaction } from "../db/Db.ts"
import { type InvitationRow, OrganizationsRepo } from "../db/repos/Organizations.ts"
import { INVITATION_TTL_SECONDS, type InvitableRole } from "../domain/Accounts.ts"
import { conflict, forbidden, notFound, validationError } from "../domain/Errors.ts"
import { newUuid, type OrganizationId, type UserId } from "../domain/Ids.ts"
import { CurrentUser, MANAGERS } from "../domain/Principals.ts"
import { isoAfter, nowIso } from "../domain/Time.ts"
import { requireOrgRole } from "./Access.ts"
import { accessChanged } from "./LiveStreams.ts"

const invitationExpiry = (now: string) => isoAfter(now, INVITATION_TTL_SECONDS)

const memberOf = (organizationId: OrganizationId, userId: UserId) =>
  Effect.map(OrganizationsRepo.members(organizationId), (members) => members.find((m) => m.user_id === userId))

/** The members, the pending invitations (as of `now`, for their wire state) and who is asking. */
export const listMembers = (organizationId: OrganizationId) =>
  Effect.gen(function*() {
    const user = yield* CurrentUser
    yield* OrganizationsRepo.acceptInvitationsFor(user.userId, user.email)
    const access = yield* requireOrgRole(organizationId)
    const now = yield* nowIso
    return {
      viewer: { user_id: access.userId, role: access.role },
      members: yield* OrganizationsRepo.members(organizationId),
      invitations: yield* OrganizationsRepo.pendingInvitations(organizationId),
      now
    }
  })

export const setMemberRole = (organizationId: OrganizationId, userId: UserId, role: typeof InvitableRole.Type) =>
  inTransaction(Effect.gen(function*() {
    const access = yield* requireOrgRole(organizationId, MANAGERS)
    if (userId === access.userId) {
      return yield* validationError("You cannot change your own role", [{ path: "user_id", message: "is you" }])
    }
    const target = yield* memberOf(organizationId, userId)
    if (target === undefined) return yield* notFound("Member")
    if (target.role === "owner") return yield* forbidden("An owner's role cannot be changed")
    yield* OrganizationsRepo.setMemberRole(organizationId, userId, role)
    return { ...target, role }
  })).pipe(Effect.withSpan("Members.setMemberRole", { attributes: { "organization.id": organizationId } }))

/** The last owner stays; the streams the removed member opened end too. */
export const removeMember = (organizationId: OrganizationId, userId: UserId) =>
  inTransaction(Effect.gen(function*() {
    yield* requireOrgRole(organizationId, MANAGERS)
    const members = yield* OrganizationsRepo.members(organizationId)
    const target = members.find((m) => m.user_id === userId)
    if (target === undefined) return yield* notFound("Member")
    if (target.role === "owner" && members.filter((m) => m.role === "owner").length < 2) {
      return yield* conflict("conflict", "Cannot remove the last owner")
    }
    yield* OrganizationsRepo.removeMember(organizationId, userId)
    return { user_id: userId, deleted: true as const }
  })).pipe(Effect.tap(() => accessChanged), Effect.withSpan("Members.removeMember", { attributes: { "organization.id": organizationId } }))

/**
 * Invites an email: a live pending invitation is answered as it is (`created: false`), an expired one is
 * refreshed in place, else a new one is made.
 */
export const invite = (organizationId: OrganizationId, input: { readonly email: string; readonly role: typeof InvitableRole.Type }) =>
  inTransaction(Effect.gen(function*() {
    const access = yield* requireOrgRole(organizationId, MANAGERS)
    const user = yield* CurrentUser
    if (input.email === user.email) {
      return yield* validationError("You cannot invite yourself", [{ path: "email", message: "is your own email" }])
    }
    const members = yield* OrganizationsRepo.members(organizationId)
    if (members.some((m) => m.email === input.email)) return yield* conflict("conflict", "That person is already a member")
    const now = yield* nowIso
    const existing = yield* OrganizationsRepo.pendingInvitationFor(organizationId, input.email)
    if (existing !== undefined && existing.expires_at > now) return { row: existing, created: false, now }
    if (existing !== undefined) {
      const refreshed = { ...existing, role: input.role, invited_by: access.userId, created_at: now, expires_at: invitationExpiry(now) }
      yield* OrganizationsRepo.refreshInvitation(existing.id, { role: refreshed.role, invitedBy: refreshed.invited_by, createdAt: now, expiresAt: refreshed.expires_at })
      return { row: refreshed, created: true, now }
    }
    const row: InvitationRow = {
      id: newUuid(),
      organization_id: organizationId,
      email: input.email,
      role: input.role,
      invited_by: access.userId,
      created_at: now,
      expires_at: invitationExpiry(now),
      status: "pending"
    }
    yield* OrganizationsRepo.insertInvitation(row)
    return { row, created: true, now }
  })).pipe(Effect.withSpan("Members.invite", { attributes: { "organization.id": organizationId } }))

const pendingInvitation = (organizationId: OrganizationId, invitationId: string) =>
  Effect.gen(function*() {
    yield* requireOrgRole(organizationId, MANAGERS)
    const row = yield* OrganizationsRepo.pendingInvitation(organizationId, invitationId)
    if (row === undefined) return yield* notFound("Invitation")
    return row
  })

/** The invitation with its new role, and the time its state is told at. */
export const setInvitationRole = (organizationId: OrganizationId, invitationId: string, role: typeof InvitableRole.Type) =>
  inTransaction(Effect.gen(function*() {
    const row = yield* pendingInvitation(organizationId, invitationId)
    yield* OrganizationsRepo.setInvitationRole(row.id, role)
    return { row: { ...row, role }, now: yield* nowIso }
  })).pipe(Effect.withSpan("Members.setInvitationRole", { attributes: { "organization.id": organizationId } }))

export const revokeInvitation = (organizationId: OrganizationId, invitationId: string) =>
  inTransaction(Effect.gen(function*() {
    const row = yield* pendingInvitation(organizationId, invitationId)
    yield* OrganizationsRepo.revokeInvitation(row.id, yield* nowIso)
    return { id: row.id, revoked: true as const }
  })).pipe(Effect.withSpan("Members.revokeInvitation", { attributes: { "organization.id": organizationId } }))

/** The invitation valid for another INVITATION_TTL_SECONDS from now. */
export const resendInvitation = (organizationId: OrganizationId, invitationId: string) =>
  inTransaction(Effect.gen(function*() {
    const row = yield* pendingInvitation(organizationId, invitationId)
    const now = yield* nowIso
    yield* OrganizationsRepo.extendInvitation(row.id, invitationExpiry(now))
    return { row: { ...row, expires_at: invitationExpiry(now) }, now }
  })).pipe(Effect.withSpan("Members.resendInvitation", { attributes: { "organization.id": organizationId } }))
