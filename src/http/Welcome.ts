/**
 * A person's first minutes (README "Quick start"): what the server says when it starts — where the API, its docs
 * and the endpoints are, and, on a gateway without users, the exact command that makes the first one for this
 * DATA_DIR or DATABASE_URL. The front door, `GET /`, is the dashboard (Dashboard.ts).
 */
import { HttpServer } from "@effect/platform"
import { Effect } from "effect"
import { AppConfig, type AppConfigShape, displayDatabaseUrl } from "../Config.ts"
import { hasUsers as anyUser } from "../services/Sessions.ts"
import type { EndpointAddressing } from "../domain/EndpointAddress.ts"
import { shellWord } from "../domain/Shell.ts"
import { GATEWAY_VERSION } from "../domain/Version.ts"
import { EndpointOrigin } from "./EndpointProxy.ts"

/** The command that bootstraps this gateway: its DATA_DIR (and DATABASE_URL, password hidden) and the CLI. */
export const bootstrapCommand = (config: Pick<AppConfigShape, "dataDir" | "databaseUrl">, operatorCommand: string) =>
  [
    `DATA_DIR=${shellWord(config.dataDir)}`,
    ...(config.databaseUrl === undefined ? [] : [`DATABASE_URL=${shellWord(displayDatabaseUrl(config.databaseUrl))}`]),
    operatorCommand,
    "bootstrap --email you@example.com --json"
  ].join(" ")

const endpointsAt = (addressing: EndpointAddressing) =>
  addressing._tag === "path" ? addressing.origin : `${addressing.scheme}://<endpoint>.${addressing.baseHost}${addressing.port === "" ? "" : `:${addressing.port}`}`

/** What the server prints once it listens. */
export const welcomeText = (input: {
  readonly apiOrigin: string
  readonly endpoints: EndpointAddressing
  readonly config: Pick<AppConfigShape, "dataDir" | "databaseUrl">
  readonly hasUsers: boolean
  readonly operatorCommand: string
}) => {
  const { apiOrigin, config } = input
  const lines = [
    `Sandbox Gateway ${GATEWAY_VERSION} is up.`,
    `  Dashboard  ${apiOrigin}/   (sign in: ${input.operatorCommand} login-link --email <email>)`,
    `  API        ${apiOrigin}/v1   (OpenAPI: ${apiOrigin}/v1/openapi.json)`,
    `  Docs       ${apiOrigin}/docs`,
    `  Endpoints  ${endpointsAt(input.endpoints)}`,
    `  Data       ${config.dataDir}${config.databaseUrl === undefined ? " (SQLite)" : `, database ${displayDatabaseUrl(config.databaseUrl)}`}`
  ]
  if (!input.hasUsers) {
    lines.push(
      "No user yet. Make the first one (with an organization, a project, a user token and a project API key):",
      `  ${bootstrapCommand(config, input.operatorCommand)}`
    )
    if (config.databaseUrl !== undefined && displayDatabaseUrl(config.databaseUrl) !== config.databaseUrl) {
      lines.push("  (with the server's DATABASE_URL: its password is not shown here)")
    }
  }
  return lines.join("\n")
}

/** Prints where everything is (always, whatever LOG_LEVEL says: operators and the test harness read it). */
export const announce = (operatorCommand: string) =>
  Effect.gen(function*() {
    const address = (yield* HttpServer.HttpServer).address
    const listening = address._tag === "TcpAddress" ? `http://${address.hostname}:${address.port}` : address.path
    const config = yield* AppConfig
    const hasUsers = yield* anyUser
    // One write: whoever reads "Listening on" has the rest too.
    console.log(`Listening on ${listening}\n${welcomeText({
      apiOrigin: config.publicUrlSet ? config.publicUrl : listening,
      endpoints: (yield* EndpointOrigin).addressing,
      config,
      hasUsers,
      operatorCommand
    })}`)
  })
