/** Members and invitations (reference §2 "Members and invitations"). */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Conflict, failsWith, Forbidden, NotFound } from "../../domain/Errors.ts"
import { CreateInvitation, Invitation, InvitationRevoked, Member, MemberRemoved, MembersList, UpdateInvitation, UpdateMember } from "../../domain/Accounts.ts"
import { UserAuth } from "../Security.ts"
import { invitationIdParam, organizationIdParam, userIdParam } from "./Common.ts"

export class MembersApi extends HttpApiGroup.make("members")
  .add(
    HttpApiEndpoint.get("list")`/v1/organizations/${organizationIdParam}/members`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(MembersList)
  )
  .add(
    HttpApiEndpoint.patch("update")`/v1/organizations/${organizationIdParam}/members/${userIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(UpdateMember)
      .addSuccess(Member)
  )
  .add(
    HttpApiEndpoint.del("remove")`/v1/organizations/${organizationIdParam}/members/${userIdParam}`
      .addError(failsWith(Conflict, "conflict"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(MemberRemoved)
  )
  .add(
    HttpApiEndpoint.post("invite")`/v1/organizations/${organizationIdParam}/invitations`
      .addError(failsWith(Conflict, "conflict"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(CreateInvitation)
      .addSuccess(Invitation, { status: 201 })
      .addSuccess(Invitation)
  )
  .add(
    HttpApiEndpoint.patch("updateInvitation")`/v1/organizations/${organizationIdParam}/invitations/${invitationIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(UpdateInvitation)
      .addSuccess(Invitation)
  )
  .add(
    HttpApiEndpoint.del("revokeInvitation")`/v1/organizations/${organizationIdParam}/invitations/${invitationIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(InvitationRevoked)
  )
  .add(
    HttpApiEndpoint.post("resendInvitation")`/v1/organizations/${organizationIdParam}/invitations/${invitationIdParam}/resend`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Invitation)
  )
  // A member of another organization, or one whose role may not do this.
  .addError(failsWith(Forbidden, "forbidden"))
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Members")
  .annotate(OpenApi.Description, "Members and invitations. An invitee accepts by listing organizations with a user token issued to the invited email.")
{}
