import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { billingFor, purchaseQuote, setAutoTopup, usageFor } from "../../services/Billing.ts"
import { provideServiceContext } from "../../services/ServiceContext.ts"
import { Api } from "../Api.ts"

export const BillingLive = HttpApiBuilder.group(Api, "billing", (handlers) =>
  Effect.gen(function*() {
    const provide = yield* provideServiceContext

    return handlers
      .handle("get", ({ path }) => billingFor(path.organization_id).pipe(provide))
      .handle("quote", ({ path, urlParams }) => purchaseQuote(path.organization_id, urlParams.amount_usd).pipe(provide))
      .handle("autoTopup", ({ path, payload }) => setAutoTopup(path.organization_id, payload).pipe(provide))
      .handle("usage", ({ path, urlParams }) => usageFor(path.organization_id, urlParams).pipe(provide))
  }))
