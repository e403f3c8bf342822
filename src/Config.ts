/**
 * Configuration from environment variables (ARCHITECTURE.md §7), validated once at start with a clear message.
 */
import { Config, ConfigError, Context, Effect, Layer } from "effect"
import * as os from "node:os"
import * as path from "node:path"
import { secureDataDir, sharedDirectoryReason } from "./DataDir.ts"

/**
 * The endpoint listener (ARCHITECTURE.md §5): sandbox endpoints are served on their own listener, never on the API's
 * origin. Path mode (default): `<origin>/e/<id>/<token>/` on that listener. Host mode (ENDPOINT_BASE_URL): every
 * endpoint is its own origin, `ep-<id>-<token>.<base host>`, routed by the Host header.
 */
export interface EndpointListenerConfig {
  /** ENDPOINT_PORT: default PORT + 1 (0 when PORT is 0: any free port). */
  readonly port: number
  /** ENDPOINT_HOST: default HOST. */
  readonly host: string
  /** ENDPOINT_PUBLIC_URL: the origin clients reach the listener at in path mode; default the listener's address. */
  readonly publicOrigin: string | undefined
  /** ENDPOINT_BASE_URL: host mode, one origin per endpoint under this host name. */
  readonly base: { readonly scheme: "http" | "https"; readonly baseHost: string; readonly port: string } | undefined
}

export interface AppConfigShape {
  readonly port: number
  readonly host: string
  readonly dataDir: string
  /** The API's public URL (PUBLIC_URL, default http://HOST:PORT). Endpoints are never served on its origin. */
  readonly publicUrl: string
  /** Whether PUBLIC_URL was given. */
  readonly publicUrlSet: boolean
  readonly logLevel: string
  /** Largest request body accepted, in bytes (a 10 MiB file write is ~14 MiB of base64 JSON). */
  readonly maxBodyBytes: number
  /** Largest raw write (`PUT …/files/content`) on a provider that streams writes (RAW_WRITE_MAX_BYTES, 1 GiB). */
  readonly rawWriteMaxBytes: number
  readonly endpoints: EndpointListenerConfig
  /**
   * DATABASE_URL: a `postgres://` (or `postgresql://`) URL selects PostgreSQL (docs/operations/scaling-out.md); absent, the
   * embedded SQLite file under DATA_DIR.
   */
  readonly databaseUrl?: string | undefined
  /**
   * DATABASE_POOL_SIZE (PostgreSQL): connections per process, default 1. Larger pools are safe: every write that
   * must not interleave is ordered by the engine's own locks (the dialect's claims and reservations, per-parent
   * counters for numbered events), the same as between replicas.
   */
  readonly databasePoolSize?: number | undefined
  /** NODE_ID: this replica's id (default the host name); see `nodeIdOf`. */
  readonly nodeId?: string | undefined
  /** NODE_URL: where the other replicas reach this one (recorded with its heartbeat). */
  readonly nodeUrl?: string | undefined
  /** NODE_GRACE_SECONDS: a node silent this long is lost (its local sandboxes fail with `node_lost`); default 60. */
  readonly nodeGraceSeconds?: number | undefined
  /** CLUSTER_SECRET: signs the requests replicas forward to each other (services/Forwarding.ts). */
  readonly clusterSecret?: string | undefined
  /**
   * JOB_LEASE_SECONDS: how long a claimed job is leased (renewed every third of it while it runs); a crashed
   * process's jobs are taken over by the others when it runs out. Default 15.
   */
  readonly jobLeaseSeconds?: number | undefined
  /** JOB_MAX_ATTEMPTS: how many times a job whose failure is retryable runs before it fails for good. Default 8. */
  readonly jobMaxAttempts?: number | undefined
}

/** This replica's node id: NODE_ID, else the host name. */
export const nodeIdOf = (config: Pick<AppConfigShape, "nodeId">): string => config.nodeId ?? os.hostname()

export class AppConfig extends Context.Tag("app/AppConfig")<AppConfig, AppConfigShape>() {}

/** DATA_DIR as an absolute path (default ./data), read only: nothing is created (appConfig does that). */
export const dataDirConfig = Effect.map(
  // An empty DATA_DIR would be the working directory itself, made root's alone with everything in it: refused.
  Config.string("DATA_DIR").pipe(
    Config.withDefault("./data"),
    Config.validate({ message: "DATA_DIR must not be empty", validation: (dir) => dir.trim() !== "" })
  ),
  (dir) => path.resolve(dir)
)

export const appConfig = Effect.gen(function*() {
  const port = yield* Config.integer("PORT").pipe(
    Config.withDefault(8080),
    Config.validate({ message: "PORT must be between 0 and 65535", validation: (p) => p >= 0 && p <= 65535 })
  )
  const host = yield* Config.string("HOST").pipe(Config.withDefault("127.0.0.1"))
  const dataDir = yield* dataDirConfig
  const explicitUrl = yield* Config.option(Config.string("PUBLIC_URL"))
  const publicUrl = (explicitUrl._tag === "Some" ? explicitUrl.value : `http://${host}:${port}`).replace(/\/+$/, "")
  const logLevel = yield* Config.literal("trace", "debug", "info", "warning", "error", "none")("LOG_LEVEL").pipe(Config.withDefault("info"))
  const maxBodyBytes = yield* Config.integer("MAX_BODY_BYTES").pipe(Config.withDefault(16 * 1024 * 1024))
  const rawWriteMaxBytes = yield* Config.integer("RAW_WRITE_MAX_BYTES").pipe(
    Config.withDefault(1024 * 1024 * 1024),
    Config.validate({ message: "RAW_WRITE_MAX_BYTES must be a positive number of bytes", validation: (n) => n > 0 })
  )
  const endpoints = yield* endpointListenerConfig(port, host, publicUrl)
  const databaseUrl = yield* databaseUrlConfig
  const nodeId = yield* Config.string("NODE_ID").pipe(
    Config.withDefault(os.hostname()),
    Config.validate({ message: "NODE_ID must be 1 to 64 letters, digits, dots, hyphens or underscores", validation: (id) => /^[A-Za-z0-9._-]{1,64}$/.test(id) })
  )
  const nodeUrl = yield* Config.option(Config.string("NODE_URL"))
  const nodeGraceSeconds = yield* Config.integer("NODE_GRACE_SECONDS").pipe(
    Config.withDefault(60),
    Config.validate({ message: "NODE_GRACE_SECONDS must be between 5 and 86400", validation: (n) => n >= 5 && n <= 86400 })
  )
  const clusterSecret = yield* Config.option(Config.string("CLUSTER_SECRET").pipe(
    Config.validate({ message: "CLUSTER_SECRET must be at least 16 characters", validation: (s) => s.length >= 16 })
  ))
  const jobLeaseSeconds = yield* Config.integer("JOB_LEASE_SECONDS").pipe(
    Config.withDefault(15),
    Config.validate({ message: "JOB_LEASE_SECONDS must be between 3 and 3600", validation: (n) => n >= 3 && n <= 3600 })
  )
  const jobMaxAttempts = yield* Config.integer("JOB_MAX_ATTEMPTS").pipe(
    Config.withDefault(8),
    Config.validate({ message: "JOB_MAX_ATTEMPTS must be between 1 and 50", validation: (n) => n >= 1 && n <= 50 })
  )
  const databasePoolSize = yield* Config.integer("DATABASE_POOL_SIZE").pipe(
    Config.withDefault(1),
    Config.validate({ message: "DATABASE_POOL_SIZE must be between 1 and 100", validation: (n) => n >= 1 && n <= 100 })
  )
  // 0700, and everything already in it 0700 / 0600 (the database, its WAL and the secrets key included) — never
  // a directory others share, which that would take from them.
  const shared = sharedDirectoryReason(dataDir)
  if (shared !== undefined) return yield* invalid("DATA_DIR", shared)
  secureDataDir(dataDir, databaseUrl === undefined ? "gateway.sqlite" : undefined)
  return { port, host, dataDir, publicUrl, publicUrlSet: explicitUrl._tag === "Some", logLevel, maxBodyBytes, rawWriteMaxBytes, endpoints, databaseUrl, databasePoolSize, nodeId,
    nodeUrl: nodeUrl._tag === "Some" ? nodeUrl.value : undefined, nodeGraceSeconds,
    clusterSecret: clusterSecret._tag === "Some" ? clusterSecret.value : undefined, jobLeaseSeconds, jobMaxAttempts } satisfies AppConfigShape
})

const invalid = (name: string, message: string) => Effect.fail(ConfigError.InvalidData([name], message))

/** A DATABASE_URL for people to read (logs, messages): its password, if it has one, shown as `***`. */
export const displayDatabaseUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password !== "") parsed.password = "***"
    if (parsed.searchParams.has("password")) parsed.searchParams.set("password", "***")
    return parsed.toString()
  } catch {
    return "(DATABASE_URL)"
  }
}

/** DATABASE_URL: absent or empty → SQLite; otherwise it must be a PostgreSQL URL. */
export const databaseUrlConfig = Effect.gen(function*() {
  const raw = yield* Config.option(Config.string("DATABASE_URL"))
  if (raw._tag === "None" || raw.value.trim() === "") return undefined
  if (!/^postgres(ql)?:\/\//.test(raw.value)) {
    return yield* invalid("DATABASE_URL", "DATABASE_URL must be a PostgreSQL URL such as postgres://user:password@host:5432/gateway")
  }
  return raw.value
})

/** An http(s) URL with nothing but scheme, host and port. */
const originOnly = (name: string, raw: string) =>
  Effect.gen(function*() {
    let url: URL
    try {
      url = new URL(raw)
    } catch {
      return yield* invalid(name, `${name} must be a URL such as https://sbx.example.com`)
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return yield* invalid(name, `${name} must be an http or https URL`)
    if ((url.pathname !== "/" && url.pathname !== "") || url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "") {
      return yield* invalid(name, `${name} must be an origin only (scheme, host and optional port), without a path, query or credentials`)
    }
    return url
  })

const DNS_NAME = /^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/

export const endpointListenerConfig = (apiPort: number, apiHost: string, apiPublicUrl: string) =>
  Effect.gen(function*() {
    const port = yield* Config.integer("ENDPOINT_PORT").pipe(
      Config.withDefault(apiPort === 0 ? 0 : apiPort + 1),
      Config.validate({ message: "ENDPOINT_PORT must be between 0 and 65535", validation: (p) => p >= 0 && p <= 65535 })
    )
    const host = yield* Config.string("ENDPOINT_HOST").pipe(Config.withDefault(apiHost))
    if (port !== 0 && port === apiPort && host === apiHost) {
      return yield* invalid("ENDPOINT_PORT", "ENDPOINT_PORT must differ from PORT: endpoints are never served on the API's origin")
    }
    const publicRaw = yield* Config.option(Config.string("ENDPOINT_PUBLIC_URL"))
    const baseRaw = yield* Config.option(Config.string("ENDPOINT_BASE_URL"))
    if (publicRaw._tag === "Some" && baseRaw._tag === "Some") {
      return yield* invalid("ENDPOINT_PUBLIC_URL", "Set ENDPOINT_BASE_URL (one host name per endpoint) or ENDPOINT_PUBLIC_URL (one origin for all endpoints), not both")
    }
    let publicOrigin: string | undefined
    if (publicRaw._tag === "Some") {
      const url = yield* originOnly("ENDPOINT_PUBLIC_URL", publicRaw.value)
      if (url.origin === new URL(apiPublicUrl).origin) {
        return yield* invalid("ENDPOINT_PUBLIC_URL", "ENDPOINT_PUBLIC_URL must be another origin than the API's (PUBLIC_URL): a page served by a sandbox would run on the API's origin")
      }
      publicOrigin = url.origin
    }
    let base: EndpointListenerConfig["base"]
    if (baseRaw._tag === "Some") {
      const url = yield* originOnly("ENDPOINT_BASE_URL", baseRaw.value)
      const baseHost = url.hostname.toLowerCase()
      if (!DNS_NAME.test(baseHost) || /^[0-9.]+$/.test(baseHost)) {
        return yield* invalid("ENDPOINT_BASE_URL", "ENDPOINT_BASE_URL needs a DNS name (endpoints are its subdomains), not an IP address")
      }
      // A host name is at most 253 characters, and each endpoint adds its 62-character label and a dot.
      if (baseHost.length > 190) return yield* invalid("ENDPOINT_BASE_URL", "ENDPOINT_BASE_URL's host name must be at most 190 characters")
      base = { scheme: url.protocol === "https:" ? "https" : "http", baseHost, port: url.port }
    }
    return { port, host, publicOrigin, base } satisfies EndpointListenerConfig
  })

export const AppConfigLive = Layer.effect(AppConfig, appConfig)

/**
 * Webhook delivery (docs/guide/webhooks.md). Defaults are the reference's: a 10 s timeout, 8 attempts, backoff
 * min(5 s × 2^(n−1), 15 min) with jitter, and an endpoint disabled after a day of nothing but failures.
 */
export interface WebhookConfigShape {
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS: also deliver to loopback, private and link-local addresses (never metadata ones). */
  readonly allowPrivateTargets: boolean
  /** WEBHOOK_DNS_SERVERS: resolve webhook hosts with these servers (`ip` or `ip:port`, comma-separated); empty: the system resolver. */
  readonly dnsServers: ReadonlyArray<string>
  /** WEBHOOK_TIMEOUT_MS: one attempt, from connect to the end of the response. */
  readonly timeoutMs: number
  /** WEBHOOK_MAX_ATTEMPTS */
  readonly maxAttempts: number
  /** WEBHOOK_RETRY_BASE_MS and WEBHOOK_RETRY_MAX_MS: the backoff's first delay and its cap. */
  readonly retryBaseMs: number
  readonly retryMaxMs: number
  /** WEBHOOK_DISABLE_AFTER_SECONDS: how long an endpoint may fail (at least 20 attempts in a row) before it is disabled. */
  readonly disableAfterSeconds: number
}

export class WebhookConfig extends Context.Tag("app/WebhookConfig")<WebhookConfig, WebhookConfigShape>() {}

const DNS_SERVER = /^(?:\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?|\[[0-9a-fA-F:.]+\](?::\d{1,5})?|[0-9a-fA-F:]*:[0-9a-fA-F:.]*)$/

const bounded = (name: string, fallback: number, min: number, max: number) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must be an integer from ${min} to ${max}`, validation: (n) => n >= min && n <= max })
  )

/** DNS servers (`ip` or `ip:port`, comma-separated) from the variable `name`; none: the system resolver. */
export const dnsServersConfig = (name: string) =>
  Effect.gen(function*() {
    const servers = yield* Config.string(name).pipe(Config.withDefault(""))
    const list = servers.split(",").map((s) => s.trim()).filter((s) => s !== "")
    const bad = list.find((s) => !DNS_SERVER.test(s))
    if (bad !== undefined) return yield* invalid(name, `${name} must list IP addresses (with an optional :port), not ${JSON.stringify(bad)}`)
    return list
  })

export const webhookConfig = Effect.gen(function*() {
  const allowPrivateTargets = yield* Config.boolean("WEBHOOK_ALLOW_PRIVATE_TARGETS").pipe(Config.withDefault(false))
  const dnsServers = yield* dnsServersConfig("WEBHOOK_DNS_SERVERS")
  const timeoutMs = yield* bounded("WEBHOOK_TIMEOUT_MS", 10_000, 50, 120_000)
  const maxAttempts = yield* bounded("WEBHOOK_MAX_ATTEMPTS", 8, 1, 50)
  const retryBaseMs = yield* bounded("WEBHOOK_RETRY_BASE_MS", 5_000, 1, 3_600_000)
  const retryMaxMs = yield* bounded("WEBHOOK_RETRY_MAX_MS", 900_000, 1, 86_400_000)
  const disableAfterSeconds = yield* bounded("WEBHOOK_DISABLE_AFTER_SECONDS", 86_400, 1, 30 * 86_400)
  return { allowPrivateTargets, dnsServers, timeoutMs, maxAttempts, retryBaseMs, retryMaxMs, disableAfterSeconds } satisfies WebhookConfigShape
})

export const WebhookConfigLive = Layer.effect(WebhookConfig, webhookConfig)
