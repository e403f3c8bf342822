/**
 * Project API keys as credentials: a live key resolves to its project; revoked, expired, deleted keys, keys of a
 * deleted project and user tokens do not. (Key-authenticated routes are the sandbox plane's; this checks the
 * resolver they use, against a real SQLite file written by the CLI.)
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { AppConfig } from "../../src/Config.ts"
import { DatabaseLive } from "../../src/db/Database.ts"
import { Credentials, CredentialsLive } from "../../src/services/Credentials.ts"
import { bootstrap, tempDataDir } from "../support/server.ts"
import { databaseUrlFor } from "../support/postgres.ts"

const layerFor = (dataDir: string) =>
  CredentialsLive.pipe(
    Layer.provideMerge(DatabaseLive),
    Layer.provide(Layer.succeed(AppConfig, { port: 0, host: "127.0.0.1", dataDir, databaseUrl: databaseUrlFor(dataDir), publicUrl: "http://x", publicUrlSet: true, logLevel: "info", maxBodyBytes: 1, rawWriteMaxBytes: 1 << 30, endpoints: { port: 0, host: "127.0.0.1", publicOrigin: undefined, base: undefined } }))
  )

describe("Credentials.resolveApiKey", () => {
  it.live("resolves live keys only", () =>
    Effect.gen(function*() {
      const dataDir = tempDataDir("creds")
      const a = yield* Effect.promise(() => bootstrap(dataDir, "keys-a@example.com", { init: true }))
      const b = yield* Effect.promise(() => bootstrap(dataDir, "keys-b@example.com"))
      const c = yield* Effect.promise(() => bootstrap(dataDir, "keys-c@example.com"))
      const d = yield* Effect.promise(() => bootstrap(dataDir, "keys-d@example.com"))
      yield* Effect.gen(function*() {
        const credentials = yield* Credentials
        const sql = yield* SqlClient.SqlClient
        const live = yield* credentials.resolveApiKey(a.api_key)
        expect(Option.getOrThrow(live)).toMatchObject({ projectId: a.project_id, organizationId: a.organization_id })
        const keyRow = (yield* sql<{ last_used_at: string | null }>`SELECT last_used_at FROM api_keys WHERE project_id = ${a.project_id}`)[0]
        expect(keyRow?.last_used_at).not.toBeNull()

        yield* sql`UPDATE api_keys SET revoked_at = '2020-01-01T00:00:00.000Z' WHERE project_id = ${b.project_id}`
        expect(Option.isNone(yield* credentials.resolveApiKey(b.api_key))).toBe(true)
        yield* sql`UPDATE api_keys SET expires_at = '2020-01-01T00:00:00.000Z' WHERE project_id = ${c.project_id}`
        expect(Option.isNone(yield* credentials.resolveApiKey(c.api_key))).toBe(true)
        yield* sql`UPDATE projects SET deleted_at = '2020-01-01T00:00:00.000Z' WHERE id = ${d.project_id}`
        expect(Option.isNone(yield* credentials.resolveApiKey(d.api_key))).toBe(true)
        expect(Option.isNone(yield* credentials.resolveApiKey(a.user_token))).toBe(true)
        expect(Option.isNone(yield* credentials.resolveApiKey(`${a.api_key}x`))).toBe(true)
        expect(Option.isSome(yield* credentials.resolveUserToken(a.user_token))).toBe(true)
        expect(Option.isNone(yield* credentials.resolveUserToken(a.api_key))).toBe(true)
      }).pipe(Effect.provide(layerFor(dataDir)))
    }), 180_000) // four CLI runs, each a program start
})
