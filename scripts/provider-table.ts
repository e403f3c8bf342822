/**
 * The provider table of docs/providers.md (`bun scripts/provider-table.ts`), built from what each plugin declares in remote
 * mode (its real provider) and what its emulator keeps of that; test/architecture/provider-table.test.ts checks
 * docs/providers.md's table is this one, so neither can drift from the code.
 */
import { ConfigProvider, Effect, Layer, type Scope } from "effect"
import { AppConfig } from "../src/Config.ts"
import { LocalRuntime } from "../src/runtime/LocalRuntime.ts"
import { PLUGINS } from "../providers/index.ts"
import type { SandboxProvider } from "../src/providers/Provider.ts"
import { CREDENTIAL_FIELDS } from "../src/domain/ProviderCredentials.ts"

/** Remote mode for every plugin: credentials that are never used (nothing is called while building). */
const REMOTE_ENV: ReadonlyArray<[string, string]> = [
  ["BL_API_KEY", "k"], ["BL_WORKSPACE", "w"],
  ["CLOUDFLARE_SANDBOX_API_URL", "https://bridge.invalid"], ["CLOUDFLARE_SANDBOX_API_KEY", "k"],
  ["CODESANDBOX_API_KEY", "k"], ["DAYTONA_API_KEY", "k"], ["E2B_API_KEY", "k"], ["FREESTYLE_API_KEY", "k"],
  ["MODAL_TOKEN_ID", "i"], ["MODAL_TOKEN_SECRET", "s"], ["NORTHFLANK_API_TOKEN", "k"], ["NORTHFLANK_PROJECT_ID", "p"],
  ["PRIME_API_KEY", "k"], ["RUNLOOP_API_KEY", "k"], ["VERCEL_TOKEN", "k"], ["VERCEL_PROJECT_ID", "p"]
]

const yes = (v: boolean | undefined) => (v === true ? "✓" : "–")

export const providerRows = async (): Promise<ReadonlyArray<string>> => {
  const providers = await Effect.runPromise(
    Effect.scoped(Effect.all(PLUGINS.map((plugin) => plugin as Effect.Effect<SandboxProvider | null, unknown, AppConfig | LocalRuntime | Scope.Scope>))).pipe(
      Effect.provide(Layer.mergeAll(
        Layer.succeed(AppConfig, {} as AppConfig["Type"]),
        Layer.succeed(LocalRuntime, {} as LocalRuntime["Type"])
      )),
      Effect.withConfigProvider(ConfigProvider.fromMap(new Map(REMOTE_ENV))),
      Effect.orDie
    )
  )
  return providers.flatMap((p) => {
    if (p === null) return []
    const c = p.capabilities
    const files = c.files
    const writes = files === null || !files.write ? "–" : `${files.writeModes.join(", ")}${p.writeFileStream !== undefined ? "; streamed" : ""}`
    const network = c.network === null ? "–" : [c.network.blockInternet ? "off switch" : "", c.network.allowDomains ? "allow list" : "", c.network.denyDomains ? "deny list" : ""].filter(Boolean).join(", ") || "–"
    const byok = CREDENTIAL_FIELDS[p.name].required.join(", ") + (CREDENTIAL_FIELDS[p.name].optional.length > 0 ? ` (+ ${CREDENTIAL_FIELDS[p.name].optional.join(", ")})` : "")
    return [`| ${p.name} | ${c.sources.join(", ")} | ${c.sizing} | ${yes(c.process?.execute)} | ${yes(p.sendInput !== undefined && c.process?.stdin !== false)} | ${yes(c.process?.terminal)} | ${yes(c.process?.cancel)} | ${files?.read === true ? "✓" : "–"} | ${writes} | ${yes(c.httpEndpoints?.expose)} | ${yes(c.computer != null && p.computer !== undefined)} | ${yes(c.pause && c.resume)} | ${network} | ${byok} |`]
  })
}

export const TABLE_HEADER = [
  "| provider | sources | sizing | exec | stdin | terminal | cancel | read | write | endpoints | desktop | pause | network | BYOK fields |",
  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
]

if (import.meta.main) console.log([...TABLE_HEADER, ...(await providerRows())].join("\n"))
