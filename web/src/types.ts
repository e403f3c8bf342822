/**
 * The wire shapes the dashboard reads, as the server's own contract declares them (type-only imports of its
 * Schemas: nothing of the server is bundled). `Wire<S>` is the JSON a route answers.
 */
import type { Schema } from "effect"
import type { ApiKeyList, CreatedApiKey, DurableEvent, Invitation, Member, MembersList, Organization, Project } from "../../src/domain/Accounts.ts"
import type { OrganizationBilling, OrganizationUsage } from "../../src/domain/Billing.ts"
import type { SandboxMetrics } from "../../src/domain/Metrics.ts"
import type { Operation } from "../../src/domain/Operation.ts"
import type { ProviderCredential } from "../../src/domain/ProviderCredentials.ts"
import type { Capabilities, Endpoint, Process, RuntimeOperation } from "../../src/domain/Runtime.ts"
import type { Sandbox, SandboxMutation, SandboxRequest } from "../../src/domain/Sandbox.ts"
import type { Session } from "../../src/domain/Sessions.ts"
import type { WebhookDelivery, WebhookEndpoint, WebhookWithSecret } from "../../src/domain/Webhooks.ts"

export type Wire<S extends Schema.Schema.Any> = Schema.Schema.Encoded<S>

export type SessionW = Wire<typeof Session>
export type OrganizationW = Wire<typeof Organization>
export type ProjectW = Wire<typeof Project>
export type MemberW = Wire<typeof Member>
export type InvitationW = Wire<typeof Invitation>
export type MembersW = Wire<typeof MembersList>
export type ApiKeysW = Wire<typeof ApiKeyList>
export type CreatedApiKeyW = Wire<typeof CreatedApiKey>
export type EventW = Wire<typeof DurableEvent>
export type BillingW = Wire<typeof OrganizationBilling>
export type UsageW = Wire<typeof OrganizationUsage>
export type SandboxW = Wire<typeof Sandbox>
export type SandboxRequestW = Wire<typeof SandboxRequest>
export type MutationW = Wire<typeof SandboxMutation>
export type OperationW = Wire<typeof Operation>
export type CapabilitiesW = Wire<typeof Capabilities>
export type ProcessW = Wire<typeof Process>
export type RuntimeOperationW = Wire<typeof RuntimeOperation>
export type EndpointW = Wire<typeof Endpoint>
export type MetricsW = Wire<typeof SandboxMetrics>
export type WebhookW = Wire<typeof WebhookEndpoint>
export type WebhookWithSecretW = Wire<typeof WebhookWithSecret>
export type DeliveryW = Wire<typeof WebhookDelivery>
export type ProviderCredentialW = Wire<typeof ProviderCredential>
