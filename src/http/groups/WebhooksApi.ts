/** Webhook endpoints (spec §4.9; reference §2 "Webhooks"); their deliveries are WebhookDeliveriesApi. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { BadRequest, Conflict, failsWith, Forbidden, NotFound } from "../../domain/Errors.ts"
import { Deleted } from "../../domain/Accounts.ts"
import { CreateWebhook, UpdateWebhook, WebhookEndpoint, WebhookList, WebhookWithSecret } from "../../domain/Webhooks.ts"
import { UserAuth } from "../Security.ts"
import { IdempotencyHeaders, organizationIdParam, webhookIdParam } from "./Common.ts"

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.get("list")`/v1/organizations/${organizationIdParam}/webhooks`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(WebhookList)
  )
  .add(
    HttpApiEndpoint.post("create")`/v1/organizations/${organizationIdParam}/webhooks`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "idempotency_in_progress", "idempotency_mismatch"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(CreateWebhook)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(WebhookWithSecret, { status: 201 })
  )
  .add(
    HttpApiEndpoint.get("get")`/v1/organizations/${organizationIdParam}/webhooks/${webhookIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(WebhookEndpoint)
  )
  .add(
    HttpApiEndpoint.patch("update")`/v1/organizations/${organizationIdParam}/webhooks/${webhookIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(UpdateWebhook)
      .addSuccess(WebhookEndpoint)
  )
  .add(
    HttpApiEndpoint.del("delete")`/v1/organizations/${organizationIdParam}/webhooks/${webhookIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Deleted)
  )
  .add(
    HttpApiEndpoint.post("rotate")`/v1/organizations/${organizationIdParam}/webhooks/${webhookIdParam}/rotate`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(WebhookWithSecret)
  )
  // A member of another organization, or one whose role may not do this.
  .addError(failsWith(Forbidden, "forbidden"))
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Webhooks")
  .annotate(
    OpenApi.Description,
    "Webhook endpoints. The signing secret (`whsec_…`) is shown only when created or rotated; rotation replaces it at once (the next attempt is signed with the new one). The URL must reach a public address unless the operator allows private networks (422 `validation_error` naming the rule)."
  )
{}
