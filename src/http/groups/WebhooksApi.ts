/** Webhook endpoints (spec §4.9; reference §2 "Webhooks"); their deliveries are WebhookDeliveriesApi. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Deleted } from "../../domain/Accounts.ts"
import { ConflictWire, ForbiddenWire, NotFoundWire } from "../../domain/Errors.ts"
import { CreateWebhook, UpdateWebhook, WebhookEndpoint, WebhookList, WebhookWithSecret } from "../../domain/Webhooks.ts"
import { UserAuth } from "../Security.ts"
import { IdempotencyHeaders, organizationIdParam, webhookIdParam } from "./Common.ts"

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(HttpApiEndpoint.get("list")`/v1/organizations/${organizationIdParam}/webhooks`.addSuccess(WebhookList).addError(ForbiddenWire).addError(NotFoundWire))
  .add(
    HttpApiEndpoint.post("create")`/v1/organizations/${organizationIdParam}/webhooks`
      .setPayload(CreateWebhook)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(WebhookWithSecret, { status: 201 })
      .addError(ForbiddenWire)
      .addError(NotFoundWire)
      .addError(ConflictWire)
  )
  .add(HttpApiEndpoint.get("get")`/v1/organizations/${organizationIdParam}/webhooks/${webhookIdParam}`.addSuccess(WebhookEndpoint).addError(ForbiddenWire).addError(NotFoundWire))
  .add(
    HttpApiEndpoint.patch("update")`/v1/organizations/${organizationIdParam}/webhooks/${webhookIdParam}`
      .setPayload(UpdateWebhook)
      .addSuccess(WebhookEndpoint)
      .addError(ForbiddenWire)
      .addError(NotFoundWire)
  )
  .add(HttpApiEndpoint.del("delete")`/v1/organizations/${organizationIdParam}/webhooks/${webhookIdParam}`.addSuccess(Deleted).addError(ForbiddenWire).addError(NotFoundWire))
  .add(
    HttpApiEndpoint.post("rotate")`/v1/organizations/${organizationIdParam}/webhooks/${webhookIdParam}/rotate`
      .addSuccess(WebhookWithSecret)
      .addError(ForbiddenWire)
      .addError(NotFoundWire)
  )
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Webhooks")
  .annotate(
    OpenApi.Description,
    "Webhook endpoints. The signing secret (`whsec_…`) is shown only when created or rotated; rotation replaces it at once (the next attempt is signed with the new one). The URL must reach a public address unless the operator allows private networks (422 `validation_error` naming the rule)."
  )
{}
