import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Db } from "../../db/Db.ts"
import { provideRepositories } from "../../db/Database.ts"
import { ProjectsRepo } from "../../db/repos/Projects.ts"
import { EXPIRES_IN_SECONDS } from "../../domain/Accounts.ts"
import { conflict, notFound } from "../../domain/Errors.ts"
import { CurrentUser, MANAGERS } from "../../domain/Principals.ts"
import { nowIso } from "../../domain/Time.ts"
import { requireProjectRole } from "../../services/Access.ts"
import { accessChanged } from "../../services/LiveStreams.ts"
import { Api } from "../Api.ts"
import { apiKeyToWire } from "../wire/Accounts.ts"

export const ApiKeysLive = HttpApiBuilder.group(Api, "apiKeys", (handlers) =>
  Effect.gen(function*() {
    const db = yield* Db
    const projects = yield* ProjectsRepo
    const provide = yield* provideRepositories
    const inTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>) => db.transaction(effect).pipe(provide)

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          // Any member may read, so the only refusal is the non-member's 404.
          yield* requireProjectRole(path.project_id).pipe(Effect.catchTag("Forbidden", Effect.die))
          return { api_keys: (yield* projects.apiKeysOf(path.project_id)).map(apiKeyToWire) }
        }).pipe(provide))
      .handle("create", ({ path, payload }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireProjectRole(path.project_id, MANAGERS)
          const user = yield* CurrentUser
          const { row, key } = yield* projects.issueApiKey({
            projectId: path.project_id,
            name: payload.name.trim(),
            expiresInSeconds: payload.expires_in === null ? null : EXPIRES_IN_SECONDS[payload.expires_in],
            createdBy: user.userId
          })
          return { api_key: apiKeyToWire(row), key }
        })))
      .handle("revoke", ({ path }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireProjectRole(path.project_id, MANAGERS)
          const row = yield* projects.apiKey(path.project_id, path.api_key_id)
          // A second revoke is a 404, as in the reference: there is no live key with that id any more.
          if (row === undefined || row.revoked_at !== null) return yield* notFound("API key")
          const now = yield* nowIso
          yield* projects.revokeApiKey(row.id, now)
          return apiKeyToWire({ ...row, revoked_at: now })
        })).pipe(Effect.tap(() => provide(accessChanged)))) // its streams end too, on every replica
      .handle("delete", ({ path }) =>
        inTransaction(Effect.gen(function*() {
          yield* requireProjectRole(path.project_id, MANAGERS)
          const row = yield* projects.apiKey(path.project_id, path.api_key_id)
          if (row === undefined) return yield* notFound("API key")
          if (row.revoked_at === null) return yield* conflict("api_key_must_be_revoked", "Revoke the API key before deleting it")
          yield* projects.deleteApiKey(row.id, yield* nowIso)
          return { id: row.id, deleted: true as const }
        })))
  }))
