/** Pieces shared by the group declarations: path parameters and headers. */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { ApiKeyId, OrganizationId, ProjectId, UserId, Uuid } from "../../domain/Ids.ts"

export const IdempotencyKey = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(512)).annotations({
  identifier: "IdempotencyKey",
  description: "Replaying a key with the same request returns the first answer; with a different one, 409 `idempotency_mismatch`"
})

/** Header keys are lower-case (that is how the server sees them). */
export const IdempotencyHeaders = Schema.Struct({ "idempotency-key": Schema.optional(IdempotencyKey) })

export const organizationIdParam = HttpApiSchema.param("organization_id", OrganizationId)
export const projectIdParam = HttpApiSchema.param("project_id", ProjectId)
export const userIdParam = HttpApiSchema.param("user_id", UserId)
export const invitationIdParam = HttpApiSchema.param("invitation_id", Uuid)
export const apiKeyIdParam = HttpApiSchema.param("api_key_id", ApiKeyId)
export const webhookIdParam = HttpApiSchema.param("webhook_id", Uuid)
