/**
 * Resolves bearer credentials to principals. Only SHA-256 hashes are stored; `last_used_at` is refreshed at
 * most once a minute per credential so that reads do not turn every request into a write.
 */
import { Context, Effect, Layer, Option } from "effect"
import { ProjectsRepo } from "../db/repos/Projects.ts"
import { type UserCredentialKind, UsersRepo } from "../db/repos/Users.ts"
import type { KeyPrincipal, UserPrincipal } from "../domain/Principals.ts"
import { nowIso } from "../domain/Time.ts"
import { sha256Hex } from "../domain/Tokens.ts"

const LAST_USED_GRANULARITY_MS = 60_000

export interface CredentialsShape {
  readonly resolveUserToken: (raw: string) => Effect.Effect<Option.Option<UserPrincipal>>
  /** A dashboard session's cookie value: the user it signs in, as a user token would (never a bearer). */
  readonly resolveSession: (raw: string) => Effect.Effect<Option.Option<UserPrincipal>>
  readonly resolveApiKey: (raw: string) => Effect.Effect<Option.Option<KeyPrincipal>>
}

export class Credentials extends Context.Tag("app/Credentials")<Credentials, CredentialsShape>() {}

/** Whether `last_used_at` is due to be written again (at most once a minute, so reads stay reads). */
export const lastUsedIsStale = (lastUsed: string | null, now: string) =>
  lastUsed === null || Date.parse(now) - Date.parse(lastUsed) >= LAST_USED_GRANULARITY_MS

export const CredentialsLive = Layer.effect(
  Credentials,
  Effect.gen(function*() {
    const users = yield* UsersRepo
    const projects = yield* ProjectsRepo

    const resolveUser = (raw: string, kind: UserCredentialKind) =>
      Effect.gen(function*() {
        const now = yield* nowIso
        const row = yield* users.liveTokenByHash(sha256Hex(raw), kind)
        if (row === undefined || (row.expires_at !== null && row.expires_at <= now)) return Option.none<UserPrincipal>()
        if (lastUsedIsStale(row.last_used_at, now)) yield* users.touchToken(row.id, now)
        return Option.some<UserPrincipal>({ userId: row.user_id, email: row.email, tokenId: row.id })
      })

    const resolveApiKey = (raw: string) =>
      Effect.gen(function*() {
        const now = yield* nowIso
        const row = yield* projects.liveApiKeyByHash(sha256Hex(raw))
        if (row === undefined || (row.expires_at !== null && row.expires_at <= now)) return Option.none<KeyPrincipal>()
        if (lastUsedIsStale(row.last_used_at, now)) yield* projects.touchApiKey(row.id, now)
        return Option.some<KeyPrincipal>({ keyId: row.id, projectId: row.project_id, organizationId: row.organization_id })
      })

    return { resolveUserToken: (raw: string) => resolveUser(raw, "token"), resolveSession: (raw: string) => resolveUser(raw, "session"), resolveApiKey }
  })
)
