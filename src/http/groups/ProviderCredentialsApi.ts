/** Bring-your-own-key provider credentials (reference §2). Secrets are sealed at rest and never returned. */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { failsWith, Forbidden, NotFound } from "../../domain/Errors.ts"
import { CredentialProviderName, ProviderCredential, ProviderCredentialInput, ProviderCredentialList, ProviderCredentialRemoved } from "../../domain/ProviderCredentials.ts"
import { UserAuth } from "../Security.ts"
import { organizationIdParam } from "./Common.ts"

const providerParam = HttpApiSchema.param("provider", CredentialProviderName)

export class ProviderCredentialsApi extends HttpApiGroup.make("providerCredentials")
  .add(
    HttpApiEndpoint.get("list")`/v1/organizations/${organizationIdParam}/provider-credentials`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(ProviderCredentialList)
  )
  .add(
    HttpApiEndpoint.put("put")`/v1/organizations/${organizationIdParam}/provider-credentials/${providerParam}`
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(ProviderCredentialInput)
      .addSuccess(ProviderCredential, { status: 201 })
      .addSuccess(ProviderCredential)
  )
  .add(
    HttpApiEndpoint.del("delete")`/v1/organizations/${organizationIdParam}/provider-credentials/${providerParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(ProviderCredentialRemoved)
  )
  // A member of another organization, or one whose role may not do this.
  .addError(failsWith(Forbidden, "forbidden"))
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Provider credentials")
  .annotate(OpenApi.Description, "Bring your own provider account: PUT merges over the stored value (201 configured, 200 replaced).")
{}
