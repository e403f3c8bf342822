import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { deleteApiKey, issueApiKey, listApiKeys, revokeApiKey } from "../../services/ApiKeys.ts"
import { provideServiceContext } from "../../services/ServiceContext.ts"
import { Api } from "../Api.ts"
import { apiKeyToWire } from "../wire/Accounts.ts"

export const ApiKeysLive = HttpApiBuilder.group(Api, "apiKeys", (handlers) =>
  Effect.gen(function*() {
    const provide = yield* provideServiceContext

    return handlers
      .handle("list", ({ path }) => listApiKeys(path.project_id).pipe(Effect.map((rows) => ({ api_keys: rows.map(apiKeyToWire) })), provide))
      .handle("create", ({ path, payload }) =>
        issueApiKey(path.project_id, payload).pipe(Effect.map(({ key, row }) => ({ api_key: apiKeyToWire(row), key })), provide))
      .handle("revoke", ({ path }) => revokeApiKey(path.project_id, path.api_key_id).pipe(Effect.map(apiKeyToWire), provide))
      .handle("delete", ({ path }) => deleteApiKey(path.project_id, path.api_key_id).pipe(provide))
  }))
