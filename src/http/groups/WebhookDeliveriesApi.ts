/**
 * Webhook delivery routes (reference §2 "Webhooks"): a test send, an endpoint's delivery log (newest first,
 * cursor-paged, each delivery with its attempts) and redelivery. Members read; owners and admins send.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Conflict, failsWith, Forbidden, NotFound } from "../../domain/Errors.ts"
import { Uuid } from "../../domain/Ids.ts"
import { WebhookDelivery, WebhookDeliveryList } from "../../domain/Webhooks.ts"
import { PageParams } from "../Pagination.ts"
import { UserAuth } from "../Security.ts"
import { organizationIdParam, webhookIdParam } from "./Common.ts"

const deliveryIdParam = HttpApiSchema.param("delivery_id", Uuid)

export class WebhookDeliveriesApi extends HttpApiGroup.make("webhookDeliveries")
  .add(
    HttpApiEndpoint.post("test")`/v1/organizations/${organizationIdParam}/webhooks/${webhookIdParam}/test`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(WebhookDelivery)
      .annotate(OpenApi.Description, "Sends a `webhook.test` delivery (cursor `\"test\"`) to this endpoint alone, even when it is disabled; answers with the pending delivery.")
  )
  .add(
    HttpApiEndpoint.get("list")`/v1/organizations/${organizationIdParam}/webhooks/${webhookIdParam}/deliveries`
      .addError(failsWith(NotFound, "not_found"))
      .setUrlParams(PageParams)
      .addSuccess(WebhookDeliveryList)
      .annotate(OpenApi.Description, "The endpoint's deliveries, newest first, each with its attempts; pass `next_cursor` as `cursor` for the next page.")
  )
  .add(
    HttpApiEndpoint.post("redeliver")`/v1/organizations/${organizationIdParam}/webhooks/${webhookIdParam}/deliveries/${deliveryIdParam}/redeliver`
      .addError(failsWith(Conflict, "delivery_in_flight"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(WebhookDelivery)
      .annotate(OpenApi.Description, "Sends a delivery that succeeded or failed again from its first attempt (same delivery id and body). 409 `delivery_in_flight` while it is pending, delivering or retrying.")
  )
  // A member of another organization, or one whose role may not do this.
  .addError(failsWith(Forbidden, "forbidden"))
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Webhook deliveries")
{}
