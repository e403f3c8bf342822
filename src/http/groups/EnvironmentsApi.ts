/**
 * The environment catalogue with a project key: which `source.environment` names and versions the gateway can
 * create, and on which configured providers (src/domain/Environments.ts).
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { EnvironmentList } from "../../domain/Environments.ts"
import { ProjectKeyAuth } from "../Security.ts"

export class EnvironmentsApi extends HttpApiGroup.make("environments")
  .add(
    HttpApiEndpoint.get("list", "/v1/environments")
      .addSuccess(EnvironmentList)
      .annotate(
        OpenApi.Description,
        "The environments a sandbox can be created from (`source: {kind: \"environment\", environment, version}`), their versions (`latest` when none is given) and the configured providers that create each. Another name or version is a 422 at `source.environment` or `source.version`, with the known ones in `details`."
      )
  )
  .middleware(ProjectKeyAuth)
  .annotate(OpenApi.Title, "Environments")
  .annotate(OpenApi.Description, "What `source.environment` can name.")
{}
