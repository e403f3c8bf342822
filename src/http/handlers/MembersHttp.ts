import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Invitation } from "../../domain/Accounts.ts"
import { invite, listMembers, removeMember, resendInvitation, revokeInvitation, setInvitationRole, setMemberRole } from "../../services/Members.ts"
import { provideServiceContext } from "../../services/ServiceContext.ts"
import { Api } from "../Api.ts"
import { invitationToWire } from "../wire/Accounts.ts"

export const MembersLive = HttpApiBuilder.group(Api, "members", (handlers) =>
  Effect.gen(function*() {
    const provide = yield* provideServiceContext

    return handlers
      .handle("list", ({ path }) =>
        listMembers(path.organization_id).pipe(
          Effect.map(({ invitations, members, now, viewer }) => ({ viewer, members, invitations: invitations.map((i) => invitationToWire(i, now)) })),
          provide
        ))
      .handle("update", ({ path, payload }) => setMemberRole(path.organization_id, path.user_id, payload.role).pipe(provide))
      .handle("remove", ({ path }) => removeMember(path.organization_id, path.user_id).pipe(provide))
      .handle("invite", ({ path, payload }) =>
        invite(path.organization_id, payload).pipe(
          // A pending invitation asked for again is answered as it is (200); a new or refreshed one is a 201.
          Effect.flatMap(({ created, now, row }) => HttpServerResponse.schemaJson(Invitation)(invitationToWire(row, now), { status: created ? 201 : 200 }).pipe(Effect.orDie)),
          provide
        ))
      .handle("updateInvitation", ({ path, payload }) =>
        setInvitationRole(path.organization_id, path.invitation_id, payload.role).pipe(Effect.map(({ now, row }) => invitationToWire(row, now)), provide))
      .handle("revokeInvitation", ({ path }) => revokeInvitation(path.organization_id, path.invitation_id).pipe(provide))
      .handle("resendInvitation", ({ path }) =>
        resendInvitation(path.organization_id, path.invitation_id).pipe(Effect.map(({ now, row }) => invitationToWire(row, now)), provide))
  }))
