/**
 * Projects and their API keys: `projects`, `api_keys`. Slugs are unique among an organization's live projects
 * (409 `conflict`); of a key only its SHA-256 is stored.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { conflict } from "../../domain/Errors.ts"
import { type ApiKeyId, newApiKeyId, newId, type OrganizationId, type ProjectId, type UserId } from "../../domain/Ids.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import { API_KEY_PREFIX, randomToken, sha256Hex } from "../../domain/Tokens.ts"
import { Dialect } from "../Dialect.ts"
import { IdColumn, rowsOf, run } from "../Rows.ts"

export const ProjectRow = Schema.Struct({
  id: IdColumn.project,
  organization_id: IdColumn.organization,
  name: Schema.String,
  slug: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String,
  deleted_at: Schema.NullOr(Schema.String)
})
export type ProjectRow = typeof ProjectRow.Type

export const ApiKeyRow = Schema.Struct({
  id: IdColumn.apiKey,
  project_id: IdColumn.project,
  name: Schema.String,
  prefix: Schema.String,
  created_at: Schema.String,
  last_used_at: Schema.NullOr(Schema.String),
  expires_at: Schema.NullOr(Schema.String),
  revoked_at: Schema.NullOr(Schema.String),
  deleted_at: Schema.NullOr(Schema.String)
})
export type ApiKeyRow = typeof ApiKeyRow.Type

/** A live key as a credential: its project and organization (also read by src/db/FastReadQueries.ts). */
export const ApiKeyCredentialRow = Schema.Struct({
  id: IdColumn.apiKey,
  project_id: IdColumn.project,
  organization_id: IdColumn.organization,
  expires_at: Schema.NullOr(Schema.String),
  last_used_at: Schema.NullOr(Schema.String)
})
export type ApiKeyCredentialRow = typeof ApiKeyCredentialRow.Type

/** A live API key by the hash of its secret (revoked, deleted, or of a deleted project or organization: none). */
export const API_KEY_BY_HASH = `SELECT k.id, k.project_id, p.organization_id, k.expires_at, k.last_used_at
  FROM api_keys k JOIN projects p ON p.id = k.project_id JOIN organizations o ON o.id = p.organization_id
  WHERE k.key_hash = ? AND k.revoked_at IS NULL AND k.deleted_at IS NULL AND p.deleted_at IS NULL AND o.deleted_at IS NULL`

/** A key as a held-open stream's credential is re-checked (services/LiveStreams.ts): revoked, expired, or its project gone. */
export const ApiKeyStateRow = Schema.Struct({
  id: IdColumn.apiKey,
  expires_at: Schema.NullOr(Schema.String),
  /** When it was revoked (or deleted). */
  revoked_at: Schema.NullOr(Schema.String),
  /** When its project (or the project's organization) was deleted. */
  gone_at: Schema.NullOr(Schema.String)
})
export type ApiKeyStateRow = typeof ApiKeyStateRow.Type

const KEY_COLUMNS = "id, project_id, name, prefix, created_at, last_used_at, expires_at, revoked_at, deleted_at"

export class ProjectsRepo extends Effect.Service<ProjectsRepo>()("app/db/ProjectsRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    const projects = rowsOf("projects", ProjectRow)
    const keys = rowsOf("api_keys", ApiKeyRow)
    const credentials = rowsOf("api_keys", ApiKeyCredentialRow)
    const keyStates = rowsOf("api_keys", ApiKeyStateRow)

    const slugTaken = (slug: string) => (e: unknown) =>
      dialect.isUniqueViolation(e)
        ? conflict("conflict", `The slug "${slug}" is already used by another project of this organization`, { field: "slug" })
        : Effect.die(e)

    const get = (id: ProjectId) => projects.first(sql`SELECT * FROM projects WHERE id = ${id} AND deleted_at IS NULL`)

    return {
      get,
      ofOrganization: (organizationId: OrganizationId) =>
        projects.all(sql`SELECT * FROM projects WHERE organization_id = ${organizationId} AND deleted_at IS NULL ORDER BY created_at, id`),
      insert: (input: { readonly organizationId: OrganizationId; readonly name: string; readonly slug: string }) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const row: ProjectRow = { id: newId("prj"), organization_id: input.organizationId, name: input.name, slug: input.slug, created_at: now, updated_at: now, deleted_at: null }
          yield* sql`INSERT INTO projects ${sql.insert({ ...row })}`.pipe(Effect.catchTag("SqlError", slugTaken(input.slug)))
          return row
        }),
      update: (id: ProjectId, input: { readonly name: string; readonly slug: string }) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          yield* sql`UPDATE projects SET name = ${input.name}, slug = ${input.slug}, updated_at = ${now} WHERE id = ${id} AND deleted_at IS NULL`.pipe(
            Effect.catchTag("SqlError", slugTaken(input.slug))
          )
          return (yield* get(id))!
        }),
      softDelete: (id: ProjectId, now: string) => run(sql`UPDATE projects SET deleted_at = ${now}, updated_at = ${now} WHERE id = ${id}`),

      /** Issues a key: only its SHA-256 is kept; the full value is returned this once. */
      issueApiKey: (input: { readonly projectId: ProjectId; readonly name: string; readonly expiresInSeconds: number | null; readonly createdBy: UserId | null }) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const key = randomToken(API_KEY_PREFIX)
          const row: ApiKeyRow = {
            id: newApiKeyId(),
            project_id: input.projectId,
            name: input.name,
            prefix: key.slice(0, 20),
            created_at: now,
            last_used_at: null,
            expires_at: input.expiresInSeconds === null ? null : isoAfter(now, input.expiresInSeconds),
            revoked_at: null,
            deleted_at: null
          }
          yield* run(sql`INSERT INTO api_keys ${sql.insert({ ...row, key_hash: sha256Hex(key), created_by: input.createdBy })}`)
          return { row, key }
        }),
      apiKeysOf: (projectId: ProjectId) =>
        keys.all(sql`SELECT ${sql.literal(KEY_COLUMNS)} FROM api_keys WHERE project_id = ${projectId} AND deleted_at IS NULL ORDER BY created_at, id`),
      apiKey: (projectId: ProjectId, id: ApiKeyId) =>
        keys.first(sql`SELECT ${sql.literal(KEY_COLUMNS)} FROM api_keys WHERE id = ${id} AND project_id = ${projectId} AND deleted_at IS NULL`),
      revokeApiKey: (id: ApiKeyId, now: string) => run(sql`UPDATE api_keys SET revoked_at = ${now} WHERE id = ${id}`),
      deleteApiKey: (id: ApiKeyId, now: string) => run(sql`UPDATE api_keys SET deleted_at = ${now} WHERE id = ${id}`),
      liveApiKeyByHash: (keyHash: string) => credentials.first(sql.unsafe(dialect.positional(API_KEY_BY_HASH), [keyHash])),
      touchApiKey: (id: ApiKeyId, now: string) => run(sql`UPDATE api_keys SET last_used_at = ${now} WHERE id = ${id}`),
      /** The state of these keys as credentials, in one read (a key missing from the answer no longer exists). */
      apiKeyStates: (ids: ReadonlyArray<ApiKeyId>) =>
        ids.length === 0
          ? Effect.succeed<ReadonlyArray<ApiKeyStateRow>>([])
          : keyStates.all(sql`SELECT k.id, k.expires_at, COALESCE(k.revoked_at, k.deleted_at) AS revoked_at, COALESCE(p.deleted_at, o.deleted_at) AS gone_at
            FROM api_keys k JOIN projects p ON p.id = k.project_id JOIN organizations o ON o.id = p.organization_id WHERE k.id IN ${sql.in(ids)}`)
    }
  })
}) {}
