/** Starts the gateway: `bun run start` (or the compiled binary), unless asked for the user CLI. Wiring lives in http/Http.ts. */
import { BunRuntime } from "@effect/platform-bun"
import { Config, Effect, Layer, Logger, LogLevel } from "effect"
import { HttpLive } from "./http/Http.ts"
import { USER_CLI_WORDS, userCliMain } from "../client/src/cli.ts"
import { emulateMain } from "../providers/emulate.ts"

/** LOG_LEVEL (default info) decides what is logged, the per-request access log included. */
const LoggingLive = Layer.unwrapEffect(
  Effect.map(
    Config.literal("trace", "debug", "info", "warning", "error", "none")("LOG_LEVEL").pipe(Config.withDefault("info" as const)),
    (level) => Logger.minimumLogLevel(level === "none" ? LogLevel.None : LogLevel.fromLiteral(level === "warning" ? "Warning" : (level.charAt(0).toUpperCase() + level.slice(1)) as LogLevel.Literal))
  )
)

// The binary is also the user CLI: `sandbox-gateway login …`, `sandbox-gateway sandbox …` (client/src/cli.ts).
// `sandbox-gateway emulate <provider…>` serves the providers' emulators on their own (providers/emulate.ts).
if (process.argv[2] === "emulate") await emulateMain(process.argv.slice(3))
else if (USER_CLI_WORDS.has(process.argv[2] ?? "")) await userCliMain(process.argv.slice(2))
else Layer.launch(HttpLive.pipe(Layer.provide(LoggingLive))).pipe(BunRuntime.runMain)
