/**
 * Configuration from environment variables (DESIGN.md §7), validated once at start with a clear message.
 */
import { Config, Context, Effect, Layer } from "effect"
import * as path from "node:path"
import { secureDataDir } from "./runtime/DataDir.ts"

export interface AppConfigShape {
  readonly port: number
  readonly host: string
  readonly dataDir: string
  /** Base of endpoint URLs; when PUBLIC_URL is unset it follows the address the server really listens on. */
  readonly publicUrl: string
  readonly publicUrlSet: boolean
  readonly logLevel: string
  /** Largest request body accepted, in bytes (a 10 MiB file write is ~14 MiB of base64 JSON). */
  readonly maxBodyBytes: number
}

export class AppConfig extends Context.Tag("app/AppConfig")<AppConfig, AppConfigShape>() {}

export const appConfig = Effect.gen(function*() {
  const port = yield* Config.integer("PORT").pipe(
    Config.withDefault(8080),
    Config.validate({ message: "PORT must be between 0 and 65535", validation: (p) => p >= 0 && p <= 65535 })
  )
  const host = yield* Config.string("HOST").pipe(Config.withDefault("127.0.0.1"))
  const dataDir = path.resolve(yield* Config.string("DATA_DIR").pipe(Config.withDefault("./data")))
  const explicitUrl = yield* Config.option(Config.string("PUBLIC_URL"))
  const publicUrl = (explicitUrl._tag === "Some" ? explicitUrl.value : `http://${host}:${port}`).replace(/\/+$/, "")
  const logLevel = yield* Config.literal("trace", "debug", "info", "warning", "error", "none")("LOG_LEVEL").pipe(Config.withDefault("info"))
  const maxBodyBytes = yield* Config.integer("MAX_BODY_BYTES").pipe(Config.withDefault(16 * 1024 * 1024))
  // 0700, and everything already in it 0700 / 0600 (the database, its WAL and the secrets key included).
  secureDataDir(dataDir)
  return { port, host, dataDir, publicUrl, publicUrlSet: explicitUrl._tag === "Some", logLevel, maxBodyBytes } satisfies AppConfigShape
})

export const AppConfigLive = Layer.effect(AppConfig, appConfig)
