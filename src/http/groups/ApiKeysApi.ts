/**
 * Project API keys (spec §4.2; reference §2 "Projects, API keys" and §6): `metal_sk_…`, shown once at creation,
 * only its SHA-256 stored. Members list; owners and admins create, revoke, then delete. Non-members get 404.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Conflict, failsWith, Forbidden, NotFound } from "../../domain/Errors.ts"
import { ApiKeyList, CreateApiKey, CreatedApiKey, Deleted, ProjectApiKey } from "../../domain/Accounts.ts"
import { UserAuth } from "../Security.ts"
import { apiKeyIdParam, projectIdParam } from "./Common.ts"

export class ApiKeysApi extends HttpApiGroup.make("apiKeys")
  .add(
    HttpApiEndpoint.get("list")`/v1/projects/${projectIdParam}/api-keys`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(ApiKeyList)
      .annotate(OpenApi.Description, "Live and revoked keys of the project (deleted ones are hidden); never the key itself.")
  )
  .add(
    HttpApiEndpoint.post("create")`/v1/projects/${projectIdParam}/api-keys`
      .addError(failsWith(Forbidden, "forbidden"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(CreateApiKey)
      .addSuccess(CreatedApiKey, { status: 201 })
      .annotate(OpenApi.Description, "Issues a key; `key` is in this response only. `expires_in` is 1h…1y, or null (default) for no expiry.")
  )
  .add(
    HttpApiEndpoint.post("revoke")`/v1/projects/${projectIdParam}/api-keys/${apiKeyIdParam}/revoke`
      .addError(failsWith(Forbidden, "forbidden"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(ProjectApiKey)
      .annotate(OpenApi.Description, "Stops the key at once. Revoking an already revoked key is 404.")
  )
  .add(
    HttpApiEndpoint.del("delete")`/v1/projects/${projectIdParam}/api-keys/${apiKeyIdParam}`
      .addError(failsWith(Conflict, "api_key_must_be_revoked"))
      .addError(failsWith(Forbidden, "forbidden"))
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Deleted)
      .annotate(OpenApi.Description, "Hides a revoked key from the list; 409 `api_key_must_be_revoked` if it is still live.")
  )
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "API keys")
  .annotate(OpenApi.Description, "Project API keys for the sandbox routes, managed with a user access token.")
{}
