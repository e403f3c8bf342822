import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { ProviderCredential } from "../../domain/ProviderCredentials.ts"
import { listProviderCredentials, putProviderCredential, removeProviderCredential } from "../../services/ProviderCredentials.ts"
import { provideServiceContext } from "../../services/ServiceContext.ts"
import { Api } from "../Api.ts"
import { providerCredentialToWire as toWire } from "../wire/Accounts.ts"

export const ProviderCredentialsLive = HttpApiBuilder.group(Api, "providerCredentials", (handlers) =>
  Effect.gen(function*() {
    const provide = yield* provideServiceContext

    return handlers
      .handle("list", ({ path }) =>
        listProviderCredentials(path.organization_id).pipe(Effect.map((rows) => ({ provider_credentials: rows.map(toWire) })), provide))
      .handle("put", ({ path, payload }) =>
        putProviderCredential(path.organization_id, path.provider, payload).pipe(
          Effect.flatMap(({ created, row }) => HttpServerResponse.schemaJson(ProviderCredential)(toWire(row), { status: created ? 201 : 200 }).pipe(Effect.orDie)),
          provide
        ))
      .handle("delete", ({ path }) => removeProviderCredential(path.organization_id, path.provider).pipe(provide))
  }))
