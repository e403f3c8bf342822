/** Billing and usage (spec §4.8; reference §2 "Billing and usage"). No payment processor in self-hosted mode. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Conflict, failsWith, Forbidden, NotFound } from "../../domain/Errors.ts"
import { AutoTopupSettings, BillingQuote, OrganizationBilling, OrganizationUsage, QuoteParams, UsageParams } from "../../domain/Billing.ts"
import { UserAuth } from "../Security.ts"
import { organizationIdParam } from "./Common.ts"

export class BillingApi extends HttpApiGroup.make("billing")
  .add(
    HttpApiEndpoint.get("get")`/v1/organizations/${organizationIdParam}/billing`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(OrganizationBilling)
  )
  .add(
    HttpApiEndpoint.get("quote")`/v1/organizations/${organizationIdParam}/billing/quote`
      .addError(failsWith(NotFound, "not_found"))
      .setUrlParams(QuoteParams)
      .addSuccess(BillingQuote)
  )
  .add(
    HttpApiEndpoint.put("autoTopup")`/v1/organizations/${organizationIdParam}/billing/auto-topup`
      .addError(failsWith(Conflict, "conflict"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(AutoTopupSettings)
      .addSuccess(OrganizationBilling)
  )
  .add(
    HttpApiEndpoint.get("usage")`/v1/organizations/${organizationIdParam}/usage`
      .addError(failsWith(NotFound, "not_found"))
      .setUrlParams(UsageParams)
      .addSuccess(OrganizationUsage)
  )
  // A member of another organization, or one whose role may not do this.
  .addError(failsWith(Forbidden, "forbidden"))
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Billing")
  .annotate(OpenApi.Description, "Prepaid credit in micro-USD: balance, ledger, purchases, auto top-up settings, quotes and usage.")
{}
