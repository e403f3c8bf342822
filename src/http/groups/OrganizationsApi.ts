/** Organizations (reference §2 "Organizations"): user access token; members read, owner/admin write, owner deletes. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { BadRequest, Conflict, failsWith, Forbidden, NotFound, Unprocessable } from "../../domain/Errors.ts"
import { CreateOrganization, Deleted, DeleteOrganization, Organization, OrganizationList, UpdateOrganization } from "../../domain/Accounts.ts"
import { UserAuth } from "../Security.ts"
import { IdempotencyHeaders, organizationIdParam } from "./Common.ts"

export class OrganizationsApi extends HttpApiGroup.make("organizations")
  .add(HttpApiEndpoint.get("list", "/v1/organizations").addSuccess(OrganizationList))
  .add(
    HttpApiEndpoint.post("create", "/v1/organizations")
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "conflict", "idempotency_in_progress", "idempotency_mismatch"))
      .setPayload(CreateOrganization)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(Organization, { status: 201 })
  )
  .add(
    HttpApiEndpoint.get("get")`/v1/organizations/${organizationIdParam}`
      .addError(failsWith(Forbidden, "forbidden"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Organization)
  )
  .add(
    HttpApiEndpoint.patch("update")`/v1/organizations/${organizationIdParam}`
      .addError(failsWith(Conflict, "conflict"))
      .addError(failsWith(Forbidden, "forbidden"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(UpdateOrganization)
      .addSuccess(Organization)
  )
  .add(
    HttpApiEndpoint.del("delete")`/v1/organizations/${organizationIdParam}`
      .addError(failsWith(Conflict, "organization_has_active_resources", "organization_has_credit_balance", "organization_has_pending_billing"))
      .addError(failsWith(Forbidden, "forbidden"))
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(Unprocessable, "confirmation_mismatch"))
      .setPayload(DeleteOrganization)
      .addSuccess(Deleted)
  )
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Organizations")
  .annotate(OpenApi.Description, "Organizations, with a user access token. Listing or reading organizations accepts pending invitations for your email.")
{}
