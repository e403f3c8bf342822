/**
 * The whole HTTP contract: every group, the API-level errors every route can answer with, and the OpenAPI
 * annotations. Plain values only; handlers live in `handlers/`, wiring in `Http.ts`.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import {
  BadRequest,
  failsWith,
  InternalError,
  NotFound,
  PayloadTooLarge,
  ServiceUnavailable,
  Unprocessable,
  UnsupportedMediaType
} from "../domain/Errors.ts"
import { ApiKeysApi } from "./groups/ApiKeysApi.ts"
import { BillingApi } from "./groups/BillingApi.ts"
import { EventsApi } from "./groups/EventsApi.ts"
import { MembersApi } from "./groups/MembersApi.ts"
import { OrganizationsApi } from "./groups/OrganizationsApi.ts"
import { ProjectsApi } from "./groups/ProjectsApi.ts"
import { ProviderCredentialsApi } from "./groups/ProviderCredentialsApi.ts"
import { EndpointsApi } from "./groups/EndpointsApi.ts"
import { EnvironmentsApi } from "./groups/EnvironmentsApi.ts"
import { ComputerApi } from "./groups/ComputerApi.ts"
import { FilesystemApi } from "./groups/FilesystemApi.ts"
import { OperationsApi } from "./groups/OperationsApi.ts"
import { ProcessesApi } from "./groups/ProcessesApi.ts"
import { ProjectOperationsApi } from "./groups/ProjectOperationsApi.ts"
import { ProjectSandboxesApi } from "./groups/ProjectSandboxesApi.ts"
import { ProjectProcessesApi } from "./groups/ProjectProcessesApi.ts"
import { ProjectFilesystemApi } from "./groups/ProjectFilesystemApi.ts"
import { ProjectEndpointsApi } from "./groups/ProjectEndpointsApi.ts"
import { SandboxesApi } from "./groups/SandboxesApi.ts"
import { SessionsApi } from "./groups/SessionsApi.ts"
import { SystemApi } from "./groups/SystemApi.ts"
import { WebhookDeliveriesApi } from "./groups/WebhookDeliveriesApi.ts"
import { WebhooksApi } from "./groups/WebhooksApi.ts"
import { documentTransform } from "./OpenApiTransform.ts"

export class Api extends HttpApi.make("sandbox-gateway")
  .add(SystemApi)
  .add(SessionsApi)
  .add(OrganizationsApi)
  .add(MembersApi)
  .add(ProjectsApi)
  .add(ApiKeysApi)
  .add(EventsApi)
  .add(BillingApi)
  .add(WebhooksApi)
  .add(WebhookDeliveriesApi)
  .add(ProviderCredentialsApi)
  .add(SandboxesApi)
  .add(EnvironmentsApi)
  .add(ProjectSandboxesApi)
  .add(OperationsApi)
  .add(ProjectOperationsApi)
  .add(ProcessesApi)
  .add(FilesystemApi)
  .add(EndpointsApi)
  .add(ProjectProcessesApi)
  .add(ProjectFilesystemApi)
  .add(ProjectEndpointsApi)
  .add(ComputerApi)
  // What any route can answer with, from the server itself (ErrorEnvelope.ts, BodyLimits.ts); each route adds its own.
  .addError(failsWith(BadRequest, "invalid_json"))
  .addError(failsWith(NotFound, "not_found"))
  .addError(failsWith(PayloadTooLarge, "payload_too_large"))
  .addError(failsWith(UnsupportedMediaType, "unsupported_media_type"))
  .addError(failsWith(Unprocessable, "validation_error"))
  .addError(failsWith(InternalError, "internal_error"))
  .addError(failsWith(ServiceUnavailable, "database_busy"))
  .annotateContext(
    OpenApi.annotations({
      title: "Sandbox Gateway API",
      version: "1.0.0",
      description:
        "One REST API that creates and drives compute sandboxes on eleven providers, plus organizations, members, projects, API keys, billing, usage and webhooks. Every error body is `{code, message, request_id, retryable, details?}`.",
      transform: documentTransform
    })
  )
{}
