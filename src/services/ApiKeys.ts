/** A project's API keys: listed by any member; issued, revoked and deleted by its managers (reference §5). */
import { Effect } from "effect"
import { inTransaction } from "../db/Db.ts"
import { ProjectsRepo } from "../db/repos/Projects.ts"
import { type CreateApiKey, EXPIRES_IN_SECONDS } from "../domain/Accounts.ts"
import { conflict, notFound } from "../domain/Errors.ts"
import { CurrentUser, MANAGERS } from "../domain/Principals.ts"
import { nowIso } from "../domain/Time.ts"
import { requireProjectRole } from "./Access.ts"
import { accessChanged } from "./LiveStreams.ts"
import type { ApiKeyId, ProjectId } from "../domain/Ids.ts"

export const listApiKeys = (projectId: ProjectId) =>
  Effect.gen(function*() {
    // Any member may read, so the only refusal is the non-member's 404.
    yield* requireProjectRole(projectId).pipe(Effect.catchTag("Forbidden", Effect.die))
    return yield* ProjectsRepo.apiKeysOf(projectId)
  })

/** A new key: its row, and the secret, returned this once. */
export const issueApiKey = (projectId: ProjectId, input: typeof CreateApiKey.Type) =>
  inTransaction(Effect.gen(function*() {
    yield* requireProjectRole(projectId, MANAGERS)
    const user = yield* CurrentUser
    return yield* ProjectsRepo.issueApiKey({
      projectId,
      name: input.name.trim(),
      expiresInSeconds: input.expires_in === null ? null : EXPIRES_IN_SECONDS[input.expires_in],
      createdBy: user.userId
    })
  })).pipe(Effect.withSpan("ApiKeys.issueApiKey", { attributes: { "project.id": projectId } }))

export const revokeApiKey = (projectId: ProjectId, apiKeyId: ApiKeyId) =>
  inTransaction(Effect.gen(function*() {
    yield* requireProjectRole(projectId, MANAGERS)
    const row = yield* ProjectsRepo.apiKey(projectId, apiKeyId)
    // A second revoke is a 404, as in the reference: there is no live key with that id any more.
    if (row === undefined || row.revoked_at !== null) return yield* notFound("API key")
    const now = yield* nowIso
    yield* ProjectsRepo.revokeApiKey(row.id, now)
    return { ...row, revoked_at: now }
  })).pipe(
    Effect.tap(() => accessChanged), // its streams end too, on every replica
    Effect.withSpan("ApiKeys.revokeApiKey", { attributes: { "project.id": projectId } })
  )

export const deleteApiKey = (projectId: ProjectId, apiKeyId: ApiKeyId) =>
  inTransaction(Effect.gen(function*() {
    yield* requireProjectRole(projectId, MANAGERS)
    const row = yield* ProjectsRepo.apiKey(projectId, apiKeyId)
    if (row === undefined) return yield* notFound("API key")
    if (row.revoked_at === null) return yield* conflict("api_key_must_be_revoked", "Revoke the API key before deleting it")
    yield* ProjectsRepo.deleteApiKey(row.id, yield* nowIso)
    return { id: row.id, deleted: true as const }
  })).pipe(Effect.withSpan("ApiKeys.deleteApiKey", { attributes: { "project.id": projectId } }))
