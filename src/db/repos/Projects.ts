/** Projects and project API keys. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { conflict } from "../../domain/Errors.ts"
import { newId, newUuid } from "../../domain/Ids.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import { API_KEY_PREFIX, randomToken, sha256Hex } from "../../domain/Tokens.ts"

export interface ProjectRow {
  readonly id: string
  readonly organization_id: string
  readonly name: string
  readonly slug: string
  readonly created_at: string
  readonly updated_at: string
  readonly deleted_at: string | null
}

export const projectToWire = (row: ProjectRow) => ({
  id: row.id,
  organization_id: row.organization_id,
  name: row.name,
  slug: row.slug,
  created_at: row.created_at,
  updated_at: row.updated_at
})

const slugTaken = (slug: string) => (e: { readonly cause?: unknown }) =>
  String((e.cause as { code?: string } | undefined)?.code ?? "").startsWith("SQLITE_CONSTRAINT")
    ? conflict("conflict", `The slug "${slug}" is already used by another project of this organization`, { field: "slug" })
    : Effect.die(e)

export const getProject = (id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<ProjectRow>`SELECT * FROM projects WHERE id = ${id} AND deleted_at IS NULL`).pipe(
    Effect.map((rows) => rows[0]),
    Effect.orDie
  )

export const projectsOf = (organizationId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<ProjectRow>`SELECT * FROM projects WHERE organization_id = ${organizationId} AND deleted_at IS NULL ORDER BY created_at, id`).pipe(Effect.orDie)

export const insertProject = (input: { readonly organizationId: string; readonly name: string; readonly slug: string }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    const row: ProjectRow = { id: newId("prj"), organization_id: input.organizationId, name: input.name, slug: input.slug, created_at: now, updated_at: now, deleted_at: null }
    yield* sql`INSERT INTO projects ${sql.insert({ ...row })}`.pipe(Effect.catchTag("SqlError", slugTaken(input.slug)))
    return row
  })

export const updateProject = (id: string, input: { readonly name: string; readonly slug: string }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    yield* sql`UPDATE projects SET name = ${input.name}, slug = ${input.slug}, updated_at = ${now} WHERE id = ${id} AND deleted_at IS NULL`.pipe(
      Effect.catchTag("SqlError", slugTaken(input.slug))
    )
    return (yield* getProject(id))!
  })

export interface ApiKeyRow {
  readonly id: string
  readonly project_id: string
  readonly name: string
  readonly prefix: string
  readonly created_at: string
  readonly last_used_at: string | null
  readonly expires_at: string | null
  readonly revoked_at: string | null
  readonly deleted_at: string | null
}

export const apiKeyToWire = (row: ApiKeyRow) => ({
  id: row.id,
  project_id: row.project_id,
  name: row.name,
  prefix: row.prefix,
  created_at: row.created_at,
  last_used_at: row.last_used_at,
  expires_at: row.expires_at,
  revoked_at: row.revoked_at,
  deleted_at: row.deleted_at
})

const KEY_COLUMNS = "id, project_id, name, prefix, created_at, last_used_at, expires_at, revoked_at, deleted_at"

/** Issues a key: only its SHA-256 is kept; the full value is returned this once. */
export const issueApiKey = (input: { readonly projectId: string; readonly name: string; readonly expiresInSeconds: number | null; readonly createdBy: string | null }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    const key = randomToken(API_KEY_PREFIX)
    const row: ApiKeyRow = {
      id: newUuid(),
      project_id: input.projectId,
      name: input.name,
      prefix: key.slice(0, 20),
      created_at: now,
      last_used_at: null,
      expires_at: input.expiresInSeconds === null ? null : isoAfter(now, input.expiresInSeconds),
      revoked_at: null,
      deleted_at: null
    }
    yield* sql`INSERT INTO api_keys ${sql.insert({ ...row, key_hash: sha256Hex(key), created_by: input.createdBy })}`
    return { row, key }
  }).pipe(Effect.orDie)

export const apiKeysOf = (projectId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<ApiKeyRow>`SELECT ${sql.unsafe(KEY_COLUMNS)} FROM api_keys WHERE project_id = ${projectId} AND deleted_at IS NULL ORDER BY created_at, id`).pipe(Effect.orDie)

export const getApiKey = (projectId: string, id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<ApiKeyRow>`SELECT ${sql.unsafe(KEY_COLUMNS)} FROM api_keys WHERE id = ${id} AND project_id = ${projectId} AND deleted_at IS NULL`).pipe(
      Effect.map((rows) => rows[0]),
      Effect.orDie
    )
