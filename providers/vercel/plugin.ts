/**
 * The Vercel Sandbox plugin. `remote` when a token is set (VERCEL_TOKEN, or VERCEL_OIDC_TOKEN), which then needs
 * its project (VERCEL_PROJECT_ID: a token without one stops the gateway at start); VERCEL_TEAM_ID (sent as
 * `?teamId=`) and VERCEL_API_URL (default https://api.vercel.com) are optional. Otherwise `emulated`, against the
 * built-in emulator over the local runtime. BYOK: `token`, `project_id` and `team_id`.
 *
 * Differences from the brief, after the reference and Vercel's SDK (details in adapter/index.ts): create is
 * `POST /v3/sandboxes` (as Vercel's SDK 3.5 sends it; the reference's `/v4` is kept nowhere), but the named sandbox is read and deleted at `/v2/sandboxes/{name}` and every command and
 * file call goes to its session (`/v2/sandboxes/sessions/{session}/…`), not `/v3/sandboxes/{id}/…`; no HTTP
 * endpoints (Vercel's routes are fixed at create and cannot be revoked, reference §3.1 has none); cancel and the
 * internet switch are declared beyond the reference's row, as the SDK shows both.
 */
import { Config, ConfigError, Effect, type Scope } from "effect"
import type { AppConfig } from "../../src/Config.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { envValue } from "../core/env.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import type { SandboxProvider } from "../../src/providers/Provider.ts"
import { DEFAULT_API_URL, makeVercelProvider } from "./adapter/index.ts"
import { vercelEmulator } from "./emulator/index.ts"

export const VercelPlugin: Effect.Effect<SandboxProvider, ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const token = yield* envValue("VERCEL_TOKEN", "VERCEL_OIDC_TOKEN")
  if (token !== undefined) {
    const projectId = yield* envValue("VERCEL_PROJECT_ID")
    if (projectId === undefined) return yield* Effect.fail(ConfigError.MissingData(["VERCEL_PROJECT_ID"], "a Vercel token needs its project: set VERCEL_PROJECT_ID"))
    return makeVercelProvider({
      apiUrl: yield* Config.string("VERCEL_API_URL").pipe(Config.withDefault(DEFAULT_API_URL)),
      token,
      projectId,
      teamId: yield* envValue("VERCEL_TEAM_ID"),
      mode: "remote"
    })
  }
  const emulator = yield* vercelEmulator
  const provider = makeVercelProvider({ apiUrl: emulator.apiUrl, token: emulator.token, projectId: emulator.projectId, teamId: emulator.teamId, mode: "emulated" })
  return onLocalRuntime(provider, yield* LocalRuntime, emulator.runtimeIdOf)
})
